"""A replica reassigned away and straight back copies the log again from offset 0.

Issue 9 (chaos seed 20261123): partition chaos-0 moved from [3, 1, 2] to [2, 1] and at
once back to three replicas. Broker 3 deleted its log; a fetch it had sent for the deleted
log (at offset 816) was still parked at the leader. The leader answered it once the
replica was assigned again, took its offset for the new replica's progress (3 rejoined
the ISR empty) and broker 3 appended the answer to its new, empty log: the log began at
816. Elected later with ISR [3], it had lost offsets 0-815, acknowledged writes.

Fenced three ways, as in Kafka: the controller bumps the leader epoch when a
reassignment starts and when it completes (a fetch from before carries the old epoch and
is refused, and the leader starts its followers' state afresh), the leader forgets a
replica no longer assigned, and a follower applies an answer only if its request's fetch
offset is still its log end.

The race needs a follower fetch parked at the leader across the move, so the producer
here is slow (a quiet partition) and followers park their fetches for up to 2 s.
"""

from __future__ import annotations

import confluent_kafka.admin

from gregor_broker.cluster.admin import ZkAdmin
from gregor_broker.devtools.local_cluster import BrokerProcess, zookeeper_client

from .broker_helpers import produce_values, wait_for
from .durability import NumberedProducer, lost_messages

TOPIC = "away-and-back"
CYCLES = 3
SEED_MESSAGES = 2000


def _log_bytes(broker: BrokerProcess) -> bytes:
    """The partition's segments, in offset order: a follower's log is a byte copy of its
    leader's batches."""
    directory = broker.log_dir / f"{TOPIC}-0"
    return b"".join(path.read_bytes() for path in sorted(directory.glob("*.log")))


def _first_offset(broker: BrokerProcess) -> int:
    """The base offset of the log's first batch (a new log's segment is named 0 whatever
    offset its first batch has)."""
    return int.from_bytes(_log_bytes(broker)[:8], "big", signed=True)


def test_a_replica_moved_away_and_straight_back_holds_the_whole_log(cluster_factory) -> None:
    cluster = cluster_factory(
        brokers=3,
        racks=None,
        **{
            "replica.fetch.wait.max.ms": "2000",
            "auto.leader.rebalance.enable": "false",
            "zookeeper.session.timeout.ms": "4000",
        },
    )
    bootstrap = cluster.bootstrap_servers
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    new_topic = confluent_kafka.admin.NewTopic(
        TOPIC, 1, replica_assignment=[[1, 2, 3]], config={"min.insync.replicas": "2"}
    )
    admin.create_topics([new_topic])[TOPIC].result(30)
    seeded = [f"seed-{n:06d}".encode() for n in range(SEED_MESSAGES)]
    offsets = produce_values(bootstrap, TOPIC, seeded)
    acknowledged = {value: (0, offset) for value, offset in zip(seeded, offsets, strict=True)}

    client = zookeeper_client(cluster.zookeeper_connect)
    zk = ZkAdmin(client)
    key = (TOPIC, 0)

    def moved(replicas: tuple[int, ...]) -> bool:
        pending = zk.get_reassignment()
        if pending is not None and key in pending.partitions:
            return False
        assignment = zk.get_topic(TOPIC)
        return assignment is not None and tuple(assignment.partitions[0]) == replicas

    def state() -> tuple[int, int, tuple[int, ...]]:
        found = zk.get_partition_state(TOPIC, 0)
        assert found is not None
        return found[0].leader, found[0].leader_epoch, tuple(found[0].isr)

    epochs: list[tuple[int, int]] = []  # leader epoch before and after each cycle
    try:
        with NumberedProducer(bootstrap, TOPIC, prefix="load", interval_s=0.5) as producer:
            for _ in range(CYCLES):
                assert wait_for(lambda: sorted(state()[2]) == [1, 2, 3], 60)
                epoch_before = state()[1]
                zk.merge_reassignment({key: (1, 2)})
                assert wait_for(lambda: moved((1, 2)), 60, interval=0.01)
                # Straight back, while broker 3's last fetch for its deleted log may
                # still be parked at the leader.
                zk.merge_reassignment({key: (1, 2, 3)})
                assert wait_for(lambda: moved((1, 2, 3)), 60, interval=0.01)
                epochs.append((epoch_before, state()[1]))
            assert wait_for(lambda: sorted(state()[2]) == [1, 2, 3], 60)
            assert producer.wait_for_progress(3, 30)
        acknowledged.update(producer.acknowledged)

        # Broker 3's log starts at 0 and, once caught up, is the leader's byte for byte.
        assert wait_for(lambda: len(_log_bytes(cluster.broker(3))) >= 8, 60)
        assert _first_offset(cluster.broker(3)) == 0
        leader = cluster.broker(state()[0])
        assert wait_for(lambda: _log_bytes(cluster.broker(3)) == _log_bytes(leader), 60)

        # The moved-back replica must be able to lead with every acknowledged record.
        for victim in (1, 2):
            cluster.broker(victim).kill()
            assert wait_for(lambda victim=victim: state()[0] not in (victim, -1), 60)
        assert wait_for(lambda: state()[0] == 3, 60), state()
    finally:
        client.stop()
    lost = lost_messages(acknowledged, cluster.broker(3).bootstrap, TOPIC)
    print(f"acked={len(acknowledged)} lost={len(lost)} failures={producer.failures}")
    assert lost == [], f"{len(lost)} acknowledged records lost, first {lost[:3]}"
    # Not vacuous: the seed and the writes during the moves were acknowledged.
    assert len(acknowledged) >= SEED_MESSAGES + 3
    # Each of the two reassignments of a cycle bumped the epoch when it started and when
    # it completed (Kafka's phases A and B).
    assert all(after >= before + 4 for before, after in epochs), epochs
