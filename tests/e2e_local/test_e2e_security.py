"""The chart's SASL_SSL mode installed for real (issue 17, step 5): the chart with
``security`` enabled in the Kubernetes emulator, the operator as its own process, broker
pods from the operator's StatefulSet run by the kubelet stand-in, which resolves their
``secretKeyRef`` environment from the emulator's Secrets.

The Secrets are what a user (or cert-manager) makes: ``gregor-tls`` with ``tls.crt``,
``tls.key`` and ``ca.crt`` from the repo's certificate helper, its names the pods' and the
client Service's DNS names plus 127.0.0.1, the address the stand-in's pods advertise (they
share this machine's loopback); ``gregor-broker-login`` with the brokers' own login, and
``app-login`` with a client's. Two User resources make their SCRAM-SHA-512 credentials.

Then a real client (confluent-kafka) produces with acks=all to an RF 3 Topic and
consumes over SASL_SSL with SCRAM and host name checks; every partition ends with its
three replicas in sync, so followers fetched over the INTERNAL SASL_SSL listener; a wrong
password is refused (SASL authentication failed). Pods run as processes (no image build,
so the test stays short); the Secret handling is the same code in podman mode.
"""

from __future__ import annotations

import base64
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient
from e2e.local import LocalPlatform
from e2e.scenarios import RELEASE, create_topic, ready_condition, running_with, wait

from gregor_broker.devtools.certificates import make_certificates

pytestmark = [pytest.mark.timeout(600)]

NAMESPACE = "gregor"
MECHANISM = "SCRAM-SHA-512"
APP_PASSWORD = "app-" + uuid.uuid4().hex


@pytest.fixture
def platform(tmp_path: Path) -> Iterator[LocalPlatform]:
    platform = LocalPlatform(tmp_path, namespace=NAMESPACE, release=RELEASE, runtime="process")
    try:
        platform.start()
        yield platform
    finally:
        platform.stop()


def secret(name: str, data: dict[str, str], kind: str = "Opaque") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name},
        "type": kind,
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
    }


def user(name: str, secret_name: str) -> dict[str, Any]:
    return {
        "apiVersion": "gregor.dev/v1alpha1",
        "kind": "User",
        "metadata": {"name": name},
        "spec": {
            "cluster": RELEASE,
            "authentication": {
                "type": MECHANISM.lower(),
                "password": {"valueFrom": {"secretKeyRef": {"name": secret_name}}},
            },
        },
    }


def client_config(bootstrap: str, ca: Path, password: str = APP_PASSWORD) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": MECHANISM,
        "sasl.username": "app",
        "sasl.password": password,
        "ssl.ca.location": str(ca),
        "ssl.endpoint.identification.algorithm": "https",
    }


def isrs(config: dict[str, Any], topic: str) -> dict[int, tuple[list[int], list[int]]]:
    """partition -> (replicas, in-sync replicas), from the Metadata API over SASL_SSL."""
    metadata = AdminClient(config).list_topics(topic, timeout=10)
    found = metadata.topics[topic]
    assert found.error is None, found.error
    return {p.id: (sorted(p.replicas), sorted(p.isrs)) for p in found.partitions.values()}


def test_chart_sasl_ssl_scram_replicates_and_refuses_a_wrong_password(
    platform: LocalPlatform, tmp_path: Path
) -> None:
    started = time.monotonic()
    headless = f"{RELEASE}-brokers.{NAMESPACE}.svc"
    certs = make_certificates(
        tmp_path / "certs",
        names=[f"*.{headless}", f"{RELEASE}.{NAMESPACE}.svc", RELEASE],
    )
    broker_password = "broker-" + uuid.uuid4().hex
    for obj in (
        secret(
            "gregor-tls",
            {
                "tls.crt": certs.broker_cert.read_text(),
                "tls.key": certs.broker_key.read_text(),
                "ca.crt": certs.ca.read_text(),
            },
            kind="kubernetes.io/tls",
        ),
        secret("gregor-broker-login", {"username": "broker", "password": broker_password}),
        secret("app-login", {"password": APP_PASSWORD}),
    ):
        platform.apply(obj)
    values = platform.values(
        {
            "security": {
                "clientProtocol": "SASL_SSL",
                "interBrokerProtocol": "SASL_SSL",
                "saslMechanisms": [MECHANISM],
                "tls": {"secretName": "gregor-tls"},
                "interBroker": {"mechanism": MECHANISM, "credentialsSecret": "gregor-broker-login"},
            }
        }
    )
    platform.install(values)
    platform.apply(user("broker", "gregor-broker-login"))
    platform.apply(user("app", "app-login"))
    for name in ("broker", "app"):
        wait(f"User {name} Ready", ready_condition(platform, "User", name), timeout=120)
    try:
        wait("3 ready brokers", running_with(platform, 3), timeout=240)
    except AssertionError as error:  # say why the stand-in started no container
        raise AssertionError(f"{error}; kubelet errors: {platform.kubelet.errors[-3:]}") from None

    # The pods got the Secrets' values through secretKeyRef, and listen as the chart says.
    pod = platform.kubelet.pod(NAMESPACE, f"{RELEASE}-0")
    assert pod is not None
    assert pod.env["GREGOR_SSL_KEYSTORE_CERTIFICATE_CHAIN"] == certs.broker_cert.read_text()
    assert pod.env["BROKER_SASL_PASSWORD"] == broker_password
    assert f'password="{broker_password}"' in pod.env["GREGOR_SASL_JAAS_CONFIG"]
    assert set(pod.ports) >= {"kafka", "internal"}, pod.ports

    create_topic(platform, "secured", partitions=3)
    config = client_config(platform.bootstrap(), certs.ca)

    count = 300
    acknowledged: set[str] = set()
    errors: list[str] = []

    def delivered(error: Any, message: Any) -> None:
        if error is None:
            acknowledged.add(message.value().decode())
        else:
            errors.append(str(error))

    producer = Producer({**config, "acks": "all", "enable.idempotence": True, "linger.ms": 5})
    for n in range(count):
        producer.produce("secured", f"v-{n}".encode(), on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(120) == 0, "deliveries outstanding after 120 s"
    assert not errors, errors[:5]
    assert len(acknowledged) == count

    consumer = Consumer(
        {
            **config,
            "group.id": f"e2e-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe(["secured"])
    received: set[str] = set()
    deadline = time.monotonic() + 120
    try:
        while received < acknowledged and time.monotonic() < deadline:
            for message in consumer.consume(500, 1.0):
                if message.error() is None:
                    received.add(message.value().decode())
    finally:
        consumer.close()
    assert acknowledged <= received, f"{len(acknowledged - received)} values not read back"

    # Every partition: three replicas, all in sync (followers fetch over INTERNAL, SASL_SSL).
    def all_replicas_in_sync() -> dict[int, tuple[list[int], list[int]]] | None:
        got = isrs(config, "secured")
        return got if all(len(r) == 3 and r == i for r, i in got.values()) else None

    partitions = wait("every partition's 3 replicas in sync", all_replicas_in_sync, timeout=120)
    assert len(partitions) == 3, partitions

    # A wrong password: refused, with SASL authentication failed.
    refusals: list[KafkaError] = []
    wrong = {
        **client_config(platform.bootstrap(), certs.ca, password="wrong"),
        "error_cb": refusals.append,
    }
    refused = Producer(wrong)  # librdkafka reports the failed login through error_cb
    deadline = time.monotonic() + 60
    while not refusals and time.monotonic() < deadline:
        refused.poll(0.5)
    assert any(e.code() == KafkaError._AUTHENTICATION for e in refusals), refusals
    assert any("authentication failed" in e.str().lower() for e in refusals), refusals
    refused = None  # the client goes, and stops retrying
    with pytest.raises(KafkaException):
        AdminClient(wrong).list_topics(timeout=10)
    print(f"e2e security: {round(time.monotonic() - started, 1)} s, {len(acknowledged)} acked")
