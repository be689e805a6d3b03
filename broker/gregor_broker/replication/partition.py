"""A hosted partition and the leader's view of its followers: ISR and high watermark.

The rules are Kafka's (seed 001, KIP-101/320):
- the leader tracks each follower's log end offset from the offsets it fetches at, and
  when the follower last caught up with the leader's log end offset;
- a follower that has not caught up for ``replica.lag.time.max.ms`` leaves the ISR; one
  whose log end offset reaches the high watermark (within the current leader epoch)
  rejoins it;
- the high watermark is the smallest log end offset in the ISR, and never moves back.

Pure bookkeeping: no I/O here. The replica manager writes ISR changes to ZooKeeper and
only then applies them, so a leader that lost its leadership cannot shrink the ISR to
itself and commit alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from ..log.inflate import DecompressionBudget
from ..log.partition_log import AppendResult, PartitionLog
from ..log.producer_state import ProducerStateError
from ..log.validator import RecordValidationError
from ..protocol.errors import KafkaError
from ..protocol.record_batch import InvalidBatch


class PartitionError(KafkaError):
    """A per-partition failure carrying the Kafka error code to return."""

    def __init__(
        self,
        error_code: ErrorCode,
        message: str = "",
        record_errors: list[tuple[int, str]] | None = None,
    ) -> None:
        super().__init__(error_code, message)
        # KIP-467: the records of the batch that made it fail (batch index, message).
        self.record_errors = record_errors


@dataclass(slots=True)
class FollowerState:
    log_end_offset: int = -1  # unknown until the follower fetches
    last_caught_up_ms: int = 0
    last_fetch_ms: int = 0
    last_fetch_leader_log_end_offset: int = -1


@dataclass(slots=True)
class Partition:
    """A partition with a log here, and what the controller says about it."""

    topic: str
    index: int
    topic_id: str | None
    log: PartitionLog
    replicas: tuple[int, ...] = ()
    leader: int = -1
    leader_epoch: int = -1
    isr: tuple[int, ...] = ()
    controller_epoch: int = 0
    state_version: int = -1
    followers: dict[int, FollowerState] = field(default_factory=dict)
    isr_change_in_flight: bool = False
    # Replicas an ISR expansion being written adds (Kafka's "maximal ISR", KIP-497). Once
    # ZooKeeper holds the new ISR they can be elected, and the leader learns that only
    # when the write's answer comes back (or, after a lost answer, later): until then the
    # high watermark must not pass what they hold.
    pending_isr_additions: tuple[int, ...] = ()

    def is_leader(self, broker_id: int) -> bool:
        return self.leader == broker_id

    def append_as_leader(
        self,
        records: bytes | None,
        acks: int,
        *,
        budget: DecompressionBudget,
        api_version: int | None = None,
    ) -> AppendResult:
        """Kafka's ``Partition.appendRecordsToLeader``: the log validates the batches,
        acks=all needs ``min.insync.replicas`` in the ISR, and the log appends them
        (deduplicating idempotent retries). Every refusal is a ``PartitionError`` with
        Kafka's code; an ``OSError`` from the disk goes to the caller (the replica
        manager takes the log dir offline). The high watermark moves after, with the
        replica manager's ISR bookkeeping."""
        log = self.log
        try:
            headers = log.validate_append(records, budget=budget, api_version=api_version)
        except RecordValidationError as error:
            raise PartitionError(
                ErrorCode.invalid_record, str(error), error.record_errors
            ) from error
        except InvalidBatch as error:
            raise PartitionError(ErrorCode[error.error.lower()], str(error)) from error
        min_insync_replicas = log.config.min_insync_replicas
        if acks == -1 and len(self.isr) < min_insync_replicas:
            raise PartitionError(
                ErrorCode.not_enough_replicas,
                f"{len(self.isr)} in-sync replicas, min.insync.replicas={min_insync_replicas}",
            )
        try:
            return log.append_as_leader(
                bytearray(records),  # type: ignore[arg-type]  # validated: not None
                headers,
                leader_epoch=self.leader_epoch,
                from_client=api_version is not None,
            )
        except ProducerStateError as error:
            raise PartitionError(error.error_code, str(error)) from error

    def append_txn_marker(
        self, *, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool
    ) -> AppendResult:
        """A transaction marker, as leader: acks=all semantics, so the ISR must hold
        ``min.insync.replicas`` (Kafka appends markers with requiredAcks -1)."""
        min_insync_replicas = self.log.config.min_insync_replicas
        if len(self.isr) < min_insync_replicas:
            raise PartitionError(
                ErrorCode.not_enough_replicas,
                f"{len(self.isr)} in-sync replicas, min.insync.replicas={min_insync_replicas}",
            )
        try:
            return self.log.append_txn_marker(
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                coordinator_epoch=coordinator_epoch,
                commit=commit,
                leader_epoch=self.leader_epoch,
            )
        except ProducerStateError as error:
            raise PartitionError(error.error_code, str(error)) from error

    def check_current_leader_epoch(self, requested_epoch: int) -> None:
        """Matches Kafka's fencing of requests that carry a current leader epoch
        (KIP-320, ``Partition.checkCurrentLeaderEpoch``): -1 means "not checked"."""
        if requested_epoch < 0 or requested_epoch == self.leader_epoch:
            return
        if requested_epoch > self.leader_epoch:
            raise PartitionError(ErrorCode.unknown_leader_epoch)
        raise PartitionError(ErrorCode.fenced_leader_epoch)

    # leader side -------------------------------------------------------------------------
    def become_leader(self, broker_id: int, now_ms: int) -> None:
        """Start tracking followers afresh, as a new leader does (their offsets unknown)."""
        self.log.stop_following_log_end()
        # Matches Kafka: the new epoch starts at the leader's log end offset, recorded
        # at election so OffsetForLeaderEpoch answers right before the first append.
        cache = self.log.leader_epoch_cache
        if self.leader_epoch > cache.latest_epoch():
            # A brand-new (empty) partition's first epoch is written to disk only before
            # its first append (or by the log's next flush), without fsync: writing it at
            # once, with two fsyncs, made creating 10,000 partitions take minutes, and
            # even the file's creation and rename were a fifth of the event loop's work
            # of creating a partition. Lost in a crash, the cache starts empty, as it
            # was: nothing in the log depended on it (an unreadable or missing
            # checkpoint is tolerated the same way).
            empty = self.log.log_end_offset == self.log.log_start_offset
            first = empty and cache.latest_epoch() < 0
            cache.assign(self.leader_epoch, self.log.log_end_offset, sync=not first, defer=first)
        self.followers = {
            replica: FollowerState(last_caught_up_ms=now_ms if replica in self.isr else 0)
            for replica in self.replicas
            if replica != broker_id
        }

    def update_assignment(self, replicas: tuple[int, ...]) -> None:
        """The controller's replica list. Kafka's ``updateAssignmentAndIsr``: a replica no
        longer assigned is forgotten, so one assigned again (a reassignment away and back,
        its log deleted meanwhile) starts with an unknown log end offset instead of the
        progress of the log it no longer has."""
        self.replicas = replicas
        for replica in [r for r in self.followers if r not in replicas]:
            del self.followers[replica]

    def record_follower_fetch(self, replica_id: int, fetch_offset: int, now_ms: int) -> None:
        """A follower fetched at ``fetch_offset``: that is its log end offset (Kafka)."""
        follower = self.followers.get(replica_id)
        if follower is None:
            follower = self.followers[replica_id] = FollowerState()
        leader_end = self.log.log_end_offset
        if fetch_offset >= leader_end:
            follower.last_caught_up_ms = max(follower.last_caught_up_ms, now_ms)
        elif fetch_offset >= follower.last_fetch_leader_log_end_offset >= 0:
            # Caught up with where the leader was at the previous fetch.
            follower.last_caught_up_ms = max(follower.last_caught_up_ms, follower.last_fetch_ms)
        follower.log_end_offset = fetch_offset
        follower.last_fetch_leader_log_end_offset = leader_end
        follower.last_fetch_ms = now_ms

    def maximal_isr(self) -> tuple[int, ...]:
        """The ISR plus the replicas an expansion in flight adds."""
        pending = self.pending_isr_additions
        if not pending:  # no expansion in flight: every append asks
            return self.isr
        return self.isr + tuple(r for r in pending if r not in self.isr)

    def high_watermark_candidate(self, broker_id: int) -> int:
        """The smallest log end offset in the maximal ISR, this leader's own included (-1
        for a member never heard from). Computed on every append, hence one pass and no
        list."""
        candidate = self.log.log_end_offset
        followers = self.followers
        for replica in self.maximal_isr():
            if replica == broker_id:
                continue
            follower = followers.get(replica)
            log_end_offset = follower.log_end_offset if follower is not None else -1
            if log_end_offset < candidate:
                candidate = log_end_offset
        return candidate

    def maybe_advance_high_watermark(self, broker_id: int) -> bool:
        """Move the high watermark to the ISR's minimum log end offset; True if it moved."""
        return self.log.maybe_increment_high_watermark(self.high_watermark_candidate(broker_id))

    def out_of_sync_replicas(self, broker_id: int, now_ms: int, lag_ms: int) -> set[int]:
        lagging = set()
        for replica in self.isr:
            if replica == broker_id:
                continue
            follower = self.followers.get(replica)
            caught_up = follower.last_caught_up_ms if follower is not None else 0
            if now_ms - caught_up > lag_ms:
                lagging.add(replica)
        return lagging

    def may_rejoin_isr(self, replica_id: int) -> bool:
        """Kafka: a follower rejoins once it reached the high watermark and holds the
        current leader epoch's first offset, so it has no stale divergent tail."""
        if replica_id in self.isr or replica_id not in self.replicas:
            return False
        follower = self.followers.get(replica_id)
        if follower is None:
            return False
        epoch_start = next(
            (
                start
                for epoch, start in self.log.leader_epoch_cache.entries()
                if epoch == self.leader_epoch
            ),
            self.log.log_end_offset,
        )
        return (
            follower.log_end_offset >= self.log.high_watermark
            and follower.log_end_offset >= epoch_start
        )
