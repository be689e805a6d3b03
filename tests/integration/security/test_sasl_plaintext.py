"""SASL_PLAINTEXT with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512, with every client library.

The broker has a SASL_PLAINTEXT listener for clients and a PLAINTEXT one; PLAIN users
come from the listener's JAAS config, SCRAM credentials from ZooKeeper, written by
``gregor users scram set`` after the broker started (brokers pick them up live).
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid

import confluent_kafka
import confluent_kafka.admin
import kafka.errors
import pytest
from aiokafka import errors as aiokafka_errors

from gregor_broker.devtools.zookeeper_server import free_port

from ..broker_helpers import scrape
from . import clients
from .clients import Security

MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
PASSWORD = "alice-secret"
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    f'user_alice="{PASSWORD}" user_admin="admin-secret";'
)


def gregor(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gregor_broker.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def sasl_properties(sasl_port: int, plain_port: int) -> dict[str, str]:
    listeners = f"PLAINTEXT://127.0.0.1:{plain_port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}"
    return {
        "listeners": listeners,
        "advertised.listeners": listeners,
        "sasl.enabled.mechanisms": ",".join(MECHANISMS),
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "num.partitions": "1",
    }


@pytest.fixture
def sasl_broker(broker_factory, zk_connect):
    plain_port, sasl_port, metrics_port = free_port(), free_port(), free_port()
    broker = broker_factory(
        port=plain_port,
        timeout=120,
        **sasl_properties(sasl_port, plain_port),
        **{"metrics.port": str(metrics_port)},
    )
    result = gregor(
        "users", "scram", "set", "alice", "--password", PASSWORD, "--zookeeper", zk_connect
    )
    assert result.returncode == 0, result.stderr
    listed = gregor("users", "scram", "list", "--zookeeper", zk_connect)
    assert "alice" in listed.stdout and "SCRAM-SHA-512" in listed.stdout
    # The broker learns the credentials through /config/changes; wait until it has.
    wait_for_login(
        f"127.0.0.1:{sasl_port}", Security("SASL_PLAINTEXT", "SCRAM-SHA-512", "alice", PASSWORD)
    )
    broker.sasl_bootstrap = f"127.0.0.1:{sasl_port}"
    broker.metrics = metrics_port
    return broker


ROUND_TRIPS = {
    "confluent-kafka": clients.round_trip_confluent,
    "kafka-python": clients.round_trip_kafka_python,
    "aiokafka": clients.round_trip_aiokafka,
    "kcat": clients.round_trip_kcat,
}


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_every_client_produces_and_consumes_over_sasl_plaintext(sasl_broker, mechanism):
    security = Security("SASL_PLAINTEXT", mechanism, "alice", PASSWORD)
    for name, round_trip in ROUND_TRIPS.items():
        topic = f"sasl-{name}-{uuid.uuid4().hex[:6]}"
        got = round_trip(sasl_broker.sasl_bootstrap, security, topic)
        assert len(set(got)) == clients.MESSAGES, f"{name} over {mechanism}: {got}"
    metrics = scrape(sasl_broker.metrics)
    labels = f'{{listener="SASL_PLAINTEXT",mechanism="{mechanism}"}}'
    key = f"gregor_successful_authentication_total{labels}"
    assert metrics[key] >= 4


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_a_wrong_password_fails_with_sasl_authentication_failed(sasl_broker, mechanism):
    bootstrap = sasl_broker.sasl_bootstrap
    for user in ("alice", "nobody"):
        wrong = Security("SASL_PLAINTEXT", mechanism, user, "wrong-password")

        error = clients.login_error_confluent(bootstrap, wrong)
        assert error.code() == confluent_kafka.KafkaError._AUTHENTICATION, error
        assert "Authentication failed" in error.str(), error

        # kafka-python and aiokafka retry until their bootstrap times out, logging the
        # broker's error code 58 as they go.
        failure, logged = clients.login_error_kafka_python(bootstrap, wrong)
        assert isinstance(failure, kafka.errors.KafkaTimeoutError), repr(failure)
        assert "SaslAuthenticationFailedError" in logged, logged
        assert "Authentication failed" in logged, logged

        failure, logged = clients.login_error_aiokafka(bootstrap, wrong)
        assert isinstance(failure, aiokafka_errors.KafkaConnectionError), repr(failure)
        assert "[Error 58] SaslAuthenticationFailed" in logged, logged

        stderr = clients.login_error_kcat(bootstrap, wrong)
        assert "SASL authentication error" in stderr and "Authentication failed" in stderr, stderr
    metrics = scrape(sasl_broker.metrics)
    labels = f'{{listener="SASL_PLAINTEXT",mechanism="{mechanism}"}}'
    key = f"gregor_failed_authentication_total{labels}"
    assert metrics[key] >= 8


def wait_for_login(bootstrap: str, security: Security) -> None:
    """The broker learns SCRAM credentials through /config/changes: wait until it has."""
    deadline = time.monotonic() + 60
    while not _can_log_in(bootstrap, security):
        assert time.monotonic() < deadline, "SCRAM credentials never reached the broker"
        time.sleep(0.5)


def _can_log_in(bootstrap: str, security: Security) -> bool:
    admin = confluent_kafka.admin.AdminClient(
        {"bootstrap.servers": bootstrap, **security.librdkafka()}
    )
    try:
        admin.list_topics(timeout=5)
    except confluent_kafka.KafkaException:
        return False
    return True


def test_scram_credentials_can_be_deleted_live(sasl_broker, zk_connect):
    security = Security("SASL_PLAINTEXT", "SCRAM-SHA-256", "alice", PASSWORD)
    result = gregor(
        "users",
        "scram",
        "delete",
        "alice",
        "--mechanism",
        "SCRAM-SHA-256",
        "--zookeeper",
        zk_connect,
    )
    assert result.returncode == 0, result.stderr
    # The broker forgets the credential through /config/changes, within moments.
    deadline = time.monotonic() + 30
    while _can_log_in(sasl_broker.sasl_bootstrap, security):
        assert time.monotonic() < deadline, "the deleted credential still logs in"
        time.sleep(0.5)
    error = clients.login_error_confluent(sasl_broker.sasl_bootstrap, security)
    assert error.code() == confluent_kafka.KafkaError._AUTHENTICATION, error
    # The other mechanism is untouched.
    other = Security("SASL_PLAINTEXT", "SCRAM-SHA-512", "alice", PASSWORD)
    topic = f"after-delete-{uuid.uuid4().hex[:6]}"
    assert (
        len(set(clients.round_trip_confluent(sasl_broker.sasl_bootstrap, other, topic)))
        == clients.MESSAGES
    )


def test_admin_clients_alter_and_describe_scram_credentials(sasl_broker):
    """AlterUserScramCredentials (the client salts the password) and
    DescribeUserScramCredentials through confluent-kafka, then a login with the result."""
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient({"bootstrap.servers": sasl_broker.bootstrap})  # PLAINTEXT listener
    futures = admin.alter_user_scram_credentials(
        [
            UserScramCredentialUpsertion(
                "bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), b"bob-secret"
            ),
            UserScramCredentialUpsertion(
                "carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 1000), b"x"
            ),
        ]
    )
    futures["bob"].result(30)
    with pytest.raises(confluent_kafka.KafkaException, match="Too few iterations"):
        futures["carol"].result(30)
    described = admin.describe_user_scram_credentials(["bob"])["bob"].result(30)
    assert [(i.mechanism, i.iterations) for i in described.scram_credential_infos] == [
        (ScramMechanism.SCRAM_SHA_256, 8192)
    ]
    bob = Security("SASL_PLAINTEXT", "SCRAM-SHA-256", "bob", "bob-secret")
    wait_for_login(sasl_broker.sasl_bootstrap, bob)
    deleted = admin.alter_user_scram_credentials(
        [UserScramCredentialDeletion("bob", ScramMechanism.SCRAM_SHA_512)]
    )
    with pytest.raises(confluent_kafka.KafkaException, match="does not exist"):
        deleted["bob"].result(30)
    with pytest.raises(confluent_kafka.KafkaException, match="does not exist"):
        admin.describe_user_scram_credentials(["nobody"])["nobody"].result(30)
    everyone = admin.describe_user_scram_credentials().result(30)
    assert {"alice", "bob"} <= set(everyone)


def test_sessions_are_reauthenticated_before_connections_max_reauth_ms(broker_factory, zk_connect):
    """KIP-368: the broker announces a session lifetime; librdkafka logs in again on the
    same connection before it ends, and keeps producing across several lifetimes."""
    plain_port, sasl_port, metrics_port = free_port(), free_port(), free_port()
    broker_factory(
        port=plain_port,
        timeout=120,
        **sasl_properties(sasl_port, plain_port),
        **{"metrics.port": str(metrics_port), "connections.max.reauth.ms": "2000"},
    )
    security = Security("SASL_PLAINTEXT", "PLAIN", "alice", PASSWORD)
    bootstrap = f"127.0.0.1:{sasl_port}"
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, **security.librdkafka(), "acks": "all"}
    )
    errors: list[object] = []
    deadline = time.monotonic() + 10
    sent = 0
    while time.monotonic() < deadline:
        producer.produce("reauth", b"x", on_delivery=lambda e, m: e and errors.append(e))
        sent += 1
        producer.poll(0.05)
    assert producer.flush(60) == 0
    assert errors == []
    renewals = scrape(metrics_port).get(
        'gregor_successful_reauthentication_total{listener="SASL_PLAINTEXT",mechanism="PLAIN"}', 0
    )
    # Ten seconds of two-second sessions: logged in again on the same connections.
    assert renewals >= 2, renewals
