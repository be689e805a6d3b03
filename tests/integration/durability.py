"""What every durability test needs: a producer writing in the background that records
each acknowledgement, a reader of everything a topic holds, and the loss count.

"Lost" means what Kafka promises against: a message the producer saw acknowledged
that is not at the partition and offset it was acknowledged with.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import confluent_kafka

from .broker_helpers import wait_for

Position = tuple[int, int]  # (partition, offset)


class NumberedProducer:
    """A background confluent-kafka producer writing ``<prefix>-<n>`` values and
    recording where each acknowledged one landed. Use it as a context manager."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        *,
        prefix: str = "message",
        acks: str | int = "all",
        pause_every: int = 50,
        interval_s: float = 0.0,
        **config: Any,
    ) -> None:
        """``interval_s``: a pause after every message (a slow producer: followers'
        fetches then wait at the leader for data, as on a quiet partition)."""
        self.topic = topic
        self.prefix = prefix
        self.pause_every = pause_every
        self.interval_s = interval_s
        self.acknowledged: dict[bytes, Position] = {}
        self.errors: list[str] = []
        self.sent = 0
        self.longest_gap_s = 0.0
        self._last_ack = time.monotonic()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        settings = {
            "bootstrap.servers": bootstrap,
            "acks": str(acks),
            "linger.ms": 2,
            "retry.backoff.ms": 100,
            "topic.metadata.refresh.interval.ms": 1000,
        }
        settings.update({key.replace("_", "."): value for key, value in config.items()})
        self._producer = confluent_kafka.Producer(settings)
        self._thread = threading.Thread(target=self._run, name="numbered-producer")

    def _delivered(self, error, message) -> None:
        with self._lock:
            if error is None:
                now = time.monotonic()
                self.longest_gap_s = max(self.longest_gap_s, now - self._last_ack)
                self._last_ack = now
                self.acknowledged[message.value()] = (message.partition(), message.offset())
            else:
                self.errors.append(str(error))

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                value = f"{self.prefix}-{self.sent:09d}".encode()
                self._producer.produce(self.topic, value, on_delivery=self._delivered)
                self.sent += 1
            except BufferError:
                self._producer.poll(0.01)
            self._producer.poll(0)
            if self.interval_s:
                self._stop.wait(self.interval_s)
            elif self.sent % self.pause_every == 0:
                time.sleep(0.001)

    @property
    def failures(self) -> int:
        return len(self.errors)

    def acked(self) -> int:
        with self._lock:
            return len(self.acknowledged)

    def wait_for_progress(self, count: int, timeout: float) -> bool:
        """Wait until ``count`` more messages are acknowledged."""
        before = self.acked()
        return wait_for(lambda: self.acked() >= before + count, timeout, interval=0.05)

    def __enter__(self) -> NumberedProducer:
        self._last_ack = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()
        self._producer.flush(30)
        # Close now: a live client keeps dialling its brokers after the test tore them
        # (and, in the network tests, their addresses) down.
        self._producer.close()


def read_topic(
    bootstrap: str,
    topic: str,
    until: dict[int, int],
    *,
    timeout: float = 60,
    client_config: dict[str, str] | None = None,
) -> dict[Position, bytes]:
    """Every record from offset 0 of each partition in ``until`` up to (excluding) the
    offset given for it. ``client_config``: librdkafka security settings (SASL_SSL...)."""
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "fetch.queue.backoff.ms": 1,
            **(client_config or {}),
        }
    )
    consumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in until])
    served: dict[Position, bytes] = {}
    reached: dict[int, int] = dict.fromkeys(until, -1)
    deadline = time.monotonic() + timeout
    try:
        while any(reached[p] < end - 1 for p, end in until.items()):
            if time.monotonic() > deadline:
                break
            for message in consumer.consume(10_000, 0.5):
                if message.error() is None:
                    served[(message.partition(), message.offset())] = message.value()
                    reached[message.partition()] = max(
                        reached[message.partition()], message.offset()
                    )
    finally:
        consumer.close()
    return served


def lost_messages(
    acknowledged: dict[bytes, Position],
    bootstrap: str,
    topic: str,
    client_config: dict[str, str] | None = None,
) -> list[bytes]:
    """Acknowledged messages that are not where they were acknowledged."""
    until: dict[int, int] = {}
    for partition, offset in acknowledged.values():
        until[partition] = max(until.get(partition, 0), offset + 1)
    served = read_topic(bootstrap, topic, until, client_config=client_config)
    return sorted(v for v, where in acknowledged.items() if served.get(where) != v)
