"""The broker and operator images under podman. A real container of
``gregor/gregor-broker`` serves Kafka clients, reads Kafka's property names from a
mounted server.properties and ``GREGOR_*`` environment variables, runs as a non-root
user and reports health through its HEALTHCHECK (the same /healthz the chart's probes
use); the operator image runs ``gregor-operator`` with its dependencies.

The image is built by ``scripts/build-images`` when missing or older than the sources
(its ``gregor.source-digest`` label), so a fresh machine builds it once here: a Debian
base by debootstrap (about 3 minutes, then cached in podman's store) and the broker
image (about 1 minute). Skipped, with the reason, where neither podman nor root to
install it is available.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from deploy.images import PODMAN, ROOT, RUN_LIMITS, image_digest, source_digest

from gregor_broker.devtools.zookeeper_server import ZooKeeperServer, free_port
from gregor_broker.log.validator import WALK

from ..integration.broker_helpers import wait_for

# xdist_group: one worker builds the image, and the short e2e (tests/e2e_local) reuses it.
pytestmark = [pytest.mark.timeout(900), pytest.mark.xdist_group("images")]

IMAGE = "gregor/gregor-broker:latest"


def _can_use_podman() -> str | None:
    """None when podman can be used (installing it when root), else the reason."""
    if shutil.which("podman") is None and os.geteuid() != 0:
        return "podman is not installed and installing it needs root"
    return None


@pytest.fixture(scope="module")
def broker_image() -> str:
    reason = _can_use_podman()
    if reason:
        pytest.skip(reason)
    if image_digest(IMAGE) != source_digest():
        started = time.monotonic()
        subprocess.run(
            ["bash", "scripts/build-images", "broker"],
            cwd=ROOT,
            check=True,
            env={**os.environ, "CONTAINER_ENGINE": "podman"},
        )
        print(f"built {IMAGE} in {time.monotonic() - started:.0f} s")
    assert image_digest(IMAGE) == source_digest()
    return IMAGE


class Container:
    """One podman container on the host network (the sandbox allows no other)."""

    def __init__(self, image: str, name: str, env: dict[str, str], mounts: list[str]) -> None:
        self.name = name
        command = [*PODMAN, "run", "--detach", "--name", name, "--network", "host", *RUN_LIMITS]
        for key, value in env.items():
            command += ["--env", f"{key}={value}"]
        for mount in mounts:
            command += ["--volume", mount]
        subprocess.run([*command, image], check=True, capture_output=True)

    def podman(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*PODMAN, *args], capture_output=True, text=True, check=False)

    def logs(self) -> str:
        result = self.podman("logs", self.name)
        return result.stdout + result.stderr

    def remove(self) -> None:
        self.podman("rm", "--force", "--time", "5", self.name)


@pytest.fixture
def broker_container(
    broker_image: str, zookeeper: ZooKeeperServer, tmp_path: Path
) -> Iterator[tuple[Container, str, int]]:
    port, metrics_port = free_port(), free_port()
    # The mounted file sets what the environment does not; the environment wins where
    # both set a key (num.partitions: 1 in the file, 3 from GREGOR_NUM_PARTITIONS).
    config_dir = tmp_path / "config"
    config_dir.mkdir()
    (config_dir / "server.properties").write_text(
        f"listeners=PLAINTEXT://127.0.0.1:{port}\n"
        "log.dirs=/var/lib/gregor/data\n"
        "auto.create.topics.enable=true\n"
        "num.partitions=1\n"
    )
    container = Container(
        broker_image,
        f"gregor-image-test-{uuid.uuid4().hex[:8]}",
        env={
            "GREGOR_BROKER_ID": "7",
            "GREGOR_ZOOKEEPER_CONNECT": f"{zookeeper.connect_string}/image-{uuid.uuid4().hex[:8]}",
            "GREGOR_METRICS_PORT": str(metrics_port),
            "GREGOR_NUM_PARTITIONS": "3",
        },
        mounts=[f"{config_dir}:/etc/gregor:ro"],
    )
    try:
        yield container, f"127.0.0.1:{port}", metrics_port
    finally:
        container.remove()


def _ready(metrics_port: int) -> bool:
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/readyz", timeout=2) as r:
        return r.status == 200


def test_broker_image_serves_produce_and_consume_with_mounted_config_and_env(
    broker_container: tuple[Container, str, int],
) -> None:
    container, bootstrap, metrics_port = broker_container
    assert wait_for(lambda: _ready(metrics_port), timeout=60), container.logs()
    # The image carries the record walk this machine compiled (make native), so its
    # brokers validate produced records as fast as a local one.
    assert f"record walk: {WALK}" in container.logs(), container.logs()

    # Non-root, with the HEALTHCHECK on the real liveness endpoint, and healthy.
    inspect = container.podman(
        "inspect", container.name, "--format", "{{.Config.User}} {{json .Config.Healthcheck}}"
    )
    user, healthcheck = inspect.stdout.split(" ", 1)
    assert user == "10001:10001"
    assert "/healthz" in healthcheck
    health = container.podman("healthcheck", "run", container.name)
    assert health.returncode == 0, health.stdout + health.stderr

    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = "image-orders"
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])[topic].result(30)

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    acknowledged: list[bytes] = []

    def on_delivery(error, message) -> None:
        if error is None:
            acknowledged.append(message.value())

    sent = [f"order-{i}".encode() for i in range(200)]
    for value in sent:
        producer.produce(topic, value=value, key=value, on_delivery=on_delivery)
    assert producer.flush(30) == 0
    assert sorted(acknowledged) == sorted(sent)

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"image-test-{uuid.uuid4().hex[:6]}",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([topic])
    received: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(received) < len(sent) and time.monotonic() < deadline:
        message = consumer.poll(1.0)
        if message is not None and message.error() is None:
            received.append(message.value())
    consumer.close()
    assert sorted(received) == sorted(sent)

    # Broker id from the environment; num.partitions from the environment over the file
    # (an auto-created topic gets 3); the listener from the mounted file.
    metadata = admin.list_topics(timeout=10)
    assert list(metadata.brokers) == [7]
    assert metadata.brokers[7].port == int(bootstrap.rsplit(":", 1)[1])
    Producer({"bootstrap.servers": bootstrap}).list_topics("image-auto", timeout=10)
    assert wait_for(
        lambda: (
            len(admin.list_topics("image-auto", timeout=5).topics["image-auto"].partitions) == 3
        ),
        timeout=20,
    )


OPERATOR_IMAGE = "gregor/gregor-operator:latest"


def test_operator_image_runs_gregor_operator_as_non_root() -> None:
    reason = _can_use_podman()
    if reason:
        pytest.skip(reason)
    if image_digest(OPERATOR_IMAGE) != source_digest():
        subprocess.run(
            ["bash", "scripts/build-images", "operator"],
            cwd=ROOT,
            check=True,
            env={**os.environ, "CONTAINER_ENGINE": "podman"},
        )
    inspect = subprocess.run(
        [
            *PODMAN,
            "image",
            "inspect",
            OPERATOR_IMAGE,
            "--format",
            "{{.Config.User}} {{json .Config.Entrypoint}} {{json .Config.Healthcheck.Test}}",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    user, entrypoint, healthcheck = inspect.stdout.split(" ", 2)
    assert user == "10001:10001"
    assert entrypoint == '["gregor-operator"]'
    assert "/healthz" in healthcheck
    # The entrypoint is the operator's CLI with its dependencies (kopf, kubernetes).
    result = subprocess.run(
        [*PODMAN, "run", "--rm", "--network", "none", *RUN_LIMITS, OPERATOR_IMAGE, "run", "--help"],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "--http-port" in result.stdout and "--namespace" in result.stdout
    check = subprocess.run(
        [
            *PODMAN,
            "run",
            "--rm",
            "--network",
            "none",
            *RUN_LIMITS,
            "--entrypoint",
            "python3",
            OPERATOR_IMAGE,
            "-c",
            "import kopf, kubernetes, gregor_operator.operator",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert check.returncode == 0, check.stderr
