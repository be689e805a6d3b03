"""A leader that lost its unflushed tail and restarts before the controller notices.

Kafka does not fsync on acknowledgement: an acks=all write survives the loss of one
replica's unflushed tail (a power loss) because the other in-sync replicas hold it. In
Kafka's ZooKeeper mode a restarted broker leads nothing until the controller says so
(LeaderAndIsr), and the controller handles a restart as a failure then a startup: the
partitions it led get leaders elsewhere, and it rejoins as a follower that truncates
to its new leader. A restarted leader that took up its old leadership from ZooKeeper at
its old epoch, with a shorter log, would answer its followers' fetches with
OFFSET_OUT_OF_RANGE and their epoch queries with its own shorter end: they would cut
acknowledged records the cluster still held.

The controller is frozen (SIGSTOP, within its own session timeout) from the kill until
the restarted broker has registered again and its followers have had time to fetch from
it, so that window is certain.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest

from gregor_broker.cluster import zk_paths
from gregor_broker.cluster.admin import ZkAdmin
from gregor_broker.devtools.local_cluster import zookeeper_client

from .broker_helpers import (
    consume_values,
    controller_id,
    produce_values,
    registered_again,
    wait_for,
)

RECORDS = 400
LONG_SESSION = {"zookeeper.session.timeout.ms": "20000"}  # a frozen controller keeps it


@pytest.fixture
def admin(zk_connect: str) -> Iterator[ZkAdmin]:
    """A ZooKeeper client of the test's own, to watch and read the cluster."""
    client = zookeeper_client(zk_connect)
    try:
        yield ZkAdmin(client)
    finally:
        client.stop()
        client.close()


def _controller_and_two_more(broker_factory, admin: ZkAdmin, **first):
    """Broker 1 (``first``: its properties), started alone so that it is the controller,
    then brokers 2 and 3."""
    controller = broker_factory(**LONG_SESSION, **first)
    assert wait_for(lambda: controller_id(admin.client) == 1, 30)
    return controller, broker_factory(**LONG_SESSION), broker_factory(**LONG_SESSION)


def _state(admin: ZkAdmin, topic: str):
    found = admin.get_partition_state(topic, 0)
    return None if found is None else found[0]


def _tear(broker) -> None:
    """A power loss: the last half of the segment had not reached the disk."""
    [segment] = (broker.log_dir / "torn-0").glob("*.log")
    os.truncate(segment, segment.stat().st_size // 2)


def _produce_to_a_full_isr(admin: ZkAdmin, leader, isr: set[int]) -> list[bytes]:
    assert wait_for(
        lambda: (
            (s := _state(admin, "torn")) is not None
            and s.leader == leader.broker_id
            and set(s.isr) == isr
        ),
        60,
    ), _state(admin, "torn")
    values = [b"v%04d" % i for i in range(RECORDS)]
    assert produce_values(leader.bootstrap, "torn", values) == list(range(RECORDS))
    return values


def test_a_leader_restarted_with_a_torn_tail_loses_no_acknowledged_record(
    broker_factory, admin
) -> None:
    """Broker 4 leads, 2 and 3 follow, 1 is the controller and holds no replica."""
    controller, *followers = _controller_and_two_more(broker_factory, admin)
    torn = broker_factory(**LONG_SESSION)
    admin.create_topic("torn", {0: [4, 2, 3]}, {"min.insync.replicas": "2"})
    values = _produce_to_a_full_isr(admin, torn, {2, 3, 4})
    before = _state(admin, "torn")
    old_czxid = admin.client.exists(zk_paths.broker_path(4)).czxid

    torn.kill()
    _tear(torn)
    controller.pause()
    try:
        torn.start()
        assert registered_again(admin.client, 4, old_czxid), "broker 4 did not register again"
        time.sleep(3)  # its old followers fetch from it meanwhile
    finally:
        controller.resume()

    assert wait_for(lambda: _state(admin, "torn").leader_epoch > before.leader_epoch, 30)
    assert wait_for(lambda: set(_state(admin, "torn").isr) == {2, 3, 4}, 60), _state(admin, "torn")
    read = consume_values(followers[0].bootstrap, "torn", RECORDS, timeout=60)
    assert read == values, f"{len(read)} of {RECORDS} records read; {_state(admin, 'torn')}"
    log = torn.log_path.read_text()
    assert "named leader at epoch 0 by a state written before this broker registered" in log
    for follower in followers:
        assert "truncating torn-0 from 400" not in follower.log_path.read_text()


def test_a_controller_restarted_with_a_torn_tail_is_not_leader_again_until_elected(
    broker_factory, admin
) -> None:
    """Broker 1 is the controller and the leader. Restarted, it removes its old
    registrations at once (its log dirs' lock proves the old process dead), so the next
    controller (any of the three) starts with no memory of broker 1's previous run: it
    must see from the states that broker 1 restarted since they were written, or the
    partition stays without a working leader."""
    torn, *followers = _controller_and_two_more(broker_factory, admin)
    admin.create_topic("torn", {0: [1, 2, 3]}, {"min.insync.replicas": "2"})
    values = _produce_to_a_full_isr(admin, torn, {1, 2, 3})
    before = _state(admin, "torn")

    torn.kill()
    _tear(torn)
    torn.start()

    assert wait_for(lambda: _state(admin, "torn").leader_epoch > before.leader_epoch, 60)
    assert wait_for(lambda: set(_state(admin, "torn").isr) == {1, 2, 3}, 60), _state(admin, "torn")
    # The partition works: a write is acknowledged, and nothing acknowledged is gone.
    assert produce_values(followers[0].bootstrap, "torn", [b"after"]) == [RECORDS]
    read = consume_values(followers[0].bootstrap, "torn", RECORDS + 1, timeout=60)
    assert read == [*values, b"after"], f"{len(read)} records read; {_state(admin, 'torn')}"
