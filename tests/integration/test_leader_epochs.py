"""Seed 001's data-loss scenario: truncating to the high watermark loses committed data.

KIP-101: a follower learns the high watermark one fetch after the leader advanced it.
If the follower restarts in that window and truncates its log to its (stale) high
watermark, then the leader dies and the follower is elected, messages that were
acknowledged with acks=all are gone. With leader epochs the follower asks the leader
where its epoch ends instead, and truncates nothing it should keep.

The test runs the scenario twice: with Gregor's leader epochs (no loss), and with the
pre-KIP-101 behaviour switched on (``gregor.unsafe.truncate.to.high.watermark``), which
must lose the tail. The second half proves the scenario really exercises the window.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import confluent_kafka
import confluent_kafka.admin
import pytest

from .broker_helpers import (
    consume_values,
    every_broker_knows_the_others,
    produce_values,
    wait_for,
)


def _state(bootstrap: str, topic: str) -> tuple[int, list[int]]:
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    partition = admin.list_topics(topic, timeout=10).topics[topic].partitions[0]
    return partition.leader, list(partition.isrs)


def _log_since(path: Path, position: int) -> str:
    with open(path, "rb") as log:
        log.seek(position)
        return log.read().decode(errors="replace")


def _end_offset(bootstrap: str, topic: str) -> int:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "unused"})
    try:
        _low, high = consumer.get_watermark_offsets(
            confluent_kafka.TopicPartition(topic, 0), timeout=10
        )
    finally:
        consumer.close()
    return high


@pytest.mark.parametrize("truncate_to_high_watermark", [False, True], ids=["epochs", "legacy"])
def test_a_restarted_follower_elected_leader_keeps_acknowledged_writes(
    broker_factory, truncate_to_high_watermark: bool
) -> None:
    settings = {
        "zookeeper.session.timeout.ms": "4000",
        # The follower hears of the new high watermark only with its next fetch
        # response; a long poll keeps that window open while the test acts.
        "replica.fetch.wait.max.ms": "8000",
        "gregor.unsafe.truncate.to.high.watermark": str(truncate_to_high_watermark).lower(),
    }
    # The leader's session outlives the follower's restart even on a loaded machine: the
    # restarted follower must become a follower (and truncate) before it is elected. A
    # broker that comes back straight as the leader never truncates at all. The restart
    # is a fork from the fixtures' zygote (about a second); a spawned broker registered
    # 15 s after the leader froze at load 19 (GREGOR_TEST_SPAWN_BROKERS=1), past the 12 s.
    leader = broker_factory(1, **{**settings, "zookeeper.session.timeout.ms": "12000"})
    follower = broker_factory(2, **settings)
    bootstrap = f"{leader.bootstrap},{follower.bootstrap}"
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    # An explicit assignment is checked against the brokers the receiving broker knows:
    # on a loaded machine broker 1 may not know broker 2 yet (INVALID_REPLICA_ASSIGNMENT).
    assert every_broker_knows_the_others((leader, follower), 30)
    topic = confluent_kafka.admin.NewTopic(
        "epochs", 1, replica_assignment=[[1, 2]], config={"min.insync.replicas": "1"}
    )
    admin.create_topics([topic])["epochs"].result(30)
    assert wait_for(lambda: _state(bootstrap, "epochs") == (1, [1, 2]), 30)

    first = [f"first-{i}".encode() for i in range(50)]
    produce_values(bootstrap, "epochs", first, acks="all")
    time.sleep(9)  # the follower's high watermark (and checkpoint) catch up with these
    tail = [f"tail-{i}".encode() for i in range(50)]
    produce_values(bootstrap, "epochs", tail, acks="all")  # committed: both replicas have it

    # Within the window: freeze the leader, crash and restart the follower.
    leader.signal(signal.SIGSTOP)
    frozen_at = time.monotonic()
    follower.kill()
    log_before_restart = follower.log_path.stat().st_size
    follower.start()  # forked from the fixtures' zygote: no imports to wait for
    follower.wait_registered(30)
    registered_after = time.monotonic() - frozen_at
    if truncate_to_high_watermark:
        # The scenario's premise: the follower truncated to its stale high watermark
        # while the leader was frozen but still alive in ZooKeeper.
        assert wait_for(
            lambda: "to its high watermark" in _log_since(follower.log_path, log_before_restart),
            10,
        ), (
            "the restarted follower did not truncate as a follower; registered "
            f"{registered_after:.1f} s after the leader froze (its session: 12 s)"
        )
    # The frozen leader's session expires; the follower is the only live ISR member.
    assert wait_for(lambda: _state(follower.bootstrap, "epochs")[0] == 2, 30)
    leader.signal(signal.SIGCONT)

    end = _end_offset(follower.bootstrap, "epochs")
    if truncate_to_high_watermark:
        # Pre-KIP-101 behaviour: acknowledged messages are gone. A consumer reads up to
        # the end offset (asking for all 100 would only wait out the timeout), and what
        # it reads is the head of what was acknowledged.
        values = consume_values(follower.bootstrap, "epochs", end, timeout=15)
        assert end < 100 and len(values) < 100, (end, len(values))
        assert values == (first + tail)[:end]
    else:
        values = consume_values(follower.bootstrap, "epochs", 100, timeout=15)
        assert end == 100
        assert values == first + tail
