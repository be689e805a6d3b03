"""A broker's event loop never waits on the file system to create a partition: the log
manager's threads make the directory and first files (a mkdir and three creations, each
waiting on the journal, for seconds under heavy disk I/O: the fuzzer saw the broker
answer nobody for 5 s), the reconcile holds the partition back meanwhile and creates it
when told the files are there; a topic deleted meanwhile leaves nothing behind."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from gregor_broker.cluster.metadata_cache import BrokerInfo, MetadataCache
from gregor_broker.cluster.models import PartitionState, TopicAssignment
from gregor_broker.log import LogConfig, LogManager
from gregor_broker.protocol.record_batch import scan_batches
from gregor_broker.protocol.records import Record, make_batch
from gregor_broker.replication.replica_manager import ReplicaManager

BROKER_ID = 1
TOPIC = "fresh"
PARTITIONS = 12


def _cluster(tmp_path: Path) -> tuple[MetadataCache, LogManager, ReplicaManager]:
    metadata = MetadataCache()
    metadata.set_brokers({BROKER_ID: BrokerInfo(BROKER_ID, "127.0.0.1", 9092, None)})
    logs = LogManager([tmp_path / "a", tmp_path / "b"], default_config=LogConfig())
    replicas = ReplicaManager(BROKER_ID, logs, metadata, lambda _overrides: LogConfig())
    return metadata, logs, replicas


def _create_led_topic(metadata: MetadataCache) -> None:
    metadata.set_topic(
        TOPIC, TopicAssignment.of({p: [BROKER_ID] for p in range(PARTITIONS)}, "id-1")
    )
    state = PartitionState(controller_epoch=1, leader=BROKER_ID, leader_epoch=3, isr=(1,))
    for index in range(PARTITIONS):
        metadata.set_partition_state(TOPIC, index, state, version=0)


async def _until(condition, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.01)


def test_new_partitions_are_created_once_their_files_are_made(tmp_path, slow_file_system):
    async def scenario() -> None:
        metadata, logs, replicas = _cluster(tmp_path)
        _create_led_topic(metadata)
        started = time.monotonic()
        pending = metadata.take_changed_topics()
        while pending:  # as the sliced reconcile calls it
            pending = replicas.reconcile(pending, max_changes=4)
        assert time.monotonic() - started < 1  # did not wait for the gate
        assert replicas.partitions == {}  # held back
        slow_file_system.set()
        await _until(lambda: len(replicas.partitions) == PARTITIONS)  # told, on the loop
        for index in range(PARTITIONS):
            partition = replicas.partitions[(TOPIC, index)]
            assert partition.leader_epoch == 3 and partition.log.log_end_offset == 0
            buffer = bytearray(make_batch([Record(0, 0, None, b"v")]))
            partition.log.append(buffer, scan_batches(buffer), leader_epoch=3)
            assert partition.log.log_end_offset == 1
        # Spread over both log dirs while they were made at the same time.
        assert sorted(len(list(d.iterdir())) for d in (tmp_path / "a", tmp_path / "b")) == [
            PARTITIONS // 2,
            PARTITIONS // 2,
        ]
        logs.close()

    asyncio.run(scenario())


def test_a_topic_deleted_while_its_files_are_made_leaves_nothing(tmp_path, slow_file_system):
    async def scenario() -> None:
        metadata, logs, replicas = _cluster(tmp_path)
        _create_led_topic(metadata)
        replicas.reconcile(metadata.take_changed_topics())
        metadata.set_topic(TOPIC, None)
        replicas.reconcile(metadata.take_changed_topics())
        assert logs.preparing() == []
        slow_file_system.set()
        await _until(lambda: not any(logs.removing((TOPIC, i)) for i in range(PARTITIONS)))
        logs.close()
        left = [p for d in (tmp_path / "a", tmp_path / "b") for p in d.iterdir() if p.is_dir()]
        assert left == []
        assert replicas.partitions == {}

    asyncio.run(scenario())


def test_create_topics_answers_once_this_broker_leads_what_it_is_named_leader_of(
    tmp_path, slow_file_system
):
    """Kafka's controller sends a broker LeaderAndIsr before the UpdateMetadata naming it
    leader, so a CreateTopics answered by the leader can be followed by a produce at
    once. Here the metadata names the leader while its files are still being made: the
    wait for leaders goes on until the replica manager leads the partitions (CI saw a
    produce right after CreateTopics refused with NOT_LEADER_OR_FOLLOWER)."""
    from gregor_broker.config import BrokerConfig
    from gregor_broker.server.topic_admin import TopicAdmin

    async def scenario() -> None:
        metadata, logs, replicas = _cluster(tmp_path)
        admin = TopicAdmin(
            BrokerConfig(broker_id=BROKER_ID, zookeeper_connect="zk:2181"),
            metadata,
            None,  # type: ignore[arg-type]  # no ZooKeeper writes here
            replicas.leads_as_assigned,
        )
        _create_led_topic(metadata)
        waiting = asyncio.ensure_future(admin.wait_for_leaders([TOPIC], 10))
        pending = metadata.take_changed_topics()
        while pending:
            pending = replicas.reconcile(pending, max_changes=4)
        await asyncio.sleep(0.2)
        assert metadata.topic_has_leaders(TOPIC)  # named leader in the metadata ...
        assert not waiting.done()  # ... but not leading yet: the files are being made
        slow_file_system.set()
        assert await asyncio.wait_for(waiting, 10) is True
        assert all(partition.is_leader(BROKER_ID) for partition in replicas.partitions.values())
        assert len(replicas.partitions) == PARTITIONS
        logs.close()

    asyncio.run(scenario())
