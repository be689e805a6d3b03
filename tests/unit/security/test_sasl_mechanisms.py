"""SCRAM (RFC 5802/7677) and PLAIN, and JAAS parsing, against their specifications."""

from __future__ import annotations

import base64

import pytest

from gregor_broker.config import ConfigError
from gregor_broker.security import scram
from gregor_broker.security.jaas import parse_jaas_config
from gregor_broker.security.plain import PlainServer, plain_token
from gregor_broker.security.scram import (
    AuthenticationFailed,
    ScramClient,
    ScramCredential,
    ScramServer,
    credential_from_password,
)

# RFC 7677 section 3: user "user", password "pencil".
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_CLIENT_FINAL = (
    f"c=biws,r={RFC_CLIENT_NONCE}{RFC_SERVER_NONCE},p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
RFC_SERVER_FINAL = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def _rfc_server(monkeypatch, known: bool = True) -> ScramServer:
    credential = credential_from_password("SCRAM-SHA-256", "pencil", salt=RFC_SALT)
    monkeypatch.setattr(scram, "random_nonce", lambda: RFC_SERVER_NONCE)
    return ScramServer(
        "SCRAM-SHA-256",
        lambda user, mechanism: credential if known and user == "user" else None,
        b"decoy",
    )


def test_scram_sha_256_matches_rfc_7677(monkeypatch):
    server = _rfc_server(monkeypatch)
    first = server.step(f"n,,n=user,r={RFC_CLIENT_NONCE}".encode())
    assert (
        first.decode()
        == f"r={RFC_CLIENT_NONCE}{RFC_SERVER_NONCE},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    )
    assert server.step(RFC_CLIENT_FINAL.encode()).decode() == RFC_SERVER_FINAL
    assert server.complete and server.user == "user"


@pytest.mark.parametrize(
    "final",
    [
        RFC_CLIENT_FINAL.replace("p=dHzb", "p=eHzb"),  # wrong proof
        RFC_CLIENT_FINAL.replace(RFC_SERVER_NONCE, "other-nonce"),  # wrong nonce
        RFC_CLIENT_FINAL.replace("c=biws", "c=eSws"),  # other channel binding
        "c=biws,r=x",  # no proof
        "garbage",
        "c=biws,r=\xff,p=!!!",
    ],
)
def test_scram_refuses_a_wrong_final_message(monkeypatch, final):
    server = _rfc_server(monkeypatch)
    server.step(f"n,,n=user,r={RFC_CLIENT_NONCE}".encode())
    with pytest.raises(AuthenticationFailed):
        server.step(final.encode())
    assert not server.complete


@pytest.mark.parametrize(
    "first",
    [b"", b"n,,", b"p=tls-unique,,n=user,r=x", b"n,,r=x,n=user", b"n,,n=us=er,r=x", b"\xff\xfe",
     b"n,,n=user,r=x,tokenauth=true", b"n,a=other,n=user,r=x", b"x" * 10000],
)  # fmt: skip
def test_scram_refuses_a_malformed_first_message(monkeypatch, first):
    server = _rfc_server(monkeypatch)
    with pytest.raises(AuthenticationFailed):
        server.step(first)


def test_an_unknown_user_looks_like_a_wrong_password(monkeypatch):
    """Same shape of answer, a stable salt, and failure only at the proof."""
    unknown = _rfc_server(monkeypatch, known=False)
    first = unknown.step(f"n,,n=user,r={RFC_CLIENT_NONCE}".encode()).decode()
    again = _rfc_server(monkeypatch, known=False)
    assert again.step(f"n,,n=user,r={RFC_CLIENT_NONCE}".encode()).decode() == first
    assert first.startswith(f"r={RFC_CLIENT_NONCE}{RFC_SERVER_NONCE},s=") and first.endswith(
        ",i=4096"
    )
    with pytest.raises(AuthenticationFailed, match="Invalid client credentials"):
        unknown.step(RFC_CLIENT_FINAL.encode())


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_our_client_and_server_agree(mechanism):
    credential = credential_from_password(mechanism, "s3cret", iterations=4096)
    server = ScramServer(mechanism, lambda u, m: credential if u == "al,ice=" else None, b"k")
    client = ScramClient(mechanism, "al,ice=", "s3cret")
    final = client.final_message(server.step(client.first_message()))
    client.verify_server_final(server.step(final))
    assert server.complete and server.user == "al,ice="
    wrong = ScramClient(mechanism, "al,ice=", "nope")
    server = ScramServer(mechanism, lambda u, m: credential, b"k")
    with pytest.raises(AuthenticationFailed):
        server.step(wrong.final_message(server.step(wrong.first_message())))


def test_credentials_round_trip_kafkas_zookeeper_format():
    credential = credential_from_password("SCRAM-SHA-512", "x", iterations=8192)
    text = credential.to_zk()
    assert text.startswith("salt=") and ",stored_key=" in text and text.endswith(",iterations=8192")
    assert ScramCredential.from_zk(text) == credential
    with pytest.raises(ValueError):
        ScramCredential.from_zk("salt=abc")


def test_plain_checks_user_and_password():
    users = {"alice": "alice-secret"}
    server = PlainServer(users)
    assert server.step(plain_token("alice", "alice-secret")) == b""
    assert server.complete and server.user == "alice"
    for token in (
        plain_token("alice", "wrong"),
        plain_token("mallory", "alice-secret"),
        b"alice\x00alice-secret",
        b"bob\x00alice\x00alice-secret",
        b"\x00\x00",
    ):
        with pytest.raises(AuthenticationFailed):
            PlainServer(users).step(token)


def test_jaas_config_gives_plain_users_and_the_login():
    login = parse_jaas_config(
        "org.apache.kafka.common.security.plain.PlainLoginModule required\n"
        '  username="admin" password="admin-secret"\n'
        '  user_admin="admin-secret" user_alice="a \\"quoted\\" one";'
    )
    assert login.control_flag == "required"
    assert login.options["username"] == "admin"
    assert login.plain_users == {"admin": "admin-secret", "alice": 'a "quoted" one'}
    for bad in ("", "Module required user_a=", "Module sometimes;", "Module required a=b"):
        with pytest.raises(ConfigError):
            parse_jaas_config(bad)
