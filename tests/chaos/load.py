"""The load a campaign runs under, and the record of everything the cluster acknowledged.

- ``AckingProducer``: a confluent-kafka producer with ``enable.idempotence`` (acks=all)
  writing unique values ``p<n>-<seq>`` at a steady rate, recording for each acknowledged
  value the partition, offset and time of the acknowledgement;
- ``CommittingConsumer``: a member of a consumer group that reads the topic and commits
  its position synchronously, recording each commit the coordinator acknowledged;
- ``CommitSampler``: reads the group's committed offsets (OffsetFetch) over and over and
  counts regressions (``regressed_from``): a read that does not return the latest commit
  acknowledged before it began, nor a commit sent after that one. Kafka lets a client
  commit a lower offset (after a rebalance or an offset reset): that is not a regression.

Each runs in its own thread; ``stop()`` ends it. Nothing here judges the log itself
(``checker`` does).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from dataclasses import dataclass, field

import confluent_kafka

from ..seeded_run import BackgroundLoop

Position = tuple[int, int]  # (partition, offset)


class ClientLog(logging.Handler):
    """Collects librdkafka's log lines (off the terminal) and keeps its protocol errors:
    a response a real client cannot parse is a broker bug, whatever the fault."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines = 0
        self.protocol_errors: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines += 1
        message = record.getMessage()
        if "PROTOERR" in message or "Protocol parse failure" in message:
            self.protocol_errors.append(message[:300])


CLIENT_LOG = ClientLog()
CLIENT_LOGGER = logging.getLogger("tests.chaos.clients")
CLIENT_LOGGER.addHandler(CLIENT_LOG)
CLIENT_LOGGER.setLevel(logging.DEBUG)
CLIENT_LOGGER.propagate = False


@dataclass
class Ack:
    value: bytes
    partition: int
    offset: int | None  # None: librdkafka knows it was stored, not where
    at: float  # time.monotonic()


class AckingProducer:
    """An idempotent acks=all producer in a thread; ``acks`` lists what was acknowledged."""

    def __init__(self, bootstrap: str, topic: str, name: str, rate: float) -> None:
        self.topic = topic
        self.name = name
        self.interval = 1.0 / rate
        self.acks: list[Ack] = []
        self.errors: dict[str, int] = {}
        self.sent = 0
        self.fatal_restarts = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._bootstrap = bootstrap
        self._producer = self._new_producer()
        self._thread = threading.Thread(target=self._run, name=f"producer-{name}", daemon=True)

    def _new_producer(self) -> confluent_kafka.Producer:
        return confluent_kafka.Producer(
            {
                "bootstrap.servers": self._bootstrap,
                "logger": CLIENT_LOGGER,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
                "retry.backoff.ms": 100,
                "message.timeout.ms": 60000,
                "request.timeout.ms": 5000,
                "socket.timeout.ms": 5000,
                "socket.connection.setup.timeout.ms": 3000,
                "topic.metadata.refresh.interval.ms": 1000,
            }
        )

    def _delivered(self, error, message) -> None:
        now = time.monotonic()
        with self._lock:
            if error is None:
                self.acks.append(Ack(message.value(), message.partition(), message.offset(), now))
            else:
                key = error.name() if hasattr(error, "name") else str(error)
                self.errors[key] = self.errors.get(key, 0) + 1

    def _run(self) -> None:
        next_send = time.monotonic()
        while not self._stop.is_set():
            value = f"{self.name}-{self.sent:09d}".encode()
            try:
                self._producer.produce(self.topic, value, on_delivery=self._delivered)
                self.sent += 1
            except BufferError:
                self._producer.poll(0.05)
                continue
            except confluent_kafka.KafkaException as error:
                # A fatal idempotence error makes the instance unusable: start a new one
                # (a new producer id), as an application would.
                self._replace(str(error))
                continue
            self._producer.poll(0)
            next_send += self.interval
            delay = next_send - time.monotonic()
            if delay > 0:
                self._stop.wait(delay)
            else:
                next_send = time.monotonic()

    def _replace(self, reason: str) -> None:
        key = f"fatal: {reason[:80]}"
        with self._lock:
            self.errors[key] = self.errors.get(key, 0) + 1
        # A fatal instance cannot flush (it raises): its undelivered messages fail.
        with contextlib.suppress(Exception):
            self._producer.flush(10)
        self._producer = self._new_producer()
        self.fatal_restarts += 1

    def acked(self) -> int:
        with self._lock:
            return len(self.acks)

    def start(self) -> None:
        self._thread.start()

    def stop(self, flush_timeout: float = 60) -> None:
        self._stop.set()
        self._thread.join()
        self._producer.flush(flush_timeout)


@dataclass
class Commit:
    """One synchronous commit: ``offsets`` as sent, ``acknowledged`` the partitions the
    coordinator acknowledged (empty when the commit failed: it may still be stored)."""

    sent_at: float
    offsets: dict[int, int]
    acknowledged_at: float | None = None
    acknowledged: dict[int, int] = field(default_factory=dict)


def regressed_from(partition: int, read: int, began: float, commits: list[Commit]) -> int | None:
    """The acknowledged offset a read of ``partition`` went back from, or None.

    The read began at ``began``; it must return the latest commit of the partition
    acknowledged before then, or the offset of a commit sent after that one (a client may
    commit backwards, and an unacknowledged commit may be stored)."""
    acknowledged = [
        c
        for c in commits
        if c.acknowledged_at is not None
        and c.acknowledged_at < began
        and partition in c.acknowledged
    ]
    latest = max(acknowledged, key=lambda c: c.acknowledged_at or 0.0, default=None)
    if latest is None:
        return None
    floor = latest.acknowledged[partition]
    if read == floor:
        return None
    if any(c.sent_at > latest.sent_at and c.offsets.get(partition) == read for c in commits):
        return None
    return floor if read < floor else None


class CommittingConsumer:
    """A consumer-group member committing its position (synchronously) every ``every`` s."""

    def __init__(self, bootstrap: str, topic: str, group: str, every: float = 0.5) -> None:
        self.attempts: list[Commit] = []
        self.consumed = 0
        self.commit_errors = 0
        self._every = every
        self._stop = threading.Event()
        self._consumer = confluent_kafka.Consumer(
            {
                "bootstrap.servers": bootstrap,
                "logger": CLIENT_LOGGER,
                "group.id": group,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "session.timeout.ms": 10000,
                "heartbeat.interval.ms": 1000,
                "fetch.queue.backoff.ms": 1,
                "topic.metadata.refresh.interval.ms": 1000,
            }
        )
        self._consumer.subscribe([topic])
        self._thread = threading.Thread(target=self._run, name="group-consumer", daemon=True)

    def _run(self) -> None:
        last_commit = time.monotonic()
        while not self._stop.is_set():
            for message in self._consumer.consume(1000, 0.2):
                if message.error() is None:
                    self.consumed += 1
            if time.monotonic() - last_commit < self._every:
                continue
            last_commit = time.monotonic()
            try:
                positions = self._consumer.position(self._consumer.assignment())
                positions = [tp for tp in positions if tp.offset >= 0]
            except confluent_kafka.KafkaException:
                continue
            if not positions:
                continue
            attempt = Commit(time.monotonic(), {tp.partition: tp.offset for tp in positions})
            try:
                result = self._consumer.commit(offsets=positions, asynchronous=False)
            except confluent_kafka.KafkaException:
                self.commit_errors += 1
                self.attempts.append(attempt)
                continue
            attempt.acknowledged = {
                tp.partition: tp.offset for tp in result or [] if tp.error is None
            }
            attempt.acknowledged_at = time.monotonic()
            self.attempts.append(attempt)

    @property
    def commits(self) -> list[Commit]:
        """The acknowledged commits."""
        return [c for c in self.attempts if c.acknowledged_at is not None]

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self._consumer.close()


@dataclass
class Regression:
    partition: int
    committed: int
    earlier_acknowledged: int
    at: float


@dataclass
class CommitSampler(BackgroundLoop):
    """Reads the group's committed offsets in a loop and records regressions."""

    bootstrap: str
    topic: str
    group: str
    partitions: int
    source: CommittingConsumer
    regressions: list[Regression] = field(default_factory=list)
    samples: int = 0
    # (began, partition, committed offset read): judged when the sampler stops, against
    # every commit the consumer sent until then.
    reads: list[tuple[float, int, int]] = field(default_factory=list)
    thread_name = "commit-sampler"

    def _run(self) -> None:
        # Same group id, never subscribes: committed() is an OffsetFetch for the group.
        reader = confluent_kafka.Consumer(
            {"bootstrap.servers": self.bootstrap, "group.id": self.group, "logger": CLIENT_LOGGER}
        )
        wanted = [confluent_kafka.TopicPartition(self.topic, p) for p in range(self.partitions)]
        try:
            while not self.stopping.wait(0.5):
                began = time.monotonic()
                try:
                    committed = reader.committed(wanted, timeout=5)
                except confluent_kafka.KafkaException:
                    continue
                self.samples += 1
                for tp in committed:
                    if tp.error is None:
                        self.reads.append((began, tp.partition, tp.offset))
        finally:
            reader.close()
            commits = list(self.source.attempts)
            for began, partition, offset in self.reads:
                floor = regressed_from(partition, offset, began, commits)
                if floor is not None:
                    self.regressions.append(Regression(partition, offset, floor, began))
