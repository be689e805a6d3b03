"""The per-partition read of a Fetch, from the local logs (Kafka's
``ReplicaManager.readFromLocalLog``).

The fetch handler (``server/handlers/fetch.py``) owns the request: its session, long poll
and framing. Deciding what each partition gives is replication's: whether this broker
may serve it (leader, or follower for a consumer with a rack, KIP-392), leader-epoch
fencing, a follower's fetch offset becoming its log end offset, the leader replication
throttle, and the file region up to the high watermark (consumers) or the log end
(followers). ``FetchReader.once`` reads every partition once; the handler re-runs it
after each wake-up.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol
from uuid import UUID

from kio.schema.errors import ErrorCode

from ..log.partition_log import OffsetOutOfRange
from ..protocol.fetch_response import (
    UNCHANGED_PARTITION,
    PartitionResult,
    TopicResult,
    records_size,
)
from .partition import Partition, PartitionError
from .replica_manager import ReplicaManager, now_ms
from .throttle import LEADER_RATE, LEADER_REPLICAS, is_throttled, parse_rate


class FetchTopic(Protocol):
    """One topic of a fetch, in read order (the fetch session's ``TopicRun``)."""

    name: str | None
    topic_id: UUID | None
    partitions: Sequence[Any]  # kio FetchPartition, or a session's CachedPartition


class FetchReader:
    """Reads every partition of the fetch once; re-run after each wake-up.

    ``runs`` (from the fetch's session context) name the partitions, in order: the
    request's, or an incremental fetch's whole session. Topics known by id only get
    their names here; an unknown id stays nameless and answers UNKNOWN_TOPIC_ID.
    """

    def __init__(
        self,
        replica_manager: ReplicaManager,
        request: Any,
        runs: Sequence[FetchTopic],
        replica_id: int,
        refused: Callable[[list[str]], set[str]] | None = None,
    ) -> None:
        """``refused``: given the fetch's topic names, those the client may not read
        (the authorizer's verdict); they answer TOPIC_AUTHORIZATION_FAILED."""
        self.replica_manager = replica_manager
        self.request = request
        self.runs = runs
        self.replica_id = replica_id
        self.keys: list[tuple[str, int]] = []
        self.had_error = False
        self.max_bytes = request.max_bytes  # lowered for a consumer under a fetch quota
        # Leader replication throttle, as of the last ``once``: bytes of throttled
        # partitions in the response, partitions held back, when to look again.
        self.throttled_bytes = 0
        self.held_back = 0
        self.throttle_retry_s: float | None = None
        self.read_committed = getattr(request, "isolation_level", 0) == 1
        # Fetch v11+ from a consumer: followers may serve it (Kafka's clientMetadata).
        self.client_rack: str | None = (
            None if replica_id >= 0 else getattr(request, "rack_id", None)
        )
        # A partition answered with preferred_read_replica: respond at once, as Kafka does.
        self.redirected = False
        # Partitions this broker served as a follower in the last ``once``.
        self.served_as_follower: set[tuple[str, int]] = set()
        for run in runs:
            if run.name is None and run.topic_id is not None:
                info = replica_manager.metadata.topic_by_uuid(run.topic_id)
                run.name = info.name if info is not None else None
        names = [run.name for run in runs if run.name is not None]
        self.refused: set[str] = refused(names) if refused is not None and names else set()
        for run in runs:
            if run.name is not None and run.name not in self.refused:
                self.keys.extend((run.name, p.partition) for p in run.partitions)

    def once(self) -> tuple[list[TopicResult], int]:
        replicas = self.replica_manager
        metadata = replicas.metadata
        broker_id = replicas.broker_id
        remaining = self.max_bytes
        total = 0
        self.had_error = False
        self.redirected = False
        self.served_as_follower.clear()
        from_follower = self.replica_id >= 0
        client_rack = self.client_rack
        quota = replicas.leader_replication_quota
        leader_rate = (
            parse_rate(metadata.dynamic_broker_config(broker_id, LEADER_RATE))
            if from_follower
            else None
        )
        self.throttled_bytes = self.held_back = 0
        self.throttle_retry_s = None
        topics: list[TopicResult] = []
        refused = self.refused
        partitions = replicas.partitions
        now = now_ms()
        for run in self.runs:
            name = run.name
            result = TopicResult(name or "", run.topic_id)
            topics.append(result)
            if refused and name in refused:
                result.partitions.extend(
                    PartitionResult(p.partition, ErrorCode.topic_authorization_failed)
                    for p in run.partitions
                )
                self.had_error = True
                continue
            topic_config = None
            if leader_rate is not None and name is not None:
                info = metadata.topics.get(name)
                topic_config = info.config if info is not None and info.config else None
            for requested in run.partitions:
                index = requested.partition
                if name is None:
                    result.partitions.append(PartitionResult(index, ErrorCode.unknown_topic_id))
                    self.had_error = True
                    continue
                if from_follower:
                    idle = _idle_follower_result(
                        partitions.get((name, index)), requested, self.replica_id, broker_id, now
                    )
                    if idle is not None:
                        result.partitions.append(idle)
                        continue
                try:
                    partition = replicas.partition_or_error(
                        name, index, require_leader=client_rack is None
                    )
                    partition.check_current_leader_epoch(
                        getattr(requested, "current_leader_epoch", -1)
                    )
                except PartitionError as error:
                    result.partitions.append(PartitionResult(index, error.error_code))
                    self.had_error = True
                    continue
                partition_log = partition.log
                if from_follower and not _is_follower(partition, self.replica_id, broker_id):
                    result.partitions.append(
                        PartitionResult(index, _unknown_replica_error(requested))
                    )
                    self.had_error = True
                    continue
                high_watermark = partition_log.high_watermark
                if client_rack is not None:
                    if not partition.is_leader(broker_id):
                        self.served_as_follower.add((name, index))
                    elif client_rack:
                        preferred = replicas.preferred_read_replica(
                            partition, client_rack, requested.fetch_offset
                        )
                        if preferred is not None:
                            result.partitions.append(
                                PartitionResult(
                                    index,
                                    ErrorCode.none,
                                    high_watermark,
                                    high_watermark,
                                    partition_log.log_start_offset,
                                    preferred_read_replica=preferred,
                                )
                            )
                            self.redirected = True
                            continue
                limit = min(requested.partition_max_bytes, remaining)
                # read_committed consumers stop at the last stable offset (Kafka's
                # FetchTxnCommitted); the others read up to the high watermark.
                if self.read_committed and not from_follower:
                    stable = partition_log.last_stable_offset
                    max_offset: int | None = stable
                else:
                    stable = partition_log.known_last_stable_offset
                    max_offset = None if from_follower else high_watermark
                try:
                    # Followers copy up to the log end; consumers see committed data only.
                    region = partition_log.read(
                        requested.fetch_offset,
                        limit,
                        max_offset=max_offset,
                        min_one_batch=total == 0,
                    )
                except OffsetOutOfRange:
                    result.partitions.append(
                        PartitionResult(
                            index,
                            ErrorCode.offset_out_of_range,
                            high_watermark,
                            stable,
                            partition_log.log_start_offset,
                        )
                    )
                    self.had_error = True
                    continue
                if from_follower:
                    # Only after a successful read, as Kafka's Partition.fetchRecords: an
                    # offset past the log end never becomes a follower's log end offset
                    # (it would move the high watermark over records nobody else has).
                    replicas.record_follower_fetch(
                        partition, self.replica_id, requested.fetch_offset
                    )
                    high_watermark = partition_log.high_watermark
                    stable = partition_log.known_last_stable_offset
                size = region.size if region is not None else 0
                throttled = topic_config is not None and is_throttled(
                    topic_config, LEADER_REPLICAS, index, broker_id
                )
                if (
                    size
                    and throttled
                    and leader_rate is not None
                    and self.replica_id not in partition.isr
                    and quota.exceeded(leader_rate, self.throttled_bytes)
                ):
                    # Matches Kafka's ReplicaManager.shouldLeaderThrottle: over the leader
                    # quota, an out-of-sync follower gets the partition with no records
                    # (not an error) and fetches again. In-sync followers are never held
                    # back, so a throttle cannot shrink the ISR.
                    region = None
                    size = 0
                    self.held_back += 1
                elif throttled:
                    self.throttled_bytes += size
                total += size
                remaining = max(remaining - size, 0)
                aborted = None
                if self.read_committed:
                    aborted = (
                        [
                            (txn.producer_id, txn.first_offset)
                            for txn in partition_log.collect_aborted_transactions(
                                requested.fetch_offset, stable
                            )
                        ]
                        if size
                        else []
                    )
                result.partitions.append(
                    PartitionResult(
                        index,
                        ErrorCode.none,
                        high_watermark,
                        stable,
                        partition_log.log_start_offset,
                        region if region is not None else b"",
                        aborted_transactions=aborted,
                    )
                )
        if self.held_back and leader_rate is not None:
            self.throttle_retry_s = quota.delay(leader_rate)
        return topics, total

    def count_bytes_out(self, topics: list[TopicResult]) -> None:
        """Record bytes sent per topic (consumers) or as replication (followers)."""
        sent = 0
        for topic in topics:
            size = 0
            for partition in topic.partitions:
                size += records_size(partition)
            if size and self.replica_id < 0:
                self.replica_manager.topic_counters_for(topic.name).bytes_out += size
                if self.served_as_follower:
                    self.replica_manager.follower_served_bytes_total += sum(
                        records_size(partition)
                        for partition in topic.partitions
                        if (topic.name, partition.partition_index) in self.served_as_follower
                    )
            sent += size
        if self.replica_id >= 0:
            replicas = self.replica_manager
            replicas.replication_bytes_out_total += sent
            # Matches Kafka: the leader quota counts what was sent for throttled
            # partitions after the fact, to every follower, in-sync ones included.
            quota = replicas.leader_replication_quota
            quota.record(self.throttled_bytes)
            quota.held_back_total += self.held_back


def _idle_follower_result(
    partition: Partition | None, requested: Any, replica_id: int, broker_id: int, now: int
) -> PartitionResult | None:
    """The answer for a partition an in-sync follower already has all of, at the leader
    epoch it names; None: the general path decides.

    It is what the general path gives such a partition (no error, no records, the
    follower's fetch recorded, which moves neither the high watermark nor the ISR),
    without its lookups: every partition of a follower's fetch session that had no
    traffic comes through here on every round trip (``__consumer_offsets`` alone has
    fifty), and the general path made them a third of the leader's work per message at
    a thousand acks=all messages a second. In an incremental session (``requested`` is
    the session's partition, holding the high watermark and log start offset it last
    sent) a partition whose answer would carry nothing new is ``UNCHANGED_PARTITION``,
    which the session drops without looking at it."""
    if partition is None or partition.leader != broker_id or replica_id not in partition.isr:
        return None
    log = partition.log
    offset = requested.fetch_offset
    if offset != log.log_end_offset or (
        # Fetch v9+ names the leader epoch; an older fetch takes the general path.
        getattr(requested, "current_leader_epoch", -1) != partition.leader_epoch
    ):
        return None
    follower = partition.followers.get(replica_id)
    if (
        follower is None
        or follower.log_end_offset != offset
        or replica_id not in partition.replicas
    ):
        return None
    partition.record_follower_fetch(replica_id, offset, now)
    if (
        getattr(requested, "high_watermark", None) == log.high_watermark
        and getattr(requested, "local_log_start_offset", None) == log.log_start_offset
    ):
        return UNCHANGED_PARTITION
    return PartitionResult(
        requested.partition,
        ErrorCode.none,
        log.high_watermark,
        log.known_last_stable_offset,
        log.log_start_offset,
        b"",
    )


def _is_follower(partition: Partition, replica_id: int, broker_id: int) -> bool:
    """Matches Kafka's Partition.followerReplicaOrThrow: only an assigned replica other
    than the leader itself has follower state."""
    return replica_id != broker_id and replica_id in partition.replicas


def _unknown_replica_error(requested: Any) -> ErrorCode:
    """Kafka's answer to a follower fetch from a replica it does not know: with a
    current leader epoch in the request, UNKNOWN_LEADER_EPOCH (the follower retries);
    without one, NOT_LEADER_OR_FOLLOWER."""
    if getattr(requested, "current_leader_epoch", -1) >= 0:
        return ErrorCode.unknown_leader_epoch
    return ErrorCode.not_leader_or_follower
