"""The JAAS login configuration Kafka takes in ``sasl.jaas.config``.

``org.apache.kafka.common.security.plain.PlainLoginModule required username="admin"
password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";``: a login
module class, a control flag and ``key=value`` options, quoted or not, ended by ``;``.
PLAIN listeners take their users from the ``user_<name>`` options (Kafka's
``PlainServerCallbackHandler``); a broker's own client login (inter-broker SASL) uses
``username`` and ``password``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..config import ConfigError

_TOKEN = re.compile(r'\s*(?:"((?:[^"\\]|\\.)*)"|([^\s=;"]+))')
_FLAGS = ("required", "requisite", "sufficient", "optional")


@dataclass(frozen=True)
class JaasLogin:
    login_module: str
    control_flag: str
    options: dict[str, str] = field(default_factory=dict)

    @property
    def plain_users(self) -> dict[str, str]:
        """``user_<name>="<password>"`` options: the users a PLAIN listener accepts."""
        return {
            key[len("user_") :]: value
            for key, value in self.options.items()
            if key.startswith("user_") and len(key) > len("user_")
        }


def parse_jaas_config(text: str, *, key: str = "sasl.jaas.config") -> JaasLogin:
    """Parse one login module entry; ConfigError naming ``key`` if it is not one."""

    def fail(problem: str) -> ConfigError:
        return ConfigError(f"Invalid value for {key}: {problem}")

    position = 0

    def token() -> str | None:
        nonlocal position
        match = _TOKEN.match(text, position)
        if match is None:
            return None
        position = match.end()
        if match.group(1) is not None:
            return re.sub(r"\\(.)", r"\1", match.group(1))
        return match.group(2)

    module = token()
    flag = token()
    if not module or flag is None or flag.lower() not in _FLAGS:
        raise fail("expected '<LoginModule> required key=\"value\" ...;'")
    options: dict[str, str] = {}
    while True:
        rest = text[position:].lstrip()
        if rest.startswith(";"):
            if rest[1:].strip():
                raise fail("Gregor takes one login module per sasl.jaas.config")
            break
        name = token()
        if name is None:
            raise fail("the login module entry must end with ';'")
        if not text[position:].lstrip().startswith("="):
            raise fail(f"option {name!r} has no value")
        position = text.index("=", position) + 1
        value = token()
        if value is None:
            raise fail(f"option {name!r} has no value")
        options[name] = value
    return JaasLogin(module, flag.lower(), options)
