"""A client cannot act as a follower: forged follower fetches never move the high watermark.

Issue 9, F4: a plain client sent Fetch v11 with a real follower's ``replica_id`` and a
``fetch_offset`` of 10^9 while both followers were SIGSTOPped, and the leader took 10^9
as their log end offsets, moved the high watermark and acknowledged an acks=all write no
other replica had. Kafka answers a follower offset past the leader's log end with
OFFSET_OUT_OF_RANGE without touching the follower's state, and ignores replica ids that
are not assigned replicas (NOT_LEADER_OR_FOLLOWER, or UNKNOWN_LEADER_EPOCH when the
request carries a leader epoch).

The forged requests are raw Fetch v11 frames (built with kio's schemas by Gregor's
broker-to-broker client, which puts nothing of the broker's state in them).
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
from typing import Any

import confluent_kafka
import confluent_kafka.admin
from kio.schema.errors import ErrorCode

from gregor_broker.cluster import zk_paths
from gregor_broker.devtools.local_cluster import zookeeper_client
from gregor_broker.replication.client import BrokerClient

from .broker_helpers import create_topic, host_port, produce_values, wait_for

TOPIC = "forged"
FAR_AHEAD = 10**9


def _request(bootstrap: str, api_key: int, version: int, data: dict[str, Any]) -> Any:
    """One raw request built with kio's schemas (nothing of a broker's state in it)."""

    async def run() -> Any:
        client = BrokerClient(*host_port(bootstrap), "forger", timeout=10)
        try:
            return await client.request(api_key, version, data)
        finally:
            await client.close()

    return asyncio.run(run())


def _fetch_as(bootstrap: str, replica_id: int, fetch_offset: int, leader_epoch: int = -1) -> Any:
    """One Fetch v11 for TOPIC-0 with the given replica id; the partition's answer."""
    response = _request(
        bootstrap,
        1,
        11,
        {
            "replica_id": replica_id,
            "max_wait": 0,
            "min_bytes": 1,
            "max_bytes": 1 << 20,
            "isolation_level": 0,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [
                {
                    "topic": TOPIC,
                    "partitions": [
                        {
                            "partition": 0,
                            "current_leader_epoch": leader_epoch,
                            "fetch_offset": fetch_offset,
                            "log_start_offset": 0,
                            "partition_max_bytes": 1 << 20,
                        }
                    ],
                }
            ],
            "forgotten_topics_data": [],
            "rack_id": "",
        },
    )
    return response.responses[0].partitions[0]


def _latest_offset(bootstrap: str) -> int:
    """The latest offset of TOPIC-0 as a read_uncommitted consumer's ListOffsets gets it."""

    answer = (
        _request(
            bootstrap,
            2,
            7,
            {
                "replica_id": -1,
                "isolation_level": 0,
                "topics": [
                    {
                        "name": TOPIC,
                        "partitions": [
                            {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}
                        ],
                    }
                ],
            },
        )
        .topics[0]
        .partitions[0]
    )
    assert answer.error_code == ErrorCode.none, answer
    return answer.offset


def _leader_epoch(zookeeper_connect: str) -> int:
    client = zookeeper_client(zookeeper_connect)
    try:
        data, _ = client.get(zk_paths.partition_state_path(TOPIC, 0))
    finally:
        client.stop()
        client.close()
    return json.loads(data)["leader_epoch"]


def _partition(bootstrap: str) -> Any:
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    return admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions[0]


def test_a_forged_follower_fetch_past_the_log_end_moves_nothing(cluster_factory) -> None:
    # replica.lag.time.max.ms keeps the frozen followers in the ISR for the whole test,
    # as in the finding: only their (forged) fetches could move the high watermark.
    cluster = cluster_factory(**{"replica.lag.time.max.ms": "120000"})
    bootstrap = cluster.bootstrap_servers
    create_topic(bootstrap, TOPIC, replication_factor=3, config={"min.insync.replicas": "2"})
    assert produce_values(bootstrap, TOPIC, [b"committed-0", b"committed-1"]) == [0, 1]
    partition = _partition(bootstrap)
    leader = cluster.broker(partition.leader)
    followers = [r for r in partition.replicas if r != partition.leader]
    assert wait_for(lambda: sorted(_partition(bootstrap).isrs) == [1, 2, 3], 30)
    for follower in followers:
        cluster.broker(follower).signal(signal.SIGSTOP)

    producer = confluent_kafka.Producer(
        {"bootstrap.servers": leader.bootstrap, "acks": "all", "message.timeout.ms": 60000}
    )
    acknowledged: list[Any] = []
    producer.produce(
        TOPIC, b"only-on-the-leader", on_delivery=lambda e, m: acknowledged.append((e, m))
    )
    producer.poll(0)
    # The leader has the write (log end 3) but no follower does: high watermark 2.
    assert wait_for(lambda: _fetch_as(leader.bootstrap, -1, 0).high_watermark == 2, 10)
    time.sleep(0.5)  # the produce is waiting in the leader's purgatory

    for follower in followers:
        answer = _fetch_as(leader.bootstrap, follower, FAR_AHEAD)
        assert answer.error_code == ErrorCode.offset_out_of_range, answer
    producer.poll(3)
    high_watermark = _fetch_as(leader.bootstrap, -1, 0).high_watermark
    # What a consumer asking for the latest offset is told (ListOffsets v7 to the leader):
    # asked directly, because librdkafka may send its metadata request to a frozen broker.
    high = _latest_offset(leader.bootstrap)
    try:
        assert high_watermark == 2
        assert high == 2
        assert acknowledged == [], "an acks=all write was acknowledged with no follower having it"
        # Ids that are not assigned followers (an unknown broker, the leader's own) get no
        # follower state at all, even at a valid offset.
        epoch = _leader_epoch(cluster.zookeeper_connect)
        for stranger in (99, partition.leader):
            answer = _fetch_as(leader.bootstrap, stranger, 3)
            assert answer.error_code == ErrorCode.not_leader_or_follower, (stranger, answer)
            answer = _fetch_as(leader.bootstrap, stranger, 3, leader_epoch=epoch)
            assert answer.error_code == ErrorCode.unknown_leader_epoch, (stranger, answer)
    finally:
        for follower in followers:
            cluster.broker(follower).signal(signal.SIGCONT)
    # Once the real followers copy it, the write commits as usual.
    assert producer.flush(60) == 0
    error, message = acknowledged[0]
    assert error is None and message.offset() == 2
