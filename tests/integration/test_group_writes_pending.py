"""OffsetDelete, DeleteGroups and SyncGroup change nothing until their write replicates.

The coordinator used to apply these to its cache as soon as the leader had appended
their ``__consumer_offsets`` records, and answered at once: with the followers unable
to replicate, OffsetFetch stopped serving deleted offsets, a deleted group was gone and
a SyncGroup handed out an assignment (the group Stable) that a new coordinator would
not have. Kafka answers these once the write is committed (the storeGroup callback;
the new coordinator's committed writes), maps a failed write to the client's error
(REQUEST_TIMED_OUT -> COORDINATOR_NOT_AVAILABLE) and leaves the group as it was.

Both followers of the single ``__consumer_offsets`` partition are SIGSTOPped during each
write (see ``coordinator_writes``); probes on another connection watch the group.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from .broker_helpers import wait_for
from .coordinator_writes import (
    TOPIC,
    fetch,
    followers_stopped,
    start_offsets_cluster,
    while_running,
)
from .raw_requests import RawClient, request

GROUP, MEMBERS = "auditors", "watchers"
JOIN_GROUP, SYNC_GROUP, DESCRIBE_GROUPS, DELETE_GROUPS, OFFSET_DELETE = 11, 14, 15, 42, 47


def _offset_delete(client: RawClient, partitions: list[int]) -> ErrorCode:
    body = request(
        OFFSET_DELETE,
        0,
        group_id=GROUP,
        topics=[{"name": TOPIC, "partitions": [{"partition_index": i} for i in partitions]}],
    )
    return client.call(OFFSET_DELETE, 0, body).error_code


def _delete_group(client: RawClient) -> ErrorCode:
    answer = client.call(DELETE_GROUPS, 1, request(DELETE_GROUPS, 1, groups_names=[GROUP]))
    return answer.results[0].error_code


def _join(client: RawClient, member_id: str) -> Any:
    body = request(
        JOIN_GROUP,
        5,
        group_id=MEMBERS,
        session_timeout=30000,
        rebalance_timeout=30000,
        member_id=member_id,
        group_instance_id=None,
        protocol_type="consumer",
        protocols=[{"name": "range", "metadata": b""}],
    )
    return client.call(JOIN_GROUP, 5, body)


def _sync(client: RawClient, member_id: str, generation: int, assignment: bytes) -> Any:
    body = request(
        SYNC_GROUP,
        3,
        group_id=MEMBERS,
        generation_id=generation,
        member_id=member_id,
        group_instance_id=None,
        assignments=[{"member_id": member_id, "assignment": assignment}],
    )
    return client.call(SYNC_GROUP, 3, body)


def _state(client: RawClient) -> str:
    body = request(DESCRIBE_GROUPS, 3, groups=[MEMBERS], include_authorized_operations=False)
    return client.call(DESCRIBE_GROUPS, 3, body).groups[0].group_state


def test_deletes_and_assignments_wait_for_their_write(cluster_factory) -> None:
    offsets = start_offsets_cluster(cluster_factory, GROUP, partitions=2)
    bootstrap = offsets.coordinator.bootstrap
    with RawClient(bootstrap) as client, RawClient(bootstrap) as reader:
        both = {0: (ErrorCode.none, 5), 1: (ErrorCode.none, 5)}
        assert fetch(reader, GROUP, [0, 1]) == both

        # OffsetDelete: the offset stays served, the deletion fails.
        with followers_stopped(offsets):
            outcome, probes = while_running(
                lambda: _offset_delete(client, [0]), lambda: fetch(reader, GROUP, [0, 1])
            )
        print(f"OffsetDelete: {outcome}; reads {probes[:3]}...")
        assert outcome is ErrorCode.coordinator_not_available, outcome
        assert all(probe == both for probe in probes), probes
        assert wait_for(lambda: _offset_delete(client, [0]) is ErrorCode.none, 60)
        assert fetch(reader, GROUP, [0, 1]) == {0: (ErrorCode.none, -1), 1: (ErrorCode.none, 5)}

        # DeleteGroups: the group and its offsets stay, the deletion fails.
        with followers_stopped(offsets):
            outcome, probes = while_running(
                lambda: _delete_group(client), lambda: fetch(reader, GROUP, [1])
            )
        print(f"DeleteGroups: {outcome}; reads {probes[:3]}...")
        assert outcome is ErrorCode.coordinator_not_available, outcome
        assert all(probe == {1: (ErrorCode.none, 5)} for probe in probes), probes
        assert wait_for(lambda: _delete_group(client) is ErrorCode.none, 60)
        assert fetch(reader, GROUP, [1]) == {1: (ErrorCode.none, -1)}

        # SyncGroup: the leader's assignment is stored first; nobody gets it, and the
        # group is not Stable, until the store replicated.
        required = _join(client, "")
        assert required.error_code is ErrorCode.member_id_required
        member = required.member_id
        joined = _join(client, member)
        assert joined.error_code is ErrorCode.none and joined.leader == member
        with followers_stopped(offsets):
            synced, states = while_running(
                lambda: _sync(client, member, joined.generation_id, b"first"),
                lambda: _state(reader),
            )
        print(f"SyncGroup: {synced.error_code}; states {set(states)}")
        assert synced.error_code is ErrorCode.coordinator_not_available, synced
        assert synced.assignment == b""
        assert "Stable" not in states, states
        assert states[-1] == "PreparingRebalance"  # the failed store rebalances
        rejoined = _join(client, member)
        assert rejoined.error_code is ErrorCode.none
        assert rejoined.generation_id > joined.generation_id
        synced = _sync(client, member, rejoined.generation_id, b"second")
        assert (synced.error_code, synced.assignment) == (ErrorCode.none, b"second")
        assert _state(reader) == "Stable"
