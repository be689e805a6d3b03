"""A GregorCluster's ``spec.security``: listeners, TLS from a Secret and the inter-broker
login, as broker configs and pod environment (pure; ``cluster_objects.render`` uses it).

Without ``spec.security`` (or with both protocols PLAINTEXT) the brokers keep the one
PLAINTEXT listener on 9092 and nothing here changes their pods. With it, every broker has
two listeners: ``CLIENT`` on 9092 (the client Service) with ``clientProtocol`` and
``INTERNAL`` on 9093 (``inter.broker.listener.name``) with ``interBrokerProtocol``.

- TLS (``SSL``/``SASL_SSL`` on either): the certificate comes from a Secret with the keys
  cert-manager writes (``tls.crt``, ``tls.key``, ``ca.crt``), passed to the broker as the
  inline PEM configs ``ssl.keystore.certificate.chain``, ``ssl.keystore.key`` and
  ``ssl.truststore.certificates`` through ``GREGOR_*`` environment variables read from the
  Secret: nothing secret lands in the ConfigMap. The certificate must name the brokers'
  addresses (``*.<cluster>-brokers.<namespace>.svc`` and the client Service) when clients
  check host names; brokers reaching each other check them too unless
  ``tls.endpointIdentification`` is false.
- SASL (``SASL_*`` on either): ``saslMechanisms`` (default SCRAM-SHA-512); the brokers'
  own login on INTERNAL comes from ``interBroker.credentialsSecret`` (keys ``username`` and
  ``password``), as ``sasl.jaas.config`` built in the pod from those two variables. That
  user's SCRAM credential must exist (a User resource, or ``gregor users scram set``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

CLIENT_PORT = 9092
INTERNAL_PORT = 9093
PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
DEFAULT_MECHANISM = "SCRAM-SHA-512"
TLS_KEYS = {
    "ssl.keystore.certificate.chain": "tls.crt",
    "ssl.keystore.key": "tls.key",
    "ssl.truststore.certificates": "ca.crt",
}
JAAS = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


class SecurityRefused(ValueError):
    """``spec.security`` cannot work as written (the message names the field)."""


@dataclass(frozen=True)
class ClusterSecurity:
    properties: dict[str, str] = field(default_factory=dict)
    env: list[dict[str, Any]] = field(default_factory=list)
    # (name, port) of every Kafka listener, for the container and the headless Service.
    ports: list[tuple[str, int]] = field(default_factory=lambda: [("kafka", CLIENT_PORT)])
    advertised: str = ""


def env_name(key: str) -> str:
    """The broker's ``GREGOR_*`` variable of a config key."""
    return "GREGOR_" + key.upper().replace(".", "_").replace("-", "_")


def plan_security(spec: Mapping[str, Any], address: str) -> ClusterSecurity:
    """Broker configs, environment and ports for ``spec.security``; ``address`` is a pod's
    DNS name (``$(POD_NAME).<headless>.<namespace>.svc``). SecurityRefused when the
    settings cannot work."""
    security = spec.get("security") or {}
    client = str(security.get("clientProtocol") or "PLAINTEXT").upper()
    internal = str(security.get("interBrokerProtocol") or "PLAINTEXT").upper()
    for where, protocol in (("clientProtocol", client), ("interBrokerProtocol", internal)):
        if protocol not in PROTOCOLS:
            raise SecurityRefused(
                f"spec.security.{where}={protocol} is not one of {', '.join(PROTOCOLS)}"
            )
    if client == internal == "PLAINTEXT":
        return ClusterSecurity(advertised=f"PLAINTEXT://{address}:{CLIENT_PORT}")
    listeners = {"CLIENT": (client, CLIENT_PORT), "INTERNAL": (internal, INTERNAL_PORT)}
    properties = {
        "listeners": ",".join(f"{n}://0.0.0.0:{port}" for n, (_, port) in listeners.items()),
        "listener.security.protocol.map": ",".join(f"{n}:{p}" for n, (p, _) in listeners.items()),
        "inter.broker.listener.name": "INTERNAL",
    }
    env: list[dict[str, Any]] = []
    protocols = {client, internal}
    if any(p.endswith("SSL") for p in protocols):
        tls = security.get("tls") or {}
        secret = tls.get("secretName")
        if not secret:
            raise SecurityRefused(
                "spec.security.tls.secretName is required for SSL and SASL_SSL listeners: a "
                "Secret with tls.crt, tls.key and ca.crt (a cert-manager Certificate's secret)"
            )
        properties |= {"ssl.keystore.type": "PEM", "ssl.truststore.type": "PEM"}
        properties["ssl.client.auth"] = str(tls.get("clientAuth") or "none")
        if tls.get("endpointIdentification") is False:
            properties["ssl.endpoint.identification.algorithm"] = ""
        env += [_from_secret(env_name(key), secret, item) for key, item in TLS_KEYS.items()]
    if any(p.startswith("SASL_") for p in protocols):
        mechanisms = [str(m).upper() for m in security.get("saslMechanisms") or [DEFAULT_MECHANISM]]
        unknown = [m for m in mechanisms if m not in JAAS]
        if unknown:
            raise SecurityRefused(
                f"spec.security.saslMechanisms {unknown}: use PLAIN, SCRAM-SHA-256, SCRAM-SHA-512"
            )
        properties["sasl.enabled.mechanisms"] = ",".join(mechanisms)
    if internal.startswith("SASL_"):
        inter = security.get("interBroker") or {}
        mechanism = str(inter.get("mechanism") or DEFAULT_MECHANISM).upper()
        if mechanism not in JAAS or mechanism not in properties["sasl.enabled.mechanisms"]:
            raise SecurityRefused(
                f"spec.security.interBroker.mechanism={mechanism} must be one of "
                "spec.security.saslMechanisms"
            )
        secret = inter.get("credentialsSecret")
        if not secret:
            raise SecurityRefused(
                "spec.security.interBroker.credentialsSecret is required when the "
                "inter-broker listener uses SASL: a Secret with keys username and password"
            )
        properties["sasl.mechanism.inter.broker.protocol"] = mechanism
        env += [
            _from_secret("BROKER_SASL_USERNAME", secret, "username"),
            _from_secret("BROKER_SASL_PASSWORD", secret, "password"),
            {
                # Kubernetes expands $(VAR) of variables defined above it.
                "name": env_name("sasl.jaas.config"),
                "value": f"{JAAS[mechanism]} required "
                'username="$(BROKER_SASL_USERNAME)" '
                'password="$(BROKER_SASL_PASSWORD)";',
            },
        ]
    return ClusterSecurity(
        properties=properties,
        env=env,
        ports=[("kafka", CLIENT_PORT), ("internal", INTERNAL_PORT)],
        advertised=f"CLIENT://{address}:{CLIENT_PORT},INTERNAL://{address}:{INTERNAL_PORT}",
    )


def _from_secret(name: str, secret: str, key: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}
