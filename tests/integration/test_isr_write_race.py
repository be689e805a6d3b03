"""A leader's ISR change is conditional on the state it was computed from.

The leader decides an ISR expansion in the call that sees a follower catch up and writes
it on a task. Before this test, the task read the state's version only when it first
ran: if the controller's ISR shrink (a dead broker taken out) reached the leader in
between, the expansion, computed from the ISR before the shrink, was written conditional
on the version after it and put the dead broker back. In chaos seed 20261130 the broker
put back was then elected by a reassignment without having caught up, and acknowledged
writes were lost. Now the version is read with the ISR it conditions: the stale expansion
is refused and ZooKeeper keeps the controller's ISR.

Real ZooKeeper, a real replica manager and log; the controller's write is made here, as
the controller makes it (a conditional update of the state znode).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from gregor_broker.cluster.admin import ZkAdmin
from gregor_broker.cluster.metadata_cache import BrokerInfo, MetadataCache
from gregor_broker.cluster.models import PartitionState
from gregor_broker.devtools.local_cluster import zookeeper_client
from gregor_broker.log import LogConfig, LogManager
from gregor_broker.protocol.record_batch import scan_batches
from gregor_broker.protocol.records import Record, make_batch
from gregor_broker.replication.replica_manager import ReplicaManager

TOPIC = "race"
LEADER, DEAD, CATCHING_UP = 1, 2, 3


def test_an_expansion_decided_before_a_controller_shrink_does_not_undo_it(
    zk_connect: str, tmp_path: Path
) -> None:
    client = zookeeper_client(zk_connect)
    logs = LogManager([tmp_path / "logs"], default_config=LogConfig())
    try:
        admin = ZkAdmin(client)
        admin.ensure_paths()
        admin.create_topic(TOPIC, {0: [LEADER, DEAD, CATCHING_UP]}, {})
        topic = admin.get_topic(TOPIC)
        admin.create_partition_state(TOPIC, 0, PartitionState(1, LEADER, 3, (LEADER, DEAD)))
        metadata = MetadataCache()
        metadata.set_brokers(
            {b: BrokerInfo(b, "127.0.0.1", 9000 + b, None) for b in (LEADER, DEAD, CATCHING_UP)}
        )
        metadata.set_topic(TOPIC, topic)
        replicas = ReplicaManager(LEADER, logs, metadata, lambda _: LogConfig(), zk_admin=admin)
        asyncio.run(_race(admin, metadata, replicas))
    finally:
        logs.close()
        client.stop()
        client.close()


async def _race(admin: ZkAdmin, metadata: MetadataCache, replicas: ReplicaManager) -> None:
    def apply(state: PartitionState, version: int) -> None:
        """What the metadata watcher does with a state znode it sees change."""
        metadata.set_partition_state(TOPIC, 0, state, version)
        pending = metadata.take_changed_topics()
        while pending:
            pending = replicas.reconcile(pending)

    led, version = admin.get_partition_state(TOPIC, 0)  # type: ignore[misc]
    apply(led, version)
    for _ in range(500):  # the log manager's threads make a new partition's files
        if (TOPIC, 0) in replicas.partitions:
            break
        await asyncio.sleep(0.01)
        apply(led, version)
    partition = replicas.partitions[(TOPIC, 0)]
    assert partition.is_leader(LEADER) and partition.isr == (LEADER, DEAD)
    buffer = bytearray(make_batch([Record(i, 0, None, b"v") for i in range(5)]))
    partition.log.append(buffer, scan_batches(buffer), leader_epoch=partition.leader_epoch)

    # The follower catches up: the leader decides to add it (the write goes on a task).
    replicas.record_follower_fetch(partition, CATCHING_UP, partition.log.log_end_offset)
    assert partition.isr_change_in_flight
    # Before that task runs, the controller takes the dead broker out, and the leader's
    # metadata applies it.
    shrunk = PartitionState(2, LEADER, led.leader_epoch, (LEADER,))
    shrunk_version = admin.set_partition_state(TOPIC, 0, shrunk, version)
    apply(shrunk, shrunk_version)
    assert partition.isr == (LEADER,)

    for _ in range(500):
        if not partition.isr_change_in_flight:
            break
        await asyncio.sleep(0.01)
    assert not partition.isr_change_in_flight
    stored, stored_version = admin.get_partition_state(TOPIC, 0)  # type: ignore[misc]
    assert DEAD not in stored.isr, f"the dead broker was written back: {stored} v{stored_version}"
    assert stored.isr == (LEADER,) and stored_version == shrunk_version
    assert partition.isr == (LEADER,)

    # The follower's next fetch adds it to the ISR as it is now.
    replicas.record_follower_fetch(partition, CATCHING_UP, partition.log.log_end_offset)
    for _ in range(500):
        if partition.isr == (LEADER, CATCHING_UP):
            break
        await asyncio.sleep(0.01)
    stored, _ = admin.get_partition_state(TOPIC, 0)  # type: ignore[misc]
    assert stored.isr == (LEADER, CATCHING_UP)
