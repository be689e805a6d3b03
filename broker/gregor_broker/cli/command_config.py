"""``--command-config FILE``: the client properties of Kafka's tools, for every ``gregor``
command that talks to brokers.

Kafka's tools (kafka-topics, kafka-consumer-groups, ...) take ``--command-config`` with a
client ``.properties`` file: ``security.protocol``, ``sasl.mechanism``,
``sasl.jaas.config`` and the ``ssl.*`` stores. This module reads such a file once per
command and turns it into what Gregor's two kinds of client need:

- librdkafka settings (confluent-kafka's AdminClient, Producer, Consumer): Kafka's names
  translated (the PEM trust store becomes ``ssl.ca.location``, the JAAS login
  ``sasl.username``/``sasl.password``), librdkafka's own names taken as they are, any other
  key passed through (librdkafka refuses what it does not know, naming the key);
- the raw one-request client (``wire_client``): a TLS context and the SASL login, the same
  ``ClientSecurity`` a follower uses towards a leader.

A command runs once in its own process, so the file applies to every client it makes, as
in Kafka's tools: ``kafka_api`` keeps the loaded settings for the process (``use``).
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from pathlib import Path

from ..config import ConfigError
from ..config.properties import parse_properties
from ..security.client import ClientSecurity
from ..security.jaas import parse_jaas_config
from ..security.scram import MECHANISMS

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", *MECHANISMS)
# Kafka-only keys with no librdkafka meaning once translated: consumed here.
_CONSUMED = frozenset(
    {
        "security.protocol",
        "sasl.mechanism",
        "sasl.mechanisms",
        "sasl.jaas.config",
        "sasl.username",
        "sasl.password",
        "ssl.truststore.type",
        "ssl.truststore.location",
        "ssl.truststore.password",
        "ssl.keystore.type",
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.key.password",
        "ssl.ca.location",
        "ssl.certificate.location",
        "ssl.key.location",
        "ssl.endpoint.identification.algorithm",
        "ssl.enabled.protocols",
        "ssl.protocol",
    }
)


class CommandConfigError(ValueError):
    """The file cannot be used; the message names the file and the key."""


@dataclass(frozen=True)
class CommandConfig:
    """A client's security settings in Kafka's terms (PLAINTEXT when no file is given)."""

    protocol: str = "PLAINTEXT"
    mechanism: str | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    ca_file: str | None = None  # PEM trust store (the CA that signed the brokers)
    cert_file: str | None = None  # PEM client certificate chain (mutual TLS)
    key_file: str | None = None  # PEM private key (may be the same file as cert_file)
    key_password: str | None = field(default=None, repr=False)
    check_hostname: bool = True  # ssl.endpoint.identification.algorithm=https
    extra: dict[str, str] = field(default_factory=dict)  # passed to librdkafka as they are

    @property
    def tls(self) -> bool:
        return self.protocol.endswith("SSL")

    def librdkafka(self) -> dict[str, str]:
        """The settings in librdkafka's names (nothing for PLAINTEXT without extras)."""
        config: dict[str, str] = {}
        if self.protocol != "PLAINTEXT":
            config["security.protocol"] = self.protocol
        if self.mechanism:
            config["sasl.mechanism"] = self.mechanism
            config["sasl.username"] = self.username or ""
            config["sasl.password"] = self.password or ""
        if self.tls:
            if self.ca_file:
                config["ssl.ca.location"] = self.ca_file
            if self.cert_file:
                config["ssl.certificate.location"] = self.cert_file
                config["ssl.key.location"] = self.key_file or self.cert_file
            if self.key_password:
                config["ssl.key.password"] = self.key_password
            config["ssl.endpoint.identification.algorithm"] = (
                "https" if self.check_hostname else "none"
            )
        return config | self.extra

    def ssl_context(self) -> ssl.SSLContext | None:
        if not self.tls:
            return None
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        if self.ca_file:
            context.load_verify_locations(cafile=self.ca_file)
        else:
            context.load_default_certs()
        if self.cert_file:
            context.load_cert_chain(
                self.cert_file, self.key_file or self.cert_file, password=self.key_password
            )
        context.check_hostname = self.check_hostname
        context.verify_mode = ssl.CERT_REQUIRED
        return context

    def client_security(self) -> ClientSecurity | None:
        """What ``wire_client`` needs: None for PLAINTEXT."""
        if self.protocol == "PLAINTEXT":
            return None
        return ClientSecurity(
            self.protocol, self.ssl_context(), self.mechanism, self.username, self.password
        )


def load(path: str | Path) -> CommandConfig:
    """Read a client properties file; CommandConfigError names what is wrong and where."""
    try:
        text = Path(path).read_text()
    except OSError as error:
        raise CommandConfigError(f"--command-config {path}: {error.strerror or error}") from error
    return from_properties(parse_properties(text), source=str(path))


def from_properties(properties: dict[str, str], source: str = "--command-config") -> CommandConfig:
    def fail(problem: str) -> CommandConfigError:
        return CommandConfigError(f"{source}: {problem}")

    protocol = properties.get("security.protocol", "PLAINTEXT").strip().upper()
    if protocol not in PROTOCOLS:
        raise fail(f"security.protocol={protocol} is not one of {', '.join(PROTOCOLS)}")
    mechanism = username = password = None
    if protocol.startswith("SASL_"):
        mechanism = (
            properties.get("sasl.mechanism") or properties.get("sasl.mechanisms") or "GSSAPI"
        ).strip().upper()  # fmt: skip
        if mechanism not in SASL_MECHANISMS:
            raise fail(
                f"sasl.mechanism={mechanism} is not supported; use one of "
                f"{', '.join(SASL_MECHANISMS)}"
            )
        username, password = properties.get("sasl.username"), properties.get("sasl.password")
        jaas = properties.get("sasl.jaas.config")
        if jaas:
            try:
                options = parse_jaas_config(jaas).options
            except ConfigError as error:
                raise fail(str(error)) from error
            username = options.get("username", username)
            password = options.get("password", password)
        if username is None or password is None:
            raise fail(
                f"{protocol} with {mechanism} needs a login: sasl.jaas.config with "
                'username="..." password="..." (or sasl.username and sasl.password)'
            )
    ca_file = cert_file = key_file = key_password = None
    check_hostname = True
    if protocol.endswith("SSL"):
        if properties.get("ssl.truststore.certificates") or properties.get(
            "ssl.keystore.certificate.chain"
        ):
            raise fail(
                "inline PEM stores (ssl.truststore.certificates, ssl.keystore.*) are not read "
                "by Gregor's tools; put the PEM in a file and set ssl.truststore.location"
            )
        for store in ("truststore", "keystore"):
            kind = properties.get(f"ssl.{store}.type", "PEM").strip().upper()
            if kind != "PEM" and properties.get(f"ssl.{store}.location"):
                raise fail(
                    f"ssl.{store}.type={kind}: Gregor's tools read PEM files only "
                    f"(ssl.{store}.type=PEM); convert the store with openssl or keytool"
                )
        ca_file = properties.get("ssl.truststore.location") or properties.get("ssl.ca.location")
        cert_file = properties.get("ssl.keystore.location") or properties.get(
            "ssl.certificate.location"
        )
        key_file = properties.get("ssl.key.location") or cert_file
        key_password = properties.get("ssl.key.password")
        for name in (ca_file, cert_file, key_file):
            if name and not Path(name).is_file():
                raise fail(f"{name} (an ssl.* location) is not a readable file")
        algorithm = properties.get("ssl.endpoint.identification.algorithm", "https")
        check_hostname = algorithm.strip().lower() == "https"
    extra = {k: v for k, v in properties.items() if k not in _CONSUMED}
    return CommandConfig(
        protocol, mechanism, username, password, ca_file, cert_file, key_file, key_password,
        check_hostname, extra,
    )  # fmt: skip
