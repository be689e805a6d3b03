"""Client-side load and checks the e2e scenarios share: an acks=all producer that counts
what was acknowledged, a consumer that reads it all back, and a watcher of every
partition's in-sync replicas as Kafka's Metadata API reports them.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient


class AcksAllProducer(threading.Thread):
    """Produces ``<prefix>-<n>`` values with acks=all (idempotent) until stopped, and
    remembers every value the cluster acknowledged."""

    def __init__(self, bootstrap: str, topic: str, interval: float = 0.005) -> None:
        super().__init__(daemon=True, name=f"producer-{topic}")
        self.topic = topic
        self.interval = interval
        self.prefix = uuid.uuid4().hex[:6]
        self.acknowledged: set[str] = set()
        self.errors: list[str] = []
        self.sent = 0
        self.stopping = threading.Event()
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "message.timeout.ms": 180000,
            }
        )

    def _delivered(self, error: Any, message: Any) -> None:
        if error is None:
            self.acknowledged.add(message.value().decode())
        else:
            self.errors.append(str(error))

    def run(self) -> None:
        while not self.stopping.is_set():
            value = f"{self.prefix}-{self.sent}"
            self.producer.produce(self.topic, value.encode(), on_delivery=self._delivered)
            self.sent += 1
            self.producer.poll(self.interval)
        self.producer.flush(180)

    def stop(self) -> None:
        self.stopping.set()
        self.join(240)
        self.producer = None  # librdkafka's client goes with it, and stops reconnecting

    def run_for(self, count: int) -> None:
        """Produce ``count`` values in this thread and wait for every acknowledgement."""
        for _ in range(count):
            value = f"{self.prefix}-{self.sent}"
            self.producer.produce(self.topic, value.encode(), on_delivery=self._delivered)
            self.sent += 1
            self.producer.poll(0)
        self.producer.flush(120)
        self.producer = None


def consume_all(bootstrap: str, topic: str, wanted: set[str], timeout: float = 120) -> set[str]:
    """Every value in ``topic`` from the beginning, until all of ``wanted`` were read (the
    topic may hold other values: an earlier scenario's) or ``timeout``."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"e2e-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    values: set[str] = set()
    deadline = time.monotonic() + timeout
    try:
        while not wanted <= values and time.monotonic() < deadline:
            for message in consumer.consume(500, 1.0):
                if message.error() is None:
                    values.add(message.value().decode())
    finally:
        consumer.close()
    return values


# topic -> partition -> in-sync replicas, as Kafka's Metadata API reports them.
Isrs = dict[str, dict[int, list[int]]]


def metadata_isrs(bootstrap: str) -> Callable[[], Isrs]:
    """A sampler of every partition's ISR through the Metadata API (confluent-kafka)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})

    def sample() -> Isrs:
        metadata = admin.list_topics(timeout=5)
        return {
            name: {p.id: list(p.isrs) for p in topic.partitions.values()}
            for name, topic in metadata.topics.items()
            if topic.error is None
        }

    return sample


class IsrWatcher(threading.Thread):
    """Samples every partition's ISR (``sample``: the platform's way to ask the Metadata
    API) every ``interval`` seconds; records each time a partition of ``topics`` was seen
    with fewer in-sync replicas than ``min_isr``."""

    def __init__(
        self,
        sample: Callable[[], Isrs],
        topics: list[str],
        min_isr: int,
        interval: float = 0.2,
    ) -> None:
        super().__init__(daemon=True, name="isr-watcher")
        self.sample = sample
        self.topics = topics
        self.min_isr = min_isr
        self.interval = interval
        self.samples = 0
        self.below_min_isr: list[tuple[str, int, list[int]]] = []
        self.smallest_isr: int | None = None
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            try:
                isrs = self.sample()
            except Exception:  # a broker restarting: the next sample will see it
                time.sleep(self.interval)
                continue
            for name in self.topics:
                for partition, isr in (isrs.get(name) or {}).items():
                    if self.smallest_isr is None or len(isr) < self.smallest_isr:
                        self.smallest_isr = len(isr)
                    if len(isr) < self.min_isr:
                        self.below_min_isr.append((name, partition, isr))
            self.samples += 1
            time.sleep(self.interval)

    def stop(self) -> None:
        self.stopping.set()
        self.join(60)


def all_in_sync(isrs: Isrs, topics: list[str], replicas: int) -> bool:
    """Every partition of ``topics`` has ``replicas`` in-sync replicas."""
    return all(
        isrs.get(name) and all(len(isr) >= replicas for isr in isrs[name].values())
        for name in topics
    )
