"""The load a campaign runs under, and the record of everything the cluster acknowledged.

- ``AckingProducer``: a confluent-kafka producer with ``enable.idempotence`` (acks=all)
  writing unique values ``p<n>-<seq>`` at a steady rate, recording for each acknowledged
  value the partition, offset and time of the acknowledgement;
- ``CommittingConsumer``: a member of a consumer group that reads the topic and commits
  its position synchronously, recording each commit the coordinator acknowledged;
- ``CommitSampler``: reads the group's committed offsets (OffsetFetch) over and over and
  counts regressions: a committed offset below one whose commit was acknowledged before
  the read began.

Each runs in its own thread; ``stop()`` ends it. Nothing here judges the log itself
(``checker`` does).
"""

from __future__ import annotations

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


class CommittingConsumer:
    """A consumer-group member committing its position (synchronously) every ``every`` s."""

    def __init__(self, bootstrap: str, topic: str, group: str, every: float = 0.5) -> None:
        self.commits: list[tuple[float, dict[int, int]]] = []  # (acknowledged at, offsets)
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
                if not positions:
                    continue
                result = self._consumer.commit(offsets=positions, asynchronous=False)
            except confluent_kafka.KafkaException:
                self.commit_errors += 1
                continue
            acknowledged = {tp.partition: tp.offset for tp in result or [] if tp.error is None}
            self.commits.append((time.monotonic(), acknowledged))

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
                floor: dict[int, int] = {}
                for acknowledged_at, offsets in list(self.source.commits):
                    if acknowledged_at >= began:
                        break
                    for partition, offset in offsets.items():
                        floor[partition] = max(floor.get(partition, -1), offset)
                try:
                    committed = reader.committed(wanted, timeout=5)
                except confluent_kafka.KafkaException:
                    continue
                self.samples += 1
                for tp in committed:
                    if tp.error is not None or (tp.offset < 0 and tp.partition not in floor):
                        continue
                    if tp.offset < floor.get(tp.partition, -1):
                        self.regressions.append(
                            Regression(tp.partition, tp.offset, floor[tp.partition], began)
                        )
        finally:
            reader.close()
