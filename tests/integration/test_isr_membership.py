"""A broker that is no longer a replica leaves the ISR at once, not after a lag timeout.

The partition's assignment and its leader/ISR state are separate znodes. At the end of
a reassignment a leader can see its new leadership before the assignment that drops a
replica, and the departing replica, still fetching for a moment, can be added back to
the ISR (CI caught this: acks=all produces then stalled for replica.lag.time.max.ms).
Here the ISR is given a broker outside the assignment directly, the state such a race
leaves behind; the leader must take it out and keep acknowledging acks=all writes.
"""

from __future__ import annotations

import time
from pathlib import Path

import confluent_kafka.admin

from gregor_broker.cluster.admin import ZkAdmin
from gregor_broker.cluster.models import PartitionState
from gregor_broker.devtools.local_cluster import zookeeper_client

from .broker_helpers import produce_values, wait_for


def test_a_broker_outside_the_assignment_is_dropped_from_the_isr(cluster_factory) -> None:
    cluster = cluster_factory(brokers=3, racks=None)
    bootstrap = cluster.bootstrap_servers
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    topic = confluent_kafka.admin.NewTopic(
        "members", 1, replica_assignment=[[1, 2]], config={"min.insync.replicas": "2"}
    )
    admin.create_topics([topic])["members"].result(30)
    client = zookeeper_client(cluster.zookeeper_connect)
    try:
        zk = ZkAdmin(client)
        assert wait_for(lambda: zk.get_partition_state("members", 0)[0].isr == (1, 2), 30)
        produce_values(bootstrap, "members", [b"before"])

        state, version = zk.get_partition_state("members", 0)
        stale = PartitionState(state.controller_epoch, state.leader, state.leader_epoch, (1, 2, 3))
        zk.set_partition_state("members", 0, stale, version)
        started = time.monotonic()
        # Broker 3 never fetches this partition: with it in the ISR the high watermark
        # could not move. The leader drops it well before replica.lag.time.max.ms (30 s).
        assert wait_for(lambda: zk.get_partition_state("members", 0)[0].isr == (1, 2), 10)
        dropped_after = time.monotonic() - started
        assert produce_values(bootstrap, "members", [b"after"]) == [1]
        print(f"broker 3 left the ISR {dropped_after:.2f} s after it was written in")
    finally:
        client.stop()


def _log_bytes(directory: Path) -> int:
    return sum(path.stat().st_size for path in directory.glob("*.log")) if directory.is_dir() else 0


def test_a_deregistered_broker_does_not_rejoin_the_isr(cluster_factory) -> None:
    """Kafka's leader takes only live brokers into the ISR (``isReplicaIsrEligible``; with
    ZooKeeper, ``hasAliveBroker``). A broker in controlled shutdown has deregistered and
    keeps fetching until it exits: taken back into the ISR by its leader, it would hold
    every acks=all write of the partition once it is gone, until the lag timeout."""
    cluster = cluster_factory(brokers=3, racks=None)
    bootstrap = cluster.bootstrap_servers
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    topic = confluent_kafka.admin.NewTopic(
        "leaving", 1, replica_assignment=[[1, 2, 3]], config={"min.insync.replicas": "2"}
    )
    admin.create_topics([topic])["leaving"].result(30)
    client = zookeeper_client(cluster.zookeeper_connect)
    try:
        zk = ZkAdmin(client)
        assert wait_for(lambda: zk.get_partition_state("leaving", 0)[0].isr == (1, 2, 3), 60)
        produce_values(bootstrap, "leaving", [b"before"])

        # What broker 3's controlled shutdown does first; the process keeps running.
        zk.deregister_broker(3)
        assert wait_for(lambda: zk.get_partition_state("leaving", 0)[0].isr == (1, 2), 30), (
            "the controller takes a deregistered broker out of the ISR"
        )
        replica_dir = cluster.broker(3).log_dir / "leaving-0"
        copied = _log_bytes(replica_dir)
        assert produce_values(bootstrap, "leaving", [b"x" * 1000] * 20)
        # Broker 3 still fetches and has caught up: without the liveness check its
        # leader takes it back on its next fetch.
        assert wait_for(lambda: _log_bytes(replica_dir) > copied + 20_000, 30), (
            "broker 3 stopped fetching: the test would prove nothing"
        )
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            isr = zk.get_partition_state("leaving", 0)[0].isr
            assert 3 not in isr, f"a deregistered broker rejoined the ISR: {isr}"
            time.sleep(0.2)
    finally:
        client.stop()
