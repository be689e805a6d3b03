"""TLS contexts from Kafka's PEM settings and ssl.principal.mapping.rules."""

from __future__ import annotations

import ssl

import pytest

from gregor_broker.config import ConfigError, load_broker_config
from gregor_broker.devtools.certificates import KEY_PASSWORD, make_certificates
from gregor_broker.security.tls import (
    PrincipalMapper,
    client_context,
    distinguished_name,
    server_context,
)

REQUIRED = {"broker.id": "1", "zookeeper.connect": "zk:2181"}


@pytest.fixture(scope="module")
def certificates(tmp_path_factory):
    return make_certificates(tmp_path_factory.mktemp("certs"))


def _config(**properties: str):
    return load_broker_config(None, {**REQUIRED, **properties}, env={})


def test_the_certificates_dn_is_written_as_rfc_2253_does(certificates):
    decoded = ssl._ssl._test_decode_cert(str(certificates.client_cert))
    assert distinguished_name(decoded) == "CN=alice,OU=eng,O=example"
    assert distinguished_name({"subject": ((("commonName", "a,b"),),)}) == "CN=a\\,b"


def test_principal_mapping_rules_follow_kafkas_syntax():
    mapper = PrincipalMapper(
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?),O=.*$/$1@$2/U, DEFAULT"
    )
    assert mapper.name("CN=kafka,OU=ServiceUsers,O=example") == "kafka"
    assert mapper.name("CN=alice,OU=eng,O=example") == "ALICE@ENG"
    assert mapper.name("O=example") == "O=example"
    assert PrincipalMapper("DEFAULT").name("CN=x") == "CN=x"
    with pytest.raises(ValueError, match=r"no ssl\.principal.mapping\.rules rule"):
        PrincipalMapper("RULE:^CN=(.*)$/$1/L").name("O=nope")
    with pytest.raises(ConfigError):
        PrincipalMapper("RULE:broken")


def test_server_context_from_a_pem_file_with_an_encrypted_key(certificates):
    config = _config(
        **{
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(certificates.broker_keystore),
            "ssl.key.password": KEY_PASSWORD,
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(certificates.ca),
            "listener.name.ssl.ssl.client.auth": "required",
        }
    )
    context = server_context(config, "SSL")
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.minimum_version == ssl.TLSVersion.TLSv1_2
    assert context.maximum_version == ssl.TLSVersion.TLSv1_3
    assert client_context(config, "SSL").check_hostname


@pytest.mark.parametrize(
    ("properties", "message"),
    [
        ({}, "no key store"),
        ({"ssl.keystore.type": "JKS"}, "PEM"),
        ({"ssl.key.password": "wrong"}, "cannot load the TLS key store"),
        ({"ssl.enabled.protocols": "TLSv1.1,TLSv1.2"}, "TLSv1.2 and TLSv1.3"),
        ({"ssl.client.auth": "required", "ssl.truststore.location": ""}, "no trust store"),
    ],
)
def test_bad_tls_settings_are_refused_at_start(certificates, properties, message):
    base = {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certificates.broker_keystore),
        "ssl.key.password": KEY_PASSWORD,
        "ssl.truststore.type": "PEM",
    }
    if not properties:
        base.pop("ssl.keystore.location")
    with pytest.raises(ConfigError, match=message):
        server_context(_config(**{**base, **properties}), "SSL")
