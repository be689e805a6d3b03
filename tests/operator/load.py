"""Shared by the GregorCluster tests that run real brokers under the kubelet stand-in: the
cluster resource, an acks=all idempotent producer that remembers what was acknowledged, a
watcher that counts partitions below min.insync.replicas, and reading everything back."""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any

import confluent_kafka

from gregor_broker.cluster.admin import ZkAdmin
from gregor_broker.devtools.local_cluster import zookeeper_client

API = "gregor.dev/v1alpha1"
MIN_ISR = 2


def cluster_resource(name: str, zk_connect: str, replicas: int) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "GregorCluster",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "zookeeper": {"connect": zk_connect},
            "config": {
                "min.insync.replicas": MIN_ISR,
                "default.replication.factor": 3,
                "replica.lag.time.max.ms": 10000,
            },
            "rebalancing": {
                "throttleBytesPerSecond": 50 * 1024 * 1024,
                "preferredLeaderCheckIntervalSeconds": 0,
            },
        },
    }


class Producer(threading.Thread):
    """acks=all, idempotent; remembers every acknowledged value."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.topic = topic
        self.acked: set[str] = set()
        self.errors: list[str] = []
        self.stopping = threading.Event()
        self.producer = confluent_kafka.Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "message.timeout.ms": 120000,
            }
        )

    def delivered(self, error: Any, message: Any) -> None:
        if error is None:
            self.acked.add(message.value().decode())
        else:
            self.errors.append(str(error))

    def run(self) -> None:
        sequence = 0
        while not self.stopping.is_set():
            self.producer.produce(self.topic, f"m-{sequence}".encode(), on_delivery=self.delivered)
            sequence += 1
            self.producer.poll(0.005)
        self.producer.flush(120)


class Watcher(threading.Thread):
    """Samples ZooKeeper and the StatefulSet: partitions below min ISR, and which brokers
    held replicas whenever the StatefulSet had each size."""

    def __init__(self, zk_connect: str, kube: Any) -> None:
        super().__init__(daemon=True)
        self.zk = zookeeper_client(zk_connect)
        self.admin = ZkAdmin(self.zk)
        self.kube = kube
        self.stopping = threading.Event()
        self.below_min_isr: list[tuple[str, int, list[int]]] = []
        self.leaderless: list[tuple[str, int]] = []  # samples of a partition with no leader
        self.samples = 0
        self.held_when: dict[int, set[int]] = {}
        # The GregorCluster's status as it went: each phase once per stretch, in order, and
        # every progress it showed (sampled about 10 times a second).
        self.phases: list[str] = []
        self.progress: list[dict[str, Any]] = []

    def run(self) -> None:
        # Status in its own thread: an API round trip must not thin out the ISR samples.
        statuses = threading.Thread(target=self.sample_statuses, daemon=True)
        statuses.start()
        sts = None
        while not self.stopping.is_set():
            # ZooKeeper every 50 ms; the StatefulSet every 0.5 s, and only its replica count
            # matters: a sample counts for the size read before it.
            if self.samples % 10 == 0:
                with contextlib.suppress(TimeoutError):
                    sts = self.kube.client.find("apps/v1", "statefulsets", "default", "gregor")
            held: set[int] = set()
            for topic in self.admin.list_topics():
                found = self.admin.get_topic(topic)
                if found is None:
                    continue
                for partition, replicas in found.partitions.items():
                    held |= set(replicas)
                    state = self.admin.get_partition_state(topic, partition)
                    if state is not None and len(state[0].isr) < MIN_ISR:
                        self.below_min_isr.append((topic, partition, list(state[0].isr)))
                    if state is not None and state[0].leader == -1:
                        self.leaderless.append((topic, partition))
            if sts is not None:
                self.held_when.setdefault(sts["spec"]["replicas"], set()).update(held)
            self.samples += 1
            time.sleep(0.05)
        self.zk.stop()
        self.zk.close()

    def sample_statuses(self) -> None:
        while not self.stopping.is_set():
            try:
                found = self.kube.client.find(API, "gregorclusters", "default", "gregor")
            except TimeoutError:
                continue
            status = (found or {}).get("status") or {}
            phase = status.get("phase")
            if phase and (not self.phases or self.phases[-1] != phase):
                self.phases.append(phase)
            if status.get("progress"):
                self.progress.append({"phase": phase, **status["progress"]})
            time.sleep(0.1)


def status_of(kube: Any) -> dict[str, Any]:
    return kube.client.get(API, "gregorclusters", "default", "gregor").get("status") or {}


def wait_phase(kube: Any, phase: str, replicas: int, timeout: float = 300) -> dict[str, Any]:
    """Wait for the GregorCluster to reach ``phase`` with ``replicas`` brokers. The default
    is generous: on two loaded cores (CI) brokers started as pods took minutes to register."""

    def check():
        obj = kube.client.get(API, "gregorclusters", "default", "gregor")
        status = obj.get("status") or {}
        sts = kube.client.find("apps/v1", "statefulsets", "default", "gregor")
        return (
            status.get("observedGeneration") == obj["metadata"]["generation"]
            and len(status.get("brokers") or ()) == replicas
            and status.get("phase") == phase
            and sts is not None
            and sts["spec"]["replicas"] == replicas
            and status
        )

    try:
        return kube.client.wait_for(f"phase {phase} with {replicas} brokers", check, timeout)
    except AssertionError as error:
        raise AssertionError(f"{error}; status: {status_of(kube)}") from None


def read_back(bootstrap: str, topic: str, wanted: set[str], timeout: float = 60) -> set[str]:
    """Every value of ``topic`` (stops early once ``wanted`` is all seen)."""
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"check-{time.monotonic_ns()}",
         "auto.offset.reset": "earliest", "enable.auto.commit": False}
    )  # fmt: skip
    consumer.subscribe([topic])
    seen: set[str] = set()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not wanted <= seen:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            seen.add(message.value().decode())
    consumer.close()
    return seen
