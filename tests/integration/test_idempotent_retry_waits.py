"""A retried idempotent batch that is not committed yet waits like the original did.

Kafka answers a duplicate of one of a producer's last five batches with the offsets it
was written at, and that answer goes through the same acks=all wait (ReplicaManager's
DelayedProduce waits until the high watermark passes the duplicate's last offset). So a
retry that arrives while the original still waits for a follower is neither written again
nor refused: it is answered NONE at the original base offset once the follower has it.
Checked while looking for what made librdkafka producers bump their epochs thousands of
times in the chaos campaign (seed 202): an error here would make the client give up on
the batch and re-send it under a new epoch, stored twice.
"""

from __future__ import annotations

import signal
import threading
import time

from kio.schema.errors import ErrorCode

from .broker_helpers import wait_for
from .durability import read_topic
from .test_idempotent_truncation import (
    SESSION_TIMEOUT_MS,
    TOPIC,
    _batch,
    _create_topic,
    _produce,
    _produce_once_led,
    _producer_id,
    _state,
)


def test_a_retry_of_an_uncommitted_batch_waits_and_gets_the_original_offset(
    cluster_factory,
) -> None:
    cluster = cluster_factory(
        **{
            "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS * 4),
            # The frozen follower stays in the ISR: the high watermark waits for it.
            "replica.lag.time.max.ms": "120000",
            "replica.fetch.wait.max.ms": "100",
        }
    )
    zookeeper = cluster.zookeeper_connect
    leader, follower = cluster.broker(1), cluster.broker(2)
    _create_topic(cluster.bootstrap_servers)
    assert wait_for(lambda: _state(zookeeper)["leader"] == 1, 30)
    producer = _producer_id(leader.bootstrap)
    # ZooKeeper names broker 1 leader before broker 1 has applied it (under CI's load).
    first = _batch(producer, 0, [b"first"])
    assert _produce_once_led(leader.bootstrap, first) == (ErrorCode.none, 0)
    assert wait_for(lambda: sorted(_state(zookeeper)["isr"]) == [1, 2], 30)

    batch = _batch(producer, 1, [b"a", b"b", b"c"])
    follower.signal(signal.SIGSTOP)
    answers: list[tuple[ErrorCode, int]] = []
    try:
        time.sleep(1.5)  # the follower's pending long poll ends before the write
        # Appended at 1-3, never committed: the acks=all wait times out.
        assert _produce(leader.bootstrap, batch, timeout_ms=1000) == (
            ErrorCode.request_timed_out,
            -1,
        )
        retry = threading.Thread(
            target=lambda: answers.append(_produce(leader.bootstrap, batch, timeout_ms=30000)),
            daemon=True,
        )
        retry.start()
        retry.join(2)
        assert answers == [], "the retry was answered before the follower had the batch"
    finally:
        follower.signal(signal.SIGCONT)
    retry.join(30)
    assert answers == [(ErrorCode.none, 1)]
    assert read_topic(leader.bootstrap, TOPIC, {0: 4}) == {
        (0, 0): b"first",
        (0, 1): b"a",
        (0, 2): b"b",
        (0, 3): b"c",
    }
