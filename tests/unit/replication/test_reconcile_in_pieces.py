"""``ReplicaManager.reconcile`` capped at a few changes per call, as the sliced reconcile
calls it: every partition ends up created and led, a call resumes where the last one
stopped instead of applying every partition before it again, and a change to the topic
between two calls makes the next one start over, so that no change is skipped."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gregor_broker.cluster.metadata_cache import BrokerInfo, MetadataCache
from gregor_broker.cluster.models import PartitionState, TopicAssignment
from gregor_broker.log import LogConfig, LogManager
from gregor_broker.protocol.record_batch import scan_batches
from gregor_broker.protocol.records import Record, make_batch
from gregor_broker.replication.partition import Partition
from gregor_broker.replication.replica_manager import ReplicaManager

BROKER_ID = 1
TOPIC = "wide"
PARTITIONS = 40


def _log_config_for(overrides: dict[str, str]) -> LogConfig:
    """A topic's log config: the defaults, or its ``segment.ms`` (the one override used
    here)."""
    segment_ms = overrides.get("segment.ms")
    return LogConfig() if segment_ms is None else LogConfig(segment_ms=int(segment_ms))


@pytest.fixture
def replicas(tmp_path: Path) -> Iterator[ReplicaManager]:
    metadata = MetadataCache()
    metadata.set_brokers({BROKER_ID: BrokerInfo(BROKER_ID, "127.0.0.1", 9092, None)})
    logs = LogManager([tmp_path / "logs"], default_config=LogConfig())
    yield ReplicaManager(BROKER_ID, logs, metadata, _log_config_for)
    logs.close()


def _led(metadata: MetadataCache, index: int, epoch: int, version: int) -> None:
    state = PartitionState(controller_epoch=1, leader=BROKER_ID, leader_epoch=epoch, isr=(1,))
    metadata.set_partition_state(TOPIC, index, state, version=version)


def _create_led_topic(metadata: MetadataCache) -> None:
    metadata.set_topic(
        TOPIC, TopicAssignment.of({p: [BROKER_ID] for p in range(PARTITIONS)}, "id-wide")
    )
    for index in range(PARTITIONS):
        _led(metadata, index, epoch=0, version=0)


def _count_applied(replicas: ReplicaManager) -> list[int]:
    """Record the index of every partition ``reconcile`` applies a state to."""
    applied: list[int] = []
    apply_state = replicas._apply_state

    def counting(partition: Partition, info):  # type: ignore[no-untyped-def]
        applied.append(partition.index)
        return apply_state(partition, info)

    replicas._apply_state = counting  # type: ignore[method-assign]
    return applied


def _reconcile_in_pieces(replicas: ReplicaManager, max_changes: int) -> int:
    """Call ``reconcile`` as the sliced reconcile does until nothing is left; the calls."""
    pending = replicas.metadata.take_changed_topics()
    calls = 0
    while pending:
        calls += 1
        assert calls < 10 * PARTITIONS, "reconcile makes no progress"
        pending = replicas.reconcile(pending, max_changes=max_changes)
    return calls


def test_each_capped_call_resumes_where_the_last_one_stopped(replicas) -> None:
    _create_led_topic(replicas.metadata)
    applied = _count_applied(replicas)
    calls = _reconcile_in_pieces(replicas, max_changes=4)
    assert sorted(replicas._indexes_of[TOPIC]) == list(range(PARTITIONS))
    assert all(replicas.partitions[(TOPIC, i)].leader == BROKER_ID for i in range(PARTITIONS))
    # Two changes a partition (its log, its leadership): 20 calls. Walking every created
    # partition again in each call applied 420 states.
    assert calls == PARTITIONS * 2 // 4
    assert sorted(applied) == list(range(PARTITIONS)), applied


def test_a_change_between_two_calls_makes_the_next_one_start_over(replicas) -> None:
    metadata = replicas.metadata
    _create_led_topic(metadata)
    pending = replicas.reconcile(metadata.take_changed_topics(), max_changes=4)
    assert pending == {TOPIC}
    assert replicas.partitions[(TOPIC, 0)].leader_epoch == 0
    # A new leader epoch for a partition an earlier call already applied.
    _led(metadata, 0, epoch=1, version=1)
    pending |= metadata.take_changed_topics()
    while pending:
        pending = replicas.reconcile(pending, max_changes=4)
    assert replicas.partitions[(TOPIC, 0)].leader_epoch == 1
    assert len(replicas._indexes_of[TOPIC]) == PARTITIONS


def test_a_new_topic_config_between_two_calls_reaches_every_partition(replicas) -> None:
    metadata = replicas.metadata
    _create_led_topic(metadata)
    pending = replicas.reconcile(metadata.take_changed_topics(), max_changes=4)
    metadata.set_topic_config(TOPIC, {"segment.ms": "60000"})
    pending |= metadata.take_changed_topics()
    while pending:
        pending = replicas.reconcile(pending, max_changes=4)
    configs = {replicas.partitions[(TOPIC, i)].log.config for i in range(PARTITIONS)}
    assert {config.segment_ms for config in configs} == {60000}


def test_a_recreated_topic_is_walked_from_its_first_partition(replicas) -> None:
    metadata = replicas.metadata
    _create_led_topic(metadata)
    generation = metadata.topics[TOPIC].generation
    pending = replicas.reconcile(metadata.take_changed_topics(), max_changes=4)
    assert pending == {TOPIC}
    # Deleted and created again under a new id, led at a new epoch: as many changes as
    # the first one had, so only its identity tells the two apart.
    metadata.set_topic(TOPIC, None)
    metadata.set_topic(
        TOPIC, TopicAssignment.of({p: [BROKER_ID] for p in range(PARTITIONS)}, "id-2")
    )
    for index in range(PARTITIONS):
        _led(metadata, index, epoch=5, version=0)
    assert metadata.topics[TOPIC].generation == generation
    pending |= metadata.take_changed_topics()
    while pending:
        pending = replicas.reconcile(pending, max_changes=4)
    epochs = {replicas.partitions[(TOPIC, i)].leader_epoch for i in range(PARTITIONS)}
    assert epochs == {5}


def test_a_topic_created_again_before_its_old_logs_are_gone_waits_without_blocking(
    replicas, monkeypatch
) -> None:
    # Under heavy disk I/O the rename of a deleted partition's directory takes seconds:
    # the remover thread does it, and a reconcile that wants the partition again holds
    # it back instead of waiting on the event loop (the fuzzer's 5 s stalls).
    from gregor_broker.log import log_manager

    gate = threading.Event()
    real = log_manager.remove_partition_files

    def slow(*args):  # type: ignore[no-untyped-def]
        assert gate.wait(30)
        real(*args)

    monkeypatch.setattr(log_manager, "remove_partition_files", slow)
    metadata = replicas.metadata
    _create_led_topic(metadata)
    replicas.reconcile(metadata.take_changed_topics())
    for index in range(PARTITIONS):
        buffer = bytearray(make_batch([Record(0, 0, None, b"v")]))
        replicas.partitions[(TOPIC, index)].log.append(buffer, scan_batches(buffer), leader_epoch=0)
    metadata.set_topic(TOPIC, None)
    replicas.reconcile(metadata.take_changed_topics())
    metadata.set_topic(
        TOPIC, TopicAssignment.of({p: [BROKER_ID] for p in range(PARTITIONS)}, "id-2")
    )
    for index in range(PARTITIONS):
        _led(metadata, index, epoch=5, version=0)
    started = time.monotonic()
    assert replicas.reconcile(metadata.take_changed_topics()) == set()
    assert time.monotonic() - started < 1
    assert not any(key[0] == TOPIC for key in replicas.partitions)  # held back
    gate.set()
    replicas.logs.wait_for_removals()
    for index in range(PARTITIONS):  # the log manager's listener, on the event loop
        replicas.create_held((TOPIC, index))
    logs = [replicas.partitions[(TOPIC, i)].log for i in range(PARTITIONS)]
    assert {log.log_end_offset for log in logs} == {0}  # new, empty logs
    assert {replicas.partitions[(TOPIC, i)].leader_epoch for i in range(PARTITIONS)} == {5}
