"""Reassignment and preferred leaders, driven the way operators drive them: the CLI.

A partition moves from brokers [1, 2, 3] to [2, 3, 4] while a producer writes to it with
acks=all; no acknowledged write is lost, the producer never stops making progress, the
replication throttle limits the copy rate, and ``gregor reassign verify`` reports the
move complete and removes the throttles.
"""

from __future__ import annotations

import json
import time

import confluent_kafka
import confluent_kafka.admin

from gregor_broker.cli.main import main as gregor
from gregor_broker.cluster.admin import ZkAdmin
from gregor_broker.devtools.local_cluster import zookeeper_client

from .broker_helpers import wait_for
from .durability import NumberedProducer, lost_messages


def _zk(cluster) -> str:
    return cluster.zookeeper_connect


def _describe(bootstrap: str, topic: str) -> dict[int, tuple[int, list[int], list[int]]]:
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    metadata = admin.list_topics(topic, timeout=10)
    return {
        p.id: (p.leader, list(p.replicas), list(p.isrs))
        for p in metadata.topics[topic].partitions.values()
    }


def test_a_partition_moves_under_load_throttled_without_loss(cluster_factory, tmp_path, capsys):
    cluster = cluster_factory(brokers=4, racks=None)
    bootstrap = cluster.bootstrap_servers
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    topic = confluent_kafka.admin.NewTopic(
        "moving", 1, replica_assignment=[[1, 2, 3]], config={"min.insync.replicas": "2"}
    )
    admin.create_topics([topic])["moving"].result(30)
    # 6 MB already in the partition, so the new replica has something to copy.
    seed = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for _ in range(6000):
        seed.produce("moving", b"s" * 1000)
    assert seed.flush(60) == 0

    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps(
            {
                "version": 1,
                "partitions": [{"topic": "moving", "partition": 0, "replicas": [2, 3, 4]}],
            }
        )
    )
    throttle = 1_000_000  # bytes/s: the 6 MB copy must take about 6 s, not a blink
    with NumberedProducer(bootstrap, "moving", prefix="load", pause_every=1) as producer:
        started = time.monotonic()
        zk = ["--zookeeper", _zk(cluster)]
        execute = ["reassign", "execute", *zk, "--plan", str(plan), "--throttle", str(throttle)]
        assert gregor([*execute, "--wait", "--timeout", "120"]) == 0
        elapsed = time.monotonic() - started
        assert wait_for(lambda: _describe(bootstrap, "moving")[0][1] == [2, 3, 4], 30)
        assert producer.wait_for_progress(100, 30)

    # The throttle held the copy to about 1 MB/s: 6 MB, less one second of saved-up
    # budget, takes at least 5 s.
    assert elapsed >= 5.0, f"6 MB copied in {elapsed:.1f} s despite a 1 MB/s throttle"
    capsys.readouterr()
    assert gregor(["reassign", "verify", "--zookeeper", _zk(cluster), "--plan", str(plan)]) == 0
    out = capsys.readouterr().out
    assert "is complete" in out and "Throttles removed" in out
    client = zookeeper_client(cluster.zookeeper_connect)
    try:
        zk_admin = ZkAdmin(client)
        config = zk_admin.get_topic_config("moving")
        assert "leader.replication.throttled.replicas" not in config
        assert "follower.replication.throttled.rate" not in zk_admin.get_entity_config("brokers/4")
        assignment = zk_admin.get_topic("moving")
        assert tuple(assignment.partitions[0]) == (2, 3, 4)
        assert not assignment.adding_replicas and not assignment.removing_replicas
    finally:
        client.stop()
    # Broker 1 no longer holds the partition's log.
    assert wait_for(lambda: not (cluster.broker(1).log_dir / "moving-0").exists(), 30)
    # No acknowledged write lost, and the producer never stalled for long.
    lost = lost_messages(producer.acknowledged, bootstrap, "moving")
    print(
        f"moved in {elapsed:.1f} s; acked={producer.acked()} lost={len(lost)} "
        f"longest ack gap={producer.longest_gap_s:.2f} s"
    )
    assert lost == []
    assert producer.longest_gap_s < 10, "the partition was unavailable during the move"


def test_preferred_leader_election_returns_leadership(cluster_factory, capsys) -> None:
    cluster = cluster_factory(
        brokers=3,
        racks=None,
        **{"zookeeper.session.timeout.ms": "4000", "auto.leader.rebalance.enable": "false"},
    )
    bootstrap = cluster.bootstrap_servers
    # (cluster_factory returns once every broker knows the others: the explicit
    # assignment below is checked against the brokers a broker knows.)
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    topic = confluent_kafka.admin.NewTopic("preferred", 1, replica_assignment=[[1, 2, 3]])
    admin.create_topics([topic])["preferred"].result(30)
    assert wait_for(lambda: _describe(bootstrap, "preferred")[0][0] == 1, 30)
    cluster.broker(1).stop()  # controlled shutdown hands leadership over
    others = ",".join(b.bootstrap for b in cluster.brokers if b.broker_id != 1)
    assert wait_for(lambda: _describe(others, "preferred")[0][0] in (2, 3), 30)
    cluster.broker(1).start()
    cluster.broker(1).wait_registered(30)
    assert wait_for(lambda: sorted(_describe(bootstrap, "preferred")[0][2]) == [1, 2, 3], 30)
    assert _describe(bootstrap, "preferred")[0][0] != 1
    code = gregor(
        [
            "leaders",
            "elect",
            "--preferred",
            "--zookeeper",
            cluster.zookeeper_connect,
            "--topic",
            "preferred",
        ]
    )
    assert code == 0, capsys.readouterr()
    # The command returns once the controller has elected (the request znode is gone);
    # each broker's metadata learns it from ZooKeeper a moment later (CI under load: the
    # broker asked first still named leader 2).
    assert wait_for(lambda: _describe(bootstrap, "preferred")[0][0] == 1, 30)
