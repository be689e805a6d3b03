"""A commit is visible only once its __consumer_offsets write is replicated.

The coordinator used to apply an OffsetCommit to its cache as soon as the leader had
appended it, then wait for the in-sync replicas (acks=all). When that wait failed (the
followers never caught up, the leader lost its leadership) the client was told the
commit failed, yet OffsetFetch kept answering the offset, one the next leader does not
have. Kafka keeps such commits pending (``GroupMetadata.prepareOffsetCommit``) and
applies them only once the append succeeded (``onOffsetCommitAppend``); a failed one is
dropped (``failPendingOffsetWrite``). Meanwhile OffsetFetch with ``require_stable``
(KIP-447) answers UNSTABLE_OFFSET_COMMIT. The committer gets COORDINATOR_NOT_AVAILABLE
for the timed-out write (Kafka's mapping of REQUEST_TIMED_OUT), and finds the
coordinator again.

Here the group's ``__consumer_offsets`` partition has 3 in-sync replicas; both followers
are SIGSTOPped, so a commit is appended by the leader but cannot be replicated.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from .broker_helpers import wait_for
from .coordinator_writes import (
    commit,
    fetch,
    followers_stopped,
    start_offsets_cluster,
    while_running,
)
from .raw_requests import RawClient

GROUP = "auditors"


def test_a_commit_that_cannot_replicate_is_never_served(cluster_factory) -> None:
    offsets = start_offsets_cluster(cluster_factory, GROUP)
    bootstrap = offsets.coordinator.bootstrap
    with RawClient(bootstrap) as committer, RawClient(bootstrap) as reader:
        assert fetch(reader, GROUP, [0]) == {0: (ErrorCode.none, 5)}
        with followers_stopped(offsets):
            outcome, probes = while_running(
                lambda: commit(committer, GROUP, {0: 9}),
                # While the commit waits for the stopped followers, and after it failed.
                lambda: (fetch(reader, GROUP, [0])[0], fetch(reader, GROUP, [0], True)[0]),
            )
        reads = [plain for plain, _ in probes]
        stable_reads = [stable for _, stable in probes]
        print(f"commit of 9: {outcome}; reads {set(reads)}; stable reads {set(stable_reads)}")
        assert outcome is ErrorCode.coordinator_not_available, outcome
        assert set(reads) == {(ErrorCode.none, 5)}, "a commit that failed was served"
        # Readers that require stable offsets were told to retry while it was pending.
        assert (ErrorCode.unstable_offset_commit, -1) in stable_reads, set(stable_reads)
        assert set(stable_reads) <= {(ErrorCode.unstable_offset_commit, -1), (ErrorCode.none, 5)}
        assert stable_reads[-1] == (ErrorCode.none, 5)

        # With the followers back, commits replicate and are served again.
        assert wait_for(lambda: commit(committer, GROUP, {0: 12}) is ErrorCode.none, 60)
        assert fetch(reader, GROUP, [0]) == {0: (ErrorCode.none, 12)}
        assert fetch(reader, GROUP, [0], require_stable=True) == {0: (ErrorCode.none, 12)}
