"""A commit is visible only once its __consumer_offsets write is replicated.

The coordinator used to apply an OffsetCommit to its cache as soon as the leader had
appended it, then wait for the in-sync replicas (acks=all). When that wait failed (the
followers never caught up, the leader lost its leadership) the client was told the
commit failed, yet OffsetFetch kept answering the offset, one the next leader does not
have. Kafka keeps such commits pending (``GroupMetadata.prepareOffsetCommit``) and
applies them only once the append succeeded (``onOffsetCommitAppend``); a failed one is
dropped (``failPendingOffsetWrite``). Meanwhile OffsetFetch with ``require_stable``
(KIP-447) answers UNSTABLE_OFFSET_COMMIT.

Here the group's ``__consumer_offsets`` partition has 3 in-sync replicas; both followers
are SIGSTOPped, so a commit is appended by the leader but cannot be replicated.
"""

from __future__ import annotations

import json
import signal
import threading
from typing import Any

from kio.schema.errors import ErrorCode

from gregor_broker.devtools.local_cluster import zookeeper_client

from .broker_helpers import create_topic, wait_for
from .raw_requests import RawClient, request

TOPIC, GROUP = "ledger", "auditors"
FIND_COORDINATOR = 10
OFFSET_COMMIT, OFFSET_COMMIT_V8 = 8, 8
OFFSET_FETCH, OFFSET_FETCH_V5, OFFSET_FETCH_V7 = 9, 5, 7
COMMIT_TIMEOUT_MS = 6000


def _commit(client: RawClient, offset: int) -> ErrorCode:
    answer = client.call(
        OFFSET_COMMIT,
        OFFSET_COMMIT_V8,
        request(
            OFFSET_COMMIT,
            OFFSET_COMMIT_V8,
            group_id=GROUP,
            generation_id_or_member_epoch=-1,
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
        ),
    )
    return answer.topics[0].partitions[0].error_code


def _fetch(client: RawClient, require_stable: bool = False) -> Any:
    """(error code, committed offset) of the partition."""
    fields: dict[str, Any] = {
        "group_id": GROUP,
        "topics": [{"name": TOPIC, "partition_indexes": [0]}],
    }
    version = OFFSET_FETCH_V5
    if require_stable:
        version, fields["require_stable"] = OFFSET_FETCH_V7, True
    answer = client.call(OFFSET_FETCH, version, request(OFFSET_FETCH, version, **fields))
    assert answer.error_code is ErrorCode.none, answer.error_code
    found = answer.topics[0].partitions[0]
    return found.error_code, found.committed_offset


def test_a_commit_that_cannot_replicate_is_never_served(cluster_factory) -> None:
    cluster = cluster_factory(
        **{
            "min.insync.replicas": "2",
            "offsets.topic.replication.factor": "3",
            "offsets.topic.num.partitions": "1",
            "offsets.commit.timeout.ms": str(COMMIT_TIMEOUT_MS),
            # The stopped followers stay in the ISR and keep their sessions throughout:
            # the commit is appended, then waits for them.
            "replica.lag.time.max.ms": "120000",
            "zookeeper.session.timeout.ms": "60000",
            "group.initial.rebalance.delay.ms": "0",
        }
    )
    create_topic(cluster.bootstrap_servers, TOPIC, partitions=1, replication_factor=3)
    found: list[int] = []
    with RawClient(cluster.brokers[0].bootstrap) as client:

        def find_coordinator() -> bool:
            # Creates __consumer_offsets on first use.
            answer = client.call(
                FIND_COORDINATOR, 2, request(FIND_COORDINATOR, 2, key=GROUP, key_type=0)
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
            assert wait_for(lambda: _commit(committer, 5) is ErrorCode.none, 60)
        assert offsets_state()["leader"] == coordinator.broker_id
        assert wait_for(lambda: len(offsets_state()["isr"]) == 3, 60), offsets_state()
    finally:
        zk.stop()
        zk.close()

    followers = [b for b in cluster.brokers if b is not coordinator]
    outcome: list[ErrorCode] = []
    reads: list[tuple[ErrorCode, int]] = []
    stable_reads: list[tuple[ErrorCode, int]] = []
    with RawClient(coordinator.bootstrap) as committer, RawClient(coordinator.bootstrap) as reader:
        assert _fetch(reader) == (ErrorCode.none, 5)
        for follower in followers:
            follower.signal(signal.SIGSTOP)
        try:
            thread = threading.Thread(
                target=lambda: outcome.append(_commit(committer, 9)), daemon=True
            )
            thread.start()
            # While the commit waits for the stopped followers, and after it failed.
            while thread.is_alive():
                reads.append(_fetch(reader))
                stable_reads.append(_fetch(reader, require_stable=True))
            thread.join()
            reads.append(_fetch(reader))
            stable_reads.append(_fetch(reader, require_stable=True))
        finally:
            for follower in followers:
                follower.signal(signal.SIGCONT)
        print(f"commit of 9: {outcome}; reads {set(reads)}; stable reads {set(stable_reads)}")
        assert outcome and outcome[0] is not ErrorCode.none, outcome
        assert set(reads) == {(ErrorCode.none, 5)}, "a commit that failed was served"
        # Readers that require stable offsets were told to retry while it was pending.
        assert (ErrorCode.unstable_offset_commit, -1) in stable_reads, set(stable_reads)
        assert set(stable_reads) <= {(ErrorCode.unstable_offset_commit, -1), (ErrorCode.none, 5)}
        assert stable_reads[-1] == (ErrorCode.none, 5)

        # With the followers back, commits replicate and are served again.
        assert wait_for(lambda: _commit(committer, 12) is ErrorCode.none, 60)
        assert _fetch(reader) == (ErrorCode.none, 12)
        assert _fetch(reader, require_stable=True) == (ErrorCode.none, 12)
