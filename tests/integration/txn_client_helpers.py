"""Helpers of the transaction tests: transactional producers, read_committed reads, and
the coordinator's view (FindCoordinator TRANSACTION, DescribeTransactions) over raw
requests, as ``kafka-transactions.sh`` sees it."""

from __future__ import annotations

import contextlib
import struct
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import confluent_kafka
import confluent_kafka.admin
from kio.schema.errors import ErrorCode

from gregor_broker.cli.transactions import parse_describe_transactions
from gregor_broker.protocol import entities
from gregor_broker.protocol.wire import skip_tagged_fields

from .broker_helpers import create_topic, read_response
from .raw_requests import RawClient, request

# Small internal topics so a test broker creates them fast; short intervals so timers
# fire within a test.
TXN_BROKER_PROPERTIES = {
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "5",
    "transaction.state.log.num.partitions": "5",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500",
}
SINGLE_BROKER_PROPERTIES = {
    **TXN_BROKER_PROPERTIES,
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
}


def transactional_producer(bootstrap: str, transactional_id: str, **extra: Any) -> Any:
    return confluent_kafka.Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": transactional_id,
            "linger.ms": 5,
            **extra,
        }
    )


# A transactional producer that opens a transaction on partition 0 of a topic, says
# "open" and then hangs, neither committing nor aborting (argv: bootstrap, transactional
# id, topic, transaction.timeout.ms).
_HANGING_PRODUCER = textwrap.dedent(
    """
    import sys, time, confluent_kafka
    producer = confluent_kafka.Producer({
        "bootstrap.servers": sys.argv[1], "transactional.id": sys.argv[2],
        "transaction.timeout.ms": int(sys.argv[4]),
    })
    producer.init_transactions(60)
    producer.begin_transaction()
    producer.produce(sys.argv[3], b"never-committed", partition=0)
    producer.flush(30)
    print("open", flush=True)
    time.sleep(600)
    """
)


@contextlib.contextmanager
def hanging_transaction(
    bootstrap: str, transactional_id: str, topic: str, timeout_ms: int
) -> Iterator[subprocess.Popen[str]]:
    """A producer process holding a transaction open on ``topic``-0 (one record, at the
    partition's end) for the block; killed (SIGKILL: no abort sent) when it ends."""
    process = subprocess.Popen(
        [sys.executable, "-c", _HANGING_PRODUCER, bootstrap, transactional_id, topic,
         str(timeout_ms)],
        stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "open"
        yield process
    finally:
        process.kill()
        process.wait()


def read_all(
    bootstrap: str,
    topic: str,
    partitions: int,
    *,
    isolation: str = "read_committed",
    settle_s: float = 3.0,
    timeout: float = 60.0,
) -> dict[int, list[bytes]]:
    """Every value a consumer with ``isolation`` reads from offset 0, per partition;
    stops once nothing new came for ``settle_s`` (after the first record, or the
    timeout)."""
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "fetch.queue.backoff.ms": 1,
        }
    )
    consumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(partitions)])
    values: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    deadline = time.monotonic() + timeout
    quiet_since = time.monotonic()
    try:
        while time.monotonic() < deadline:
            messages = consumer.consume(10_000, 0.3)
            got = False
            for message in messages:
                if message.error() is None:
                    values[message.partition()].append(message.value())
                    got = True
            if got:
                quiet_since = time.monotonic()
            elif time.monotonic() - quiet_since > settle_s:
                break
    finally:
        consumer.close()
    return values


def coordinator_address(bootstrap: str, transactional_id: str, timeout: float = 30.0) -> Any:
    """The broker FindCoordinator(TRANSACTION) names (node id, host, port)."""
    deadline = time.monotonic() + timeout
    addresses = bootstrap.split(",")
    attempt = 0
    while True:
        address = addresses[attempt % len(addresses)]
        attempt += 1
        try:
            with RawClient(address) as client:
                response = client.call(10, 3, request(10, 3, key=transactional_id, key_type=1))
        except OSError:
            if time.monotonic() > deadline:
                raise
            continue  # that broker is down: ask the next one
        if response.error_code == 0 or time.monotonic() > deadline:
            assert response.error_code == 0, response
            return response.node_id, response.host, response.port
        time.sleep(0.2)


def describe_transaction(bootstrap: str, transactional_id: str, timeout: float = 30.0) -> Any:
    """DescribeTransactions from the id's coordinator (retrying while it moves/loads)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            _node, host, port = coordinator_address(bootstrap, transactional_id)
            with RawClient(f"{host}:{port}") as client:
                body = entities.encode(request(65, 0, transactional_ids=[transactional_id]))
                correlation_id = client.send(65, 0, body)
                frame = read_response(client.sock)
            assert struct.unpack_from(">i", frame)[0] == correlation_id
            # Read as gregor transactions describe reads it: kio refuses the -1 start time
            # Kafka sends when no transaction runs.
            [found] = parse_describe_transactions(memoryview(frame), skip_tagged_fields(frame, 4))
            state = SimpleNamespace(**found)
            if state.error_code == 0:
                return state
            problem: object = ErrorCode(state.error_code).name.upper()
        except (OSError, AssertionError) as error:
            problem = error
        if time.monotonic() > deadline:
            raise AssertionError(f"cannot describe {transactional_id}: {problem}")
        time.sleep(0.2)


def wait_for_state(
    bootstrap: str, transactional_id: str, states: set[str], timeout: float = 60.0
) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        state = describe_transaction(bootstrap, transactional_id)
        if state.transaction_state in states:
            return state
        if time.monotonic() > deadline:
            raise AssertionError(
                f"{transactional_id} stayed {state.transaction_state}, wanted {states}"
            )
        time.sleep(0.2)


class CommitLoop:
    """A transactional producer committing transactions in a background thread, each
    writing its number once to every partition of ``topics``, while a test breaks
    brokers: what it attempted, saw committed and aborted itself is kept for
    ``check_all_or_nothing``. ``commit_started`` is set each time a commit begins (to
    strike mid-commit). After ``stop()`` it goes on until at least ``minimum``
    transactions were attempted, so that some run after the fault."""

    def __init__(
        self, producer: Any, topics: list[str], partitions: int, minimum: int = 20
    ) -> None:
        self.producer = producer
        self.topics = topics
        self.partitions = partitions
        self.minimum = minimum
        self.attempted: list[int] = []
        self.committed: list[int] = []
        self.aborted: list[int] = []
        self.failures: list[BaseException] = []
        self.commit_started = threading.Event()
        # The transaction whose commit_transaction runs now (None between commits).
        self.in_commit: int | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 300.0) -> None:
        self._stop.set()
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "the transactions did not finish"
        assert self.failures == []

    def _run(self) -> None:
        producer = self.producer
        number = 0
        try:
            while (not self._stop.is_set() or number < self.minimum) and number <= 400:
                self.attempted.append(number)
                producer.begin_transaction()
                for topic in self.topics:
                    for partition in range(self.partitions):
                        producer.produce(topic, f"{number}".encode(), partition=partition)
                self.in_commit = number
                self.commit_started.set()
                try:
                    producer.commit_transaction(60)
                    self.committed.append(number)
                except confluent_kafka.KafkaException as error:
                    if error.args[0].txn_requires_abort():
                        producer.abort_transaction(60)
                        self.aborted.append(number)
                    elif not error.args[0].retriable():
                        raise
                    else:
                        producer.commit_transaction(60)
                        self.committed.append(number)
                self.in_commit = None
                number += 1
        except BaseException as error:
            self.failures.append(error)


def check_all_or_nothing(bootstrap: str, loop: CommitLoop) -> set[int]:
    """read_committed sees every transaction on all of its partitions, once, or on
    none; every commit the producer saw succeed, none it aborted. The visible ones."""
    visible: dict[int, int] = {}
    for topic in loop.topics:
        for values in read_all(bootstrap, topic, loop.partitions).values():
            for value in values:
                visible[int(value)] = visible.get(int(value), 0) + 1
    everywhere = len(loop.topics) * loop.partitions
    assert {n: c for n, c in visible.items() if c != everywhere} == {}
    assert set(loop.committed) <= set(visible)
    assert set(loop.aborted) & set(visible) == set()
    assert set(visible) <= set(loop.attempted)
    return set(visible)


def partition_leaders(bootstrap: str, topic: str) -> dict[int, int]:
    """Partition -> leader broker id, from the metadata."""
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    metadata = admin.list_topics(topic, timeout=30)
    return {p.id: p.leader for p in metadata.topics[topic].partitions.values()}


def create_rf3_topic(bootstrap: str, topic: str, partitions: int, timeout: float = 60.0) -> None:
    """A topic with replication factor 3 and ``min.insync.replicas=2``, right after a
    cluster started: the controller may not count every registered broker yet and answer
    INVALID_REPLICATION_FACTOR for a moment (seen once in 40 runs), so that is retried."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            create_topic(
                bootstrap,
                topic,
                partitions=partitions,
                replication_factor=3,
                config={"min.insync.replicas": "2"},
            )
            return
        except confluent_kafka.KafkaException as error:
            code = error.args[0].code()
            if code != confluent_kafka.KafkaError.INVALID_REPLICATION_FACTOR:
                raise
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
