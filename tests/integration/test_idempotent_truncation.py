"""An idempotent batch truncated away is written again when retried, never "duplicate".

Issue 9, A1, replayed with real brokers and raw Produce requests (so the test decides
exactly when a batch is sent and retried):

1. broker 1 leads; its follower, broker 2, is frozen (still in the ISR). Producer P2's
   batch lands only on broker 1, so the acks=all produce times out: not acknowledged;
2. broker 1 is frozen past its ZooKeeper session, broker 2 wakes and becomes leader, and
   producer P3's longer batch takes the same offsets there;
3. broker 1 wakes: as a follower it truncates P2's batch and copies P3's, so its log grows
   back past where P2's batch ended;
4. broker 1 leads again (preferred leader election) and P2 retries its batch.

Kafka rebuilds producer state on every truncation, so the retry is appended at new
offsets. Before the fix broker 1 answered "duplicate" with offsets that hold P3's records,
and P2's values existed nowhere.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
from typing import Any

from kio.schema.errors import ErrorCode

from gregor_broker.cluster import zk_paths
from gregor_broker.cluster.admin import ZkAdmin
from gregor_broker.devtools.local_cluster import zookeeper_client
from gregor_broker.protocol.records import Record, make_batch
from gregor_broker.replication.client import BrokerClient

from .broker_helpers import host_port, wait_for
from .durability import read_topic

TOPIC = "retried"
SESSION_TIMEOUT_MS = 3000


def _request(bootstrap: str, api_key: int, version: int, data: dict[str, Any]) -> Any:
    async def run() -> Any:
        client = BrokerClient(*host_port(bootstrap), "a1-test", timeout=30)
        try:
            return await client.request(api_key, version, data)
        finally:
            await client.close()

    return asyncio.run(run())


def _producer_id(bootstrap: str) -> tuple[int, int]:
    response = _request(bootstrap, 22, 1, {"transactional_id": None, "transaction_timeout": 60000})
    assert response.error_code == ErrorCode.none, response
    return response.producer_id, response.producer_epoch


def _produce(bootstrap: str, records: bytes, *, timeout_ms: int = 10000) -> tuple[ErrorCode, int]:
    response = _request(
        bootstrap,
        0,
        7,
        {
            "transactional_id": None,
            "acks": -1,
            "timeout": timeout_ms,
            "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": records}]}],
        },
    )
    answer = response.responses[0].partition_responses[0]
    return answer.error_code, answer.base_offset


def _produce_once_led(bootstrap: str, records: bytes) -> tuple[ErrorCode, int]:
    """``_produce``, sent again while the broker answers NOT_LEADER_OR_FOLLOWER: it learns
    its leadership from ZooKeeper moments after the znode says so (nothing is appended
    meanwhile, so the batch's sequence stays the next one)."""
    answers: list[tuple[ErrorCode, int]] = []
    assert wait_for(
        lambda: (
            answers.append(_produce(bootstrap, records))
            or answers[-1][0] != ErrorCode.not_leader_or_follower
        ),
        30,
    ), answers
    return answers[-1]


def _batch(producer: tuple[int, int], sequence: int, values: list[bytes]) -> bytes:
    records = [Record(i, 0, None, value) for i, value in enumerate(values)]
    return make_batch(
        records, producer_id=producer[0], producer_epoch=producer[1], base_sequence=sequence
    )


def _state(zookeeper_connect: str) -> dict[str, Any]:
    client = zookeeper_client(zookeeper_connect)
    try:
        data, _ = client.get(zk_paths.partition_state_path(TOPIC, 0))
    finally:
        client.stop()
        client.close()
    return json.loads(data)


def _elect_preferred_leader(zookeeper_connect: str) -> None:
    client = zookeeper_client(zookeeper_connect)
    try:
        ZkAdmin(client).request_preferred_replica_election([(TOPIC, 0)])
    finally:
        client.stop()
        client.close()


def _create_topic(bootstrap: str) -> None:
    import confluent_kafka.admin

    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    topic = confluent_kafka.admin.NewTopic(
        TOPIC, 1, replica_assignment=[[1, 2]], config={"min.insync.replicas": "1"}
    )
    for future in admin.create_topics([topic], operation_timeout=30).values():
        future.result(60)


def test_a_retried_batch_truncated_as_follower_is_appended_again(cluster_factory) -> None:
    cluster = cluster_factory(
        **{
            "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
            # Frozen followers stay in the ISR: only truncation may remove P2's batch.
            "replica.lag.time.max.ms": "120000",
            "auto.leader.rebalance.enable": "false",
            # Short follower long polls: a pending one ends well within the pause below.
            "replica.fetch.wait.max.ms": "100",
        }
    )
    zookeeper = cluster.zookeeper_connect
    first, second = cluster.broker(1), cluster.broker(2)
    _create_topic(cluster.bootstrap_servers)
    assert wait_for(lambda: _state(zookeeper)["leader"] == 1, 30)
    p2 = _producer_id(first.bootstrap)
    p3 = _producer_id(first.bootstrap)
    assert _produce(first.bootstrap, _batch(p2, 0, [b"p2-0"])) == (ErrorCode.none, 0)
    assert wait_for(lambda: sorted(_state(zookeeper)["isr"]) == [1, 2], 30)

    # 1. P2's next batch reaches only broker 1: not acknowledged.
    second.signal(signal.SIGSTOP)
    try:
        # Let the follower's pending long-poll fetch (replica.fetch.wait.max.ms) end
        # before the write, or its answer would carry the batch to the frozen follower
        # (then the retry would rightly be a duplicate).
        time.sleep(1.5)
        retried = _batch(p2, 1, [b"p2-1", b"p2-2", b"p2-3"])
        assert _produce(first.bootstrap, retried, timeout_ms=1000) == (
            ErrorCode.request_timed_out,
            -1,
        )
        # 2. Broker 1 loses its session; broker 2 leads and P3 writes at offsets 1-5.
        first.signal(signal.SIGSTOP)
    finally:
        second.signal(signal.SIGCONT)
    try:
        assert wait_for(lambda: _state(zookeeper)["leader"] == 2, 30)
        p3_batch = _batch(p3, 0, [f"p3-{i}".encode() for i in range(5)])
        assert wait_for(lambda: _produce(second.bootstrap, p3_batch)[0] == ErrorCode.none, 30)
    finally:
        first.signal(signal.SIGCONT)

    # 3. Broker 1 truncates P2's batch, copies P3's, and rejoins the ISR.
    assert wait_for(lambda: sorted(_state(zookeeper)["isr"]) == [1, 2], 60)
    # 4. Broker 1 leads again; P2 retries its unacknowledged batch.
    _elect_preferred_leader(zookeeper)
    assert wait_for(lambda: _state(zookeeper)["leader"] == 1, 30)
    # Broker 1 learns its leadership from ZooKeeper moments after the znode says so; until
    # then it answers NOT_LEADER_OR_FOLLOWER (nothing appended), which clients retry.
    error, offset = _produce_once_led(first.bootstrap, retried)
    # (wait_for may have sent P3's batch twice; the second was a duplicate, so the log
    # holds P3 once, at 1-5.)
    assert (error, offset) == (ErrorCode.none, 6), "the retry was not written again"
    log = read_topic(first.bootstrap, TOPIC, {0: 9})
    assert [log.get((0, o)) for o in range(9)] == [
        b"p2-0",
        *(f"p3-{i}".encode() for i in range(5)),
        b"p2-1",
        b"p2-2",
        b"p2-3",
    ]
