"""A TxnOffsetCommit that cannot replicate stops being pending.

The coordinator kept the offsets of a TxnOffsetCommit pending for the producer as soon
as the leader had appended them, and kept them when the wait for the in-sync replicas
failed: the client was told COORDINATOR_NOT_AVAILABLE, yet OffsetFetch with
``require_stable`` answered UNSTABLE_OFFSET_COMMIT until the transaction ended, and the
producer's COMMIT marker would have made the failed offsets the group's. Kafka drops
them (``GroupMetadataManager.storeOffsets`` calls ``failPendingTxnOffsetCommit``) and
the client retries the commit.

Both followers of the single ``__consumer_offsets`` partition are SIGSTOPped during the
commit (see ``coordinator_writes``); the commit's producer is a plain producer id and the
COMMIT marker is written as a transaction coordinator writes it (WriteTxnMarkers), so
that no transaction coordinator on a stopped broker is involved.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from .broker_helpers import wait_for
from .coordinator_writes import (
    fetch,
    followers_stopped,
    producer_id,
    start_offsets_cluster,
    txn_commit,
    while_running,
)
from .raw_requests import RawClient
from .txn_helpers import write_markers

GROUP = "settlers"


def test_a_txn_offset_commit_that_cannot_replicate_is_dropped(cluster_factory) -> None:
    offsets = start_offsets_cluster(cluster_factory, GROUP)
    bootstrap = offsets.coordinator.bootstrap
    with RawClient(bootstrap) as committer, RawClient(bootstrap) as reader:
        producer = producer_id(committer)
        assert fetch(reader, GROUP, [0], require_stable=True) == {0: (ErrorCode.none, 5)}
        with followers_stopped(offsets):
            outcome, probes = while_running(
                lambda: txn_commit(committer, GROUP, producer, 9),
                lambda: (fetch(reader, GROUP, [0])[0], fetch(reader, GROUP, [0], True)[0]),
            )
        reads = [plain for plain, _ in probes]
        stable_reads = [stable for _, stable in probes]
        print(f"TxnOffsetCommit of 9: {outcome}; reads {set(reads)}; stable {set(stable_reads)}")
        assert outcome is ErrorCode.coordinator_not_available, outcome
        assert set(reads) == {(ErrorCode.none, 5)}
        # Pending while the append waited for the followers...
        assert (ErrorCode.unstable_offset_commit, -1) in stable_reads, set(stable_reads)
        # ...and no longer once it failed: nothing of the producer is pending now.
        assert stable_reads[-1] == (ErrorCode.none, 5), stable_reads[-3:]
        assert fetch(reader, GROUP, [0], require_stable=True) == {0: (ErrorCode.none, 5)}

        # The client retries with the followers back; the COMMIT marker makes it count.
        assert wait_for(lambda: txn_commit(committer, GROUP, producer, 9) is ErrorCode.none, 60)
        assert fetch(reader, GROUP, [0], require_stable=True) == {
            0: (ErrorCode.unstable_offset_commit, -1)
        }
        assert fetch(reader, GROUP, [0]) == {0: (ErrorCode.none, 5)}
    markers = write_markers(bootstrap, producer, 0, True, {"__consumer_offsets": [0]})
    assert markers == {("__consumer_offsets", 0): ErrorCode.none}, markers
    with RawClient(bootstrap) as reader:
        assert wait_for(
            lambda: fetch(reader, GROUP, [0], require_stable=True) == {0: (ErrorCode.none, 9)},
            30,
        ), fetch(reader, GROUP, [0], require_stable=True)
