"""How a broker connects to another broker's inter-broker listener (follower fetches).

Kafka's inter-broker client takes the listener's own settings: TLS from the listener's
key and trust stores (``security/tls.py``), the SASL mechanism
``sasl.mechanism.inter.broker.protocol``, and its login from the ``username`` and
``password`` options of the listener's JAAS config for that mechanism
(``listener.name.<l>.<mechanism>.sasl.jaas.config``, else ``sasl.jaas.config``).
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field

from ..config import BrokerConfig, ConfigError
from .jaas import parse_jaas_config
from .plain import plain_token
from .scram import MECHANISMS, ScramClient
from .tls import client_context


@dataclass(frozen=True)
class ClientSecurity:
    protocol: str
    ssl_context: ssl.SSLContext | None = None
    mechanism: str | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)

    def sasl_messages(self) -> SaslClientExchange:
        assert self.mechanism and self.username is not None and self.password is not None
        return SaslClientExchange(self.mechanism, self.username, self.password)


class SaslClientExchange:
    """The client's messages of one login: ``first()``, then ``next(server_message)``
    until ``done``."""

    def __init__(self, mechanism: str, username: str, password: str) -> None:
        self.mechanism = mechanism
        self._plain = plain_token(username, password) if mechanism == "PLAIN" else None
        self._scram = ScramClient(mechanism, username, password) if self._plain is None else None
        self._step = 0
        self.done = False

    def first(self) -> bytes:
        if self._plain is not None:
            self.done = True
            return self._plain
        assert self._scram is not None
        return self._scram.first_message()

    def next(self, server_message: bytes) -> bytes | None:
        """The next message to send, or None when the login is complete (the server's
        final message checked)."""
        assert self._scram is not None
        self._step += 1
        if self._step == 1:
            return self._scram.final_message(server_message)
        self._scram.verify_server_final(server_message)
        self.done = True
        return None


def inter_broker_security(config: BrokerConfig) -> ClientSecurity | None:
    """None for a PLAINTEXT inter-broker listener; ConfigError when a SASL one has no
    usable login."""
    listener = config.inter_broker_listener
    protocol = config.security_protocol_map[listener]
    if protocol == "PLAINTEXT":
        return None
    context = client_context(config, listener) if protocol.endswith("SSL") else None
    if not protocol.startswith("SASL_"):
        return ClientSecurity(protocol, context)
    mechanism = config.sasl_mechanism_inter_broker_protocol.upper()
    if mechanism != "PLAIN" and mechanism not in MECHANISMS:
        raise ConfigError(
            f"sasl.mechanism.inter.broker.protocol={mechanism} is not supported; use PLAIN, "
            "SCRAM-SHA-256 or SCRAM-SHA-512"
        )
    key = f"{mechanism.lower()}.sasl.jaas.config"
    jaas = config.for_listener(listener, key)
    if not jaas:
        raise ConfigError(
            f"The inter-broker listener {listener} uses SASL but has no login: set "
            f'listener.name.{listener.lower()}.{key} with username="..." password="..."'
        )
    options = parse_jaas_config(jaas, key=key).options
    if "username" not in options or "password" not in options:
        raise ConfigError(f"{key} of listener {listener} needs username and password options")
    return ClientSecurity(protocol, context, mechanism, options["username"], options["password"])
