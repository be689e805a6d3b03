"""A consumer group's state: members, generation, protocol, committed offsets.

Kafka's ``GroupMetadata`` and ``MemberMetadata`` as plain data, with the group state
machine's legal transitions. The rules that move a group between states (joins, syncs,
timeouts) live in ``group_coordinator.py``; this module only keeps the data
consistent. No I/O and no clocks: times are passed in, in milliseconds.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from .consumer_protocol import subscription_topics
from .records import OffsetAndMetadata


class GroupState(Enum):
    """Kafka's classic group states, spelled as ListGroups/DescribeGroups report them."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


# Matches Kafka's GroupState.validPreviousStates.
VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


class IllegalStateTransition(RuntimeError):
    pass


@dataclass(slots=True)
class Member:
    """One member of a group (Kafka's ``MemberMetadata``)."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    # Callbacks of a JoinGroup / SyncGroup waiting for the rebalance to progress.
    awaiting_join: Callable[[Any], None] | None = None
    awaiting_sync: Callable[[Any], None] | None = None
    is_new: bool = False
    heartbeat_deadline_ms: int = 0

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        raise KeyError(f"member {self.member_id} does not support protocol {protocol}")

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among ``candidates``."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")


@dataclass(slots=True)
class Group:
    group_id: str
    state: GroupState = GroupState.EMPTY
    state_timestamp_ms: int = -1
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    # group.instance.id -> member id
    static_members: dict[str, str] = field(default_factory=dict)
    # member ids handed out with MEMBER_ID_REQUIRED, not joined yet -> expiry deadline
    pending_members: dict[str, int] = field(default_factory=dict)
    offsets: dict[tuple[str, int], OffsetAndMetadata] = field(default_factory=dict)
    # TxnOffsetCommit: producer id -> offsets written in its open transaction, committed
    # when its COMMIT marker reaches this group's partition, dropped on ABORT.
    pending_txn_offsets: dict[int, dict[tuple[str, int], OffsetAndMetadata]] = field(
        default_factory=dict
    )
    # Kafka's pendingOffsetCommits: partition -> sequence of the latest commit written to
    # __consumer_offsets but not yet replicated. ``offsets`` shows a commit only once its
    # append is replicated; ``offset_sequences`` holds the sequence of the commit shown
    # (absent for offsets loaded from the log), so a late completion never overwrites a
    # newer commit.
    pending_offset_commits: dict[tuple[str, int], int] = field(default_factory=dict)
    offset_sequences: dict[tuple[str, int], int] = field(default_factory=dict)
    # DeleteGroups (or the expiry of its last offsets) wrote the group's tombstones and
    # waits for their replication: the group is shown as it was, but takes no joins or
    # commits until the deletion succeeded (then it is Dead) or failed (then it is back).
    deleting: bool = False
    # rebalance bookkeeping (Kafka's DelayedJoin / InitialDelayedJoin)
    new_member_added: bool = False
    rebalance_deadline_ms: int | None = None
    initial_delay_active: bool = False
    initial_delay_remaining_ms: int = 0

    # -- state --------------------------------------------------------------------------
    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    def is_gone(self) -> bool:
        """Dead, or being deleted: joins and commits get COORDINATOR_NOT_AVAILABLE."""
        return self.state is GroupState.DEAD or self.deleting

    def transition_to(self, state: GroupState, now_ms: int) -> None:
        if self.state not in VALID_PREVIOUS_STATES[state]:
            raise IllegalStateTransition(
                f"group {self.group_id}: {self.state.value} -> {state.value} is not allowed"
            )
        self.state = state
        self.state_timestamp_ms = now_ms

    # -- members ------------------------------------------------------------------------
    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.pending_members.pop(member.member_id, None)

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        instance_id = member.group_instance_id
        if instance_id is not None and self.static_members.get(instance_id) == member_id:
            del self.static_members[instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> Member:
        member = self.members.pop(old_id)
        member.member_id = new_id
        self.members[new_id] = member
        self.static_members[instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        return member

    def is_static_member_fenced(self, member_id: str, instance_id: str | None) -> bool:
        """Kafka: a known instance id whose registered member id differs is fenced."""
        if instance_id is None:
            return False
        registered = self.static_members.get(instance_id)
        return registered is not None and registered != member_id

    def has_all_members_joined(self) -> bool:
        return not self.pending_members and all(
            m.awaiting_join is not None for m in self.members.values()
        )

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # -- protocols ----------------------------------------------------------------------
    def candidate_protocols(self) -> set[str]:
        members = list(self.members.values())
        if not members:
            return set()
        candidates = set(members[0].protocol_names())
        for member in members[1:]:
            candidates &= set(member.protocol_names())
        return candidates

    def supports_protocols(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        """Matches Kafka: an empty group takes any non-empty protocol list; otherwise the
        type must match and the member must share a protocol with every member."""
        names = {name for name, _ in protocols}
        if not self.members:
            return bool(protocol_type) and bool(names)
        return protocol_type == self.protocol_type and bool(names & self.candidate_protocols())

    def select_protocol(self) -> str:
        """Kafka's selection: every member votes for its most preferred protocol among
        those all members support; the most votes win (ties: the earlier preference of
        the first member)."""
        candidates = self.candidate_protocols()
        if not candidates:
            raise ValueError(f"group {self.group_id}: members share no protocol")
        votes = Counter(member.vote(candidates) for member in self.members.values())
        first = next(iter(self.members.values())).protocol_names()
        return max(votes, key=lambda name: (votes[name], -first.index(name)))

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to, when the group uses the consumer protocol
        and every subscription parses; None when unknown."""
        if self.protocol_type != "consumer" or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            try:
                topics |= subscription_topics(member.metadata(self.protocol_name))
            except (KeyError, ValueError):
                return None
        return topics
