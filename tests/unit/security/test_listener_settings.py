"""What a SASL listener accepts and how a follower logs in, read from the broker config."""

from __future__ import annotations

import pytest

from gregor_broker.config import ConfigError, load_broker_config
from gregor_broker.security.client import inter_broker_security
from gregor_broker.server.authentication import SaslListenerSettings

REQUIRED = {"broker.id": "1", "zookeeper.connect": "zk:2181"}
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="broker" password="b" user_broker="b" user_alice="a";'
)


def _config(**properties: str):
    return load_broker_config(None, {**REQUIRED, **properties}, env={})


def test_a_sasl_listener_takes_its_mechanisms_and_plain_users():
    config = _config(
        listeners="SASL_PLAINTEXT://:9092",
        **{
            "sasl.enabled.mechanisms": "plain,SCRAM-SHA-512,GSSAPI",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
            "connection.failed.authentication.delay.ms": "250",
        },
    )
    settings = SaslListenerSettings.from_config(config, "SASL_PLAINTEXT")
    assert settings.mechanisms == ("PLAIN", "SCRAM-SHA-512")  # GSSAPI is not offered
    assert settings.plain_users == {"broker": "b", "alice": "a"}
    assert settings.failed_delay_s == 0.25


@pytest.mark.parametrize(
    ("properties", "message"),
    [
        ({}, "sasl.enabled.mechanisms"),  # Kafka's default GSSAPI only
        ({"sasl.enabled.mechanisms": "PLAIN"}, "has no users"),
    ],
)
def test_a_sasl_listener_without_what_it_needs_is_refused(properties, message):
    config = _config(listeners="SASL_PLAINTEXT://:9092", **properties)
    with pytest.raises(ConfigError, match=message):
        SaslListenerSettings.from_config(config, "SASL_PLAINTEXT")


def test_the_inter_broker_login_comes_from_the_listeners_jaas_config():
    base = {
        "listeners": "CLIENT://:9092,INTERNAL://:9093",
        "listener.security.protocol.map": "CLIENT:PLAINTEXT,INTERNAL:SASL_PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL",
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
    }
    security = inter_broker_security(
        _config(**base, **{"listener.name.internal.plain.sasl.jaas.config": JAAS})
    )
    assert security is not None
    assert (security.protocol, security.mechanism, security.username) == (
        "SASL_PLAINTEXT",
        "PLAIN",
        "broker",
    )
    assert security.ssl_context is None
    with pytest.raises(ConfigError, match="has no login"):
        inter_broker_security(_config(**base))
    plaintext = {**base, "inter.broker.listener.name": "CLIENT"}
    assert inter_broker_security(_config(**plaintext)) is None
