"""Incremental fetch sessions (KIP-227) on the wire, against a real broker process.

The raw tests speak Fetch and Produce with the replication client (kio's request
classes, one connection) and look at every field the broker sends back: the session id,
the error code, which partitions are in the response and which offsets their records
carry. Fetch v7 (the first with sessions), v12 (the first flexible) and v16 (topics by
id) each run the whole story. The last test shows kafka-python consuming through a
session: one session created, many incremental fetches, every record in order.
"""

from __future__ import annotations

import asyncio
import time
import uuid
import warnings
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from gregor_broker.devtools.zookeeper_server import free_port
from gregor_broker.protocol.record_batch import HEADER_SIZE, read_header
from gregor_broker.protocol.records import Record, make_batch
from gregor_broker.replication.client import BrokerClient

from .broker_helpers import create_topic, host_port, scrape
from .quota_helpers import set_quota, zk_admin

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaConsumer, TopicPartition

FETCH, PRODUCE, METADATA = 1, 0, 3
NO_SESSION = 0
FINAL_EPOCH = -1  # a sessionless full fetch
TopicPartitionKey = tuple[str, int]


@dataclass
class Fetched:
    """What one Fetch response said, by (topic name, partition)."""

    error_code: int
    session_id: int
    partitions: dict[TopicPartitionKey, list[int]] = field(default_factory=dict)  # offsets
    throttle_time_ms: int = 0
    high_watermarks: dict[TopicPartitionKey, int] = field(default_factory=dict)
    partition_errors: dict[TopicPartitionKey, int] = field(default_factory=dict)


def record_offsets(records: bytes | None) -> list[int]:
    offsets: list[int] = []
    position = 0
    data = records or b""
    while len(data) - position >= HEADER_SIZE:
        header = read_header(data, position)
        offsets.extend(range(header.base_offset, header.next_offset))
        position += header.size
    return offsets


class SessionClient:
    """Raw Fetch requests of one version on one connection, topics by name or by id."""

    def __init__(self, bootstrap: str, version: int) -> None:
        host, port = host_port(bootstrap)
        self.client = BrokerClient(host, port, f"fetch-session-test-v{version}", timeout=20)
        self.version = version
        self.ids: dict[str, uuid.UUID] = {}

    async def learn_topic_ids(self, *topics: str) -> None:
        metadata = await self.client.request(
            METADATA,
            12,
            {
                "topics": [{"name": topic, "topic_id": None} for topic in topics],
                "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False,
            },
        )
        self.ids.update({topic.name: topic.topic_id for topic in metadata.topics})
        assert all(self.ids[t] != uuid.UUID(int=0) for t in topics), self.ids

    async def fetch(
        self,
        session_id: int,
        epoch: int,
        partitions: dict[TopicPartitionKey, int] | None = None,
        *,
        forgotten: list[TopicPartitionKey] = (),  # type: ignore[assignment]
        max_wait_ms: int = 0,
    ) -> Fetched:
        by_id = self.version >= 13
        names = {topic_id: name for name, topic_id in self.ids.items()}

        def topic_field(name: str) -> dict:
            return {"topic_id": self.ids[name]} if by_id else {"topic": name}

        topics: dict[str, list[dict]] = {}
        for (topic, index), offset in (partitions or {}).items():
            topics.setdefault(topic, []).append(
                {
                    "partition": index,
                    "current_leader_epoch": -1,
                    "fetch_offset": offset,
                    "last_fetched_epoch": -1,
                    "log_start_offset": -1,
                    "partition_max_bytes": 1 << 20,
                }
            )
        forgotten_topics: dict[str, list[int]] = {}
        for topic, index in forgotten:
            forgotten_topics.setdefault(topic, []).append(index)
        response = await self.client.request(
            FETCH,
            self.version,
            {
                "replica_id": -1,
                "max_wait": max_wait_ms,
                "min_bytes": 1,
                "max_bytes": 1 << 24,
                "isolation_level": 0,
                "session_id": session_id,
                "session_epoch": epoch,
                "topics": [
                    {**topic_field(topic), "partitions": parts} for topic, parts in topics.items()
                ],
                "forgotten_topics_data": [
                    {**topic_field(topic), "partitions": indexes}
                    for topic, indexes in forgotten_topics.items()
                ],
                "rack_id": "",
            },
        )
        fetched = Fetched(
            response.error_code,
            response.session_id,
            throttle_time_ms=int(response.throttle_time.total_seconds() * 1000),
        )
        for topic in response.responses:
            name = names[topic.topic_id] if by_id else topic.topic
            for data in topic.partitions:
                key = (name, data.partition_index)
                assert key not in fetched.partitions, f"{key} answered twice"
                fetched.partitions[key] = record_offsets(data.records)
                fetched.high_watermarks[key] = data.high_watermark
                fetched.partition_errors[key] = data.error_code
        return fetched

    async def produce(self, topic: str, partition: int, count: int) -> None:
        batch = make_batch(
            [Record(i, 0, None, b"value-%d" % i) for i in range(count)],
            base_timestamp=int(time.time() * 1000),
        )
        deadline = time.monotonic() + 20
        while True:
            response = await self.client.request(
                PRODUCE,
                9,
                {
                    "transactional_id": None,
                    "acks": 1,
                    "timeout": 10000,
                    "topic_data": [
                        {"name": topic, "partition_data": [{"index": partition, "records": batch}]}
                    ],
                },
            )
            error = response.responses[0].partition_responses[0].error_code
            if error == ErrorCode.none:
                return
            assert time.monotonic() < deadline, f"produce to {topic}-{partition}: {error!r}"
            await asyncio.sleep(0.1)  # leadership still settling after the topic's creation

    async def close(self) -> None:
        await self.client.close()


async def _session_story(bootstrap: str, version: int) -> None:
    a, b = f"sessions-v{version}-a", f"sessions-v{version}-b"
    create_topic(bootstrap, a, partitions=3)
    create_topic(bootstrap, b)
    client = SessionClient(bootstrap, version)
    producer = SessionClient(bootstrap, version)
    try:
        if version >= 13:
            await client.learn_topic_ids(a, b)
        await producer.produce(a, 0, 3)
        await producer.produce(a, 1, 2)
        await producer.produce(b, 0, 1)

        # A full fetch at epoch 0 creates a session and answers every partition.
        full = await client.fetch(NO_SESSION, 0, {(a, 0): 0, (a, 1): 0, (a, 2): 0, (b, 0): 0})
        session = full.session_id
        assert (full.error_code, session != NO_SESSION) == (ErrorCode.none, True), full
        assert full.partitions == {(a, 0): [0, 1, 2], (a, 1): [0, 1], (a, 2): [], (b, 0): [0]}

        # Moving the offsets on, with nothing new: an empty incremental response.
        moved = await client.fetch(session, 1, {(a, 0): 3, (a, 1): 2, (b, 0): 1})
        assert (moved.error_code, moved.session_id, moved.partitions) == (0, session, {})

        # New records in one partition: only that partition comes back, from the
        # offset the session remembers.
        await producer.produce(a, 1, 2)
        changed = await client.fetch(session, 2)
        assert (changed.session_id, changed.partitions) == (session, {(a, 1): [2, 3]})
        assert changed.high_watermarks[(a, 1)] == 4

        # A forgotten partition disappears even when it gets records.
        forgot = await client.fetch(session, 3, {(a, 1): 4}, forgotten=[(b, 0)])
        assert forgot.partitions == {}
        await producer.produce(b, 0, 1)
        await producer.produce(a, 2, 1)
        after_forget = await client.fetch(session, 4)
        assert after_forget.partitions == {(a, 2): [0]}

        # A long poll waits over the whole session and wakes on its partitions' appends.
        async def produce_later() -> None:
            await asyncio.sleep(0.3)
            await producer.produce(a, 0, 1)

        started = time.monotonic()
        polled, _ = await asyncio.gather(
            client.fetch(session, 5, {(a, 2): 1}, max_wait_ms=10_000), produce_later()
        )
        waited = time.monotonic() - started
        assert polled.partitions == {(a, 0): [3]}
        assert 0.25 < waited < 5, waited

        # Session errors: a repeated epoch, an unknown id. Neither harms the session.
        repeated = await client.fetch(session, 5)
        assert (repeated.error_code, repeated.session_id, repeated.partitions) == (
            ErrorCode.invalid_fetch_session_epoch,
            NO_SESSION,
            {},
        )
        unknown = await client.fetch((session % 1_000_000) + 1, 1)
        assert (unknown.error_code, unknown.session_id) == (
            ErrorCode.fetch_session_id_not_found,
            NO_SESSION,
        )
        still = await client.fetch(session, 6, {(a, 0): 4})  # the client moves a-0 on
        assert (still.error_code, still.session_id, still.partitions) == (0, session, {})

        # Epoch -1 with the session's id closes it and answers a sessionless full fetch.
        closing = await client.fetch(session, -1, {(a, 0): 0})
        assert (closing.error_code, closing.session_id) == (ErrorCode.none, NO_SESSION)
        assert closing.partitions == {(a, 0): [0, 1, 2, 3]}
        gone = await client.fetch(session, 7)
        assert gone.error_code == ErrorCode.fetch_session_id_not_found
    finally:
        await client.close()
        await producer.close()


def _broker_with_metrics(broker_factory, **properties: str) -> tuple[object, int]:
    """A broker with ``properties`` and a metrics port; returns both."""
    metrics_port = free_port()
    return broker_factory(**{"metrics.port": str(metrics_port), **properties}), metrics_port


def test_a_session_answers_only_what_changed_over_fetch_v7_v12_and_v16(broker):
    for version in (7, 12, 16):
        asyncio.run(_session_story(broker.bootstrap, version))


def test_a_full_cache_refuses_new_sessions_until_one_has_been_idle_long_enough(broker_factory):
    broker, metrics_port = _broker_with_metrics(
        broker_factory,
        **{
            "max.incremental.fetch.session.cache.slots": "1",
            # Long enough that a loaded machine cannot age the first session before the
            # second client asks (it must be refused then), short enough for the test.
            "min.incremental.fetch.session.eviction.ms": "3000",
        },
    )
    create_topic(broker.bootstrap, "evictions", partitions=2)
    partitions = {("evictions", 0): 0, ("evictions", 1): 0}

    async def story() -> None:
        first, second = SessionClient(broker.bootstrap, 12), SessionClient(broker.bootstrap, 12)
        try:
            created = await first.fetch(NO_SESSION, 0, partitions)
            assert created.session_id != NO_SESSION
            metrics = scrape(metrics_port)
            assert metrics["gregor_fetch_sessions"] == 1
            assert metrics["gregor_fetch_session_partitions"] == 2

            # The only slot is taken by a session in use: no session, a full answer.
            refused = await second.fetch(NO_SESSION, 0, partitions)
            assert (refused.session_id, set(refused.partitions)) == (NO_SESSION, set(partitions))

            await asyncio.sleep(3.2)  # the first session is now idle for longer than 3000 ms
            replacing = await second.fetch(NO_SESSION, 0, partitions)
            assert replacing.session_id not in (NO_SESSION, created.session_id)
            evicted = await first.fetch(created.session_id, 1)
            assert evicted.error_code == ErrorCode.fetch_session_id_not_found
        finally:
            await first.close()
            await second.close()

    asyncio.run(story())
    metrics = scrape(metrics_port)
    assert metrics["gregor_fetch_session_evictions_total"] == 1
    assert metrics["gregor_fetch_sessions_created_total"] == 2
    assert metrics["gregor_fetch_sessions"] == 1


def test_a_quota_throttled_full_fetch_creates_no_session(broker_factory, zk_connect):
    # Matches Kafka's getThrottledResponse: the throttled client sees none of the fetch's
    # data, so no session is made of it (it would only hold a slot until evicted).
    broker, metrics_port = _broker_with_metrics(
        broker_factory, **{"quota.window.num": "2", "quota.window.size.seconds": "1"}
    )
    create_topic(broker.bootstrap, "throttled", partitions=1)
    partitions = {("throttled", 0): 0}

    async def story() -> tuple[int, int]:
        client = SessionClient(broker.bootstrap, 12)
        try:
            for _ in range(10):
                await client.produce("throttled", 0, 100)
            with zk_admin(zk_connect) as admin:
                set_quota(admin, None, "fetch-session-test-v12", consumer_byte_rate=5000)
            deadline = time.monotonic() + 30
            while (await client.fetch(NO_SESSION, FINAL_EPOCH, partitions)).throttle_time_ms == 0:
                assert time.monotonic() < deadline, "the consumer quota never throttled"
            sessions_made = throttled = 0
            for _ in range(10):
                full = await client.fetch(NO_SESSION, 0, partitions)
                if full.throttle_time_ms == 0:
                    assert full.session_id != NO_SESSION
                    sessions_made += 1
                    continue
                throttled += 1
                assert (full.error_code, full.session_id) == (ErrorCode.none, NO_SESSION)
                assert full.partitions == {}
            return sessions_made, throttled
        finally:
            await client.close()

    sessions_made, throttled = asyncio.run(story())
    assert throttled > 0
    assert scrape(metrics_port)["gregor_fetch_sessions_created_total"] == sessions_made


def test_kafka_python_consumes_through_one_incremental_fetch_session(broker_factory):
    metrics_port = free_port()
    broker = broker_factory(**{"metrics.port": str(metrics_port)})
    topic = "kafka-python-sessions"
    create_topic(broker.bootstrap, topic, partitions=3)
    producer = SessionClient(broker.bootstrap, 12)
    expected: dict[int, int] = {0: 0, 1: 0, 2: 0}

    async def produce(partition: int, count: int) -> None:
        await producer.produce(topic, partition, count)
        expected[partition] += count

    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        group_id=None,
        enable_auto_commit=False,
        fetch_max_wait_ms=100,
        request_timeout_ms=30_000,
    )
    received: dict[int, list[int]] = {0: [], 1: [], 2: []}
    loop = asyncio.new_event_loop()
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(3)])
        consumer.seek_to_beginning()
        # Rounds of records to one partition at a time, so most fetches in the session
        # answer one partition (or none) and leave the others out.
        for round_number in range(6):
            loop.run_until_complete(produce(round_number % 3, 5 + round_number))
            deadline = time.monotonic() + 15
            while sum(map(len, received.values())) < sum(expected.values()):
                assert time.monotonic() < deadline, (expected, received)
                for batch in consumer.poll(timeout_ms=200).values():
                    for record in batch:
                        received[record.partition].append(record.offset)
            # Idle fetches: nothing changed, so the session's responses are empty.
            assert consumer.poll(timeout_ms=300) == {}
        metrics = scrape(metrics_port)
    finally:
        consumer.close()
        loop.run_until_complete(producer.close())
        loop.close()

    assert received == {p: list(range(count)) for p, count in expected.items()}
    fetches = metrics['gregor_requests_total{api="Fetch"}']
    print(
        f"kafka-python: {fetches:.0f} fetches, "
        f"{metrics['gregor_fetch_sessions_created_total']:.0f} session(s) created"
    )
    # One session carried the whole consumption: every fetch after the first was
    # incremental (a failed one would have made the client start a new session).
    assert metrics["gregor_fetch_sessions_created_total"] == 1
    assert metrics["gregor_fetch_sessions"] == 1
    assert fetches >= 12
