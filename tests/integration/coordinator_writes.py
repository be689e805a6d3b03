"""A group coordinator whose ``__consumer_offsets`` writes cannot replicate.

Shared by the tests of the coordinator's pending writes: a 3-broker cluster whose single
``__consumer_offsets`` partition has 3 in-sync replicas and ``min.insync.replicas=2``;
SIGSTOPping both followers (``followers_stopped``) leaves the leader able to append but
not to replicate, so every write waits ``offsets.commit.timeout.ms`` and fails. The
followers stay in the ISR and keep their ZooKeeper sessions meanwhile (long lag and
session timeouts). Raw requests, so the tests see each error code as the broker sent it.
"""

from __future__ import annotations

import contextlib
import json
import signal
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from gregor_broker.devtools.local_cluster import zookeeper_client

from .broker_helpers import create_topic, wait_for
from .raw_requests import RawClient, request

TOPIC = "ledger"
COMMIT_TIMEOUT_MS = 6000
FIND_COORDINATOR, OFFSET_COMMIT, OFFSET_FETCH = 10, 8, 9
INIT_PRODUCER_ID, TXN_OFFSET_COMMIT = 22, 28
OFFSET_COMMIT_V8, OFFSET_FETCH_V5, OFFSET_FETCH_V7 = 8, 5, 7


@dataclass
class OffsetsCluster:
    cluster: Any
    coordinator: Any  # the broker leading __consumer_offsets-0

    @property
    def followers(self) -> list[Any]:
        return [b for b in self.cluster.brokers if b is not self.coordinator]


def start_offsets_cluster(cluster_factory: Any, group: str, partitions: int = 1) -> OffsetsCluster:
    """The cluster, ``TOPIC`` with ``partitions`` partitions (RF 3), and a first commit of
    offset 5 to each of them for ``group``, replicated to all 3 replicas."""
    cluster = cluster_factory(
        **{
            "min.insync.replicas": "2",
            "offsets.topic.replication.factor": "3",
            "offsets.topic.num.partitions": "1",
            "offsets.commit.timeout.ms": str(COMMIT_TIMEOUT_MS),
            "replica.lag.time.max.ms": "120000",
            "zookeeper.session.timeout.ms": "60000",
            "group.initial.rebalance.delay.ms": "0",
        }
    )
    create_topic(cluster.bootstrap_servers, TOPIC, partitions=partitions, replication_factor=3)
    found: list[int] = []
    with RawClient(cluster.brokers[0].bootstrap) as client:

        def find_coordinator() -> bool:
            # Creates __consumer_offsets on first use.
            answer = client.call(
                FIND_COORDINATOR, 2, request(FIND_COORDINATOR, 2, key=group, key_type=0)
            )
            found.append(answer.node_id)
            return answer.error_code is ErrorCode.none

        assert wait_for(find_coordinator, 60)
    coordinator = cluster.broker(found[-1])
    zk = zookeeper_client(cluster.zookeeper_connect)
    try:

        def offsets_state() -> dict[str, Any]:
            data, _ = zk.get("/brokers/topics/__consumer_offsets/partitions/0/state")
            return json.loads(data)

        with RawClient(coordinator.bootstrap) as committer:
            everything = dict.fromkeys(range(partitions), 5)
            assert wait_for(lambda: commit(committer, group, everything) is ErrorCode.none, 60)
        assert offsets_state()["leader"] == coordinator.broker_id
        assert wait_for(lambda: len(offsets_state()["isr"]) == 3, 60), offsets_state()
    finally:
        zk.stop()
        zk.close()
    return OffsetsCluster(cluster, coordinator)


@contextlib.contextmanager
def followers_stopped(offsets: OffsetsCluster) -> Iterator[None]:
    for follower in offsets.followers:
        follower.signal(signal.SIGSTOP)
    try:
        yield
    finally:
        for follower in offsets.followers:
            follower.signal(signal.SIGCONT)


def commit(client: RawClient, group: str, offsets: dict[int, int]) -> ErrorCode:
    """OffsetCommit v8 of partition -> offset, outside group management; the first
    partition's error (all share it)."""
    answer = client.call(
        OFFSET_COMMIT,
        OFFSET_COMMIT_V8,
        request(
            OFFSET_COMMIT,
            OFFSET_COMMIT_V8,
            group_id=group,
            generation_id_or_member_epoch=-1,
            member_id="",
            group_instance_id=None,
            topics=[
                {
                    "name": TOPIC,
                    "partitions": [
                        {
                            "partition_index": index,
                            "committed_offset": offset,
                            "committed_leader_epoch": -1,
                            "committed_metadata": "",
                        }
                        for index, offset in offsets.items()
                    ],
                }
            ],
        ),
    )
    return answer.topics[0].partitions[0].error_code


def producer_id(client: RawClient) -> int:
    """A producer id from InitProducerId (no transactional id): TxnOffsetCommit needs
    only an id and epoch; the group coordinator asks no transaction coordinator."""
    body = request(INIT_PRODUCER_ID, 1, transactional_id=None, transaction_timeout=60000)
    answer = client.call(INIT_PRODUCER_ID, 1, body)
    assert answer.error_code is ErrorCode.none, answer.error_code
    return answer.producer_id


def txn_commit(client: RawClient, group: str, producer: int, offset: int) -> ErrorCode:
    """TxnOffsetCommit v3 of partition 0 (epoch 0), outside group management."""
    body = request(
        TXN_OFFSET_COMMIT,
        3,
        transactional_id=f"{group}-txn",
        group_id=group,
        producer_id=producer,
        producer_epoch=0,
        generation_id=-1,
        member_id="",
        group_instance_id=None,
        topics=[
            {
                "name": TOPIC,
                "partitions": [
                    {
                        "partition_index": 0,
                        "committed_offset": offset,
                        "committed_leader_epoch": -1,
                        "committed_metadata": "",
                    }
                ],
            }
        ],
    )
    answer = client.call(TXN_OFFSET_COMMIT, 3, body)
    return answer.topics[0].partitions[0].error_code


def fetch(
    client: RawClient, group: str, partitions: list[int], require_stable: bool = False
) -> dict[int, tuple[ErrorCode, int]]:
    """Partition -> (error code, committed offset)."""
    fields: dict[str, Any] = {
        "group_id": group,
        "topics": [{"name": TOPIC, "partition_indexes": partitions}],
    }
    version = OFFSET_FETCH_V5
    if require_stable:
        version, fields["require_stable"] = OFFSET_FETCH_V7, True
    answer = client.call(OFFSET_FETCH, version, request(OFFSET_FETCH, version, **fields))
    assert answer.error_code is ErrorCode.none, answer.error_code
    return {
        p.partition_index: (p.error_code, p.committed_offset) for p in answer.topics[0].partitions
    }


def while_running(action: Callable[[], Any], probe: Callable[[], Any]) -> tuple[Any, list[Any]]:
    """Run ``action`` in a thread and ``probe`` over and over until it returns, then once
    more: (the action's result, every probe's result)."""
    outcome: list[Any] = []
    thread = threading.Thread(target=lambda: outcome.append(action()), daemon=True)
    thread.start()
    probes = []
    while thread.is_alive():
        probes.append(probe())
    thread.join()
    probes.append(probe())
    assert outcome, "the action raised"
    return outcome[0], probes
