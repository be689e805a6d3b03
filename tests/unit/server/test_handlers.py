"""Produce, Fetch and Metadata handlers called directly, with no socket and no ZooKeeper.

The handlers depend on ``server/services.py`` (``BrokerServices``), not on ``Broker``, so a
test hands them a small services object built from the real components below them: a
``MetadataCache`` filled as the ZooKeeper watcher would fill it, a ``LogManager`` on a
temporary directory and the ``ReplicaManager`` over both. Nothing is mocked; only the
broker process, its socket and ZooKeeper are left out. The responses are encoded and
decoded with kio, as a client would read them.
"""

from __future__ import annotations

import asyncio
import datetime
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from gregor_broker.cluster.metadata_cache import BrokerInfo, MetadataCache
from gregor_broker.cluster.models import PartitionState, TopicAssignment
from gregor_broker.config import BrokerConfig, load_broker_config, log_config_for
from gregor_broker.deferred import Deferred
from gregor_broker.log.log_manager import LogManager
from gregor_broker.protocol import entities, replica_fetch
from gregor_broker.protocol.record_batch import scan_batches
from gregor_broker.protocol.records import Record, iter_batch_records, make_batch
from gregor_broker.protocol.wire import RequestHeader
from gregor_broker.replication.replica_manager import ReplicaManager
from gregor_broker.server.authorizer import Authorizer
from gregor_broker.server.fetch_sessions import FetchSessionCache
from gregor_broker.server.handlers.fetch import handle_fetch
from gregor_broker.server.handlers.metadata import handle_metadata
from gregor_broker.server.handlers.produce import handle_produce
from gregor_broker.server.quotas import ClientQuotaManager
from gregor_broker.server.request_router import RequestContext

BROKER_ID = 1
TOPIC = "orders"
TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAQ"  # base64 of a UUID, as /brokers/topics/<t> holds it
PRODUCE, FETCH, METADATA = 0, 1, 3


@dataclass
class Services:
    """The part of ``BrokerServices`` that Produce, Fetch and Metadata use."""

    config: BrokerConfig
    metadata: MetadataCache
    replica_manager: ReplicaManager
    fetch_sessions: FetchSessionCache
    quotas: ClientQuotaManager
    topic_admin: Any = None
    connections: set[Any] = field(default_factory=set)
    authorizer: Authorizer = field(default_factory=Authorizer)  # none: everything allowed

    @property
    def broker_id(self) -> int:
        return self.config.broker_id


@pytest.fixture
def services(tmp_path: Path) -> Iterator[Services]:
    config = load_broker_config(
        None,
        {
            "broker.id": str(BROKER_ID),
            "log.dirs": str(tmp_path / "logs"),
            "zookeeper.connect": "127.0.0.1:1",  # never dialled: no ZooKeeper here
            "auto.create.topics.enable": "false",
        },
        env={},
    )
    metadata = MetadataCache()
    metadata.set_brokers({BROKER_ID: BrokerInfo(BROKER_ID, "127.0.0.1", 9092, None)})
    metadata.set_controller(BROKER_ID)
    logs = LogManager([tmp_path / "logs"], default_config=log_config_for(config, {}))
    replica_manager = ReplicaManager(
        BROKER_ID, logs, metadata, lambda overrides: log_config_for(config, overrides)
    )
    yield Services(
        config,
        metadata,
        replica_manager,
        FetchSessionCache(
            config.max_incremental_fetch_session_cache_slots,
            config.min_incremental_fetch_session_eviction_ms,
        ),
        ClientQuotaManager(config.quota_window_num, config.quota_window_size_seconds),
    )
    logs.close()


def lead(services: Services, partitions: int = 1, leader: int = BROKER_ID) -> None:
    """Metadata as the watcher would apply it: ``TOPIC`` on this broker, led by ``leader``."""
    services.metadata.set_topic(
        TOPIC, TopicAssignment.of({p: [BROKER_ID] for p in range(partitions)}, TOPIC_ID)
    )
    for p in range(partitions):
        state = PartitionState(controller_epoch=1, leader=leader, leader_epoch=0, isr=(BROKER_ID,))
        services.metadata.set_partition_state(TOPIC, p, state, version=0)
    services.replica_manager.reconcile(services.metadata.take_changed_topics())


def context(api_key: int, version: int) -> RequestContext:
    header = RequestHeader(api_key, version, 7, "handler-test", 0)
    # No connection: these handlers touch it only to close it after a failed acks=0.
    return RequestContext(header, None)  # type: ignore[arg-type]


def request(api_key: int, version: int, data: dict[str, Any]) -> Any:
    return entities.build(entities.payload_class(api_key, version, "request"), data)


def decode(api_key: int, version: int, frame: bytes) -> Any:
    """A response frame (size, header, body) read back with kio, as a client reads it."""
    flexible = entities.is_flexible(api_key, version) and api_key != 18
    body_offset = 4 + 4 + (1 if flexible else 0)
    response, _size = entities.response_reader(api_key, version)(frame, body_offset)
    return response


def produce_request(
    version: int,
    acks: int,
    records: bytes,
    partition: int = 0,
    *,
    partitions: tuple[int, ...] | None = None,
    timeout_ms: int = 5000,
) -> Any:
    """One batch to ``partition`` (or the same batch to each of ``partitions``)."""
    indexes = partitions if partitions is not None else (partition,)
    return request(
        PRODUCE,
        version,
        {
            "transactional_id": None,
            "acks": acks,
            "timeout": datetime.timedelta(milliseconds=timeout_ms),
            "topic_data": [
                {
                    "name": TOPIC,
                    "partition_data": [{"index": i, "records": records} for i in indexes],
                }
            ],
        },
    )


def batch(*values: bytes) -> bytes:
    return make_batch([Record(i, 0, None, v) for i, v in enumerate(values)], base_timestamp=1)


def run(result: Any) -> Any:
    """Handlers return a response, or when they wait a coroutine or a Deferred one."""
    if asyncio.iscoroutine(result):
        return asyncio.run(result)
    if isinstance(result, Deferred):

        async def answer() -> Any:
            return await result

        return asyncio.run(answer())
    return result


# -- Produce -----------------------------------------------------------------------------


@pytest.mark.parametrize("version", [3, 9])
def test_produce_appends_to_the_leaders_log_and_answers_the_base_offset(
    services: Services, version: int
) -> None:
    lead(services)
    first = run(
        handle_produce(
            services, context(PRODUCE, version), produce_request(version, 1, batch(b"a", b"b"))
        )
    )
    second = run(
        handle_produce(
            services, context(PRODUCE, version), produce_request(version, 1, batch(b"c"))
        )
    )

    answers = [decode(PRODUCE, version, r.encode_frame(version, 7)) for r in (first, second)]
    partitions = [a.responses[0].partition_responses[0] for a in answers]
    assert [p.error_code for p in partitions] == [ErrorCode.none, ErrorCode.none]
    assert [p.base_offset for p in partitions] == [0, 2]
    assert services.replica_manager.partitions[(TOPIC, 0)].log.log_end_offset == 3


def test_produce_to_a_partition_hosted_elsewhere_is_not_leader_or_follower(
    services: Services,
) -> None:
    services.metadata.set_topic(TOPIC, TopicAssignment.of({0: [2]}, TOPIC_ID))
    state = PartitionState(controller_epoch=1, leader=2, leader_epoch=0, isr=(2,))
    services.metadata.set_partition_state(TOPIC, 0, state, version=0)
    services.replica_manager.reconcile(services.metadata.take_changed_topics())
    response = run(
        handle_produce(services, context(PRODUCE, 9), produce_request(9, 1, batch(b"a")))
    )

    partition = decode(PRODUCE, 9, response.encode_frame(9, 7)).responses[0].partition_responses[0]
    assert partition.error_code == ErrorCode.not_leader_or_follower
    assert (TOPIC, 0) not in services.replica_manager.partitions


def test_produce_of_a_corrupt_batch_is_refused_and_appends_nothing(services: Services) -> None:
    lead(services)
    damaged = bytearray(batch(b"a"))
    damaged[-1] ^= 0xFF  # the CRC-32C no longer matches
    response = run(
        handle_produce(services, context(PRODUCE, 9), produce_request(9, 1, bytes(damaged)))
    )

    partition = decode(PRODUCE, 9, response.encode_frame(9, 7)).responses[0].partition_responses[0]
    assert partition.error_code == ErrorCode.corrupt_message
    assert services.replica_manager.partitions[(TOPIC, 0)].log.log_end_offset == 0


def test_produce_with_invalid_acks_appends_nothing(services: Services) -> None:
    lead(services)
    response = run(
        handle_produce(services, context(PRODUCE, 9), produce_request(9, 2, batch(b"a")))
    )

    partition = decode(PRODUCE, 9, response.encode_frame(9, 7)).responses[0].partition_responses[0]
    assert partition.error_code == ErrorCode.invalid_required_acks
    assert services.replica_manager.partitions[(TOPIC, 0)].log.log_end_offset == 0


# -- Fetch -------------------------------------------------------------------------------


def fetch_request(
    version: int, offset: int, max_wait_ms: int = 0, isolation_level: int = 0, replica_id: int = -1
) -> Any:
    """A Fetch of ``TOPIC``-0 (a consumer's unless ``replica_id``); fields the version
    does not have are left out."""
    return request(
        FETCH,
        version,
        {
            "replica_id": replica_id,
            "max_wait": datetime.timedelta(milliseconds=max_wait_ms),
            "min_bytes": 1,
            "max_bytes": 1 << 20,
            "isolation_level": isolation_level,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [
                {
                    "topic": TOPIC,
                    "topic_id": services_topic_uuid(),
                    "partitions": [
                        {
                            "partition": 0,
                            "current_leader_epoch": -1,
                            "fetch_offset": offset,
                            "last_fetched_epoch": -1,
                            "log_start_offset": -1,
                            "partition_max_bytes": 1 << 20,
                        }
                    ],
                }
            ],
            "forgotten_topics_data": [],
            "rack_id": "",
        },
    )


def services_topic_uuid() -> Any:
    info = MetadataCache()
    info.set_topic(TOPIC, TopicAssignment.of({0: [BROKER_ID]}, TOPIC_ID))
    return info.topics[TOPIC].uuid


def fetched(version: int, response: Any) -> Any:
    """Encode the fetch response as the connection would send it: header bytes from
    Python, record bytes as file regions (read here the way sendfile(2) would)."""
    parts, size = response.encode_frame(version, 7)
    frame = b"".join(
        part if isinstance(part, bytes) else os.pread(part.fd, part.size, part.position)
        for part in parts
    )
    assert len(frame) == size
    assert any(not isinstance(part, bytes) for part in parts), "records come as a file region"
    return decode(FETCH, version, frame)


@pytest.mark.parametrize("version", [11, 13])
def test_fetch_returns_the_records_up_to_the_high_watermark_from_the_segment_file(
    services: Services, version: int
) -> None:
    lead(services)
    run(handle_produce(services, context(PRODUCE, 9), produce_request(9, 1, batch(b"a", b"b"))))
    run(handle_produce(services, context(PRODUCE, 9), produce_request(9, 1, batch(b"c"))))

    response = run(handle_fetch(services, context(FETCH, version), fetch_request(version, 1)))

    partition = fetched(version, response).responses[0].partitions[0]
    assert partition.error_code == ErrorCode.none
    assert partition.high_watermark == 3
    records = bytes(partition.records)
    values = [
        (header.base_offset + record.offset_delta, record.value)
        for header in scan_batches(records)
        for record in iter_batch_records(records, header)
    ]
    # Matches Kafka: whole batches come back, so offset 0 rides along with offset 1.
    assert values == [(0, b"a"), (1, b"b"), (2, b"c")]


def test_fetch_beyond_the_log_end_is_offset_out_of_range(services: Services) -> None:
    lead(services)
    run(handle_produce(services, context(PRODUCE, 9), produce_request(9, 1, batch(b"a"))))

    response = run(handle_fetch(services, context(FETCH, 11), fetch_request(11, 5)))

    parts, _size = response.encode_frame(11, 7)
    partition = decode(FETCH, 11, b"".join(parts)).responses[0].partitions[0]
    assert partition.error_code == ErrorCode.offset_out_of_range


def test_fetch_waits_for_a_produce_when_the_log_has_nothing_new(services: Services) -> None:
    lead(services)

    async def fetch_then_produce() -> Any:
        waiting = handle_fetch(services, context(FETCH, 11), fetch_request(11, 0, 5000))
        assert isinstance(waiting, Deferred), "nothing to read yet: the fetch waits"
        task = asyncio.ensure_future(waiting)
        await asyncio.sleep(0.05)
        assert not task.done()
        handle_produce(services, context(PRODUCE, 9), produce_request(9, 1, batch(b"late")))
        return await asyncio.wait_for(task, 2)

    partition = fetched(11, asyncio.run(fetch_then_produce())).responses[0].partitions[0]
    assert partition.error_code == ErrorCode.none
    assert partition.high_watermark == 1


def test_a_produce_before_the_waiting_fetch_first_runs_still_wakes_it(services: Services) -> None:
    """The fetch found nothing and parked, and an append came before anything awaited
    its answer. The fetch must answer with that data at once, not after its max wait: a
    follower's fetch once missed it this way (it registered a turn of the loop after its
    read) and every acks=all round trip behind it waited 500 ms."""
    lead(services)

    async def produce_before_the_fetch_runs() -> tuple[Any, float]:
        loop = asyncio.get_running_loop()
        waiting = handle_fetch(services, context(FETCH, 11), fetch_request(11, 0, 30_000))
        assert isinstance(waiting, Deferred), "nothing to read yet: the fetch waits"
        handle_produce(services, context(PRODUCE, 9), produce_request(9, 1, batch(b"early")))
        started = loop.time()
        response = await asyncio.wait_for(waiting, 20)
        return response, loop.time() - started

    response, waited = asyncio.run(produce_before_the_fetch_runs())
    partition = fetched(11, response).responses[0].partitions[0]
    assert partition.error_code == ErrorCode.none
    assert partition.high_watermark == 1
    assert waited < 10, f"the fetch waited {waited:.1f} s for data it could have read"
    assert services.replica_manager.append_waiters.pending() == 0


def lead_replicated(services: Services, partitions: int = 1) -> Any:
    """``TOPIC``'s partitions led here with followers 2 and 3 in the ISR: an append is
    committed only once both fetched past it. Returns partition 0."""
    services.metadata.set_topic(
        TOPIC, TopicAssignment.of({p: [BROKER_ID, 2, 3] for p in range(partitions)}, TOPIC_ID)
    )
    state = PartitionState(controller_epoch=1, leader=BROKER_ID, leader_epoch=0, isr=(1, 2, 3))
    for index in range(partitions):
        services.metadata.set_partition_state(TOPIC, index, state, version=0)
    services.replica_manager.reconcile(services.metadata.take_changed_topics())
    return services.replica_manager.partitions[(TOPIC, 0)]


def _watch(waiters: Any, keys: list[Any], *, committed: bool = False) -> asyncio.Future[None]:
    """A future woken as a parked fetch of that kind would be."""
    future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    waiters.watch_with(future, keys, committed=committed)
    return future


def test_fetches_wake_only_for_what_can_answer_them(services: Services) -> None:
    """Kafka's DelayedFetch: a follower's fetch completes on data at the log end, a
    consumer's on data below the high watermark. Woken by every append and every high
    watermark move, each acks=all message at RF=3 cost the leader two futile wake-ups
    (the consumer's fetch by the append, the first follower's by the high watermark)."""
    partition = lead_replicated(services)
    replicas = services.replica_manager
    waiters = replicas.append_waiters
    key = [(TOPIC, 0)]

    async def scenario() -> None:
        consumer = _watch(waiters, key, committed=True)
        follower_2 = _watch(waiters, key)
        follower_3 = _watch(waiters, key)
        replicas.append(TOPIC, 0, batch(b"a"), -1)
        assert follower_2.done() and follower_3.done(), "followers wake to copy the append"
        assert not consumer.done(), "a consumer cannot read it before the HW moves"

        follower_2 = _watch(waiters, key)  # follower 2 copied it and fetches again
        replicas.record_follower_fetch(partition, 2, 1)
        assert partition.log.high_watermark == 0 and not consumer.done()
        replicas.record_follower_fetch(partition, 3, 1)  # the high watermark moves
        assert partition.log.high_watermark == 1
        assert consumer.done(), "a consumer wakes as soon as the HW covers the data"
        assert not follower_2.done(), "the HW gives a caught-up follower nothing to copy"

        # Anything else about the partition wakes every kind of fetch.
        consumer = _watch(waiters, key, committed=True)
        state = PartitionState(controller_epoch=1, leader=2, leader_epoch=1, isr=(1, 2, 3))
        services.metadata.set_partition_state(TOPIC, 0, state, version=1)
        replicas.reconcile(services.metadata.take_changed_topics())
        assert consumer.done() and follower_2.done(), "leadership moved: both re-check"
        assert waiters.pending() == 0

    asyncio.run(scenario())


def follower_fetch(
    replica_id: int,
    offset: int,
    leader_epoch: int,
    *,
    partitions: tuple[int, ...] = (0,),
    session: tuple[int, int] = (0, -1),
    max_wait_ms: int = 0,
) -> Any:
    """A follower's Fetch v11 as the leader reads it (the lean decoder's objects): the
    ``partitions`` at ``offset``, in the fetch ``session`` (id, epoch; none by default)."""
    frame = replica_fetch.encode_request(
        3,
        b"gregor-replica",
        replica_id=replica_id,
        max_wait_ms=max_wait_ms,
        min_bytes=1,
        max_bytes=1 << 20,
        topics=[
            (
                TOPIC,
                [
                    replica_fetch.FetchPosition(p, leader_epoch, offset, 0, 1 << 20)
                    for p in partitions
                ],
            )
        ]
        if partitions
        else [],
        session_id=session[0],
        session_epoch=session[1],
    )
    decoded = replica_fetch.decode_request(frame[4:], 2 + 2 + 4 + 2 + len(b"gregor-replica"))
    assert decoded is not None
    return decoded


def test_parked_fetches_are_answered_in_the_call_that_makes_them_answerable(
    services: Services,
) -> None:
    """Kafka's purgatory completes a delayed fetch on the thread whose action made it
    completable. The append answers the parked followers before the produce returns,
    the follower fetch that moves the high watermark answers the parked consumer before
    it returns: no turn of the event loop in between, where the rest of the waking
    request and everything queued before would have gone first."""
    partition = lead_replicated(services)
    replicas = services.replica_manager

    async def scenario() -> list[Any]:
        followers = [
            handle_fetch(services, context(FETCH, 11), follower_fetch(r, 0, 0, max_wait_ms=30_000))
            for r in (2, 3)
        ]
        consumer = handle_fetch(services, context(FETCH, 11), fetch_request(11, 0, 30_000))
        parked = [*followers, consumer]
        assert all(isinstance(w, Deferred) and not w.settled for w in parked)
        handle_produce(services, context(PRODUCE, 9), produce_request(9, 1, batch(b"a")))
        assert all(w.settled for w in followers), "the append answered the followers"
        assert not consumer.settled, "appended, not committed"
        replicas.record_follower_fetch(partition, 2, 1)
        assert not consumer.settled
        replicas.record_follower_fetch(partition, 3, 1)
        assert consumer.settled, "the high watermark's move answered the consumer"
        return [await waiting for waiting in parked]

    answers = [
        fetched(11, response).responses[0].partitions[0] for response in asyncio.run(scenario())
    ]
    assert all(a.error_code == ErrorCode.none and bytes(a.records) for a in answers)
    assert [a.high_watermark for a in answers] == [0, 0, 1]
    assert replicas.append_waiters.pending() == 0


def test_an_acks_all_produce_is_answered_in_the_call_that_moves_the_high_watermark(
    services: Services,
) -> None:
    """Kafka's DelayedProduce is completed by the follower fetch that moves the high
    watermark past the append, on that thread. A waiting produce was a task, woken on a
    later turn of the event loop; it now answers before that fetch's call returns, after
    the consumer the same move answers (whose answer is the end-to-end latency). A
    produce over two partitions answers once both have passed."""
    partition = lead_replicated(services, partitions=2)
    replicas = services.replica_manager
    other = replicas.partitions[(TOPIC, 1)]

    async def scenario() -> Any:
        answered: list[str] = []
        produced: list[Any] = []
        consumer = handle_fetch(services, context(FETCH, 11), fetch_request(11, 0, 30_000))
        assert isinstance(consumer, Deferred)
        consumer.then(lambda _response, _error: answered.append("consumer"))
        waiting = handle_produce(
            services,
            context(PRODUCE, 9),
            produce_request(9, -1, batch(b"a"), partitions=(0, 1)),
        )
        assert isinstance(waiting, Deferred) and not waiting.settled
        waiting.then(
            lambda response, _error: answered.append("producer") or produced.append(response)
        )
        replicas.record_follower_fetch(partition, 2, 1)
        replicas.record_follower_fetch(partition, 3, 1)
        assert answered == ["consumer"], "partition 1 has not passed the append yet"
        replicas.record_follower_fetch(other, 2, 1)
        assert answered == ["consumer"]
        replicas.record_follower_fetch(other, 3, 1)
        assert answered == ["consumer", "producer"], "answered in the call that moved it"
        assert replicas.produce_purgatory.pending() == 0
        return produced[0]

    response = asyncio.run(scenario())
    answers = decode(PRODUCE, 9, response.encode_frame(9, 7)).responses[0].partition_responses
    assert [(a.index, a.error_code, a.base_offset) for a in answers] == [
        (0, ErrorCode.none, 0),
        (1, ErrorCode.none, 0),
    ]


def test_an_acks_all_produce_times_out_with_request_timed_out_and_stops_watching(
    services: Services,
) -> None:
    lead_replicated(services)
    replicas = services.replica_manager
    produce = produce_request(9, -1, batch(b"a"), timeout_ms=50)

    async def scenario() -> Any:
        waiting = handle_produce(services, context(PRODUCE, 9), produce)
        assert isinstance(waiting, Deferred)
        return await asyncio.wait_for(waiting, 10)

    response = asyncio.run(scenario())
    answer = decode(PRODUCE, 9, response.encode_frame(9, 7)).responses[0].partition_responses[0]
    assert (answer.error_code, answer.base_offset) == (ErrorCode.request_timed_out, -1)
    assert replicas.produce_purgatory.pending() == 0


def test_an_in_sync_followers_fetch_of_a_partition_it_has_answers_as_the_general_path(
    services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every partition of a follower's fetch session with no traffic is answered on a
    short path (no partition lookup, no read): the same answer and the same follower
    state as the general path, which a fetch without a leader epoch still takes."""
    partition = lead_replicated(services)
    replicas = services.replica_manager
    replicas.append(TOPIC, 0, batch(b"a", b"b"), -1)
    replicas.record_follower_fetch(partition, 2, 2)
    replicas.record_follower_fetch(partition, 3, 2)
    assert partition.log.high_watermark == 2
    looked_up = []
    general = replicas.partition_or_error
    monkeypatch.setattr(
        replicas,
        "partition_or_error",
        lambda *args, **kwargs: looked_up.append(args) or general(*args, **kwargs),
    )

    answers = []
    for leader_epoch in (0, -1):  # the short path, then (no epoch named) the general one
        follower = partition.followers[2]
        follower.last_caught_up_ms = follower.last_fetch_ms = 0
        response = handle_fetch(services, context(FETCH, 11), follower_fetch(2, 2, leader_epoch))
        parts, _size = response.encode_frame(11, 7)
        answers.append((b"".join(parts), follower.log_end_offset, follower.last_caught_up_ms > 0))
        assert follower.last_fetch_ms > 0
    assert len(looked_up) == 1, "the short path looks nothing up"
    assert answers[0] == answers[1]
    answer = decode(FETCH, 11, answers[0][0]).responses[0].partitions[0]
    assert (answer.error_code, answer.high_watermark, bytes(answer.records or b"")) == (
        ErrorCode.none,
        2,
        b"",
    )

    # Behind the log end, out of the ISR or at another epoch: the general path.
    replicas.append(TOPIC, 0, batch(b"c"), -1)
    for replica_id, offset, leader_epoch in ((2, 2, 0), (2, 3, 0), (3, 3, 5)):
        if replica_id == 2 and offset == 3:
            partition.isr = (1, 3)
        looked_up.clear()
        fenced = handle_fetch(
            services, context(FETCH, 11), follower_fetch(replica_id, offset, leader_epoch)
        )
        assert looked_up, (replica_id, offset, leader_epoch)
    parts, _size = fenced.encode_frame(11, 8)
    assert (
        decode(FETCH, 11, b"".join(p for p in parts if isinstance(p, bytes)))
        .responses[0]
        .partitions[0]
        .error_code
        == ErrorCode.unknown_leader_epoch
    )


@pytest.mark.parametrize("version", [4, 5, 6, 8])
def test_a_replica_fetch_older_than_leader_epochs_takes_the_general_path(
    services: Services, version: int
) -> None:
    """Fetch v4-8 carries no current leader epoch: a replica's fetch of a partition it
    has all of is answered as any other (the fuzzer's v5 and v6 got UNKNOWN_SERVER_ERROR
    from a short path that read the missing field)."""
    partition = lead_replicated(services)
    replicas = services.replica_manager
    replicas.append(TOPIC, 0, batch(b"a"), -1)
    replicas.record_follower_fetch(partition, 2, 1)
    replicas.record_follower_fetch(partition, 3, 1)
    fetch = fetch_request(version, 1, replica_id=2)
    response = handle_fetch(services, context(FETCH, version), fetch)
    parts, _size = response.encode_frame(version, 7)
    answer = decode(FETCH, version, b"".join(p for p in parts if isinstance(p, bytes)))
    result = answer.responses[0].partitions[0]
    assert (result.error_code, result.high_watermark) == (ErrorCode.none, 1)


def test_a_followers_session_answers_only_what_changed_on_its_idle_partitions(
    services: Services,
) -> None:
    """In a follower's incremental session, a partition it has all of is left out of the
    answer until something it would carry changes: here the high watermark, moved by the
    other follower while this one had nothing new to fetch."""
    services.metadata.set_topic(
        TOPIC, TopicAssignment.of({0: [BROKER_ID, 2, 3], 1: [BROKER_ID, 2, 3]}, TOPIC_ID)
    )
    for index in (0, 1):
        state = PartitionState(controller_epoch=1, leader=BROKER_ID, leader_epoch=0, isr=(1, 2, 3))
        services.metadata.set_partition_state(TOPIC, index, state, version=0)
    replicas = services.replica_manager
    replicas.reconcile(services.metadata.take_changed_topics())
    for index in (0, 1):
        replicas.append(TOPIC, index, batch(b"a"), -1)
        for follower in (2, 3):
            replicas.record_follower_fetch(replicas.partitions[(TOPIC, index)], follower, 1)

    def answered(request: Any) -> tuple[int, dict[int, int]]:
        """The session id and {partition: high watermark} of the answer."""
        response = handle_fetch(services, context(FETCH, 11), request)
        parts, _size = response.encode_frame(11, 7)
        decoded = decode(FETCH, 11, b"".join(p for p in parts if isinstance(p, bytes)))
        return decoded.session_id, {
            p.partition_index: p.high_watermark for t in decoded.responses for p in t.partitions
        }

    session_id, full = answered(follower_fetch(2, 1, 0, partitions=(0, 1), session=(0, 0)))
    assert session_id and full == {0: 1, 1: 1}
    assert answered(follower_fetch(2, 1, 0, partitions=(), session=(session_id, 1))) == (
        session_id,
        {},
    )
    # Partition 0 grows; follower 2 has copied it (it fetches from 2), follower 3 not yet:
    # the high watermark stays at 1, as the session last sent, so nothing is said.
    partition = replicas.partitions[(TOPIC, 0)]
    replicas.append(TOPIC, 0, batch(b"b"), -1)
    assert answered(follower_fetch(2, 2, 0, partitions=(0,), session=(session_id, 2))) == (
        session_id,
        {},
    )
    replicas.record_follower_fetch(partition, 3, 2)  # the high watermark moves to 2
    # Nothing new for follower 2 to copy anywhere, but partition 0's high watermark moved.
    assert answered(follower_fetch(2, 1, 0, partitions=(), session=(session_id, 3))) == (
        session_id,
        {0: 2},
    )
    assert answered(follower_fetch(2, 1, 0, partitions=(), session=(session_id, 4))) == (
        session_id,
        {},
    )


@pytest.mark.parametrize("isolation_level", [0, 1])
def test_a_waiting_consumer_fetch_answers_once_the_followers_have_the_data(
    services: Services, isolation_level: int
) -> None:
    partition = lead_replicated(services)
    replicas = services.replica_manager
    fetch = fetch_request(11, 0, 30_000, isolation_level)

    async def scenario() -> tuple[Any, float]:
        loop = asyncio.get_running_loop()
        waiting = handle_fetch(services, context(FETCH, 11), fetch)
        assert isinstance(waiting, Deferred), "nothing committed yet: the fetch waits"
        task = asyncio.ensure_future(waiting)
        await asyncio.sleep(0.01)
        replicas.append(TOPIC, 0, batch(b"a"), -1)
        await asyncio.sleep(0.01)
        assert not task.done(), "appended, not committed: nothing to answer yet"
        replicas.record_follower_fetch(partition, 2, 1)
        started = loop.time()
        replicas.record_follower_fetch(partition, 3, 1)
        response = await asyncio.wait_for(task, 20)
        return response, loop.time() - started

    response, waited = asyncio.run(scenario())
    answer = fetched(11, response).responses[0].partitions[0]
    assert answer.error_code == ErrorCode.none
    assert answer.high_watermark == 1
    assert bytes(answer.records), "the committed record comes back"
    assert waited < 10, f"the fetch waited {waited:.1f} s after the high watermark moved"
    assert replicas.append_waiters.pending() == 0


def test_an_acks_all_produce_waiting_when_the_replica_moves_away_answers_at_once(
    services: Services,
) -> None:
    """Kafka's StopReplica completes the delayed produces and fetches of the partition
    it removes. A reassignment that moved the partition off this leader deleted its log
    but woke nobody: the acks=all produce waiting for the followers answered only at its
    own timeout (30 s in librdkafka), and the producer stood still that long."""
    lead_replicated(services)
    replicas = services.replica_manager
    produce = produce_request(9, -1, batch(b"a"))  # acks=all, 5 s timeout

    async def scenario() -> tuple[Any, Any, float]:
        loop = asyncio.get_running_loop()
        waiting = handle_produce(services, context(PRODUCE, 9), produce)
        assert isinstance(waiting, Deferred), "the followers have not fetched: it waits"
        task = asyncio.ensure_future(waiting)
        # A consumer waiting up to 30 s for the record to be committed.
        consuming = handle_fetch(services, context(FETCH, 11), fetch_request(11, 0, 30_000))
        assert isinstance(consuming, Deferred)
        consumer = asyncio.ensure_future(consuming)
        await asyncio.sleep(0.01)
        assert not task.done() and not consumer.done()
        # The reassignment's last step: the replicas are [2, 3, 4], led by 2.
        services.metadata.set_topic(TOPIC, TopicAssignment.of({0: [2, 3, 4]}, TOPIC_ID))
        state = PartitionState(controller_epoch=1, leader=2, leader_epoch=1, isr=(2, 3, 4))
        services.metadata.set_partition_state(TOPIC, 0, state, version=1)
        started = loop.time()
        replicas.reconcile(services.metadata.take_changed_topics())
        response, fetch = await asyncio.wait_for(asyncio.gather(task, consumer), 20)
        return response, fetch, loop.time() - started

    response, fetch, waited = asyncio.run(scenario())
    answer = decode(PRODUCE, 9, response.encode_frame(9, 7)).responses[0].partition_responses[0]
    assert answer.error_code == ErrorCode.not_leader_or_follower
    parts, _size = fetch.encode_frame(11, 7)
    fetch_answer = decode(FETCH, 11, b"".join(parts)).responses[0].partitions[0]
    assert fetch_answer.error_code == ErrorCode.not_leader_or_follower
    assert (TOPIC, 0) not in replicas.partitions
    assert waited < 1, f"they waited {waited:.1f} s after the replica moved away"
    assert replicas.produce_purgatory.pending() == 0
    assert replicas.append_waiters.pending() == 0


# -- Metadata ----------------------------------------------------------------------------


@pytest.mark.parametrize("version", [1, 9, 12])
def test_metadata_names_this_broker_as_the_leader_and_unknown_topics_as_unknown(
    services: Services, version: int
) -> None:
    lead(services, partitions=2)
    data: dict[str, Any] = {
        "topics": [{"name": TOPIC}, {"name": "absent"}],
        "allow_auto_topic_creation": True,  # refused by auto.create.topics.enable=false
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False,
    }
    response = run(
        handle_metadata(services, context(METADATA, version), request(METADATA, version, data))
    )

    answer = decode(METADATA, version, response.encode_frame(version, 7))
    assert [(b.node_id, b.host, b.port) for b in answer.brokers] == [(BROKER_ID, "127.0.0.1", 9092)]
    assert answer.controller_id == BROKER_ID
    topics = {t.name: t for t in answer.topics}
    assert topics["absent"].error_code == ErrorCode.unknown_topic_or_partition
    orders = topics[TOPIC]
    assert orders.error_code == ErrorCode.none
    assert sorted(
        (p.partition_index, p.leader_id, tuple(p.replica_nodes), tuple(p.isr_nodes))
        for p in orders.partitions
    ) == [(0, BROKER_ID, (BROKER_ID,), (BROKER_ID,)), (1, BROKER_ID, (BROKER_ID,), (BROKER_ID,))]
