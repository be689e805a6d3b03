"""Committed offsets live in __consumer_offsets and survive broker restarts.

The coordinator writes each commit as an OffsetCommitKey/OffsetCommitValue record to
the group's __consumer_offsets partition (the default 50 partitions here) and replays
the partition when the broker leads it again, so a consumer of the same group resumes
exactly at the committed offsets, after a clean restart and after SIGKILL alike.
"""

from __future__ import annotations

import time

import confluent_kafka
import pytest

from gregor_broker.devtools.zookeeper_server import free_port

from .group_helpers import committed_offsets, create_topic, produce

PARTITIONS = 3
COMMITTED = {0: 7, 1: 0, 2: 19}


def _first_offsets_seen(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
        }
    )
    consumer.subscribe([topic])
    first: dict[int, int] = {}
    deadline = time.monotonic() + 60
    try:
        while len(first) < PARTITIONS and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None or message.error() is not None:
                continue
            first.setdefault(message.partition(), message.offset())
    finally:
        consumer.close()
    return first


@pytest.mark.parametrize("how", ["restart", "sigkill"])
def test_consumers_resume_at_committed_offsets_after_a_broker_restart(broker_factory, how) -> None:
    # A fixed port, so that clients find the restarted broker where it was.
    broker = broker_factory(port=free_port(), **{"group.initial.rebalance.delay.ms": "0"})
    bootstrap = broker.bootstrap
    topic, group = "payments", "ledger"
    create_topic(bootstrap, topic, PARTITIONS)
    produce(bootstrap, topic, [f"v{i}" for i in range(90)], PARTITIONS)

    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
    )
    consumer.commit(
        offsets=[confluent_kafka.TopicPartition(topic, p, o) for p, o in COMMITTED.items()],
        asynchronous=False,
    )
    consumer.close()
    assert committed_offsets(bootstrap, group, topic, PARTITIONS) == COMMITTED

    if how == "restart":
        broker.restart()
    else:
        broker.kill()
        broker.start()
        broker.wait_registered(30)

    assert committed_offsets(bootstrap, group, topic, PARTITIONS) == COMMITTED
    assert _first_offsets_seen(bootstrap, group, topic) == COMMITTED
