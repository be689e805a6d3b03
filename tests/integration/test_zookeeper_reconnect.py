"""Brokers keep following ZooKeeper after their connection to it drops and comes back.

A ZooKeeper restart (or any connection blip shorter than the session timeout) keeps
every broker's session, but drops every watch: they belong to the connection, and kazoo
neither restores them nor keeps its own. Brokers read their partition-state and topic
znodes again on every reconnect; before they did so only after a lost session, so after
a ZooKeeper restart (chaos seed 20261123: ``zookeeper_kill``, then a reassignment that
never finished) a broker never learned that it had become leader, its partition's ISR
never filled again, and a reassigned replica never started copying.

Here, after a ZooKeeper kill -9 and restart, the leader of a partition is stopped
(controlled shutdown hands leadership to another in-sync replica) and started again:
the ISR must be whole and acks=all writes must go through within seconds.
"""

from __future__ import annotations

import datetime
import itertools
import time
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
import pytest

from gregor_broker.cluster.admin import ZkAdmin
from gregor_broker.cluster.models import PartitionState
from gregor_broker.devtools.local_cluster import LocalCluster, zookeeper_client
from gregor_broker.devtools.zookeeper_server import four_letter_word

from .broker_helpers import create_topic, wait_for

TOPIC = "reconnected"
# Long enough that every session survives the ZooKeeper restart (the point of the test).
SESSION_TIMEOUT_MS = 20000
RECOVERY_S = 15.0


@pytest.fixture
def own_zookeeper_cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    """Three brokers on a ZooKeeper of their own, which the test may kill and restart."""
    cluster = LocalCluster(
        tmp_path,
        3,
        racks="a,b,c",
        properties={"zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS)},
    )
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def _state(admin: ZkAdmin) -> PartitionState:
    found = admin.get_partition_state(TOPIC, 0)
    assert found is not None
    return found[0]


def _zookeeper_connections(cluster: LocalCluster) -> int:
    assert cluster.zookeeper is not None
    # A JVM just restarted on two loaded cores can take seconds to answer (CI: 1 s timed out).
    reply = four_letter_word(cluster.zookeeper.port, "srvr", timeout=5.0)
    for line in reply.splitlines():
        if line.startswith("Connections:"):
            return int(line.split(":")[1])
    return 0


def _produce(bootstrap: str, value: bytes) -> confluent_kafka.KafkaError | None:
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 5000}
    )
    outcome: list[confluent_kafka.KafkaError | None] = []
    producer.produce(TOPIC, value, partition=0, on_delivery=lambda e, _m: outcome.append(e))
    producer.flush(10)
    return (
        outcome[0] if outcome else confluent_kafka.KafkaError(confluent_kafka.KafkaError._TIMED_OUT)
    )


def test_a_new_leader_after_a_zookeeper_restart_fills_its_isr_again(
    own_zookeeper_cluster: LocalCluster,
) -> None:
    cluster = own_zookeeper_cluster
    assert cluster.zookeeper is not None
    bootstrap = cluster.bootstrap_servers
    create_topic(
        bootstrap, TOPIC, partitions=1, replication_factor=3, config={"min.insync.replicas": "2"}
    )
    zk = zookeeper_client(cluster.zookeeper_connect)
    admin = ZkAdmin(zk)
    try:
        assert wait_for(lambda: len(_state(admin).isr) == 3, 30)
        assert _produce(bootstrap, b"before") is None

        # Every broker's connection drops; their sessions survive the restart.
        cluster.zookeeper.kill()
        cluster.zookeeper.start()
        assert wait_for(lambda: _zookeeper_connections(cluster) >= 4, 60, 0.1), (
            "the brokers did not reconnect to ZooKeeper"
        )
        assert wait_for(lambda: len(zk.get_children("/brokers/ids")) == 3, 10)
        # Under load a broker's first reconnection can hang until its session expires
        # (CI: 20 s in one socket read while ZooKeeper came back); it registers again,
        # but the controller has shrunk the ISR meanwhile, and only an in-sync follower
        # may take over. So the ISR must be whole again first, as when sessions survive.
        assert wait_for(lambda: len(_state(admin).isr) == 3, RECOVERY_S, 0.1), (
            f"ISR {list(_state(admin).isr)} not whole again after the ZooKeeper restart"
        )

        before = _state(admin)
        leader = cluster.broker(before.leader)
        leader.stop()  # controlled shutdown: another in-sync replica takes over
        assert wait_for(lambda: _state(admin).leader not in (before.leader, -1), 30), (
            f"no new leader after broker {before.leader} stopped"
        )
        leader.start()
        # 90 s: a spawned broker on a loaded CI machine took 14 s to reach ZooKeeper on its
        # first start and did not register within 30 s on this one.
        leader.wait_registered(90)
        restarted = time.monotonic()

        whole = wait_for(lambda: len(_state(admin).isr) == 3, RECOVERY_S, 0.1)
        after = _state(admin)
        assert whole, (
            f"ISR {list(after.isr)} (leader {after.leader}, epoch {after.leader_epoch}) "
            f"not whole {RECOVERY_S:.0f} s after broker {before.leader} came back; "
            f"{_replication_lines(cluster, after.leader, before.leader)}"
        )
        print(f"ISR whole {time.monotonic() - restarted:.1f} s after the restart: {after}")
        assert _produce(bootstrap, b"after") is None
    finally:
        zk.stop()
        zk.close()


def _connection_attempts(log: Path, since: datetime.datetime) -> list[datetime.datetime]:
    """When kazoo tried to connect (its "Connecting to" lines in the broker's log)."""
    moments = []
    for line in log.read_text(errors="replace").splitlines():
        if "kazoo.client: Connecting to" not in line:
            continue
        moment = datetime.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")
        if moment >= since:
            moments.append(moment)
    return moments


def test_a_broker_retries_zookeeper_at_least_every_few_seconds(tmp_path: Path) -> None:
    """While ZooKeeper is away the broker tries to reconnect at most about a second apart,
    and is connected again within seconds once ZooKeeper serves. kazoo's default backoff
    doubles up to an hour: after 14 s away its attempts came 6-25 s apart, so a broker
    stayed away 10 s and more after ZooKeeper was back (chaos campaign: sessions expired,
    every partition unavailable for minutes)."""
    cluster = LocalCluster(
        tmp_path, 1, properties={"zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS)}
    )
    cluster.start()
    try:
        assert cluster.zookeeper is not None
        assert wait_for(lambda: _zookeeper_connections(cluster) >= 1, timeout=30)
        killed = datetime.datetime.now()
        cluster.zookeeper.kill()
        time.sleep(14)
        restarting = datetime.datetime.now()
        cluster.zookeeper.start()
        serving = time.monotonic()
        assert wait_for(lambda: _zookeeper_connections(cluster) >= 1, timeout=60, interval=0.1)
        reconnected_after = time.monotonic() - serving
        attempts = [
            moment
            for moment in _connection_attempts(cluster.brokers[0].log_path, killed)
            if moment <= restarting
        ]
        # Attempts through the whole outage, 1 s at most apart, with kazoo's jitter (up to
        # x1.4) and a loaded machine's slack (a CI simulation logged 7 attempts in the
        # 14 s, not the 8 this test once required: the gaps are the property).
        edges = [attempts[0] - killed, restarting - attempts[-1]] if attempts else []
        gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(attempts)]
        assert len(attempts) >= 5, attempts
        assert max(edge.total_seconds() for edge in edges) < 3.0, (killed, attempts, restarting)
        assert max(gaps) < 3.0, gaps
        assert reconnected_after < 6.0, f"reconnected {reconnected_after:.1f} s after"
    finally:
        cluster.stop()


def _replication_lines(cluster: LocalCluster, *broker_ids: int) -> str:
    """What the leader and the returning follower logged about this partition: how far
    the follower got and what the leader decided (ISR expansions carry the offsets)."""
    lines = []
    for broker_id in broker_ids:
        text = cluster.broker(broker_id).log_path.read_text(errors="replace")
        mine = [line for line in text.splitlines() if TOPIC in line or "fetcher" in line]
        lines.append(f"broker {broker_id}:\n" + "\n".join(mine[-15:]))
    return "\n".join(lines)
