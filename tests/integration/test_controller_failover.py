"""The controller can die at any time: its successor resumes its work.

Also a rolling restart: each broker in turn gets SIGTERM (controlled shutdown hands its
leaderships over first) and comes back, while a producer writes with acks=all; no write
fails for lack of a leader and none is lost. And ``controlled.shutdown.enable``: with it
(the default) a broker's SIGTERM waits for its leadership to move; without it the broker
just stops and the controller fails its partitions over afterwards.
"""

from __future__ import annotations

import json
import signal
import time

import confluent_kafka
import confluent_kafka.admin

from gregor_broker.cli.main import main as gregor
from gregor_broker.cluster.admin import ZkAdmin
from gregor_broker.devtools.local_cluster import zookeeper_client

from .broker_helpers import create_topic, produce_values, wait_for
from .durability import NumberedProducer, lost_messages


def test_a_new_controller_finishes_a_reassignment_in_flight(cluster_factory, tmp_path) -> None:
    cluster = cluster_factory(brokers=4, racks=None, **{"zookeeper.session.timeout.ms": "4000"})
    bootstrap = cluster.bootstrap_servers
    client = zookeeper_client(cluster.zookeeper_connect)
    admin = ZkAdmin(client)
    try:
        controller_id = admin.get_controller().broker_id
        others = [b.broker_id for b in cluster.brokers if b.broker_id != controller_id]
        source, target = [others[0], others[1]], [others[1], others[2]]
        confluent_admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
        topic = confluent_kafka.admin.NewTopic("resumed", 1, replica_assignment=[source])
        confluent_admin.create_topics([topic])["resumed"].result(30)
        producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        for _ in range(2000):
            producer.produce("resumed", b"r" * 1000)
        assert producer.flush(60) == 0
        plan = tmp_path / "plan.json"
        plan.write_text(
            json.dumps(
                {
                    "version": 1,
                    "partitions": [{"topic": "resumed", "partition": 0, "replicas": target}],
                }
            )
        )
        zk = ["--zookeeper", cluster.zookeeper_connect]
        # 2 MB at 400 kB/s: the move takes about 5 s, long enough to kill the controller.
        assert (
            gregor(["reassign", "execute", *zk, "--plan", str(plan), "--throttle", "400000"]) == 0
        )
        time.sleep(1)
        assert admin.get_topic("resumed").adding_replicas  # still in flight
        cluster.broker(controller_id).kill()
        assert wait_for(
            lambda: (c := admin.get_controller()) is not None and c.broker_id != controller_id, 30
        )

        def moved() -> bool:
            assignment = admin.get_topic("resumed")
            return (
                tuple(assignment.partitions[0]) == tuple(target)
                and not assignment.adding_replicas
                and not assignment.removing_replicas
            )

        assert wait_for(moved, 60), admin.get_topic("resumed")
        assert gregor(["reassign", "verify", *zk, "--plan", str(plan)]) == 0
    finally:
        client.stop()


def test_a_rolling_restart_keeps_every_partition_writable(cluster_factory) -> None:
    # Controlled shutdown does not wait for session expiry: a long session timeout keeps
    # a CPU-starved broker on a busy CI machine from being expired by mistake.
    cluster = cluster_factory(**{"zookeeper.session.timeout.ms": "15000"})
    bootstrap = cluster.bootstrap_servers
    create_topic(
        bootstrap,
        "rolling",
        partitions=6,
        replication_factor=3,
        config={"min.insync.replicas": "2"},
    )
    with NumberedProducer(
        bootstrap, "rolling", prefix="m", pause_every=1, message_timeout_ms=60000
    ) as producer:
        for broker in cluster.brokers:
            assert producer.wait_for_progress(300, 30)
            broker.stop()  # SIGTERM: controlled shutdown
            broker.start()
            broker.wait_registered(30)
            assert wait_for(lambda: _all_isrs_full(bootstrap), 60)
        assert producer.wait_for_progress(300, 30)
    lost = lost_messages(producer.acknowledged, bootstrap, "rolling")
    print(f"acked={producer.acked()} errors={producer.failures} lost={len(lost)}")
    assert producer.errors == []
    assert lost == []


def _all_isrs_full(bootstrap: str) -> bool:
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    topic = admin.list_topics("rolling", timeout=10).topics["rolling"]
    return all(len(p.isrs) == 3 for p in topic.partitions.values())


def _leader_and_isr(admin: ZkAdmin, topic: str) -> tuple[int, tuple[int, ...]] | None:
    found = admin.get_partition_state(topic, 0)
    return None if found is None else (found[0].leader, tuple(sorted(found[0].isr)))


def _paused_controller_cluster(broker_factory, enable: str):
    """Three brokers; topic ``cs`` (one partition) led by a broker that is not the
    controller (``controlled.shutdown.enable=enable`` on it), its follower the third; the
    controller paused (SIGSTOP), so no leader moves until it resumes. Long sessions: the
    paused controller keeps its session (and nobody else takes over) meanwhile."""
    session = {"zookeeper.session.timeout.ms": "40000"}
    first = broker_factory(1, **session)
    client = zookeeper_client(first.zookeeper_connect)
    admin = ZkAdmin(client)
    # A broker registers before it runs for controller: broker 2 starting at once won
    # the election on a loaded machine (CI), so the others start once broker 1 has it.
    assert wait_for(lambda: admin.get_controller() is not None, 60)
    assert admin.get_controller().broker_id == 1, "broker 1 was alone and is the controller"
    brokers = {
        1: first,
        2: broker_factory(2, **session, **{"controlled.shutdown.enable": enable}),
        3: broker_factory(3, **session),
    }
    admin.create_topic("cs", {0: [2, 3]}, {})
    assert wait_for(lambda: _leader_and_isr(admin, "cs") == (2, (2, 3)), 120)
    # Broker 2 itself knows it leads (a broker learns its leadership from ZooKeeper a
    # moment after the state is written; one that does not know has nothing to hand over).
    values = [b"c%d" % i for i in range(100)]
    assert len(produce_values(brokers[2].bootstrap, "cs", values)) == 100
    brokers[1].pause()
    return brokers, client, admin


def test_controlled_shutdown_waits_for_leadership_to_move_before_exiting(broker_factory) -> None:
    """controlled.shutdown.enable=true (Kafka's default): SIGTERM deregisters and the
    broker keeps serving until the controller has moved its leadership; with the
    controller paused it waits, and it exits only once the leader has moved."""
    brokers, client, admin = _paused_controller_cluster(broker_factory, "true")
    stopping = brokers[2]
    try:
        stopping.signal(signal.SIGTERM)
        assert wait_for(lambda: admin.get_broker(2) is None, 30), "never deregistered"
        time.sleep(5)  # the controller is paused: nothing can move, so it must wait
        assert stopping.is_running()
        assert _leader_and_isr(admin, "cs") == (2, (2, 3))
        brokers[1].resume()
        assert stopping.process is not None
        assert stopping.process.wait(60) == 0
        # It exited because the leadership had moved, not on its 30 s deadline.
        assert _leader_and_isr(admin, "cs") == (3, (3,))
        log = stopping.log_path.read_text()
        assert "controlled shutdown: nothing left to hand over" in log
        assert "leadership not moved within" not in log
    finally:
        brokers[1].resume()
        client.stop()
        client.close()


def test_without_controlled_shutdown_the_broker_exits_before_its_leadership_moves(
    broker_factory,
) -> None:
    """controlled.shutdown.enable=false: SIGTERM just stops the broker (no wait, even
    with the controller paused); its registration ends with its ZooKeeper session, and
    the controller fails its partition over only after that, once it runs again."""
    brokers, client, admin = _paused_controller_cluster(broker_factory, "false")
    stopping = brokers[2]
    try:
        started = time.monotonic()
        stopping.signal(signal.SIGTERM)
        assert stopping.process is not None
        # Well under the 30 s a controlled shutdown waits for a paused controller.
        assert stopping.process.wait(25) == 0
        print(f"exited {time.monotonic() - started:.2f} s after SIGTERM")
        assert admin.get_broker(2) is None
        # Nobody moved the leadership before it exited: the state still names it.
        assert _leader_and_isr(admin, "cs") == (2, (2, 3))
        log = stopping.log_path.read_text()
        assert "controlled.shutdown.enable=false" in log
        assert "controlled shutdown: deregistered" not in log
        brokers[1].resume()
        # The controller, running again, fails the partition over to the follower.
        assert wait_for(lambda: _leader_and_isr(admin, "cs") == (3, (3,)), 60)
    finally:
        brokers[1].resume()
        client.stop()
        client.close()
