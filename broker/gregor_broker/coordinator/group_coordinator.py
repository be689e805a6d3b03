"""The group coordinator's rules: Kafka's classic ``GroupCoordinator`` as a state machine.

Everything here is synchronous and free of I/O. Time comes in as ``now_ms``; the
caller calls ``tick(now_ms)`` regularly so that session timeouts, rebalance timeouts
and ``group.initial.rebalance.delay.ms`` fire. JoinGroup and SyncGroup responses that
must wait for other members are delivered later through the ``respond`` callback given
with the request. Writes to ``__consumer_offsets`` go through the injected ``Store``
(records already encoded in Kafka's format), which answers with an error code.

Which groups this coordinator owns follows the ``__consumer_offsets`` partitions this
broker leads: ``load_partition`` adopts the groups replayed from one partition,
``unload_partition`` drops them (their members get NOT_COORDINATOR and find the new
coordinator).

The flow, as in Kafka: members JoinGroup → the group prepares a rebalance and waits
until every known member has rejoined (or the rebalance timeout passes, dropping the
ones that did not) → the next generation starts, the leader receives every member's
subscription → the leader's SyncGroup carries the assignment → every member receives
its own and the group is Stable. Heartbeats keep members alive and tell them (with
REBALANCE_IN_PROGRESS) when to rejoin.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

from kio.schema.errors import ErrorCode

from .group import Group, GroupState, Member
from .records import (
    GroupMetadataKey,
    GroupMetadataValue,
    LoadedPartition,
    MemberRecord,
    OffsetAndMetadata,
    OffsetCommitKey,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
    partition_for,
)

log = logging.getLogger(__name__)

UNKNOWN_MEMBER_ID = ""
# Kafka's GroupCoordinator.NewMemberJoinTimeoutMs: a new member that never completes
# its first join is dropped after this long.
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000

Records = list[tuple[bytes, bytes | None]]
TopicPartition = tuple[str, int]


class Store(Protocol):
    def append(
        self,
        group_id: str,
        records: Records,
        producer: tuple[int, int] | None = None,
        on_replicated: Callable[[ErrorCode], None] | None = None,
    ) -> ErrorCode:
        """Append records to the group's ``__consumer_offsets`` partition; with
        ``producer`` (id, epoch) as a transactional batch of that producer. Returns the
        leader's append error as the partition reports it (``write_error`` maps it for
        clients). When that is NONE, ``on_replicated`` (if given) is called exactly once
        with the outcome of the wait for the in-sync replicas (NONE, or e.g.
        REQUEST_TIMED_OUT); possibly before ``append`` returns."""


# Kafka's mapping of a failed __consumer_offsets write to what the group's client sees
# (GroupMetadataManager.storeOffsets / storeGroup, GroupCoordinatorService's
# normalizeException): retriable errors send the client to find the coordinator again.
_WRITE_ERRORS = {
    ErrorCode.unknown_topic_or_partition: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas_after_append: ErrorCode.coordinator_not_available,
    ErrorCode.request_timed_out: ErrorCode.coordinator_not_available,
    ErrorCode.not_leader_or_follower: ErrorCode.not_coordinator,
    ErrorCode.kafka_storage_error: ErrorCode.not_coordinator,
}
_TOO_LARGE = frozenset(
    {ErrorCode.message_too_large, ErrorCode.record_list_too_large, ErrorCode.invalid_fetch_size}
)


def write_error(error: ErrorCode, *, commit: bool = False) -> ErrorCode:
    """The error a client gets for a failed write of the coordinator: an offset commit's
    oversized batch is INVALID_COMMIT_OFFSET_SIZE, any other write's UNKNOWN_SERVER_ERROR
    (Kafka's storeOffsets vs storeGroup)."""
    if error in _TOO_LARGE:
        return ErrorCode.invalid_commit_offset_size if commit else ErrorCode.unknown_server_error
    return _WRITE_ERRORS.get(error, error)


@dataclass(frozen=True, slots=True)
class CoordinatorConfig:
    num_partitions: int = 50
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1800000
    group_initial_rebalance_delay_ms: int = 3000
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    offset_metadata_max_bytes: int = 4096


@dataclass(frozen=True, slots=True)
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    client_id: str = ""
    client_host: str = ""
    # JoinGroup v4+: a new member first gets MEMBER_ID_REQUIRED and its member id.
    require_known_member_id: bool = True


@dataclass(frozen=True, slots=True)
class JoinResult:
    error: ErrorCode
    member_id: str = UNKNOWN_MEMBER_ID
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    # (member id, group instance id, metadata); only the leader gets them
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)
    skip_assignment: bool = False


@dataclass(frozen=True, slots=True)
class SyncResult:
    error: ErrorCode
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(frozen=True, slots=True)
class GroupSummary:
    group_id: str
    state: GroupState
    protocol_type: str
    protocol_name: str
    # (member id, instance id, client id, client host, metadata, assignment)
    members: list[tuple[str, str | None, str, str, bytes, bytes]]


@dataclass(slots=True)
class PendingOffsetCommit:
    """Offsets appended to ``__consumer_offsets`` and not yet replicated (Kafka's
    ``GroupMetadata.prepareOffsetCommit``); None for a tombstone (OffsetDelete, offset
    expiry, DeleteGroups). The caller waits for the append's replication, then calls
    ``GroupCoordinator.complete_offset_commit``."""

    group: Group
    offsets: dict[TopicPartition, OffsetAndMetadata | None]
    sequence: int


@dataclass(slots=True)
class PendingTxnOffsetCommit:
    """A TxnOffsetCommit appended to ``__consumer_offsets`` and not yet replicated: its
    offsets are already the producer's pending ones (Kafka's ``prepareTxnOffsetCommit``,
    so that require_stable readers wait); the caller reports the replication through
    ``GroupCoordinator.complete_transactional_offset_commit``."""

    group: Group
    producer_id: int
    offsets: dict[TopicPartition, OffsetAndMetadata]


@dataclass(slots=True)
class OffsetCommitResult:
    errors: dict[TopicPartition, ErrorCode]
    # Set when offsets were appended: they take effect once the append is replicated.
    pending: PendingOffsetCommit | None = None


@dataclass(slots=True)
class TxnOffsetCommitResult:
    errors: dict[TopicPartition, ErrorCode]
    # Set when offsets were appended: they are dropped if the append fails to replicate.
    pending: PendingTxnOffsetCommit | None = None


JoinCallback = Callable[[JoinResult], None]
SyncCallback = Callable[[SyncResult], None]
# OffsetDelete's outcome: the top-level error and each partition's.
OffsetDeleteCallback = Callable[[ErrorCode, dict[TopicPartition, ErrorCode]], None]


class GroupCoordinator:
    def __init__(
        self,
        config: CoordinatorConfig,
        store: Store,
        holds_lease: Callable[[int], bool] | None = None,
    ) -> None:
        self.config = config
        self.store = store
        # Whether this broker may still act for an owned partition (the service's
        # leadership lease, see service.py); always, without one.
        self.holds_lease = holds_lease or (lambda partition: True)
        self.groups: dict[str, Group] = {}
        # The real partition count of __consumer_offsets once it exists (Kafka too uses
        # the topic's count, not the config, when they differ).
        self.num_partitions = config.num_partitions
        self.owned_partitions: set[int] = set()
        # Partitions being loaded: the service's InternalTopic adds and discards them
        # (this set is its ``loading``); load_partition and unload_partition end it.
        self.loading_partitions: set[int] = set()
        # Orders offset commits: appends are synchronous, so a later sequence is a later
        # position in the group's __consumer_offsets partition.
        self._commit_sequence = 0

    # -- ownership ----------------------------------------------------------------------
    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions)

    def ownership_error(self, group_id: str) -> ErrorCode | None:
        """NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS when this broker cannot
        serve the group now, None when it can."""
        partition = self.partition_for(group_id)
        if partition in self.loading_partitions:
            return ErrorCode.coordinator_load_in_progress
        if partition not in self.owned_partitions:
            return ErrorCode.not_coordinator
        if not self.holds_lease(partition):
            # Possibly a zombie: another broker may lead the partition by now and hold
            # newer commits than this cache; the client finds the coordinator again.
            return ErrorCode.not_coordinator
        return None

    def load_partition(self, partition: int, loaded: LoadedPartition, now_ms: int) -> None:
        """Adopt the groups replayed from ``partition`` (Kafka's loadGroupsAndOffsets):
        a group with members comes back Stable, its members with fresh session timers."""
        for group_id in set(loaded.groups) | set(loaded.offsets) | set(loaded.pending_txn_offsets):
            if self.partition_for(group_id) != partition:
                continue
            value = loaded.groups.get(group_id)
            group = Group(group_id)
            group.offsets = dict(loaded.offsets.get(group_id, {}))
            group.pending_txn_offsets = {
                producer_id: dict(offsets)
                for producer_id, offsets in loaded.pending_txn_offsets.get(group_id, {}).items()
            }
            if value is not None:
                group.generation_id = value.generation
                group.protocol_type = value.protocol_type or None
                group.protocol_name = value.protocol
                group.state_timestamp_ms = value.current_state_timestamp
                for record in value.members:
                    member = Member(
                        record.member_id,
                        record.group_instance_id,
                        record.client_id,
                        record.client_host,
                        record.rebalance_timeout_ms,
                        record.session_timeout_ms,
                        value.protocol_type,
                        [(value.protocol or "", record.subscription)],
                        assignment=record.assignment,
                        heartbeat_deadline_ms=now_ms + record.session_timeout_ms,
                    )
                    group.add(member)
                group.leader_id = value.leader if value.leader in group.members else None
                if group.members and group.leader_id is None:
                    group.leader_id = next(iter(group.members))
                group.state = GroupState.STABLE if group.members else GroupState.EMPTY
            self.groups[group_id] = group
        self.loading_partitions.discard(partition)
        self.owned_partitions.add(partition)

    def unload_partition(self, partition: int) -> None:
        """Leadership of the partition moved: forget its groups; waiting members get
        NOT_COORDINATOR and look the coordinator up again."""
        self.owned_partitions.discard(partition)
        self.loading_partitions.discard(partition)
        for group_id in [g for g in self.groups if self.partition_for(g) == partition]:
            group = self.groups.pop(group_id)
            for member in group.members.values():
                self._respond_join(member, JoinResult(ErrorCode.not_coordinator, member.member_id))
                self._respond_sync(member, SyncResult(ErrorCode.not_coordinator))
            group.state = GroupState.DEAD

    # -- JoinGroup ----------------------------------------------------------------------
    def join(self, request: JoinRequest, now_ms: int, respond: JoinCallback) -> None:
        error = self.ownership_error(request.group_id)
        if error is not None:
            respond(JoinResult(error, request.member_id))
            return
        config = self.config
        if not (
            config.group_min_session_timeout_ms
            <= request.session_timeout_ms
            <= config.group_max_session_timeout_ms
        ):
            respond(JoinResult(ErrorCode.invalid_session_timeout, request.member_id))
            return
        group = self.groups.get(request.group_id)
        if group is None:
            if request.member_id != UNKNOWN_MEMBER_ID:
                respond(JoinResult(ErrorCode.unknown_member_id, request.member_id))
                return
            group = Group(request.group_id, state_timestamp_ms=now_ms)
            self.groups[request.group_id] = group
        if group.is_gone():
            # The group was deleted meanwhile; the member retries and recreates it.
            respond(JoinResult(ErrorCode.coordinator_not_available, request.member_id))
            return
        if not group.supports_protocols(request.protocol_type, request.protocols):
            respond(JoinResult(ErrorCode.inconsistent_group_protocol, request.member_id))
            return
        if request.member_id == UNKNOWN_MEMBER_ID:
            self._join_new_member(group, request, now_ms, respond)
        else:
            self._join_current_member(group, request, now_ms, respond)
        if group.state is GroupState.PREPARING_REBALANCE:
            self._try_complete_join(group, now_ms)

    def _new_member_id(self, request: JoinRequest) -> str:
        prefix = request.group_instance_id or request.client_id
        return f"{prefix}-{uuid.uuid4()}"

    def _join_new_member(
        self, group: Group, request: JoinRequest, now_ms: int, respond: JoinCallback
    ) -> None:
        member_id = self._new_member_id(request)
        if request.group_instance_id is not None:
            old_id = group.static_members.get(request.group_instance_id)
            if old_id is None:
                self._add_member_and_rebalance(group, member_id, request, now_ms, respond)
            else:
                self._update_static_member(group, old_id, member_id, request, now_ms, respond)
        elif request.require_known_member_id:
            # KIP-394: the member must come back with this id, so that a client retrying
            # a timed-out join does not leave orphan members behind.
            group.pending_members[member_id] = now_ms + request.session_timeout_ms
            respond(JoinResult(ErrorCode.member_id_required, member_id))
        else:
            self._add_member_and_rebalance(group, member_id, request, now_ms, respond)

    def _join_current_member(
        self, group: Group, request: JoinRequest, now_ms: int, respond: JoinCallback
    ) -> None:
        member_id = request.member_id
        if member_id in group.pending_members:
            if request.group_instance_id is not None:
                respond(JoinResult(ErrorCode.unknown_member_id, member_id))
                return
            self._add_member_and_rebalance(group, member_id, request, now_ms, respond)
            return
        if group.is_static_member_fenced(member_id, request.group_instance_id):
            respond(JoinResult(ErrorCode.fenced_instance_id, member_id))
            return
        member = group.members.get(member_id)
        if member is None or group.is_in(GroupState.EMPTY, GroupState.DEAD):
            respond(JoinResult(ErrorCode.unknown_member_id, member_id))
            return
        state = group.state
        if state is GroupState.PREPARING_REBALANCE:
            self._update_member_and_rebalance(group, member, request, now_ms, respond)
        elif state is GroupState.COMPLETING_REBALANCE:
            if member.matches(request.protocols):
                # A retry of a join that completed: answer with the current generation.
                respond(self._join_result(group, member))
            else:
                self._update_member_and_rebalance(group, member, request, now_ms, respond)
        elif state is GroupState.STABLE:
            if member_id == group.leader_id or not member.matches(request.protocols):
                # The leader rejoins to force a rebalance (e.g. metadata changed), or a
                # member changed its subscription.
                self._update_member_and_rebalance(group, member, request, now_ms, respond)
            else:
                member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
                respond(self._join_result(group, member, with_members=False))

    def _add_member_and_rebalance(
        self,
        group: Group,
        member_id: str,
        request: JoinRequest,
        now_ms: int,
        respond: JoinCallback,
    ) -> None:
        member = Member(
            member_id,
            request.group_instance_id,
            request.client_id,
            request.client_host,
            request.rebalance_timeout_ms,
            request.session_timeout_ms,
            request.protocol_type,
            list(request.protocols),
            awaiting_join=respond,
            is_new=True,
            heartbeat_deadline_ms=now_ms + NEW_MEMBER_JOIN_TIMEOUT_MS,
        )
        if group.state is GroupState.PREPARING_REBALANCE and group.generation_id == 0:
            group.new_member_added = True
        group.add(member)
        self._maybe_prepare_rebalance(group, now_ms, f"member {member_id} joined")

    def _update_member_and_rebalance(
        self,
        group: Group,
        member: Member,
        request: JoinRequest,
        now_ms: int,
        respond: JoinCallback,
    ) -> None:
        member.protocols = list(request.protocols)
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
        member.session_timeout_ms = request.session_timeout_ms
        member.awaiting_join = respond
        self._maybe_prepare_rebalance(group, now_ms, f"member {member.member_id} rejoined")

    def _update_static_member(
        self,
        group: Group,
        old_id: str,
        new_id: str,
        request: JoinRequest,
        now_ms: int,
        respond: JoinCallback,
    ) -> None:
        """KIP-345: a static member restarted under the same group.instance.id takes over
        its old member id and assignment; a Stable group does not rebalance unless the
        group's protocol would change."""
        current_leader = group.leader_id or ""
        old = group.members[old_id]
        previous = (old.protocols, old.rebalance_timeout_ms, old.session_timeout_ms)
        # Whoever still waits under the old id has been replaced.
        self._respond_join(old, JoinResult(ErrorCode.fenced_instance_id, old_id))
        self._respond_sync(old, SyncResult(ErrorCode.fenced_instance_id))
        assert request.group_instance_id is not None
        member = group.replace_static_member(request.group_instance_id, old_id, new_id)
        member.heartbeat_deadline_ms = now_ms + request.session_timeout_ms
        member.protocols = list(request.protocols)
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
        member.session_timeout_ms = request.session_timeout_ms
        member.client_id = request.client_id
        member.client_host = request.client_host
        member.awaiting_join = respond
        if group.state is GroupState.STABLE:
            if group.protocol_name == group.select_protocol():
                instance_id = request.group_instance_id

                def replicated(error: ErrorCode) -> None:
                    if member.awaiting_join is not respond:
                        return  # a rebalance answered the member meanwhile
                    if error is not ErrorCode.none:
                        # Undo, as Kafka does, so that the old member id stays valid.
                        member.awaiting_join = None
                        if group.static_members.get(instance_id) == new_id:
                            member.protocols, member.rebalance_timeout_ms = previous[:2]
                            member.session_timeout_ms = previous[2]
                            group.replace_static_member(instance_id, new_id, old_id)
                        respond(JoinResult(write_error(error), UNKNOWN_MEMBER_ID))
                        return
                    if group.state is not GroupState.STABLE:
                        return  # it waits for the rebalance that started meanwhile
                    # Kafka answers with the old leader id so that this member does not
                    # run an assignment a Stable group would not broadcast.
                    member.is_new = False
                    self._respond_join(
                        member,
                        JoinResult(
                            ErrorCode.none,
                            new_id,
                            group.generation_id,
                            group.protocol_type,
                            group.protocol_name,
                            current_leader,
                        ),
                    )

                error = self._store_group(group, on_replicated=replicated)
                if error is not ErrorCode.none:
                    replicated(error)
            else:
                self._maybe_prepare_rebalance(group, now_ms, "static member changed protocol")
        elif group.state is GroupState.COMPLETING_REBALANCE:
            # The leader may already be assigning to the old member id.
            self._prepare_rebalance(group, now_ms, "static member rejoined during sync")

    def _join_result(
        self, group: Group, member: Member, *, with_members: bool = True
    ) -> JoinResult:
        members: list[tuple[str, str | None, bytes]] = []
        if with_members and member.member_id == group.leader_id and group.protocol_name:
            members = [
                (m.member_id, m.group_instance_id, m.metadata(group.protocol_name))
                for m in group.members.values()
            ]
        return JoinResult(
            ErrorCode.none,
            member.member_id,
            group.generation_id,
            group.protocol_type,
            group.protocol_name,
            group.leader_id or "",
            members,
        )

    # -- rebalance ----------------------------------------------------------------------
    def _maybe_prepare_rebalance(self, group: Group, now_ms: int, reason: str) -> None:
        if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY):
            self._prepare_rebalance(group, now_ms, reason)

    def _prepare_rebalance(self, group: Group, now_ms: int, reason: str) -> None:
        if group.state is GroupState.COMPLETING_REBALANCE:
            for member in group.members.values():
                member.assignment = b""
                self._respond_sync(member, SyncResult(ErrorCode.rebalance_in_progress))
        if group.state is GroupState.EMPTY and self.config.group_initial_rebalance_delay_ms > 0:
            # group.initial.rebalance.delay.ms: a new group waits for more members to
            # arrive, extending the delay while they keep coming, within the rebalance
            # timeout (Kafka's InitialDelayedJoin).
            delay = self.config.group_initial_rebalance_delay_ms
            group.initial_delay_active = True
            group.initial_delay_remaining_ms = max(group.rebalance_timeout_ms() - delay, 0)
            group.new_member_added = False
            group.rebalance_deadline_ms = now_ms + delay
        else:
            group.initial_delay_active = False
            group.rebalance_deadline_ms = now_ms + group.rebalance_timeout_ms()
        log.info(
            "preparing to rebalance group %s in state %s with old generation %d (%s)",
            group.group_id,
            group.state.value,
            group.generation_id,
            reason,
        )
        group.transition_to(GroupState.PREPARING_REBALANCE, now_ms)
        # Matches Kafka's tryCompleteElseWatch: with every member already rejoined (or
        # none left), the rebalance completes at once.
        self._try_complete_join(group, now_ms)

    def _try_complete_join(self, group: Group, now_ms: int) -> None:
        if group.initial_delay_active:
            return  # the initial delay runs to its end (ticks)
        if group.has_all_members_joined():
            self._complete_join(group, now_ms)

    def _complete_join(self, group: Group, now_ms: int) -> None:
        group.rebalance_deadline_ms = None
        group.initial_delay_active = False
        for member in [m for m in group.members.values() if m.awaiting_join is None]:
            log.info(
                "group %s: member %s did not rejoin in time; removing it",
                group.group_id,
                member.member_id,
            )
            group.remove(member.member_id)
        group.pending_members.clear()
        if group.state is GroupState.DEAD:
            return
        group.generation_id += 1
        if group.members:
            group.protocol_name = group.select_protocol()
            group.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            group.protocol_name = None
            group.transition_to(GroupState.EMPTY, now_ms)
        log.info(
            "group %s: generation %d (%s) with %d members",
            group.group_id,
            group.generation_id,
            group.protocol_name,
            len(group.members),
        )
        if group.state is GroupState.EMPTY:
            # As Kafka's onCompleteJoin: the empty generation is the group's state
            # already; a failed write is only logged (the next write carries it).
            logged = self._log_store_failure(group)
            store_error = self._store_group(group, on_replicated=logged)
            if store_error is not ErrorCode.none:
                logged(store_error)
            return
        for member in group.members.values():
            result = self._join_result(group, member)
            member.is_new = False
            member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
            self._respond_join(member, result)

    # -- SyncGroup ----------------------------------------------------------------------
    def sync(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
        now_ms: int,
        respond: SyncCallback,
    ) -> None:
        error = self.ownership_error(group_id)
        group = self.groups.get(group_id)
        if error is None and group is None:
            error = ErrorCode.unknown_member_id
        if error is not None:
            respond(SyncResult(error))
            return
        assert group is not None
        error = self._validate_member(group, member_id, group_instance_id)
        if error is None and generation_id != group.generation_id:
            error = ErrorCode.illegal_generation
        if error is None and (
            (protocol_type is not None and protocol_type != group.protocol_type)
            or (protocol_name is not None and protocol_name != group.protocol_name)
        ):
            error = ErrorCode.inconsistent_group_protocol
        if error is not None:
            respond(SyncResult(error))
            return
        member = group.members[member_id]
        if group.state is GroupState.EMPTY:
            respond(SyncResult(ErrorCode.unknown_member_id))
        elif group.state is GroupState.PREPARING_REBALANCE:
            respond(SyncResult(ErrorCode.rebalance_in_progress))
        elif group.state is GroupState.COMPLETING_REBALANCE:
            member.awaiting_sync = respond
            member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
            if member_id == group.leader_id:
                self._store_assignment(group, assignments, now_ms)
        elif group.state is GroupState.STABLE:
            member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
            respond(
                SyncResult(
                    ErrorCode.none, member.assignment, group.protocol_type, group.protocol_name
                )
            )
        else:
            respond(SyncResult(ErrorCode.coordinator_not_available))

    def _store_assignment(self, group: Group, assignments: dict[str, bytes], now_ms: int) -> None:
        """The leader's assignment: stored with the group's metadata, then, once the write
        is replicated, handed to every member and the group is Stable (Kafka's storeGroup
        callback, setAndPropagateAssignment). A failed write answers every waiting member
        with the error and rebalances (resetAndPropagateAssignmentError)."""
        assignment = {m: assignments.get(m, b"") for m in group.members}
        generation = group.generation_id

        def replicated(error: ErrorCode) -> None:
            if (
                self.groups.get(group.group_id) is not group
                or group.state is not GroupState.COMPLETING_REBALANCE
                or group.generation_id != generation
            ):
                return  # the group moved on meanwhile (Kafka ignores the outcome too)
            if error is not ErrorCode.none:
                log.warning(
                    "group %s: storing the assignment of generation %d failed: %s",
                    group.group_id,
                    generation,
                    error.name,
                )
                for member in group.members.values():
                    member.assignment = b""
                    self._respond_sync(member, SyncResult(write_error(error)))
                self._prepare_rebalance(group, now_ms, "storing the assignment failed")
                return
            for member in group.members.values():
                member.assignment = assignment.get(member.member_id, b"")
            group.transition_to(GroupState.STABLE, now_ms)
            for member in group.members.values():
                self._respond_sync(
                    member,
                    SyncResult(
                        ErrorCode.none, member.assignment, group.protocol_type, group.protocol_name
                    ),
                )

        store_error = self._store_group(group, assignment, replicated)
        if store_error is not ErrorCode.none:
            replicated(store_error)

    # -- Heartbeat / LeaveGroup -----------------------------------------------------------
    def heartbeat(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        now_ms: int,
    ) -> ErrorCode:
        error = self.ownership_error(group_id)
        if error is not None:
            return error
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.unknown_member_id
        error = self._validate_member(group, member_id, group_instance_id)
        if error is not None:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.illegal_generation
        member = group.members[member_id]
        if group.state is GroupState.EMPTY:
            return ErrorCode.unknown_member_id
        member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
        if group.state is GroupState.PREPARING_REBALANCE:
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def leave(
        self, group_id: str, members: list[tuple[str, str | None]], now_ms: int
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        """LeaveGroup for (member id, group instance id) pairs: the top-level error and
        one error per member (v3+ batches members; older versions send one)."""
        error = self.ownership_error(group_id)
        if error is not None:
            return error, [error] * len(members)
        group = self.groups.get(group_id)
        if group is None or group.state is GroupState.DEAD:
            return ErrorCode.none, [ErrorCode.unknown_member_id] * len(members)
        results = []
        for member_id, instance_id in members:
            if instance_id is not None:
                registered = group.static_members.get(instance_id)
                if registered is None:
                    results.append(ErrorCode.unknown_member_id)
                    continue
                if member_id != UNKNOWN_MEMBER_ID and member_id != registered:
                    results.append(ErrorCode.fenced_instance_id)
                    continue
                member_id = registered
            if member_id in group.pending_members:
                del group.pending_members[member_id]
                results.append(ErrorCode.none)
                if group.state is GroupState.PREPARING_REBALANCE:
                    self._try_complete_join(group, now_ms)
                continue
            if member_id not in group.members:
                results.append(ErrorCode.unknown_member_id)
                continue
            self._remove_member_and_update_group(group, member_id, now_ms, "left the group")
            results.append(ErrorCode.none)
        return ErrorCode.none, results

    def _remove_member_and_update_group(
        self, group: Group, member_id: str, now_ms: int, reason: str
    ) -> None:
        member = group.remove(member_id)
        if member is not None:
            self._respond_join(member, JoinResult(ErrorCode.unknown_member_id, member_id))
            self._respond_sync(member, SyncResult(ErrorCode.unknown_member_id))
        if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, now_ms, f"member {member_id} {reason}")
        elif group.state is GroupState.PREPARING_REBALANCE:
            self._try_complete_join(group, now_ms)

    def _validate_member(
        self, group: Group, member_id: str, instance_id: str | None
    ) -> ErrorCode | None:
        if group.is_gone():
            return ErrorCode.coordinator_not_available
        if group.is_static_member_fenced(member_id, instance_id):
            return ErrorCode.fenced_instance_id
        if member_id not in group.members:
            return ErrorCode.unknown_member_id
        return None

    # -- timers ---------------------------------------------------------------------------
    def tick(self, now_ms: int) -> None:
        """Expire sessions, pending members and rebalance deadlines."""
        for group in list(self.groups.values()):
            for member_id, deadline in list(group.pending_members.items()):
                if now_ms >= deadline:
                    del group.pending_members[member_id]
                    if group.state is GroupState.PREPARING_REBALANCE:
                        self._try_complete_join(group, now_ms)
            for member in list(group.members.values()):
                if self._keep_alive(member, now_ms):
                    continue
                log.info(
                    "group %s: member %s session expired (%d ms); removing it",
                    group.group_id,
                    member.member_id,
                    member.session_timeout_ms,
                )
                self._remove_member_and_update_group(
                    group, member.member_id, now_ms, "session expired"
                )
            if (
                group.state is GroupState.PREPARING_REBALANCE
                and group.rebalance_deadline_ms is not None
                and now_ms >= group.rebalance_deadline_ms
            ):
                if (
                    group.initial_delay_active
                    and group.new_member_added
                    and group.initial_delay_remaining_ms > 0
                ):
                    delay = min(
                        self.config.group_initial_rebalance_delay_ms,
                        group.initial_delay_remaining_ms,
                    )
                    group.initial_delay_remaining_ms -= delay
                    group.new_member_added = False
                    group.rebalance_deadline_ms = now_ms + delay
                else:
                    self._complete_join(group, now_ms)

    @staticmethod
    def _keep_alive(member: Member, now_ms: int) -> bool:
        """Kafka's MemberMetadata.shouldKeepAlive: a member waiting in a join or sync is
        alive (the rebalance timeout governs it), except a new member that never
        completed a join, which gets NEW_MEMBER_JOIN_TIMEOUT_MS."""
        if member.awaiting_join is not None:
            return not member.is_new or now_ms < member.heartbeat_deadline_ms
        if member.awaiting_sync is not None:
            return True
        return now_ms < member.heartbeat_deadline_ms

    # -- offsets --------------------------------------------------------------------------
    def commit_offsets(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        offsets: dict[TopicPartition, OffsetAndMetadata],
        now_ms: int,
    ) -> OffsetCommitResult:
        """Validate and append a commit. Accepted offsets are only pending here: the
        cache (OffsetFetch) shows them once the caller reports the append replicated
        through ``complete_offset_commit``, as Kafka's ``onOffsetCommitAppend`` does; a
        commit that fails to replicate must never have been visible."""

        def all_fail(code: ErrorCode) -> OffsetCommitResult:
            return OffsetCommitResult(dict.fromkeys(offsets, code))

        error = self.ownership_error(group_id)
        if error is not None:
            return all_fail(error)
        group = self.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                return all_fail(ErrorCode.illegal_generation)
            # A group that does not use Kafka's group management (assign() + commit).
            group = Group(group_id, state_timestamp_ms=now_ms)
            self.groups[group_id] = group
        if group.is_gone():
            return all_fail(ErrorCode.coordinator_not_available)
        if generation_id >= 0 or member_id != UNKNOWN_MEMBER_ID or group_instance_id is not None:
            error = self._validate_member(group, member_id, group_instance_id)
            if error is None and generation_id != group.generation_id:
                error = ErrorCode.illegal_generation
            if error is not None:
                return all_fail(error)
        elif group.state is not GroupState.EMPTY:
            # Matches Kafka: while the group has members, only members may commit.
            return all_fail(ErrorCode.unknown_member_id)
        if group.state is GroupState.COMPLETING_REBALANCE:
            return all_fail(ErrorCode.rebalance_in_progress)
        member = group.members.get(member_id)
        if member is not None:
            member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
        results, records, accepted = self._offset_commit_records(group_id, offsets)
        if not records:
            return OffsetCommitResult(results)
        store_error = self.store.append(group_id, records)
        for key in accepted:
            results[key] = write_error(store_error, commit=True)
        if store_error is not ErrorCode.none:
            return OffsetCommitResult(results)
        return OffsetCommitResult(results, self._stage(group, dict(accepted)))

    def _offset_commit_records(
        self, group_id: str, offsets: dict[TopicPartition, OffsetAndMetadata]
    ) -> tuple[dict[TopicPartition, ErrorCode], Records, dict[TopicPartition, OffsetAndMetadata]]:
        """(refused partitions, the records of the accepted ones, the accepted offsets):
        metadata over ``offset.metadata.max.bytes`` is OFFSET_METADATA_TOO_LARGE."""
        results: dict[TopicPartition, ErrorCode] = {}
        records: Records = []
        accepted: dict[TopicPartition, OffsetAndMetadata] = {}
        for key, value in offsets.items():
            if len(value.metadata.encode("utf-8")) > self.config.offset_metadata_max_bytes:
                results[key] = ErrorCode.offset_metadata_too_large
                continue
            accepted[key] = value
            records.append(
                (
                    encode_offset_commit_key(OffsetCommitKey(group_id, key[0], key[1])),
                    encode_offset_commit_value(value),
                )
            )
        return results, records, accepted

    def complete_offset_commit(self, pending: PendingOffsetCommit, error: ErrorCode) -> ErrorCode:
        """The append of ``pending`` was replicated (``error`` none) or failed: apply it
        to the cache (Kafka's ``onOffsetCommitAppend``; a tombstone removes the offset) or
        drop it, leaving the cache as it was (``failPendingOffsetWrite``). A group
        unloaded or deleted meanwhile is not touched: its partition's new leader serves
        what the log holds. Returns the error for the committing client."""
        group = pending.group
        current = self.groups.get(group.group_id) is group and group.state is not GroupState.DEAD
        for key, value in pending.offsets.items():
            staged = group.pending_offset_commits.get(key)
            if (
                error is ErrorCode.none
                and current
                and staged is not None
                and group.offset_sequences.get(key, 0) < pending.sequence
            ):
                if value is None:
                    group.offsets.pop(key, None)
                    # Kafka's replay of a tombstone: open transactions lose the offset.
                    for producer_id, txn_offsets in list(group.pending_txn_offsets.items()):
                        txn_offsets.pop(key, None)
                        if not txn_offsets:
                            del group.pending_txn_offsets[producer_id]
                else:
                    group.offsets[key] = value
                group.offset_sequences[key] = pending.sequence
            if staged == pending.sequence:
                del group.pending_offset_commits[key]
        return write_error(error, commit=True)

    def _stage(
        self, group: Group, offsets: dict[TopicPartition, OffsetAndMetadata | None]
    ) -> PendingOffsetCommit:
        """Register writes of ``offsets`` (None: tombstones) as pending, before their
        append: later than every write staged so far."""
        self._commit_sequence += 1
        pending = PendingOffsetCommit(group, offsets, self._commit_sequence)
        for key in offsets:
            group.pending_offset_commits[key] = pending.sequence
        return pending

    def has_pending_offset_commit(self, group_id: str, key: TopicPartition) -> bool:
        """A write of ``key`` awaits replication, or an open transaction holds an offset
        for it: OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT (KIP-447;
        Kafka's ``hasPendingOffsetCommitsForTopicPartition``)."""
        group = self.groups.get(group_id)
        return group is not None and (
            key in group.pending_offset_commits
            or any(key in offsets for offsets in group.pending_txn_offsets.values())
        )

    def commit_transactional_offsets(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        offsets: dict[TopicPartition, OffsetAndMetadata],
        now_ms: int,
    ) -> TxnOffsetCommitResult:
        """TxnOffsetCommit (Kafka's ``handleTxnCommitOffsets``): the offsets are written
        as a transactional batch of the producer and held pending until its marker
        reaches this partition (``complete_transactional_offsets``). The caller waits
        for the append's replication and reports it through
        ``complete_transactional_offset_commit``."""

        def all_fail(code: ErrorCode) -> TxnOffsetCommitResult:
            return TxnOffsetCommitResult(dict.fromkeys(offsets, code))

        error = self.ownership_error(group_id)
        if error is not None:
            return all_fail(error)
        group = self.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                return all_fail(ErrorCode.illegal_generation)
            group = Group(group_id, state_timestamp_ms=now_ms)
            self.groups[group_id] = group
        if group.is_gone():
            return all_fail(ErrorCode.coordinator_not_available)
        if group_instance_id is not None or member_id != UNKNOWN_MEMBER_ID:
            error = self._validate_member(group, member_id, group_instance_id)
            if error is not None:
                return all_fail(error)
        if generation_id >= 0 and generation_id != group.generation_id:
            return all_fail(ErrorCode.illegal_generation)
        results, records, accepted = self._offset_commit_records(group_id, offsets)
        if records:
            store_error = self.store.append(group_id, records, (producer_id, producer_epoch))
            for key in accepted:
                results[key] = write_error(store_error, commit=True)
            if store_error is ErrorCode.none:
                group.pending_txn_offsets.setdefault(producer_id, {}).update(accepted)
                return TxnOffsetCommitResult(
                    results, PendingTxnOffsetCommit(group, producer_id, accepted)
                )
        return TxnOffsetCommitResult(results)

    def complete_transactional_offset_commit(
        self, pending: PendingTxnOffsetCommit, error: ErrorCode
    ) -> ErrorCode:
        """The append of a TxnOffsetCommit was replicated (``error`` none) or failed.
        A failed one's offsets are no longer pending for the producer (Kafka's
        ``failPendingTxnOffsetCommit``): its marker must not make them committed, and
        require_stable readers need not wait for them; the client, told to find the
        coordinator again, retries the commit. An offset another commit of the
        producer has staged since is left alone. Returns the client's error."""
        if error is not ErrorCode.none:
            group = pending.group
            staged = group.pending_txn_offsets.get(pending.producer_id)
            if staged is not None:
                for key, value in pending.offsets.items():
                    if staged.get(key) is value:
                        del staged[key]
                if not staged:
                    del group.pending_txn_offsets[pending.producer_id]
        return write_error(error, commit=True)

    def complete_transactional_offsets(
        self, producer_id: int, partitions: Iterable[int], commit: bool
    ) -> int:
        """The producer's marker reached these ``__consumer_offsets`` partitions: its
        pending offsets of their groups become the committed offsets (COMMIT) or are
        dropped (ABORT). Returns how many groups changed."""
        wanted = set(partitions)
        changed = 0
        for group in self.groups.values():
            if producer_id not in group.pending_txn_offsets:
                continue
            if self.partition_for(group.group_id) not in wanted:
                continue
            pending = group.pending_txn_offsets.pop(producer_id)
            if commit:
                # Newer than any commit applied so far: a regular commit completing later
                # with an older sequence does not overwrite it.
                self._commit_sequence += 1
                for key, value in pending.items():
                    group.offsets[key] = value
                    group.offset_sequences[key] = self._commit_sequence
            changed += 1
        return changed

    def fetch_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition] | None
    ) -> tuple[ErrorCode, dict[TopicPartition, OffsetAndMetadata | None]]:
        """Committed offsets (None where there is none); all of them when
        ``partitions`` is None."""
        error = self.ownership_error(group_id)
        if error is not None:
            return error, {}
        group = self.groups.get(group_id)
        offsets = group.offsets if group is not None else {}
        if partitions is None:
            return ErrorCode.none, dict(offsets)
        return ErrorCode.none, {key: offsets.get(key) for key in partitions}

    def delete_offsets(
        self, group_id: str, partitions: list[TopicPartition], respond: OffsetDeleteCallback
    ) -> None:
        """OffsetDelete: only for partitions of topics the group does not consume. The
        offsets stay served until their tombstones are replicated; ``respond`` gets the
        outcome then (Kafka's new coordinator answers once the write is committed)."""
        error = self.ownership_error(group_id)
        if error is not None:
            respond(error, {})
            return
        group = self.groups.get(group_id)
        if group is None or group.state is GroupState.DEAD:
            respond(ErrorCode.group_id_not_found, {})
            return
        if group.deleting:
            respond(ErrorCode.coordinator_not_available, {})
            return
        if group.state is not GroupState.EMPTY and group.protocol_type != "consumer":
            respond(ErrorCode.non_empty_group, {})
            return
        subscribed = group.subscribed_topics() if group.state is not GroupState.EMPTY else set()
        results: dict[TopicPartition, ErrorCode] = {}
        tombstones: dict[TopicPartition, OffsetAndMetadata | None] = {}
        for key in partitions:
            if subscribed is None or key[0] in subscribed:
                results[key] = ErrorCode.group_subscribed_to_topic
                continue
            results[key] = ErrorCode.none
            if (
                key in group.offsets
                or key in group.pending_offset_commits
                or any(key in txn_offsets for txn_offsets in group.pending_txn_offsets.values())
            ):
                # Kafka: also when only an open transaction holds an offset for it.
                tombstones[key] = None
        if not tombstones:
            respond(ErrorCode.none, results)
            return

        def replicated(outcome: ErrorCode) -> None:
            self.complete_offset_commit(pending, outcome)
            if outcome is ErrorCode.none:
                respond(ErrorCode.none, results)
            else:
                respond(write_error(outcome), {})

        pending = self._stage(group, tombstones)
        store_error = self.store.append(
            group_id, self._tombstones(group_id, tombstones), on_replicated=replicated
        )
        if store_error is not ErrorCode.none:
            replicated(store_error)

    @staticmethod
    def _tombstones(group_id: str, keys: Iterable[TopicPartition]) -> Records:
        return [(encode_offset_commit_key(OffsetCommitKey(group_id, t, p)), None) for t, p in keys]

    def expire_offsets(self, now_ms: int) -> int:
        """Offset retention (``offsets.retention.minutes``, KIP-211): offsets of a group
        without members expire this long after the group became empty (or after the
        commit, for groups that never had members); an explicit expiry from
        OffsetCommit v2..v4 wins. An empty group left without offsets is deleted. The
        cache forgets them once their tombstones are replicated (a failed write leaves
        them for the next check). Returns how many offsets were written off."""
        retention = self.config.offsets_retention_ms
        expired_total = 0
        for group in list(self.groups.values()):
            if group.state is not GroupState.EMPTY or group.deleting:
                continue
            expired = []
            for key, value in group.offsets.items():
                if key in group.pending_offset_commits or any(
                    key in txn_offsets for txn_offsets in group.pending_txn_offsets.values()
                ):
                    # Kafka: a partition with a pending commit, or an offset an open
                    # transaction holds, does not expire (its tombstone would drop it).
                    continue
                if value.expire_timestamp >= 0:
                    due = now_ms >= value.expire_timestamp
                else:
                    base = (
                        group.state_timestamp_ms
                        if group.protocol_type is not None and group.state_timestamp_ms >= 0
                        else value.commit_timestamp
                    )
                    due = now_ms - base >= retention
                if due:
                    expired.append(key)
            records = self._tombstones(group.group_id, expired)
            # Kafka keeps a group with pending commits (GroupMetadata.hasOffsets).
            delete_group = len(expired) == len(group.offsets) and not (
                group.pending_offset_commits or group.pending_txn_offsets
            )
            if delete_group:
                records.append((encode_group_metadata_key(GroupMetadataKey(group.group_id)), None))
            if not records:
                continue
            if self._write_off(group, dict.fromkeys(expired), records, delete_group, now_ms):
                expired_total += len(expired)
        return expired_total

    def _write_off(
        self,
        group: Group,
        tombstones: dict[TopicPartition, OffsetAndMetadata | None],
        records: Records,
        delete_group: bool,
        now_ms: int,
        respond: Callable[[ErrorCode], None] | None = None,
    ) -> bool:
        """Append ``records`` (the tombstones of ``tombstones``' offsets, and of the
        group itself when ``delete_group``); the cache changes once they are replicated
        (a group being deleted takes no joins or commits meanwhile). ``respond`` gets the
        client's error. False when the leader could not even append."""
        pending = self._stage(group, tombstones)
        group.deleting = delete_group

        def replicated(outcome: ErrorCode) -> None:
            self.complete_offset_commit(pending, outcome)
            group.deleting = False
            current = self.groups.get(group.group_id) is group
            if outcome is ErrorCode.none and delete_group and current:
                # Joins and commits waited (``deleting``): the group is still Empty, and
                # goes with whatever was pending (Kafka's removeAllOffsets).
                group.transition_to(GroupState.DEAD, now_ms)
                del self.groups[group.group_id]
            elif outcome is not ErrorCode.none:
                log.warning(
                    "group %s: writing off %d offsets%s failed: %s",
                    group.group_id,
                    len(tombstones),
                    " and the group" if delete_group else "",
                    outcome.name,
                )
            if respond is not None:
                respond(write_error(outcome))

        store_error = self.store.append(group.group_id, records, on_replicated=replicated)
        if store_error is not ErrorCode.none:
            replicated(store_error)
            return False
        return True

    # -- groups ---------------------------------------------------------------------------
    def list_groups(self) -> list[Group]:
        return [
            g
            for g in self.groups.values()
            if g.state is not GroupState.DEAD
            and self.partition_for(g.group_id) in self.owned_partitions
        ]

    def describe(self, group_id: str) -> tuple[ErrorCode, GroupSummary | None]:
        """Matches Kafka: an unknown group is described as Dead without an error, and
        member metadata and assignments are shown only while the group is Stable."""
        error = self.ownership_error(group_id)
        if error is not None:
            return error, None
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.none, GroupSummary(group_id, GroupState.DEAD, "", "", [])
        stable = group.state is GroupState.STABLE
        protocol = group.protocol_name or ""
        members = [
            (
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.metadata(protocol) if stable and protocol in m.protocol_names() else b"",
                m.assignment if stable else b"",
            )
            for m in group.members.values()
        ]
        return ErrorCode.none, GroupSummary(
            group_id,
            group.state,
            group.protocol_type or "",
            protocol if stable else "",
            members,
        )

    def delete_group(
        self, group_id: str, now_ms: int, respond: Callable[[ErrorCode], None]
    ) -> None:
        """DeleteGroups for one group: answered once its tombstones are replicated, the
        group shown as it was until then (and kept when the write fails)."""
        error = self.ownership_error(group_id)
        if error is not None:
            respond(error)
            return
        group = self.groups.get(group_id)
        if group is None or group.state is GroupState.DEAD:
            respond(ErrorCode.group_id_not_found)
            return
        if group.deleting:
            respond(ErrorCode.coordinator_not_available)
            return
        if group.state is not GroupState.EMPTY:
            respond(ErrorCode.non_empty_group)
            return
        keys = set(group.offsets) | set(group.pending_offset_commits)
        for offsets in group.pending_txn_offsets.values():
            keys |= set(offsets)
        records = self._tombstones(group_id, keys)
        records.append((encode_group_metadata_key(GroupMetadataKey(group_id)), None))
        # Kafka drops the group's open transactional offsets with it.
        self._write_off(group, dict.fromkeys(keys), records, True, now_ms, respond)

    # -- helpers --------------------------------------------------------------------------
    def _store_group(
        self,
        group: Group,
        assignments: dict[str, bytes] | None = None,
        on_replicated: Callable[[ErrorCode], None] | None = None,
    ) -> ErrorCode:
        """Write the group's metadata (members, subscriptions, assignments: the members'
        own unless ``assignments`` are given) so that a new coordinator can take over the
        generation; ``on_replicated`` as in ``Store.append``."""
        chosen = assignments or {}
        protocol = group.protocol_name
        value = GroupMetadataValue(
            protocol_type=group.protocol_type or "",
            generation=group.generation_id,
            protocol=protocol,
            leader=group.leader_id if group.members else None,
            current_state_timestamp=group.state_timestamp_ms,
            members=tuple(
                MemberRecord(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.rebalance_timeout_ms,
                    m.session_timeout_ms,
                    m.metadata(protocol) if protocol and protocol in m.protocol_names() else b"",
                    chosen.get(m.member_id, m.assignment),
                )
                for m in group.members.values()
            ),
        )
        return self.store.append(
            group.group_id,
            [
                (
                    encode_group_metadata_key(GroupMetadataKey(group.group_id)),
                    encode_group_metadata_value(value),
                )
            ],
            on_replicated=on_replicated,
        )

    @staticmethod
    def _log_store_failure(group: Group) -> Callable[[ErrorCode], None]:
        generation = group.generation_id

        def replicated(error: ErrorCode) -> None:
            if error is not ErrorCode.none:
                log.warning(
                    "group %s: storing generation %d failed: %s",
                    group.group_id,
                    generation,
                    error.name,
                )

        return replicated

    @staticmethod
    def _respond_join(member: Member, result: JoinResult) -> None:
        callback, member.awaiting_join = member.awaiting_join, None
        if callback is not None:
            callback(result)

    @staticmethod
    def _respond_sync(member: Member, result: SyncResult) -> None:
        callback, member.awaiting_sync = member.awaiting_sync, None
        if callback is not None:
            callback(result)
