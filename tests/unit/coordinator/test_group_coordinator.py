"""The group state machine, driven without sockets or clocks."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from gregor_broker.coordinator.group import GroupState
from gregor_broker.coordinator.group_coordinator import (
    CoordinatorConfig,
    GroupCoordinator,
    JoinRequest,
    JoinResult,
    SyncResult,
    write_error,
)
from gregor_broker.coordinator.records import OffsetAndMetadata, replay

GROUP = "g"


class MemoryStore:
    """Records in a list. Writes replicate at once, unless ``hold`` keeps their
    outcomes back until ``replicate`` reports one."""

    def __init__(self) -> None:
        self.records: list[tuple[bytes, bytes | None]] = []
        self.fail: ErrorCode | None = None
        self.hold = False
        self.waiting: list = []

    def append(self, group_id, records, producer=None, on_replicated=None):
        if self.fail is not None:
            return self.fail
        self.records += records
        if on_replicated is not None:
            if self.hold:
                self.waiting.append(on_replicated)
            else:
                on_replicated(ErrorCode.none)
        return ErrorCode.none

    def replicate(self, outcome: ErrorCode = ErrorCode.none) -> None:
        waiting, self.waiting = self.waiting, []
        for on_replicated in waiting:
            on_replicated(outcome)


def delete_group(c: GroupCoordinator, group_id: str, now: int) -> list[ErrorCode]:
    answers: list[ErrorCode] = []
    c.delete_group(group_id, now, answers.append)
    return answers


def delete_offsets(c: GroupCoordinator, keys) -> list:
    answers: list = []
    c.delete_offsets(GROUP, keys, lambda error, results: answers.append((error, results)))
    return answers


def commit(c: GroupCoordinator, *args, replicated: ErrorCode = ErrorCode.none):
    """Commit and report the append's replication outcome, as the handler does."""
    outcome = c.commit_offsets(*args)
    if outcome.pending is not None:
        c.complete_offset_commit(outcome.pending, replicated)
    return outcome.errors


def coordinator(**config) -> tuple[GroupCoordinator, MemoryStore]:
    store = MemoryStore()
    defaults = {"num_partitions": 1, "group_initial_rebalance_delay_ms": 0}
    c = GroupCoordinator(CoordinatorConfig(**{**defaults, **config}), store)
    c.load_partition(0, replay([]), 0)
    return c, store


def join(c, member_id="", protocols=(("range", b"r"),), instance=None, now=0, v4=True):
    results: list[JoinResult] = []
    c.join(
        JoinRequest(
            GROUP,
            member_id,
            instance,
            "consumer",
            list(protocols),
            6000,
            10000,
            "client",
            "/host",
            v4,
        ),
        now,
        results.append,
    )
    return results


def sync(c, member_id, generation, assignments=None, now=0):
    results: list[SyncResult] = []
    c.sync(GROUP, generation, member_id, None, None, None, assignments or {}, now, results.append)
    return results


def stable_group_of(c, count):
    """Join ``count`` members (JoinGroup v4 flow) and complete the rebalance."""
    ids = []
    for _ in range(count):
        (required,) = join(c)
        assert required.error is ErrorCode.member_id_required
        ids.append(required.member_id)
    pending = [join(c, member_id) for member_id in ids]
    results = [r[0] for r in pending if r]
    assert len(results) == count
    leader = results[0].leader_id
    generation = results[0].generation_id
    syncs = {
        m: sync(c, m, generation, {x: x.encode() for x in ids} if m == leader else None)
        for m in [leader] + [i for i in ids if i != leader]
    }
    assert all(s[0].error is ErrorCode.none for s in syncs.values())
    assert c.groups[GROUP].state is GroupState.STABLE
    return ids, leader, generation


def test_new_member_must_rejoin_with_its_member_id_v4() -> None:
    c, _ = coordinator()
    (result,) = join(c)
    assert result.error is ErrorCode.member_id_required
    assert result.member_id.startswith("client-")
    (joined,) = [r for r in join(c, result.member_id)] or [None]  # completes at once
    assert joined.error is ErrorCode.none
    assert joined.generation_id == 1 and joined.leader_id == result.member_id
    assert joined.members == [(result.member_id, None, b"r")]


def test_leader_assignment_reaches_every_member_and_group_becomes_stable() -> None:
    c, store = coordinator()
    ids, _leader, generation = stable_group_of(c, 3)
    assert generation == 1
    for member in ids:
        (result,) = sync(c, member, generation)
        assert result.assignment == member.encode()
    assert store.records, "the group metadata with the assignment is stored"


def test_initial_rebalance_delay_waits_for_more_members() -> None:
    c, _ = coordinator(group_initial_rebalance_delay_ms=3000)
    first = join(c, v4=False, now=0)
    c.tick(1000)
    assert first == []  # still waiting for the delay
    assert c.groups[GROUP].state is GroupState.PREPARING_REBALANCE
    join(c, v4=False, now=1500)
    c.tick(3000)  # a member arrived during the delay: it is extended
    assert c.groups[GROUP].state is GroupState.PREPARING_REBALANCE
    c.tick(6001)
    assert c.groups[GROUP].state is GroupState.COMPLETING_REBALANCE
    assert len(c.groups[GROUP].members) == 2


def test_session_timeout_removes_a_silent_member_and_triggers_a_rebalance() -> None:
    c, _ = coordinator()
    ids, _, generation = stable_group_of(c, 2)
    assert c.heartbeat(GROUP, generation, ids[0], None, 5000) is ErrorCode.none
    c.tick(6500)  # ids[1] last heard at 0, session 6000
    group = c.groups[GROUP]
    assert ids[1] not in group.members
    assert group.state is GroupState.PREPARING_REBALANCE
    assert c.heartbeat(GROUP, generation, ids[0], None, 6600) is ErrorCode.rebalance_in_progress
    (rejoined,) = join(c, ids[0], now=6700)
    assert rejoined.generation_id == generation + 1 and rejoined.leader_id == ids[0]


def test_rebalance_timeout_drops_members_that_do_not_rejoin() -> None:
    c, _ = coordinator()
    ids, _, _ = stable_group_of(c, 2)
    join(c, ids[0], protocols=(("range", b"changed"),), now=100)  # forces a rebalance
    assert c.groups[GROUP].state is GroupState.PREPARING_REBALANCE
    c.heartbeat(GROUP, 1, ids[1], None, 5000)
    c.tick(10_101)  # rebalance timeout 10000 from 100
    group = c.groups[GROUP]
    assert list(group.members) == [ids[0]]
    assert group.state is GroupState.COMPLETING_REBALANCE and group.generation_id == 2


def test_leave_group_rebalances_and_the_last_member_leaves_an_empty_group() -> None:
    c, _ = coordinator()
    ids, _, _ = stable_group_of(c, 1)
    assert c.leave(GROUP, [(ids[0], None)], 10) == (ErrorCode.none, [ErrorCode.none])
    group = c.groups[GROUP]
    assert group.state is GroupState.EMPTY and group.generation_id == 2
    assert c.leave(GROUP, [("nobody", None)], 10)[1] == [ErrorCode.unknown_member_id]


def test_protocol_selection_takes_the_most_preferred_common_protocol() -> None:
    c, _ = coordinator(group_initial_rebalance_delay_ms=100)
    a = join(c, protocols=(("roundrobin", b""), ("range", b"")), v4=False)
    b = join(c, protocols=(("range", b""), ("roundrobin", b"")), v4=False)
    d = join(c, protocols=(("range", b""), ("sticky", b"")), v4=False)
    c.tick(101)  # members arrived during the delay: extended once
    c.tick(202)
    assert a[0].protocol_name == b[0].protocol_name == d[0].protocol_name == "range"
    (bad,) = join(c, protocols=(("sticky", b""),), v4=False)
    assert bad.error is ErrorCode.inconsistent_group_protocol


def test_static_member_rejoin_keeps_generation_and_assignment() -> None:
    c, _store = coordinator()
    (first,) = join(c, instance="i-1", v4=True)
    assert first.error is ErrorCode.none  # static members skip MEMBER_ID_REQUIRED
    (s,) = sync(c, first.member_id, first.generation_id, {first.member_id: b"p0"})
    assert s.assignment == b"p0"
    (again,) = join(c, instance="i-1", now=100)
    assert again.error is ErrorCode.none
    assert again.generation_id == first.generation_id
    assert again.member_id != first.member_id and again.leader_id == first.member_id
    (s2,) = sync(c, again.member_id, again.generation_id)
    assert s2.assignment == b"p0"
    assert c.groups[GROUP].state is GroupState.STABLE
    # The old incarnation is fenced.
    assert c.heartbeat(GROUP, 1, first.member_id, "i-1", 200) is ErrorCode.fenced_instance_id


def test_offset_commits_are_validated_like_kafka() -> None:
    c, _store = coordinator()
    offsets = {("t", 0): OffsetAndMetadata(5, -1, "", 1)}
    # A group without members (assign() + commit) commits with generation -1.
    assert commit(c, "simple", -1, "", None, offsets, 1) == {("t", 0): ErrorCode.none}
    assert c.fetch_offsets("simple", [("t", 0), ("t", 1)])[1] == {
        ("t", 0): offsets[("t", 0)],
        ("t", 1): None,
    }
    ids, _, generation = stable_group_of(c, 1)
    assert commit(c, GROUP, -1, "", None, offsets, 1)[("t", 0)] is ErrorCode.unknown_member_id
    assert commit(c, GROUP, 7, ids[0], None, offsets, 1)[("t", 0)] is ErrorCode.illegal_generation
    assert commit(c, GROUP, generation, ids[0], None, offsets, 1)[("t", 0)] is ErrorCode.none
    big = {("t", 0): OffsetAndMetadata(5, -1, "x" * 5000, 1)}
    assert commit(c, GROUP, generation, ids[0], None, big, 1)[("t", 0)] is (
        ErrorCode.offset_metadata_too_large
    )


def test_offsets_survive_unload_and_reload_from_the_stored_records() -> None:
    c, store = coordinator()
    ids, _, generation = stable_group_of(c, 2)
    commit(c, GROUP, generation, ids[0], None, {("t", 0): OffsetAndMetadata(9, -1, "m", 1)}, 1)
    c.unload_partition(0)
    assert c.fetch_offsets(GROUP, None)[0] is ErrorCode.not_coordinator
    c.loading_partitions.add(0)  # as the service's InternalTopic marks a partition it loads
    assert c.fetch_offsets(GROUP, None)[0] is ErrorCode.coordinator_load_in_progress
    c.load_partition(0, replay(store.records), 100)
    group = c.groups[GROUP]
    assert group.state is GroupState.STABLE and group.generation_id == generation
    assert set(group.members) == set(ids)
    assert c.fetch_offsets(GROUP, None)[1] == {("t", 0): OffsetAndMetadata(9, -1, "m", 1)}
    assert c.heartbeat(GROUP, generation, ids[0], None, 200) is ErrorCode.none


def test_delete_group_and_offset_retention_write_tombstones() -> None:
    c, store = coordinator(offsets_retention_ms=1000)
    ids, _, generation = stable_group_of(c, 1)
    commit(c, GROUP, generation, ids[0], None, {("t", 0): OffsetAndMetadata(1, -1, "", 1)}, 1)
    assert delete_group(c, GROUP, 2) == [ErrorCode.non_empty_group]
    c.leave(GROUP, [(ids[0], None)], 10)
    assert c.expire_offsets(500) == 0
    assert c.expire_offsets(1010) == 1  # retention counts from when the group became empty
    assert GROUP not in c.groups
    assert store.records[-1][1] is None and store.records[-2][1] is None
    assert delete_group(c, GROUP, 2000) == [ErrorCode.group_id_not_found]
    commit(c, "other", -1, "", None, {("t", 0): OffsetAndMetadata(1, -1, "", 1)}, 1)
    assert delete_group(c, "other", 2) == [ErrorCode.none]
    assert replay(store.records).offsets == {}


def test_store_failure_is_returned_to_the_committer() -> None:
    c, store = coordinator()
    store.fail = ErrorCode.not_leader_or_follower
    result = commit(c, "x", -1, "", None, {("t", 0): OffsetAndMetadata(1)}, 1)
    assert result == {("t", 0): ErrorCode.not_coordinator}
    assert c.fetch_offsets("x", [("t", 0)])[1] == {("t", 0): None}


def test_a_coordinator_without_its_leadership_lease_answers_not_coordinator() -> None:
    """A broker that cannot confirm it still leads the group's partition (a woken zombie)
    serves no offsets and takes no commits: the client finds the coordinator again."""
    c, _store = coordinator()
    offsets = {("t", 0): OffsetAndMetadata(9, -1, "", 1)}
    assert commit(c, GROUP, -1, "", None, offsets, 1)[("t", 0)] is ErrorCode.none
    lease = {0: False}
    c.holds_lease = lease.__getitem__
    assert c.fetch_offsets(GROUP, None) == (ErrorCode.not_coordinator, {})
    assert commit(c, GROUP, -1, "", None, offsets, 2)[("t", 0)] is (ErrorCode.not_coordinator)
    lease[0] = True
    assert c.fetch_offsets(GROUP, None)[1] == offsets


def test_a_commit_is_visible_only_once_its_append_is_replicated() -> None:
    """Kafka's pendingOffsetCommits: OffsetFetch never shows a commit that may still be
    lost; require_stable readers are told the offset is unstable meanwhile."""
    c, _store = coordinator()
    first = {("t", 0): OffsetAndMetadata(5, -1, "", 1)}
    assert commit(c, GROUP, -1, "", None, first, 1) == {("t", 0): ErrorCode.none}
    outcome = c.commit_offsets(GROUP, -1, "", None, {("t", 0): OffsetAndMetadata(9)}, 2)
    assert outcome.errors == {("t", 0): ErrorCode.none} and outcome.pending is not None
    assert c.fetch_offsets(GROUP, [("t", 0)])[1] == first
    assert c.has_pending_offset_commit(GROUP, ("t", 0))
    assert not c.has_pending_offset_commit(GROUP, ("t", 1))
    c.complete_offset_commit(outcome.pending, ErrorCode.request_timed_out)
    assert c.fetch_offsets(GROUP, [("t", 0)])[1] == first
    assert not c.has_pending_offset_commit(GROUP, ("t", 0))
    assert commit(c, GROUP, -1, "", None, {("t", 0): OffsetAndMetadata(12)}, 3) == {
        ("t", 0): ErrorCode.none
    }
    assert c.fetch_offsets(GROUP, [("t", 0)])[1] == {("t", 0): OffsetAndMetadata(12)}


def test_overlapping_commits_complete_in_log_order() -> None:
    c, _store = coordinator()
    older = c.commit_offsets(GROUP, -1, "", None, {("t", 0): OffsetAndMetadata(5)}, 1)
    newer = c.commit_offsets(GROUP, -1, "", None, {("t", 0): OffsetAndMetadata(9)}, 2)
    assert older.pending is not None and newer.pending is not None
    c.complete_offset_commit(older.pending, ErrorCode.none)
    assert c.fetch_offsets(GROUP, [("t", 0)])[1] == {("t", 0): OffsetAndMetadata(5)}
    assert c.has_pending_offset_commit(GROUP, ("t", 0))  # the newer one still is
    c.complete_offset_commit(newer.pending, ErrorCode.none)
    assert c.fetch_offsets(GROUP, [("t", 0)])[1] == {("t", 0): OffsetAndMetadata(9)}
    assert not c.has_pending_offset_commit(GROUP, ("t", 0))
    # A late completion of an older commit never overwrites a newer one.
    c.complete_offset_commit(older.pending, ErrorCode.none)
    assert c.fetch_offsets(GROUP, [("t", 0)])[1] == {("t", 0): OffsetAndMetadata(9)}


def test_a_commit_completing_after_its_partition_moved_away_is_dropped() -> None:
    c, _store = coordinator()
    outcome = c.commit_offsets(GROUP, -1, "", None, {("t", 0): OffsetAndMetadata(5)}, 1)
    assert outcome.pending is not None
    c.unload_partition(0)
    c.load_partition(0, replay([]), 2)
    c.complete_offset_commit(outcome.pending, ErrorCode.none)
    assert c.fetch_offsets(GROUP, [("t", 0)])[1] == {("t", 0): None}


def test_write_errors_map_as_kafkas_group_coordinator() -> None:
    """GroupMetadataManager.storeOffsets / storeGroup: what a client sees when the
    __consumer_offsets write failed."""
    for partition_error, expected in [
        (ErrorCode.not_enough_replicas, ErrorCode.coordinator_not_available),
        (ErrorCode.not_enough_replicas_after_append, ErrorCode.coordinator_not_available),
        (ErrorCode.unknown_topic_or_partition, ErrorCode.coordinator_not_available),
        (ErrorCode.request_timed_out, ErrorCode.coordinator_not_available),
        (ErrorCode.not_leader_or_follower, ErrorCode.not_coordinator),
        (ErrorCode.kafka_storage_error, ErrorCode.not_coordinator),
        (ErrorCode.invalid_producer_epoch, ErrorCode.invalid_producer_epoch),
    ]:
        assert write_error(partition_error) is expected
        assert write_error(partition_error, commit=True) is expected
    for too_large in (ErrorCode.message_too_large, ErrorCode.record_list_too_large):
        assert write_error(too_large, commit=True) is ErrorCode.invalid_commit_offset_size
        assert write_error(too_large) is ErrorCode.unknown_server_error
    c, store = coordinator()
    store.fail = ErrorCode.not_enough_replicas
    result = commit(c, "x", -1, "", None, {("t", 0): OffsetAndMetadata(1)}, 1)
    assert result == {("t", 0): ErrorCode.coordinator_not_available}


def test_offset_delete_takes_effect_once_replicated() -> None:
    c, store = coordinator()
    offsets = {("t", 0): OffsetAndMetadata(5), ("t", 1): OffsetAndMetadata(6)}
    commit(c, GROUP, -1, "", None, offsets, 1)
    store.hold = True
    answers = delete_offsets(c, [("t", 0)])
    assert answers == []  # waits for the replication
    assert c.fetch_offsets(GROUP, None)[1] == offsets
    assert c.has_pending_offset_commit(GROUP, ("t", 0))
    store.replicate(ErrorCode.request_timed_out)
    assert answers == [(ErrorCode.coordinator_not_available, {})]
    assert c.fetch_offsets(GROUP, None)[1] == offsets
    assert not c.has_pending_offset_commit(GROUP, ("t", 0))
    answers = delete_offsets(c, [("t", 0)])
    store.replicate()
    assert answers == [(ErrorCode.none, {("t", 0): ErrorCode.none})]
    assert c.fetch_offsets(GROUP, None)[1] == {("t", 1): OffsetAndMetadata(6)}


def test_delete_group_takes_effect_once_replicated() -> None:
    c, store = coordinator()
    offsets = {("t", 0): OffsetAndMetadata(5)}
    commit(c, GROUP, -1, "", None, offsets, 1)
    store.hold = True
    answers = delete_group(c, GROUP, 2)
    assert answers == []
    assert c.fetch_offsets(GROUP, None)[1] == offsets
    # Meanwhile the group takes no commits or joins (they could outlive the deletion).
    (joined,) = join(c, v4=False)
    assert joined.error is ErrorCode.coordinator_not_available
    assert commit(c, GROUP, -1, "", None, offsets, 3) == {
        ("t", 0): ErrorCode.coordinator_not_available
    }
    assert delete_group(c, GROUP, 3) == [ErrorCode.coordinator_not_available]
    store.replicate(ErrorCode.not_leader_or_follower)
    assert answers == [ErrorCode.not_coordinator]
    assert c.fetch_offsets(GROUP, None)[1] == offsets  # the failed deletion changed nothing
    assert commit(c, GROUP, -1, "", None, offsets, 4) == {("t", 0): ErrorCode.none}
    answers = delete_group(c, GROUP, 5)
    store.replicate()
    assert answers == [ErrorCode.none]
    assert GROUP not in c.groups
    assert c.fetch_offsets(GROUP, None)[1] == {}


def test_the_assignment_is_handed_out_once_stored() -> None:
    c, store = coordinator()
    (required,) = join(c)
    (joined,) = join(c, required.member_id)
    member = required.member_id
    store.hold = True
    synced = sync(c, member, joined.generation_id, {member: b"a"})
    assert synced == []
    assert c.groups[GROUP].state is GroupState.COMPLETING_REBALANCE
    store.replicate(ErrorCode.request_timed_out)
    assert synced == [SyncResult(ErrorCode.coordinator_not_available)]
    assert c.groups[GROUP].state is GroupState.PREPARING_REBALANCE
    (rejoined,) = join(c, member)
    synced = sync(c, member, rejoined.generation_id, {member: b"b"})
    store.replicate()
    assert synced == [SyncResult(ErrorCode.none, b"b", "consumer", "range")]
    assert c.groups[GROUP].state is GroupState.STABLE


def test_expiry_keeps_a_group_with_pending_transactional_offsets() -> None:
    """Kafka's GroupMetadata.hasOffsets counts open transactions' offsets: expiring the
    group's last plain offset must not delete the group under them."""
    c, _store = coordinator(offsets_retention_ms=1000)
    commit(c, GROUP, -1, "", None, {("t", 0): OffsetAndMetadata(1, -1, "", 1)}, 1)
    outcome = c.commit_transactional_offsets(
        GROUP, 7, 0, -1, "", None, {("t", 1): OffsetAndMetadata(4, -1, "", 1)}, 1
    )
    assert outcome.pending is not None
    c.complete_transactional_offset_commit(outcome.pending, ErrorCode.none)
    assert c.has_pending_offset_commit(GROUP, ("t", 1))
    assert c.expire_offsets(5000) == 1
    assert GROUP in c.groups
    c.complete_transactional_offsets(7, [0], commit=True)
    assert c.fetch_offsets(GROUP, None)[1] == {("t", 1): OffsetAndMetadata(4, -1, "", 1)}


def test_an_offset_an_open_transaction_holds_does_not_expire() -> None:
    """Kafka's cleanupExpiredOffsets skips a partition with pending transactional
    offsets: its tombstone would drop the transaction's offset."""
    c, _store = coordinator(offsets_retention_ms=1000)
    commit(c, GROUP, -1, "", None, {("t", 0): OffsetAndMetadata(1, -1, "", 1)}, 1)
    outcome = c.commit_transactional_offsets(
        GROUP, 7, 0, -1, "", None, {("t", 0): OffsetAndMetadata(4, -1, "", 1)}, 1
    )
    assert outcome.pending is not None
    c.complete_transactional_offset_commit(outcome.pending, ErrorCode.none)
    assert c.expire_offsets(5000) == 0
    c.complete_transactional_offsets(7, [0], commit=True)
    assert c.fetch_offsets(GROUP, None)[1] == {("t", 0): OffsetAndMetadata(4, -1, "", 1)}


def test_expired_offsets_stay_until_their_tombstones_replicate() -> None:
    c, store = coordinator(offsets_retention_ms=1000)
    offsets = {("t", 0): OffsetAndMetadata(1, -1, "", 1)}
    commit(c, GROUP, -1, "", None, offsets, 1)
    store.hold = True
    assert c.expire_offsets(5000) == 1
    assert c.fetch_offsets(GROUP, None)[1] == offsets
    assert c.expire_offsets(5001) == 0  # not written off twice
    store.replicate(ErrorCode.request_timed_out)
    assert c.fetch_offsets(GROUP, None)[1] == offsets
    assert c.expire_offsets(5002) == 1
    store.replicate()
    assert GROUP not in c.groups
