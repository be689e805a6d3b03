"""DeleteGroups of an Empty group while a transaction holds offsets for it.

Kafka deletes the group (``ClassicGroup.validateDeleteGroup`` refuses only a group with
members, NON_EMPTY_GROUP; ``OffsetMetadataManager.deleteAllOffsets`` writes tombstones for
the open transactions' offsets too), and replaying a tombstone removes the key from the
open transactions: the transaction committing afterwards does not bring the offset back,
neither on this coordinator nor on the next one, which rebuilds the group from the log.
Gregor's load used to apply a committed transaction's offsets at its marker whatever
came between: the next coordinator served the deleted group's offset again.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from .broker_helpers import wait_for
from .coordinator_writes import (
    FIND_COORDINATOR,
    fetch,
    producer_id,
    start_offsets_cluster,
    txn_commit,
)
from .raw_requests import RawClient, request
from .txn_helpers import write_markers

GROUP = "archivists"
DELETE_GROUPS = 42


def _delete_group(client: RawClient) -> ErrorCode:
    answer = client.call(DELETE_GROUPS, 1, request(DELETE_GROUPS, 1, groups_names=[GROUP]))
    return answer.results[0].error_code


def test_a_group_deleted_under_an_open_transaction_stays_deleted(cluster_factory) -> None:
    offsets = start_offsets_cluster(cluster_factory, GROUP)
    coordinator = offsets.coordinator
    with RawClient(coordinator.bootstrap) as client:
        producer = producer_id(client)
        assert txn_commit(client, GROUP, producer, 9) is ErrorCode.none
        assert fetch(client, GROUP, [0], require_stable=True) == {
            0: (ErrorCode.unstable_offset_commit, -1)
        }
        assert _delete_group(client) is ErrorCode.none
        assert fetch(client, GROUP, [0], require_stable=True) == {0: (ErrorCode.none, -1)}
    markers = write_markers(coordinator.bootstrap, producer, 0, True, {"__consumer_offsets": [0]})
    assert markers == {("__consumer_offsets", 0): ErrorCode.none}, markers
    with RawClient(coordinator.bootstrap) as client:
        assert fetch(client, GROUP, [0], require_stable=True) == {0: (ErrorCode.none, -1)}

    # The next coordinator rebuilds the group from the log: still deleted.
    coordinator.stop()
    survivor = offsets.followers[0]
    found: list[int] = []
    with RawClient(survivor.bootstrap) as client:

        def moved() -> bool:
            body = request(FIND_COORDINATOR, 2, key=GROUP, key_type=0)
            answer = client.call(FIND_COORDINATOR, 2, body)
            found.append(answer.node_id)
            return answer.error_code is ErrorCode.none and answer.node_id != coordinator.broker_id

        assert wait_for(moved, 60), found[-3:]
    successor = offsets.cluster.broker(found[-1])
    with RawClient(successor.bootstrap) as client:
        answers: list[dict[int, tuple[ErrorCode, int]]] = []

        def loaded() -> bool:
            answers.append(fetch_or_none(client))
            return answers[-1] is not None

        assert wait_for(loaded, 60), answers[-3:]
        assert answers[-1] == {0: (ErrorCode.none, -1)}, answers[-1]


def fetch_or_none(client: RawClient) -> dict[int, tuple[ErrorCode, int]] | None:
    """The group's offset of partition 0 from this coordinator; None while it is still
    loading the partition or not yet its coordinator."""
    try:
        return fetch(client, GROUP, [0], require_stable=True)
    except AssertionError:
        return None
