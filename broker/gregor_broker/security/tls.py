"""TLS for SSL and SASL_SSL listeners (and followers reaching one), from PEM, as Kafka
configures it.

Keys (each also per listener as ``listener.name.<l>.<key>``): ``ssl.keystore.type=PEM``
with ``ssl.keystore.location`` (one file: the private key and the certificate chain) and
``ssl.key.password`` for an encrypted key, or the inline ``ssl.keystore.key`` and
``ssl.keystore.certificate.chain``; ``ssl.truststore.type=PEM`` with
``ssl.truststore.location`` or the inline ``ssl.truststore.certificates``;
``ssl.client.auth`` none/requested/required; ``ssl.enabled.protocols`` (TLSv1.2 and
TLSv1.3 only); ``ssl.cipher.suites`` (TLS 1.2 suites, OpenSSL names).

A client certificate becomes the principal ``User:<name>`` through
``ssl.principal.mapping.rules`` (Kafka's ``SslPrincipalMapper``): ``DEFAULT`` keeps the
distinguished name as RFC 2253 writes it (``CN=alice,OU=eng,O=example``), and
``RULE:<regex>/<replacement>/[LU]`` rules rewrite it, the first matching rule winning.
"""

from __future__ import annotations

import contextlib
import os
import re
import ssl
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..config import BrokerConfig, ConfigError

_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_CLIENT_AUTH = {
    "none": ssl.CERT_NONE,
    "requested": ssl.CERT_OPTIONAL,
    "required": ssl.CERT_REQUIRED,
}


def _setting(config: BrokerConfig, listener: str | None, key: str) -> Any:
    if listener is None:
        return getattr(config, key.replace(".", "_"))
    return config.for_listener(listener, key)


@contextlib.contextmanager
def _pem_file(text: str) -> Iterator[str]:
    """An inline PEM value as a private temporary file (``ssl`` loads keys from files)."""
    handle, path = tempfile.mkstemp(suffix=".pem")
    try:
        with os.fdopen(handle, "w") as out:
            out.write(text)
        yield path
    finally:
        os.unlink(path)


def _check_pem(config: BrokerConfig, listener: str | None, key: str) -> None:
    kind = _setting(config, listener, key)
    if kind != "PEM":
        raise ConfigError(
            f"{key}={kind} is not supported: Gregor reads PEM key and trust stores; set {key}=PEM"
        )


def _versions(context: ssl.SSLContext, config: BrokerConfig, listener: str | None) -> None:
    enabled = _setting(config, listener, "ssl.enabled.protocols")
    unknown = [v for v in enabled if v not in _VERSIONS]
    if unknown or not enabled:
        raise ConfigError(
            f"ssl.enabled.protocols={','.join(enabled)}: Gregor speaks only TLSv1.2 and TLSv1.3"
        )
    chosen = sorted(_VERSIONS[v] for v in enabled)
    context.minimum_version = chosen[0]
    context.maximum_version = chosen[-1]
    suites = _setting(config, listener, "ssl.cipher.suites")
    if suites:
        try:
            context.set_ciphers(":".join(suites))
        except ssl.SSLError as error:
            raise ConfigError(f"ssl.cipher.suites: no usable suite ({error})") from None


def _load_key_store(context: ssl.SSLContext, config: BrokerConfig, listener: str | None) -> bool:
    """Load the certificate chain and key; False when none is configured."""
    location = _setting(config, listener, "ssl.keystore.location")
    chain = _setting(config, listener, "ssl.keystore.certificate.chain")
    key = _setting(config, listener, "ssl.keystore.key")
    password = _setting(config, listener, "ssl.key.password")
    if not (location or chain or key):
        return False
    _check_pem(config, listener, "ssl.keystore.type")
    try:
        if location:
            context.load_cert_chain(location, password=password)
        else:
            if not (chain and key):
                raise ConfigError("ssl.keystore.certificate.chain and ssl.keystore.key go together")
            with _pem_file(chain) as chain_path, _pem_file(key) as key_path:
                context.load_cert_chain(chain_path, key_path, password=password)
    except (OSError, ssl.SSLError) as error:
        raise ConfigError(f"cannot load the TLS key store: {error}") from None
    return True


def _load_trust_store(context: ssl.SSLContext, config: BrokerConfig, listener: str | None) -> bool:
    location = _setting(config, listener, "ssl.truststore.location")
    certificates = _setting(config, listener, "ssl.truststore.certificates")
    if not (location or certificates):
        return False
    _check_pem(config, listener, "ssl.truststore.type")
    try:
        if location:
            context.load_verify_locations(cafile=location)
        else:
            context.load_verify_locations(cadata=certificates)
    except (OSError, ssl.SSLError) as error:
        raise ConfigError(f"cannot load the TLS trust store: {error}") from None
    return True


def server_context(config: BrokerConfig, listener: str) -> ssl.SSLContext:
    """The TLS context of an SSL or SASL_SSL listener; ConfigError when it cannot be built."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _versions(context, config, listener)
    if not _load_key_store(context, config, listener):
        raise ConfigError(
            f"Listener {listener} uses TLS but has no key store: set ssl.keystore.location "
            "(or ssl.keystore.certificate.chain and ssl.keystore.key) with ssl.keystore.type=PEM"
        )
    client_auth = str(_setting(config, listener, "ssl.client.auth")).lower()
    context.verify_mode = _CLIENT_AUTH[client_auth]
    has_trust = _load_trust_store(context, config, listener)
    if client_auth != "none" and not has_trust:
        raise ConfigError(
            f"Listener {listener} has ssl.client.auth={client_auth} but no trust store to "
            "check client certificates: set ssl.truststore.location"
        )
    return context


def client_context(config: BrokerConfig, listener: str) -> ssl.SSLContext:
    """The context a follower uses towards another broker's TLS listener: it trusts the
    listener's trust store, presents the listener's key store (for mTLS), and checks the
    host name when ``ssl.endpoint.identification.algorithm`` is ``https``."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _versions(context, config, listener)
    if not _load_trust_store(context, config, listener):
        context.load_default_certs()
    _load_key_store(context, config, listener)
    algorithm = str(_setting(config, listener, "ssl.endpoint.identification.algorithm") or "")
    context.check_hostname = algorithm.lower() == "https"
    context.verify_mode = ssl.CERT_REQUIRED
    return context


# -- principals ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""


_RULE = re.compile(r"RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?)")


class PrincipalMapper:
    """``ssl.principal.mapping.rules``: a certificate's DN to a principal name."""

    def __init__(self, rules: str) -> None:
        self.rules: list[_Rule] = []
        text = rules.strip()
        while text:
            if text.startswith("DEFAULT"):
                self.rules.append(_Rule(None))
                text = text[len("DEFAULT") :]
            else:
                match = _RULE.match(text)
                if match is None:
                    raise ConfigError(f"Invalid rule in ssl.principal.mapping.rules: {text!r}")
                replacement = re.sub(r"\$(\d)", r"\\\1", match.group(2))
                try:
                    pattern = re.compile(match.group(1))
                except re.error as error:
                    raise ConfigError(
                        f"Invalid rule in ssl.principal.mapping.rules: {error}"
                    ) from None
                self.rules.append(_Rule(pattern, replacement, match.group(3)))
                text = text[match.end() :]
            text = text.lstrip().removeprefix(",").lstrip()

    def name(self, distinguished_name: str) -> str:
        for rule in self.rules:
            if rule.pattern is None:
                return distinguished_name
            if rule.pattern.fullmatch(distinguished_name):
                result = rule.pattern.sub(rule.replacement, distinguished_name, count=1)
                if rule.case == "L":
                    return result.lower()
                if rule.case == "U":
                    return result.upper()
                return result
        # Kafka: no rule applies → "No rules apply to <dn>, rules [...]": the login fails.
        raise ValueError(f"no ssl.principal.mapping.rules rule applies to {distinguished_name}")


_DN_NAMES = {
    "commonName": "CN",
    "organizationalUnitName": "OU",
    "organizationName": "O",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "countryName": "C",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}


def _escape(value: str) -> str:
    escaped = re.sub(r'([,+"\\<>;=])', r"\\\1", value)
    if escaped.startswith((" ", "#")):
        escaped = "\\" + escaped
    if escaped.endswith(" ") and not escaped.endswith("\\ "):
        escaped = escaped[:-1] + "\\ "
    return escaped


def distinguished_name(peer_certificate: dict[str, Any]) -> str:
    """The subject of ``SSLSocket.getpeercert()`` in RFC 2253 order (most specific first),
    as Java's ``X500Principal.getName()`` gives it to Kafka's principal builder."""
    rdns = []
    for rdn in reversed(peer_certificate.get("subject", ())):
        rdns.append("+".join(f"{_DN_NAMES.get(key, key)}={_escape(value)}" for key, value in rdn))
    return ",".join(rdns)
