"""Helpers for the client quota tests: writing quotas, timed clients, raw quota APIs."""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import confluent_kafka
from kazoo.client import KazooClient

from gregor_broker.cluster.admin import ZkAdmin
from gregor_broker.cluster.client_quotas import entity_path
from gregor_broker.protocol import entities
from gregor_broker.protocol.wire import read_unsigned_varint

from .broker_helpers import host_port, read_response

MB = 1_000_000
MIB = 1 << 20


@contextmanager
def zk_admin(zk_connect: str) -> Iterator[ZkAdmin]:
    client = KazooClient(hosts=zk_connect, timeout=10)
    client.start(timeout=10)
    try:
        yield ZkAdmin(client)
    finally:
        client.stop()
        client.close()


def set_quota(admin: ZkAdmin, user: str | None, client_id: str | None, **values: Any) -> None:
    """Write a quota entity as kafka-configs did (config node, then the notification)."""
    admin.set_entity_config(entity_path(user, client_id), {k: str(v) for k, v in values.items()})


class Timeline:
    """Bytes a client got done, by time: rates over any interval afterwards."""

    def __init__(self) -> None:
        self.events: list[tuple[float, int]] = []
        self.throttle_ms: list[int] = []
        self.lock = threading.Lock()

    def add(self, size: int) -> None:
        with self.lock:
            self.events.append((time.monotonic(), size))

    def on_throttle(self, event: Any) -> None:
        self.throttle_ms.append(round(event.throttle_time * 1000))

    def rate(self, start: float, end: float) -> float:
        with self.lock:
            total = sum(size for at, size in self.events if start <= at < end)
        return total / (end - start)

    def total(self) -> int:
        with self.lock:
            return sum(size for _at, size in self.events)


class ProducerLoop(threading.Thread):
    """A confluent-kafka producer writing ``value_size`` values, as fast as the broker lets
    it, or paced at ``paced_rate`` bytes/s; acknowledged bytes go to ``timeline``."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        client_id: str,
        *,
        value_size: int = 10_000,
        paced_rate: float | None = None,
    ) -> None:
        super().__init__(daemon=True, name=f"producer-{client_id}")
        self.timeline = Timeline()
        self.topic = topic
        self.value = b"q" * value_size
        self.paced_rate = paced_rate
        self.stopping = threading.Event()
        self.errors: list[Any] = []
        self.producer = confluent_kafka.Producer(
            {
                "bootstrap.servers": bootstrap,
                "client.id": client_id,
                "acks": "1",
                "linger.ms": 5,
                "batch.size": 65536,
                "throttle_cb": self.timeline.on_throttle,
            }
        )

    def _delivered(self, error: Any, message: Any) -> None:
        if error is not None:
            self.errors.append(error)
        else:
            self.timeline.add(len(message.value()))

    def run(self) -> None:
        producer = self.producer
        started = time.monotonic()
        sent = 0
        while not self.stopping.is_set():
            if self.paced_rate is not None:
                due = started + sent / self.paced_rate
                if time.monotonic() < due:
                    producer.poll(max(min(due - time.monotonic(), 0.005), 0))
                    continue
            if len(producer) >= 200:
                producer.poll(0.005)
                continue
            producer.produce(self.topic, self.value, on_delivery=self._delivered)
            sent += len(self.value)
            producer.poll(0)
        producer.flush(30)

    def stop(self) -> None:
        self.stopping.set()
        self.join(60)


class ConsumerLoop(threading.Thread):
    """A confluent-kafka consumer reading a partition from offset 0 (no group)."""

    def __init__(self, bootstrap: str, topic: str, client_id: str) -> None:
        super().__init__(daemon=True, name=f"consumer-{client_id}")
        self.timeline = Timeline()
        self.stopping = threading.Event()
        self.consumer = confluent_kafka.Consumer(
            {
                "bootstrap.servers": bootstrap,
                "client.id": client_id,
                "group.id": f"unused-{client_id}",
                "enable.auto.commit": False,
                "throttle_cb": self.timeline.on_throttle,
            }
        )
        self.consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])

    def run(self) -> None:
        try:
            while not self.stopping.is_set():
                for message in self.consumer.consume(1000, 0.1):
                    if message.error() is None:
                        self.timeline.add(len(message.value()))
        finally:
            self.consumer.close()

    def stop(self) -> None:
        self.stopping.set()
        self.join(60)


def fill_topic(bootstrap: str, topic: str, total_bytes: int, value_size: int = 10_000) -> None:
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 5, "client.id": "filler"}
    )
    value = b"f" * value_size
    for _ in range(total_bytes // value_size):
        while True:
            try:
                producer.produce(topic, value)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(120) == 0


# -- raw Kafka requests (no Python client has the client quota APIs) -----------------------


def kafka_request(
    bootstrap: str, api_key: int, version: int, body: dict[str, Any], client_id: str = "test"
) -> Any:
    """Send one request and return the decoded kio response."""
    request_class = entities.payload_class(api_key, version, "request")
    payload = entities.encode(entities.build(request_class, body))
    flexible = entities.is_flexible(api_key, version)
    encoded_id = client_id.encode()
    header = struct.pack(">hhih", api_key, version, 7, len(encoded_id)) + encoded_id
    if flexible:
        header += b"\x00"
    frame = header + payload
    with socket.create_connection(host_port(bootstrap), timeout=30) as sock:
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        response = read_response(sock)
    (correlation_id,) = struct.unpack_from(">i", response, 0)
    assert correlation_id == 7
    position = 4
    if flexible:
        count, position = read_unsigned_varint(response, position)
        assert count == 0
    decoded, _size = entities.response_reader(api_key, version)(response, position)
    return decoded
