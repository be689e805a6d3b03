"""The broker under fuzzing and the checks that it is still well.

``FuzzTarget`` runs one ZooKeeper and one broker process, sends inputs over a reusable
connection (reopened whenever the broker closes it or an answer does not come), runs the
connection abuses, and restarts the broker if it dies. ``Prober`` is another client: its
own connection sending ApiVersions every 100 ms for the whole run, recording latencies.
``health()`` is the check after each batch of inputs: the process lives, a fresh
confluent-kafka client round-trips (produce with acks=all, then fetch it back), the
control topic still holds exactly what was written at the start, and the broker's RSS.
"""

from __future__ import annotations

import contextlib
import random
import select
import socket
import struct
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import confluent_kafka

from gregor_broker.devtools.local_cluster import BrokerProcess, log_tail
from gregor_broker.devtools.zookeeper_server import ZooKeeperServer

from ..integration.broker_helpers import create_topic
from ..integration.raw_requests import decode_response, server_errors
from ..seeded_run import BackgroundLoop
from .inputs import COMPACT_TOPIC, DELETE_TOPIC, Input, api_versions_frame

CONTROL_TOPIC = f"fuzz-control-{uuid.uuid4().hex[:8]}"
HEALTH_TOPIC = f"fuzz-health-{uuid.uuid4().hex[:8]}"
CONTROL_RECORDS = 50
# How long an input waits for its answer before the connection is dropped (a healthy
# broker answers in milliseconds; requests that may legitimately wait, such as a Fetch
# with a long max_wait, are then simply left behind).
ANSWER_TIMEOUT_S = 0.2


def read_frame(sock: socket.socket, deadline: float) -> bytes | None:
    """One response frame, or None on timeout or a closed connection."""
    data = b""
    needed = 4
    size_known = False
    while len(data) < needed:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        ready, _, _ = select.select([sock], [], [], remaining)
        if not ready:
            return None
        try:
            chunk = sock.recv(max(needed - len(data), 65536))
        except OSError:
            return None
        if not chunk:
            return None
        data += chunk
        if not size_known and len(data) >= 4:
            needed = 4 + struct.unpack(">i", data[:4])[0]
            size_known = True
    return data[4:needed]


@dataclass
class Prober(BackgroundLoop):
    """Another client's view: ApiVersions every ``interval`` s on one connection."""

    host: str
    port: int
    interval: float = 0.1
    timeout: float = 10.0
    latencies: list[float] = field(default_factory=list)
    failures: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    thread_name = "prober"

    def _run(self) -> None:
        sock: socket.socket | None = None
        correlation = 0
        while not self.stopping.wait(self.interval):
            try:
                if sock is None:
                    sock = socket.create_connection((self.host, self.port), timeout=5)
                correlation += 1
                began = time.monotonic()
                sock.sendall(api_versions_frame(correlation))
                answer = read_frame(sock, began + self.timeout)
                if answer is None:
                    raise TimeoutError
                with self._lock:
                    self.latencies.append(time.monotonic() - began)
            except OSError:
                with self._lock:
                    self.failures += 1
                    self.latencies.append(self.timeout)
                if sock is not None:
                    sock.close()
                sock = None
        if sock is not None:
            sock.close()

    def take(self) -> tuple[list[float], int]:
        """Latencies and failures since the last call."""
        with self._lock:
            latencies, failures = self.latencies, self.failures
            self.latencies, self.failures = [], 0
        return latencies, failures


@dataclass
class RssWatchdog(BackgroundLoop):
    """Kills the broker (SIGKILL) the moment its RSS passes ``hard_limit_mb``: a
    decompression bomb must not take the whole machine down with it."""

    target: FuzzTarget
    hard_limit_mb: float
    kills: list[float] = field(default_factory=list)
    thread_name = "rss-watchdog"

    def _run(self) -> None:
        while not self.stopping.wait(0.05):
            rss = self.target.rss_mb()
            if rss > self.hard_limit_mb:
                self.kills.append(rss)
                self.target.broker.kill()

    def take(self) -> list[float]:
        kills, self.kills = self.kills, []
        return kills


@dataclass
class Health:
    alive: bool
    round_trip_s: float | None  # None: failed
    control_intact: bool
    rss_mb: float
    problem: str = ""


class FuzzTarget:
    def __init__(self, directory: Path, properties: dict[str, str] | None = None) -> None:
        self.directory = Path(directory)
        self.zookeeper = ZooKeeperServer(self.directory / "zookeeper")
        self.zookeeper.start()
        self.broker = BrokerProcess(
            broker_id=1,
            directory=self.directory / "broker",
            zookeeper_connect=f"{self.zookeeper.connect_string}/fuzz",
            metrics_port=0,  # /metrics: the event-loop delay histogram (loop_delay.py)
            properties={
                "offsets.topic.replication.factor": "1",
                "transaction.state.log.replication.factor": "1",
                "num.partitions": "1",
                **(properties or {}),
            },
        )
        self.broker.start()
        self.broker.wait_registered(60)
        self.restarts = 0
        self.control: dict[int, bytes] = {}
        self._setup_topics()

    @property
    def metrics_url(self) -> str:
        return f"http://{self.broker.host}:{self.broker.metrics_port}/metrics"

    @property
    def bootstrap(self) -> str:
        return self.broker.bootstrap

    def _setup_topics(self) -> None:
        create_topic(self.bootstrap, DELETE_TOPIC, partitions=1)
        create_topic(self.bootstrap, COMPACT_TOPIC, config={"cleanup.policy": "compact"})
        create_topic(self.bootstrap, HEALTH_TOPIC)
        create_topic(self.bootstrap, CONTROL_TOPIC)
        producer = confluent_kafka.Producer({"bootstrap.servers": self.bootstrap, "acks": "all"})
        values = [f"control-{n}".encode() for n in range(CONTROL_RECORDS)]
        for value in values:
            producer.produce(CONTROL_TOPIC, value, key=value)
        assert producer.flush(30) == 0
        self.control = dict(enumerate(values))

    def stop(self) -> None:
        self.broker.stop()
        self.zookeeper.stop()

    # sending inputs --------------------------------------------------------------------
    def sender(self) -> Sender:
        """A sender with its own connection (one per worker thread)."""
        return Sender(self)

    def abuse(self, item: Input) -> str:
        assert item.params is not None
        rng = random.Random(item.params["seed"])
        address = (self.broker.host, self.broker.port)
        request = api_versions_frame()
        sockets: list[socket.socket] = []
        try:
            if item.abuse == "half_frame":
                sock = socket.create_connection(address, timeout=5)
                sockets.append(sock)
                sock.sendall(request[: rng.randint(1, len(request) - 1)])
                time.sleep(rng.uniform(0, 0.3))
            elif item.abuse == "never_read":
                # Many requests, then never read an answer (the broker's send buffer fills).
                sock = socket.create_connection(address, timeout=5)
                sockets.append(sock)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                sock.setblocking(False)
                flood = request * rng.choice([1000, 5000])
                with contextlib.suppress(OSError):
                    sock.send(flood)
                time.sleep(rng.uniform(0.5, 2.0))
            elif item.abuse == "many_connections":
                for _ in range(rng.choice([100, 300])):
                    with contextlib.suppress(OSError):
                        sock = socket.create_connection(address, timeout=5)
                        sockets.append(sock)
                        sock.sendall(request)
            elif item.abuse == "huge_size":
                sock = socket.create_connection(address, timeout=5)
                sockets.append(sock)
                sock.sendall(struct.pack(">i", 2**31 - 1) + rng.randbytes(1000))
                time.sleep(0.1)
            elif item.abuse == "negative_size":
                sock = socket.create_connection(address, timeout=5)
                sockets.append(sock)
                sock.sendall(struct.pack(">i", -rng.randint(1, 2**31)) + b"\x00" * 20)
                time.sleep(0.1)
            elif item.abuse == "pipelined_flood":
                # Many requests in one write, answers read: the broker must stay fair.
                sock = socket.create_connection(address, timeout=5)
                sockets.append(sock)
                sock.sendall(request * rng.choice([1000, 10000]))
                time.sleep(0.5)
        except OSError:
            return "unreachable"
        finally:
            for sock in sockets:
                sock.close()
        return "abused"

    # health ----------------------------------------------------------------------------
    def rss_mb(self) -> float:
        if not self.broker.is_running():
            return 0.0
        try:
            for line in Path(f"/proc/{self.broker.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        except OSError:
            pass
        return 0.0

    def health(self) -> Health:
        alive = self.broker.is_running()
        if not alive:
            return Health(False, None, False, 0.0, "broker process exited")
        round_trip, problem = self._round_trip()
        intact, control_problem = self._control_intact()
        return Health(
            True,
            round_trip,
            intact,
            self.rss_mb(),
            "; ".join(p for p in (problem, control_problem) if p),
        )

    def _round_trip(self) -> tuple[float | None, str]:
        began = time.monotonic()
        value = uuid.uuid4().bytes
        delivered: list[int] = []
        producer = confluent_kafka.Producer(
            {"bootstrap.servers": self.bootstrap, "acks": "all", "message.timeout.ms": 10000}
        )
        producer.produce(
            HEALTH_TOPIC,
            value,
            on_delivery=lambda error, message: delivered.append(
                -1 if error is not None else message.offset()
            ),
        )
        producer.flush(15)
        if not delivered or delivered[0] < 0:
            return None, "a fresh producer could not write"
        consumer = confluent_kafka.Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": "fuzz-health",
                "enable.auto.commit": False,
            }
        )
        try:
            consumer.assign([confluent_kafka.TopicPartition(HEALTH_TOPIC, 0, delivered[0])])
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                message = consumer.poll(0.5)
                if message is not None and message.error() is None:
                    if message.value() == value:
                        return time.monotonic() - began, ""
                    return None, f"read back {message.value()!r}, wrote {value!r}"
        finally:
            consumer.close()
        return None, "a fresh consumer could not read back what it wrote"

    def _control_intact(self) -> tuple[bool, str]:
        consumer = confluent_kafka.Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": "fuzz-control",
                "enable.auto.commit": False,
            }
        )
        seen: dict[int, bytes] = {}
        try:
            low, high = consumer.get_watermark_offsets(
                confluent_kafka.TopicPartition(CONTROL_TOPIC, 0), timeout=10
            )
            if (low, high) != (0, CONTROL_RECORDS):
                return False, f"control topic offsets {low}..{high}, expected 0..{CONTROL_RECORDS}"
            consumer.assign([confluent_kafka.TopicPartition(CONTROL_TOPIC, 0, 0)])
            deadline = time.monotonic() + 10
            while len(seen) < CONTROL_RECORDS and time.monotonic() < deadline:
                for message in consumer.consume(1000, 0.5):
                    if message.error() is None:
                        seen[message.offset()] = message.value()
        except confluent_kafka.KafkaException as error:
            return False, f"control topic unreadable: {error}"
        finally:
            consumer.close()
        if seen != self.control and all(self.control.get(o) == v for o, v in seen.items()):
            # Nothing differs, some records did not arrive in time: slow, not damaged.
            return True, f"read only {len(seen)} of the {CONTROL_RECORDS} control records in 10 s"
        if seen != self.control:
            return (
                False,
                f"control topic holds {len(seen)} records, not the {CONTROL_RECORDS} written",
            )
        return True, ""

    def restart(self) -> str:
        """Bring a dead or stuck broker back; returns the tail of its log."""
        tail = log_tail(self.broker.log_path, 30)
        self.broker.kill()
        self.broker.start()
        self.broker.wait_registered(60)
        self.restarts += 1
        return tail


class Sender:
    """Sends inputs over one connection, reopened whenever the broker closes it or an
    answer does not come in time."""

    def __init__(self, target: FuzzTarget) -> None:
        self.target = target
        self._sock: socket.socket | None = None

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def send(self, item: Input) -> str:
        """Send one input; returns "answered", "closed", "silent", "unreachable" or
        "abused" (connection abuse runs on connections of its own); for a schema-valid
        request, "server_error" when an answer says UNKNOWN_SERVER_ERROR (a handler
        failed), and for one with a null its schema does not allow, "served_null" when
        it was answered at all (Kafka refuses to parse it and closes)."""
        if item.abuse is not None:
            return self.target.abuse(item)
        broker = self.target.broker
        try:
            if self._sock is None:
                self._sock = socket.create_connection((broker.host, broker.port), timeout=5)
            self._sock.sendall(item.data)
        except OSError:
            self.close()
            return "unreachable"
        wait = ANSWER_TIMEOUT_S if item.expect_response else 0.05
        answer = read_frame(self._sock, time.monotonic() + wait)
        if answer is not None:
            return _judge(item, answer)
        # No answer: either closed, or still busy. Start afresh for the next input, so
        # one unanswered request never delays the next.
        closed = _closed(self._sock)
        self.close()
        return "closed" if closed else "silent"


def _judge(item: Input, answer: bytes) -> str:
    if item.kind not in ("structured", "unknown_tag"):
        return "answered"  # a mutated frame's answer may be to any request, or none
    if item.null_where_not_allowed:
        return "served_null"
    try:
        _correlation, decoded = decode_response(item.api_key, item.version, answer)
    except Exception:  # an error response kio cannot read: not this check's business
        return "answered"
    return "server_error" if server_errors(decoded) else "answered"


def _closed(sock: socket.socket) -> bool:
    try:
        ready, _, _ = select.select([sock], [], [], 0)
        if not ready:
            return False
        return sock.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True
