"""SSL and SASL_SSL listeners with every client library, mTLS, and TLS-only settings.

One broker, four listeners: PLAINTEXT (between brokers), SSL (the key store a PEM file
with an encrypted key and ``ssl.key.password``, client certificates requested), MTLS
(protocol SSL, client certificates required) and SASL_SSL (the key store given inline).
"""

from __future__ import annotations

import socket
import ssl
import subprocess
import uuid

import confluent_kafka
import pytest

from gregor_broker.devtools.certificates import KEY_PASSWORD, make_certificates
from gregor_broker.devtools.zookeeper_server import free_port

from ..broker_helpers import scrape
from . import clients
from .clients import Security
from .test_sasl_plaintext import JAAS, MECHANISMS, PASSWORD, gregor, wait_for_login

ROUND_TRIPS = {
    "confluent-kafka": clients.round_trip_confluent,
    "kafka-python": clients.round_trip_kafka_python,
    "aiokafka": clients.round_trip_aiokafka,
    "kcat": clients.round_trip_kcat,
}


def _inline(path) -> str:
    return path.read_text().strip().replace("\n", "\\n")


@pytest.fixture(scope="module")
def certificates(tmp_path_factory):
    return make_certificates(tmp_path_factory.mktemp("certificates"))


@pytest.fixture
def tls_broker(broker_factory, zk_connect, certificates):
    ports = {name: free_port() for name in ("PLAINTEXT", "SSL", "MTLS", "SASL_SSL")}
    listeners = ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items())
    metrics_port = free_port()
    properties = {
        "listeners": listeners,
        "advertised.listeners": listeners,
        "listener.security.protocol.map": (
            "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL,SASL_SSL:SASL_SSL"
        ),
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certificates.broker_keystore),
        "ssl.key.password": KEY_PASSWORD,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(certificates.ca),
        "ssl.client.auth": "requested",
        "ssl.principal.mapping.rules": "RULE:^CN=([^,]+),.*$/$1/L,DEFAULT",
        "listener.name.mtls.ssl.client.auth": "required",
        # The SASL_SSL listener's key store is inline instead.
        "listener.name.sasl_ssl.ssl.keystore.location": "",
        "listener.name.sasl_ssl.ssl.keystore.certificate.chain": _inline(certificates.broker_cert),
        "listener.name.sasl_ssl.ssl.keystore.key": _inline(certificates.broker_key),
        "listener.name.sasl_ssl.ssl.key.password": "",
        "sasl.enabled.mechanisms": ",".join(MECHANISMS),
        "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
        "num.partitions": "1",
        "metrics.port": str(metrics_port),
    }
    broker = broker_factory(port=ports["PLAINTEXT"], timeout=120, **properties)
    result = gregor("users", "scram", "set", "alice", "--password", PASSWORD,
                    "--zookeeper", zk_connect)  # fmt: skip
    assert result.returncode == 0, result.stderr
    broker.ports = ports
    broker.metrics = metrics_port
    broker.ca = str(certificates.ca)
    wait_for_login(
        f"127.0.0.1:{ports['SASL_SSL']}",
        Security("SASL_SSL", "SCRAM-SHA-512", "alice", PASSWORD, ca=broker.ca),
    )
    return broker


def test_every_client_produces_and_consumes_over_ssl(tls_broker):
    bootstrap = f"127.0.0.1:{tls_broker.ports['SSL']}"
    security = Security("SSL", ca=tls_broker.ca)
    before = scrape(tls_broker.metrics)
    for name, round_trip in ROUND_TRIPS.items():
        topic = f"ssl-{name}-{uuid.uuid4().hex[:6]}"
        got = round_trip(bootstrap, security, topic)
        assert len(set(got)) == clients.MESSAGES, f"{name} over SSL: {got}"
    after = scrape(tls_broker.metrics)
    # Consumed through TLS: read from the segments and encrypted, never sendfile(2).
    assert after["gregor_tls_read_bytes_total"] > before.get("gregor_tls_read_bytes_total", 0)
    assert after["gregor_sendfile_bytes_total"] == before["gregor_sendfile_bytes_total"]


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_every_client_produces_and_consumes_over_sasl_ssl(tls_broker, mechanism):
    bootstrap = f"127.0.0.1:{tls_broker.ports['SASL_SSL']}"
    security = Security("SASL_SSL", mechanism, "alice", PASSWORD, ca=tls_broker.ca)
    for name, round_trip in ROUND_TRIPS.items():
        topic = f"sasl-ssl-{name}-{uuid.uuid4().hex[:6]}"
        got = round_trip(bootstrap, security, topic)
        assert len(set(got)) == clients.MESSAGES, f"{name} over SASL_SSL/{mechanism}: {got}"
    wrong = Security("SASL_SSL", mechanism, "alice", "wrong", ca=tls_broker.ca)
    error = clients.login_error_confluent(bootstrap, wrong)
    assert error.code() == confluent_kafka.KafkaError._AUTHENTICATION, error


def test_mtls_required_takes_only_clients_with_a_certificate(tls_broker, certificates):
    bootstrap = f"127.0.0.1:{tls_broker.ports['MTLS']}"
    with_cert = Security(
        "SSL",
        ca=tls_broker.ca,
        cert=str(certificates.client_cert),
        key=str(certificates.client_key),
    )
    for name, round_trip in ROUND_TRIPS.items():
        topic = f"mtls-{name}-{uuid.uuid4().hex[:6]}"
        assert len(set(round_trip(bootstrap, with_cert, topic))) == clients.MESSAGES, name
    error = clients.login_error_confluent(bootstrap, Security("SSL", ca=tls_broker.ca))
    assert error.code() in (
        confluent_kafka.KafkaError._TRANSPORT,
        confluent_kafka.KafkaError._SSL,
        confluent_kafka.KafkaError._ALL_BROKERS_DOWN,
    ), error


def test_old_tls_versions_and_plaintext_bytes_are_refused(tls_broker):
    port = tls_broker.ports["SSL"]
    old = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    old.load_verify_locations(tls_broker.ca)
    old.minimum_version = ssl.TLSVersion.TLSv1
    old.maximum_version = ssl.TLSVersion.TLSv1_1
    with (
        socket.create_connection(("127.0.0.1", port), timeout=60) as raw,
        pytest.raises((ssl.SSLError, ConnectionError)),
        old.wrap_socket(raw, server_hostname="localhost"),
    ):
        pass
    good = ssl.create_default_context(cafile=tls_broker.ca)
    with (
        socket.create_connection(("127.0.0.1", port), timeout=60) as raw,
        good.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        assert tls.version() == "TLSv1.3"
    # A Kafka request in the clear (ApiVersions v0) to a TLS listener: at most a TLS
    # alert comes back, never a Kafka answer, and the connection closes.
    with socket.create_connection(("127.0.0.1", port), timeout=60) as raw:
        raw.sendall(b"\x00\x00\x00\x0a\x00\x12\x00\x00\x00\x00\x00\x01\x00\x00")
        try:
            data = raw.recv(100)
        except ConnectionResetError:
            data = b""
        assert data == b"" or data[0] == 0x15, data  # 0x15: a TLS alert record
    # The broker still serves TLS clients.
    subprocess.run(
        [clients.KCAT or "kcat", "-b", f"127.0.0.1:{port}", "-X", "security.protocol=SSL",
         "-X", f"ssl.ca.location={tls_broker.ca}", "-L"],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip


def test_a_consumer_fetch_waiting_for_records_is_answered_through_tls(tls_broker):
    """A consumer's fetch that waits for records is answered by the produce that appends
    them (the Deferred path, in the producing call). Over TLS its records must still be
    read and encrypted: sent with sendfile(2) onto the socket under the TLS layer, they
    corrupted the stream and the client dropped the connection."""
    bootstrap = f"127.0.0.1:{tls_broker.ports['SSL']}"
    security = Security("SSL", ca=tls_broker.ca)
    topic = f"ssl-waiting-{uuid.uuid4().hex[:6]}"
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, **security.librdkafka()})
    producer.produce(topic, b"first")
    assert producer.flush(30) == 0
    errors: list[confluent_kafka.KafkaError] = []
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"g-{topic}",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 5000,
            "error_cb": errors.append,
            **security.librdkafka(),
        }
    )
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
        first = consumer.poll(30)
        assert first is not None and first.error() is None and first.value() == b"first"
        before = scrape(tls_broker.metrics)
        got = []
        for i in range(clients.MESSAGES):
            assert consumer.poll(0.3) is None  # its fetch now waits at the log end
            producer.produce(topic, b"late-%d" % i)
            producer.flush(30)
            message = consumer.poll(10)
            assert message is not None and message.error() is None, message
            got.append(message.value())
        after = scrape(tls_broker.metrics)
    finally:
        consumer.close()
    assert got == [b"late-%d" % i for i in range(clients.MESSAGES)]
    assert not errors, f"the consumer's connection failed: {errors}"
    assert after["gregor_sendfile_bytes_total"] == before["gregor_sendfile_bytes_total"]
    assert after["gregor_tls_read_bytes_total"] > before.get("gregor_tls_read_bytes_total", 0)
