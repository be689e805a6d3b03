"""The fetch session cache (KIP-227) decides as Kafka's FetchManager and FetchSessionCache do.

Requests are kio's own FetchRequest classes; results are the fetch encoder's
PartitionResults, built here as the fetch reader would build them for each context's
runs. Time is a plain millisecond count passed in.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import Iterable

from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from gregor_broker.protocol import entities
from gregor_broker.protocol.fetch_metadata import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    next_epoch,
)
from gregor_broker.protocol.fetch_response import (
    UNCHANGED_PARTITION,
    PartitionResult,
    TopicResult,
)
from gregor_broker.replication.purgatory import Waiters
from gregor_broker.server.fetch_sessions import (
    FULL_PASS_MS,
    FetchContext,
    FetchSessionCache,
    FullContext,
    IncrementalContext,
    SessionErrorContext,
    SessionlessContext,
)

EVICTION_MS = 1000
ORDERS = uuid.UUID(int=0xA1)  # topic ids of v13+ fetches
PAYMENTS = uuid.UUID(int=0xB2)

Partitions = dict[str | uuid.UUID, list[tuple[int, int]]]  # topic -> [(partition, offset)]


def fetch_request(
    version: int = 12,
    *,
    session_id: int = INVALID_SESSION_ID,
    epoch: int = FINAL_EPOCH,
    topics: Partitions | None = None,
    forgotten: dict[str | uuid.UUID, list[int]] | None = None,
) -> object:
    by_id = version >= 13
    return entities.build(
        entities.payload_class(1, version, "request"),
        {
            "replica_id": -1,
            "max_wait": 0,
            "min_bytes": 1,
            "max_bytes": 1 << 20,
            "isolation_level": 0,
            "session_id": session_id,
            "session_epoch": epoch,
            "topics": [
                {
                    ("topic_id" if by_id else "topic"): topic,
                    "partitions": [
                        {
                            "partition": index,
                            "fetch_offset": offset,
                            "log_start_offset": 0,
                            "partition_max_bytes": 1 << 16,
                        }
                        for index, offset in partitions
                    ],
                }
                for topic, partitions in (topics or {}).items()
            ],
            "forgotten_topics_data": [
                {("topic_id" if by_id else "topic"): topic, "partitions": indexes}
                for topic, indexes in (forgotten or {}).items()
            ],
            "rack_id": "",
        },
    )


def read(
    context: FetchContext,
    *,
    high_watermark: int = 10,
    changed: dict[tuple[str | uuid.UUID, int], dict] | None = None,
) -> list[TopicResult]:
    """What the fetch reader would return for the context's runs: every partition at
    ``high_watermark`` without records, unless ``changed`` overrides its fields."""
    changed = changed or {}
    topics = []
    for run in context.runs:
        key = run.topic_id if run.topic_id is not None else run.name
        result = TopicResult(run.name or "", run.topic_id)
        for requested in run.partitions:
            fields = {
                "high_watermark": high_watermark,
                "last_stable_offset": high_watermark,
                "log_start_offset": 0,
                "records": b"",
                **changed.get((key, requested.partition), {}),
            }
            result.partitions.append(PartitionResult(requested.partition, **fields))
        topics.append(result)
    return topics


def answered(topics: Iterable[TopicResult]) -> list[tuple[str | uuid.UUID, int]]:
    return [
        (topic.topic_id if topic.topic_id is not None else topic.name, partition.partition_index)
        for topic in topics
        for partition in topic.partitions
    ]


def fetched(context: FetchContext) -> list[tuple[str | uuid.UUID, int, int]]:
    """(topic, partition, fetch offset) of every partition the context reads, in order."""
    return [
        (run.topic_id if run.topic_id is not None else run.name, p.partition, p.fetch_offset)
        for run in context.runs
        for p in run.partitions
    ]


def new_session(
    cache: FetchSessionCache,
    topics: Partitions,
    *,
    version: int = 12,
    now_ms: int = 0,
    privileged: bool = False,
) -> int:
    context = cache.new_context(
        fetch_request(version, epoch=INITIAL_EPOCH, topics=topics), version, privileged, now_ms
    )
    error, session_id, _ = context.finish(read(context), now_ms)
    assert error == ErrorCode.none
    return session_id


def incremental(
    cache: FetchSessionCache,
    session_id: int,
    epoch: int,
    *,
    version: int = 12,
    topics: Partitions | None = None,
    forgotten: dict[str | uuid.UUID, list[int]] | None = None,
    now_ms: int = 0,
) -> FetchContext:
    request = fetch_request(
        version, session_id=session_id, epoch=epoch, topics=topics, forgotten=forgotten
    )
    return cache.new_context(request, version, False, now_ms)


# --- epochs ------------------------------------------------------------------------------


def test_next_epoch_counts_up_wraps_to_one_and_keeps_the_final_epoch():
    assert next_epoch(INITIAL_EPOCH) == 1
    assert next_epoch(41) == 42
    assert next_epoch(2**31 - 1) == 1
    assert next_epoch(FINAL_EPOCH) == FINAL_EPOCH


# --- full fetches ------------------------------------------------------------------------


def test_final_epoch_without_a_session_is_a_sessionless_full_fetch():
    cache = FetchSessionCache(10, EVICTION_MS)
    context = cache.new_context(fetch_request(topics={"orders": [(0, 5), (1, 7)]}), 12, False, 0)
    assert isinstance(context, SessionlessContext)
    assert fetched(context) == [("orders", 0, 5), ("orders", 1, 7)]
    error, session_id, topics = context.finish(read(context), 0)
    assert (error, session_id) == (ErrorCode.none, INVALID_SESSION_ID)
    assert answered(topics) == [("orders", 0), ("orders", 1)]
    assert len(cache) == 0


def test_fetch_v4_to_v6_without_session_fields_is_sessionless():
    cache = FetchSessionCache(10, EVICTION_MS)
    context = cache.new_context(fetch_request(6, topics={"orders": [(0, 0)]}), 6, False, 0)
    assert isinstance(context, SessionlessContext)


def test_initial_epoch_creates_a_session_of_every_requested_partition():
    cache = FetchSessionCache(10, EVICTION_MS)
    context = cache.new_context(
        fetch_request(epoch=INITIAL_EPOCH, topics={"orders": [(0, 5), (1, 7)], "pay": [(0, 1)]}),
        12,
        False,
        0,
    )
    assert isinstance(context, FullContext)
    error, session_id, topics = context.finish(read(context, high_watermark=9), 0)

    assert error == ErrorCode.none and session_id != INVALID_SESSION_ID
    assert answered(topics) == [("orders", 0), ("orders", 1), ("pay", 0)]  # all of them
    session = cache.get(session_id)
    assert session is not None and session.epoch == 1  # the client's next epoch
    assert [(p.topic_key, p.partition, p.fetch_offset) for p in session.partitions.values()] == [
        ("orders", 0, 5),
        ("orders", 1, 7),
        ("pay", 0, 1),
    ]
    assert {p.high_watermark for p in session.partitions.values()} == {9}
    assert (cache.created_total, cache.partitions_total) == (1, 3)


def test_final_epoch_with_a_session_id_closes_that_session():
    cache = FetchSessionCache(10, EVICTION_MS)
    session_id = new_session(cache, {"orders": [(0, 0)]})
    context = cache.new_context(
        fetch_request(session_id=session_id, epoch=FINAL_EPOCH, topics={"orders": [(0, 0)]}),
        12,
        False,
        0,
    )
    assert isinstance(context, SessionlessContext)
    assert cache.get(session_id) is None
    assert cache.partitions_total == 0
    error = incremental(cache, session_id, 1).error_code
    assert error == ErrorCode.fetch_session_id_not_found


def test_initial_epoch_with_a_session_id_replaces_that_session():
    cache = FetchSessionCache(10, EVICTION_MS)
    old = new_session(cache, {"orders": [(0, 0)]})
    context = cache.new_context(
        fetch_request(session_id=old, epoch=INITIAL_EPOCH, topics={"orders": [(0, 3)]}),
        12,
        False,
        0,
    )
    _, new, _ = context.finish(read(context), 0)
    assert new not in (old, INVALID_SESSION_ID)
    assert cache.get(old) is None and len(cache) == 1


# --- incremental fetches -----------------------------------------------------------------


def test_incremental_fetch_reads_the_whole_session_with_the_request_applied():
    cache = FetchSessionCache(10, EVICTION_MS)
    session_id = new_session(cache, {"orders": [(0, 5), (1, 7)], "pay": [(0, 1)]})

    context = incremental(
        cache, session_id, 1, topics={"orders": [(1, 9)], "pay": [(1, 0)]}, now_ms=5
    )

    assert isinstance(context, IncrementalContext)
    # Partitions not in the request keep their cached offsets; a new one joins at the end.
    assert fetched(context) == [("orders", 0, 5), ("orders", 1, 9), ("pay", 0, 1), ("pay", 1, 0)]
    session = cache.get(session_id)
    assert session is not None
    assert session.epoch == 2 and session.last_used_ms == 5
    assert cache.partitions_total == 4


def test_incremental_response_has_only_partitions_that_changed():
    cache = FetchSessionCache(10, EVICTION_MS)
    session_id = new_session(cache, {"t": [(0, 0), (1, 0), (2, 0), (3, 0), (4, 0)]})

    context = incremental(cache, session_id, 1)
    error, returned_id, topics = context.finish(
        read(
            context,
            changed={
                ("t", 0): {"records": b"batch"},  # new records
                ("t", 2): {"high_watermark": 11, "last_stable_offset": 11},
                ("t", 3): {"log_start_offset": 4},
                ("t", 4): {"error_code": ErrorCode.not_leader_or_follower},
            },
        ),
        0,
    )

    assert (error, returned_id) == (ErrorCode.none, session_id)
    assert answered(topics) == [("t", 0), ("t", 2), ("t", 3), ("t", 4)]  # ("t", 1) unchanged
    # Nothing changed since: only the failing partition is answered again.
    context = incremental(cache, session_id, 2)
    _, _, topics = context.finish(
        read(
            context,
            changed={
                ("t", 2): {"high_watermark": 11},
                ("t", 3): {"log_start_offset": 4},
                ("t", 4): {"error_code": ErrorCode.not_leader_or_follower},
            },
        ),
        0,
    )
    assert answered(topics) == [("t", 4)]
    # Once the error is gone the partition is sent again, at an unchanged high watermark.
    context = incremental(cache, session_id, 3)
    _, _, topics = context.finish(
        read(
            context, changed={("t", 2): {"high_watermark": 11}, ("t", 3): {"log_start_offset": 4}}
        ),
        0,
    )
    assert answered(topics) == [("t", 4)]


def test_an_incremental_response_with_nothing_new_is_empty():
    cache = FetchSessionCache(10, EVICTION_MS)
    session_id = new_session(cache, {"orders": [(0, 0), (1, 0)]})
    context = incremental(cache, session_id, 1, topics={"orders": [(0, 3)]})
    assert context.finish(read(context), 0) == (ErrorCode.none, session_id, [])


def test_partitions_that_returned_records_go_to_the_back_of_the_session():
    cache = FetchSessionCache(10, EVICTION_MS)
    session_id = new_session(cache, {"a": [(0, 0), (1, 0)], "b": [(0, 0)]})
    context = incremental(cache, session_id, 1)
    context.finish(read(context, changed={("a", 0): {"records": b"x"}}), 0)

    context = incremental(cache, session_id, 2)
    assert [(topic, index) for topic, index, _ in fetched(context)] == [
        ("a", 1),
        ("b", 0),
        ("a", 0),
    ]
    # "a" appears in two runs now: a response keeps the session's order, one topic entry
    # per run of consecutive partitions.
    _, _, topics = context.finish(
        read(
            context,
            changed={
                ("a", 1): {"records": b"y"},
                ("b", 0): {"high_watermark": 12},
                ("a", 0): {"records": b"z"},
            },
        ),
        0,
    )
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in topics] == [
        ("a", [1]),
        ("b", [0]),
        ("a", [0]),
    ]


def test_consecutive_answered_partitions_of_a_topic_share_one_topic_entry():
    cache = FetchSessionCache(10, EVICTION_MS)
    session_id = new_session(cache, {"a": [(0, 0)], "b": [(0, 0)], "c": [(0, 0)]})
    context = incremental(cache, session_id, 1)
    _, _, topics = context.finish(
        read(context, changed={("a", 0): {"high_watermark": 12}, ("c", 0): {"high_watermark": 12}}),
        0,
    )
    assert [t.name for t in topics] == ["a", "c"]


def test_forgotten_partitions_leave_the_session():
    cache = FetchSessionCache(10, EVICTION_MS)
    session_id = new_session(cache, {"orders": [(0, 0), (1, 0)], "pay": [(0, 0)]})

    context = incremental(cache, session_id, 1, forgotten={"orders": [1], "pay": [0, 7]})

    assert [(t, p) for t, p, _ in fetched(context)] == [("orders", 0)]
    _, _, topics = context.finish(read(context, high_watermark=99), 0)
    assert answered(topics) == [("orders", 0)]
    assert cache.partitions_total == 1


def test_a_partition_added_and_forgotten_in_one_request_is_forgotten():
    cache = FetchSessionCache(10, EVICTION_MS)
    session_id = new_session(cache, {"orders": [(0, 0)]})
    context = incremental(
        cache, session_id, 1, topics={"orders": [(1, 0)]}, forgotten={"orders": [1]}
    )
    assert [(t, p) for t, p, _ in fetched(context)] == [("orders", 0)]


def test_forgetting_every_partition_closes_the_session_and_answers_without_one():
    cache = FetchSessionCache(10, EVICTION_MS)
    session_id = new_session(cache, {"orders": [(0, 0), (1, 0)]})

    context = incremental(cache, session_id, 1, forgotten={"orders": [0, 1]})

    assert isinstance(context, SessionlessContext)
    assert context.finish(read(context), 0) == (ErrorCode.none, INVALID_SESSION_ID, [])
    assert len(cache) == 0 and cache.partitions_total == 0


def test_topic_id_sessions_key_partitions_and_forgotten_topics_by_id():
    cache = FetchSessionCache(10, EVICTION_MS)
    session_id = new_session(cache, {ORDERS: [(0, 0), (1, 0)], PAYMENTS: [(0, 0)]}, version=16)

    context = incremental(cache, session_id, 1, version=16, forgotten={ORDERS: [0]})

    assert [(t, p) for t, p, _ in fetched(context)] == [(ORDERS, 1), (PAYMENTS, 0)]
    assert all(run.name is None for run in context.runs)  # the handler resolves names


# --- session errors ----------------------------------------------------------------------


def test_an_unknown_session_id_is_fetch_session_id_not_found():
    cache = FetchSessionCache(10, EVICTION_MS)
    new_session(cache, {"orders": [(0, 0)]})
    context = incremental(cache, 12345, 1)
    assert isinstance(context, SessionErrorContext)
    assert context.error_code == ErrorCode.fetch_session_id_not_found
    assert context.finish([], 0) == (ErrorCode.fetch_session_id_not_found, INVALID_SESSION_ID, [])


def test_a_wrong_epoch_is_invalid_fetch_session_epoch_and_leaves_the_session_as_it_was():
    cache = FetchSessionCache(10, EVICTION_MS)
    session_id = new_session(cache, {"orders": [(0, 0)]})
    assert incremental(cache, session_id, 1).error_code == ErrorCode.none

    for stale_or_early in (1, 3, 7):
        context = incremental(cache, session_id, stale_or_early, topics={"orders": [(1, 0)]})
        assert context.error_code == ErrorCode.invalid_fetch_session_epoch
        assert context.runs == []

    context = incremental(cache, session_id, 2)
    assert context.error_code == ErrorCode.none
    assert [(t, p) for t, p, _ in fetched(context)] == [("orders", 0)]


def test_a_topic_id_session_used_by_a_topic_name_fetch_is_fetch_session_topic_id_error():
    cache = FetchSessionCache(10, EVICTION_MS)
    session_id = new_session(cache, {ORDERS: [(0, 0)]}, version=13)
    context = incremental(cache, session_id, 1, version=12)
    assert context.error_code == ErrorCode.fetch_session_topic_id_error


def test_a_request_overtaken_by_the_next_one_of_its_session_answers_invalid_epoch():
    # A long poll at epoch 1 is still waiting when the client (after a timeout) sends
    # epoch 2: the first one's response must not move the session on.
    cache = FetchSessionCache(10, EVICTION_MS)
    session_id = new_session(cache, {"orders": [(0, 0)]})
    waiting = incremental(cache, session_id, 1)
    newer = incremental(cache, session_id, 2)

    assert waiting.finish(read(waiting, high_watermark=20), 0) == (
        ErrorCode.invalid_fetch_session_epoch,
        session_id,
        [],
    )
    _, _, topics = newer.finish(read(newer, high_watermark=20), 0)
    assert answered(topics) == [("orders", 0)]


# --- the cache and eviction --------------------------------------------------------------


def test_a_full_cache_gives_session_id_zero_while_no_session_is_evictable():
    cache = FetchSessionCache(2, EVICTION_MS)
    new_session(cache, {"a": [(0, 0)]}, now_ms=0)
    new_session(cache, {"b": [(0, 0)]}, now_ms=10)
    assert new_session(cache, {"c": [(0, 0), (1, 0), (2, 0)]}, now_ms=EVICTION_MS) == 0
    assert (len(cache), cache.evictions_total) == (2, 0)


def test_the_least_recently_used_session_is_evicted_once_unused_longer_than_the_minimum():
    cache = FetchSessionCache(2, EVICTION_MS)
    first = new_session(cache, {"a": [(0, 0)]}, now_ms=0)
    second = new_session(cache, {"b": [(0, 0)]}, now_ms=10)
    incremental(cache, first, 1, now_ms=500)  # first is used again: second is now the LRU

    third = new_session(cache, {"c": [(0, 0)]}, now_ms=10 + EVICTION_MS + 1)

    assert third != INVALID_SESSION_ID
    assert cache.get(second) is None and cache.get(first) is not None
    assert cache.evictions_total == 1
    assert incremental(cache, second, 1).error_code == ErrorCode.fetch_session_id_not_found


def test_a_follower_session_evicts_a_recent_consumer_session_but_not_the_other_way_round():
    cache = FetchSessionCache(1, EVICTION_MS)
    consumer = new_session(cache, {"a": [(0, 0), (1, 0)]}, now_ms=0)

    follower = new_session(cache, {"a": [(0, 0)]}, now_ms=1, privileged=True)

    assert follower != INVALID_SESSION_ID and cache.get(consumer) is None
    session = cache.get(follower)
    assert session is not None and session.privileged
    # A consumer cannot take a follower's slot, even with more partitions and even once
    # the follower's session has settled.
    incremental(cache, follower, 1, now_ms=EVICTION_MS + 10)
    assert new_session(cache, {"a": [(0, 0), (1, 0), (2, 0)]}, now_ms=EVICTION_MS + 20) == 0
    assert cache.evictions_total == 1


def test_a_larger_session_evicts_a_smaller_settled_one_but_not_an_equal_or_larger_one():
    cache = FetchSessionCache(1, EVICTION_MS)
    small = new_session(cache, {"a": [(0, 0), (1, 0)]}, now_ms=0)
    # Settled: it was last used more than EVICTION_MS after its creation.
    incremental(cache, small, 1, now_ms=EVICTION_MS + 1)
    later = EVICTION_MS + 2

    assert new_session(cache, {"b": [(0, 0), (1, 0)]}, now_ms=later) == 0  # same size
    larger = new_session(cache, {"b": [(0, 0), (1, 0), (2, 0)]}, now_ms=later)

    assert larger != INVALID_SESSION_ID and cache.get(small) is None
    assert cache.evictions_total == 1


def test_a_session_is_judged_settled_at_its_last_use_as_kafka_does():
    cache = FetchSessionCache(1, EVICTION_MS)
    new_session(cache, {"a": [(0, 0)]}, now_ms=0)
    # Created long enough ago, but last used too soon after creation to count as settled,
    # and not unused for long enough to be stale: nothing can take its slot.
    incremental(cache, next(iter(cache.sessions)), 1, now_ms=100)
    assert new_session(cache, {"b": [(0, 0), (1, 0)]}, now_ms=EVICTION_MS + 50) == 0


def test_zero_slots_turn_sessions_off():
    cache = FetchSessionCache(0, EVICTION_MS)
    assert new_session(cache, {"a": [(0, 0)]}) == INVALID_SESSION_ID
    assert len(cache) == 0 and cache.created_total == 0


def test_session_ids_are_positive_and_unique():
    cache = FetchSessionCache(500, EVICTION_MS, rng=random.Random(7))
    ids = {new_session(cache, {"a": [(0, 0)]}) for _ in range(500)}
    assert len(ids) == 500 and min(ids) > 0 and max(ids) < 2**31 - 1


# --- a session against a model -----------------------------------------------------------

_operations = st.lists(
    st.tuples(
        st.lists(st.tuples(st.sampled_from("ab"), st.integers(0, 3), st.integers(0, 100))),
        st.lists(st.tuples(st.sampled_from("ab"), st.integers(0, 3))),
    ),
    max_size=12,
)


@settings(max_examples=200, deadline=None)
@given(initial=st.integers(1, 4), operations=_operations)
def test_a_session_holds_what_its_requests_added_minus_what_they_forgot(initial, operations):
    cache = FetchSessionCache(10, EVICTION_MS)
    model = {("a", index): 0 for index in range(initial)}
    session_id = new_session(cache, {"a": [(index, 0) for index in range(initial)]})
    epoch = 1
    for added, forgotten in operations:
        topics: Partitions = {}
        for topic, index, offset in added:
            topics.setdefault(topic, []).append((index, offset))
            model[(topic, index)] = offset
        forget: dict[str | uuid.UUID, list[int]] = {}
        for topic, index in forgotten:
            forget.setdefault(topic, []).append(index)
            model.pop((topic, index), None)
        context = incremental(cache, session_id, epoch, topics=topics, forgotten=forget)
        if not model:
            # Emptied: closed, and the request itself answered without a session.
            assert isinstance(context, SessionlessContext) and len(cache) == 0
            return
        assert {(t, p): offset for t, p, offset in fetched(context)} == model
        epoch = next_epoch(epoch)
        assert cache.get(session_id).epoch == epoch
        assert cache.partitions_total == len(model)


# --- quota throttling ----------------------------------------------------------------------


def test_a_throttled_full_fetch_creates_no_session():
    # Matches Kafka's getThrottledResponse: a throttled client sees nothing of this fetch,
    # so no session may be made of it (it would hold a slot until evicted).
    cache = FetchSessionCache(10, EVICTION_MS)
    context = cache.new_context(
        fetch_request(epoch=INITIAL_EPOCH, topics={"t": [(0, 0)]}), 12, False, 0
    )
    assert context.throttled() == (ErrorCode.none, INVALID_SESSION_ID)
    assert len(cache) == 0


def test_a_throttled_incremental_fetch_keeps_its_session_and_the_unsent_changes():
    cache = FetchSessionCache(10, EVICTION_MS)
    session_id = new_session(cache, {"t": [(0, 0), (1, 0)]})
    context = incremental(cache, session_id, 1)
    assert context.throttled() == (ErrorCode.none, session_id)
    # The change the throttled response did not carry is still news for the next fetch.
    context = incremental(cache, session_id, 2)
    _, _, topics = context.finish(read(context, changed={("t", 1): {"high_watermark": 12}}), 0)
    assert answered(topics) == [("t", 1)]


# --- a follower's session reads what changed (FULL_PASS_MS) --------------------------------


def quiet(context: FetchContext, *keys: tuple[str, int]) -> list[TopicResult]:
    """``read(context)`` with ``keys`` answered as the reader answers a partition an
    in-sync follower has all of and whose answer carries nothing new."""
    topics = read(context)
    for topic in topics:
        topic.partitions = [
            UNCHANGED_PARTITION if (topic.name, p.partition_index) in keys else p
            for p in topic.partitions
        ]
    return topics


def follower_session(waiters: Waiters, topics: Partitions) -> tuple[FetchSessionCache, int]:
    cache = FetchSessionCache(10, EVICTION_MS)
    cache.watch_partitions(waiters)
    return cache, new_session(cache, topics, privileged=True)


def step(
    cache: FetchSessionCache,
    session_id: int,
    now_ms: int,
    *quiet_keys: tuple[str, int],
    topics: Partitions | None = None,
) -> tuple[list[tuple[str | uuid.UUID, int, int]], FetchContext]:
    """One incremental fetch of a follower: what it read; ``quiet_keys`` found quiet."""
    session = cache.get(session_id)
    assert session is not None
    request = fetch_request(session_id=session_id, epoch=session.epoch, topics=topics)
    context = cache.new_context(request, 12, True, now_ms)
    read_now = fetched(context)
    results = quiet(context, *quiet_keys)
    context.after_read(results)
    context.finish(results, now_ms)
    return read_now, context


def test_a_follower_session_reads_only_partitions_notified_or_named_since_found_quiet():
    waiters = Waiters()
    everything = {"t": [(0, 5), (1, 5), (2, 5), (3, 5)]}
    cache, session_id = follower_session(waiters, everything)
    all_keys = [("t", 0), ("t", 1), ("t", 2), ("t", 3)]

    read_now, _ = step(cache, session_id, 1, *all_keys)
    assert read_now == [("t", 0, 5), ("t", 1, 5), ("t", 2, 5), ("t", 3, 5)]
    read_now, context = step(cache, session_id, 2)
    assert read_now == [] and context.skipping  # every partition quiet: none read

    waiters.notify_appended(("t", 2))  # records
    waiters.notify_committed(("t", 0))  # a high watermark move
    waiters.notify(("t", 3))  # leadership
    waiters.notify_appended(("other", 0))  # not in the session
    read_now, _ = step(cache, session_id, 3, ("t", 3))
    assert read_now == [("t", 0, 5), ("t", 2, 5), ("t", 3, 5)]
    # Read and not found quiet: read again; found quiet: not.
    read_now, _ = step(cache, session_id, 4, *all_keys)
    assert read_now == [("t", 0, 5), ("t", 2, 5)]
    # A partition the follower names (it moved on) is read.
    read_now, _ = step(cache, session_id, 5, *all_keys, topics={"t": [(1, 9)]})
    assert read_now == [("t", 1, 9)]
    assert step(cache, session_id, 6)[0] == []
    # Every FULL_PASS_MS the whole session is read, quiet or not, in the session's order.
    read_now, _ = step(cache, session_id, 1 + FULL_PASS_MS, *all_keys)
    assert read_now == [("t", 0, 5), ("t", 1, 9), ("t", 2, 5), ("t", 3, 5)]
    assert step(cache, session_id, 2 + FULL_PASS_MS)[0] == []


def test_news_of_a_skipped_partition_wakes_the_parked_fetch_but_a_high_watermark_does_not():
    loop = asyncio.new_event_loop()
    try:
        waiters = Waiters()
        cache, session_id = follower_session(waiters, {"t": [(0, 5), (1, 5)]})
        step(cache, session_id, 1, ("t", 0), ("t", 1))
        _, context = step(cache, session_id, 2)
        parked = loop.create_future()
        context.park(parked)

        waiters.notify_committed(("t", 0))
        assert not parked.done() and not context.skipped_changed
        waiters.notify_appended(("t", 1))
        assert parked.done() and context.skipped_changed
        # The next fetch reads both: the high watermark to send, the records to copy.
        read_now, context = step(cache, session_id, 3)
        assert read_now == [("t", 0, 5), ("t", 1, 5)] and not context.skipped_changed
    finally:
        loop.close()


def test_a_follower_session_stops_listening_to_what_it_forgets_and_when_it_closes():
    waiters = Waiters()
    cache, session_id = follower_session(waiters, {"t": [(0, 5), (1, 5)]})
    assert set(waiters._listeners) == {("t", 0), ("t", 1)}
    step(cache, session_id, 1, topics={"u": [(0, 0)]})
    assert set(waiters._listeners) == {("t", 0), ("t", 1), ("u", 0)}
    session = cache.get(session_id)
    assert session is not None
    context = cache.new_context(
        fetch_request(session_id=session_id, epoch=session.epoch, forgotten={"t": [0]}),
        12,
        True,
        2,
    )
    context.finish(read(context), 2)
    assert set(waiters._listeners) == {("t", 1), ("u", 0)}
    cache.new_context(fetch_request(session_id=session_id, epoch=FINAL_EPOCH), 12, True, 3)
    assert cache.get(session_id) is None and waiters._listeners == {}


def test_consumer_and_topic_id_sessions_read_the_whole_session_every_fetch():
    waiters = Waiters()
    cache = FetchSessionCache(10, EVICTION_MS)
    cache.watch_partitions(waiters)
    consumer = new_session(cache, {"t": [(0, 5), (1, 5)]})
    by_id = new_session(cache, {ORDERS: [(0, 5)]}, version=13, privileged=True)
    assert waiters._listeners == {}
    for now_ms in (1, 2):
        context = incremental(cache, consumer, now_ms, now_ms=now_ms)
        assert fetched(context) == [("t", 0, 5), ("t", 1, 5)]
        context.after_read(quiet(context, ("t", 0), ("t", 1)))
        context.finish(quiet(context, ("t", 0), ("t", 1)), now_ms)
        context = incremental(cache, by_id, now_ms, version=13, now_ms=now_ms)
        assert fetched(context) == [(ORDERS, 0, 5)]
        context.finish(read(context), now_ms)


def test_a_partial_read_keeps_the_session_order_records_moving_a_partition_back():
    waiters = Waiters()
    topics: Partitions = {"a": [(0, 1), (1, 1)], "b": [(0, 1)], "c": [(0, 1)]}
    cache, session_id = follower_session(waiters, topics)
    step(cache, session_id, 1, ("a", 0), ("a", 1), ("b", 0), ("c", 0))
    for key in (("b", 0), ("a", 1), ("a", 0)):
        waiters.notify_appended(key)
    session = cache.get(session_id)
    assert session is not None
    context = cache.new_context(
        fetch_request(session_id=session_id, epoch=session.epoch), 12, True, 2
    )
    assert fetched(context) == [("a", 0, 1), ("a", 1, 1), ("b", 0, 1)]
    results = read(context, changed={("a", 0): {"records": b"x"}})
    context.after_read(results)
    context.finish(results, 2)
    # a-0 returned records: it goes behind the others, in a partial read too (c-0, quiet
    # all along, is not read).
    read_now, context = step(cache, session_id, 3)
    assert context.skipping
    assert read_now == [("a", 1, 1), ("b", 0, 1), ("a", 0, 1)]
