"""Fetch: long-polling reads served from segment files with sendfile.

The handler resolves each partition to a file region (``PartitionLog.read``) and the
fetch encoder frames them; record bytes never enter Python. Matches Kafka:
- ``max_bytes`` bounds the response, but the first batch of the first non-empty
  partition is always returned whole (KIP-74) so a consumer can never get stuck;
- a fetch waits up to ``max_wait`` for ``min_bytes`` to accumulate, waking on appends;
- incremental fetch sessions (KIP-227): ``broker.fetch_sessions`` (``fetch_sessions.py``)
  decides which partitions a fetch reads (the request's, or its whole session) and which
  results go back (in an incremental fetch, only partitions that changed); the reading,
  long poll and sendfile framing below are the same for every kind of fetch;
- a follower's fetch (replica id >= 0) for a partition in the topic's
  ``leader.replication.throttled.replicas`` is held to this broker's
  ``leader.replication.throttled.rate``: over the quota the partition comes back with no
  records (error NONE, high watermark set) and the follower asks again, while other
  partitions keep flowing (Kafka's leader replication quota). Consumers never are;
- a follower fetch (replica id >= 0) is believed only from an assigned replica of the
  partition other than this broker (else NOT_LEADER_OR_FOLLOWER, or UNKNOWN_LEADER_EPOCH
  when the request carries a leader epoch), and its fetch offset becomes the follower's
  log end offset only when the read succeeded: an offset outside [log start, log end]
  answers OFFSET_OUT_OF_RANGE and leaves the ISR and high watermark alone
  (Kafka's Partition.fetchRecords / updateFollowerFetchState);
- fetch from follower (KIP-392): a consumer's Fetch v11+ (which carries ``rack_id``) may be
  served by a follower, up to the follower's high watermark; with ``replica.selector.class``
  set to Kafka's rack-aware selector, the leader answers a consumer in another replica's
  rack with that replica as ``preferred_read_replica`` and no records, at once
  (``replication/replica_selector.py`` decides; Kafka's ReplicaManager.readFromLog).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from ...log.partition_log import OffsetOutOfRange
from ...protocol.fetch_response import (
    PartitionResult,
    TopicResult,
    encode_fetch_response,
    records_size,
)
from ...replication.replica_manager import PartitionError
from ...replication.throttle import LEADER_RATE, LEADER_REPLICAS, is_throttled, parse_rate
from ..fetch_sessions import FetchContext, TopicRun
from ..quotas import ANONYMOUS
from ..request_router import RawResponse, RequestContext
from ..services import BrokerServices


def handle_fetch(broker: BrokerServices, context: RequestContext, request: Any) -> Any:
    version = context.version
    replica_id = _replica_id(request)
    fetch = broker.fetch_sessions.new_context(request, version, replica_id >= 0, _now_ms())
    if fetch.error_code:
        return _session_error(context, fetch.error_code)
    max_wait_ms = int(request.max_wait.total_seconds() * 1000)
    read = _FetchReader(broker, request, fetch.runs, replica_id)
    if broker.quotas.active and replica_id < 0:
        read.max_bytes = broker.quotas.fetch_max_bytes(
            ANONYMOUS, context.header.client_id or "", request.max_bytes
        )
    topics, total = read.once()
    if (
        total >= request.min_bytes
        or max_wait_ms <= 0
        or read.had_error
        or read.redirected
        or not read.keys
    ):
        return _respond(context, topics, read, fetch)
    return _wait_and_respond(broker, context, read, fetch, max_wait_ms)


async def _wait_and_respond(
    broker: BrokerServices,
    context: RequestContext,
    read: _FetchReader,
    fetch: FetchContext,
    max_wait_ms: int,
) -> FetchResponse:
    deadline = time.monotonic() + max_wait_ms / 1000
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        if read.throttle_retry_s is not None:
            # Gregor's addition: Kafka's delayed fetch wakes only on new data or at
            # max_wait; waking when the leader quota frees up keeps the copy at its rate.
            remaining = min(remaining, read.throttle_retry_s)
        await broker.replica_manager.append_waiters.wait_any(read.keys, remaining)
        topics, total = read.once()
        if total >= read.request.min_bytes or read.had_error or read.redirected:
            return _respond(context, topics, read, fetch)
    topics, _total = read.once()
    return _respond(context, topics, read, fetch)


# Bytes of a partition's entry besides its records (index, error, offsets, lengths).
_PARTITION_OVERHEAD = 40


def _respond(
    context: RequestContext, topics: list[TopicResult], read: _FetchReader, fetch: FetchContext
) -> FetchResponse:
    return FetchResponse(context, topics, read, fetch)


@dataclass(slots=True, eq=False)
class FetchResponse:
    """A fetch's result before its session sees it, so that a quota throttle can still
    answer instead (Kafka's getThrottledResponse) without creating or advancing a
    session. The router encodes it (``encode_frame``) after deciding the throttle."""

    context: RequestContext
    topics: list[TopicResult]
    read: _FetchReader
    fetch: FetchContext

    @property
    def size(self) -> int:
        """Bytes the response carries, for the fetch byte-rate quota: the records, and a
        little for each partition's header."""
        return sum(
            _PARTITION_OVERHEAD + records_size(partition)
            for topic in self.topics
            for partition in topic.partitions
        )

    def encode_frame(self, version: int, correlation_id: int) -> tuple[list[Any], int]:
        # An incremental fetch keeps only the partitions that changed; a full one at
        # epoch 0 gets its session made here, once the response is final (as Kafka does).
        error_code, session_id, topics = self.fetch.finish(self.topics, _now_ms())
        self.read.count_bytes_out(topics)
        return encode_fetch_response(
            version, correlation_id, error_code=error_code, session_id=session_id, topics=topics
        )

    def throttled(self, throttle_ms: int) -> RawResponse:
        """The empty response a throttled client gets; its session is left as it was."""
        error_code, session_id = self.fetch.throttled()
        parts, size = encode_fetch_response(
            self.context.version,
            self.context.header.correlation_id,
            throttle_time_ms=throttle_ms,
            error_code=error_code,
            session_id=session_id,
        )
        return RawResponse(parts, size)


def _session_error(context: RequestContext, error_code: int) -> RawResponse:
    parts, size = encode_fetch_response(
        context.version, context.header.correlation_id, error_code=error_code
    )
    return RawResponse(parts, size)


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


def _replica_id(request: Any) -> int:
    replica_state = getattr(request, "replica_state", None)  # Fetch v15+
    if replica_state is not None:
        return replica_state.replica_id
    return getattr(request, "replica_id", -1)


class _FetchReader:
    """Reads every partition of the fetch once; re-run after each wake-up.

    ``runs`` (from the fetch's session context) name the partitions, in order: the
    request's, or an incremental fetch's whole session. Topics known by id only get
    their names here; an unknown id stays nameless and answers UNKNOWN_TOPIC_ID.
    """

    def __init__(
        self, broker: BrokerServices, request: Any, runs: list[TopicRun], replica_id: int
    ) -> None:
        self.broker = broker
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
                info = broker.metadata.topic_by_uuid(run.topic_id)
                run.name = info.name if info is not None else None
            if run.name is not None:
                self.keys.extend((run.name, p.partition) for p in run.partitions)

    def once(self) -> tuple[list[TopicResult], int]:
        broker = self.broker
        replicas = broker.replica_manager
        remaining = self.max_bytes
        total = 0
        self.had_error = False
        self.redirected = False
        self.served_as_follower.clear()
        from_follower = self.replica_id >= 0
        client_rack = self.client_rack
        quota = replicas.leader_replication_quota
        bound = (
            parse_rate(broker.metadata.dynamic_broker_config(broker.broker_id, LEADER_RATE))
            if from_follower
            else None
        )
        self.throttled_bytes = self.held_back = 0
        self.throttle_retry_s = None
        topics: list[TopicResult] = []
        for run in self.runs:
            name = run.name
            result = TopicResult(name or "", run.topic_id)
            topics.append(result)
            topic_config = None
            if bound is not None and name is not None:
                info = broker.metadata.topics.get(name)
                topic_config = info.config if info is not None and info.config else None
            for requested in run.partitions:
                index = requested.partition
                if name is None:
                    result.partitions.append(PartitionResult(index, ErrorCode.unknown_topic_id))
                    self.had_error = True
                    continue
                try:
                    if client_rack is None:
                        partition = replicas.leader_partition(name, index)
                    else:
                        partition = replicas.readable_partition(name, index)
                    _check_leader_epoch(partition, getattr(requested, "current_leader_epoch", -1))
                except PartitionError as error:
                    result.partitions.append(PartitionResult(index, error.error_code))
                    self.had_error = True
                    continue
                partition_log = partition.log
                if from_follower and not _is_follower(partition, self.replica_id, broker):
                    result.partitions.append(
                        PartitionResult(index, _unknown_replica_error(requested))
                    )
                    self.had_error = True
                    continue
                high_watermark = partition_log.high_watermark
                if client_rack is not None:
                    if not partition.is_leader(broker.broker_id):
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
                try:
                    # Followers copy up to the log end; consumers see committed data only.
                    region = partition_log.read(
                        requested.fetch_offset,
                        limit,
                        max_offset=None if from_follower else high_watermark,
                        min_one_batch=total == 0,
                    )
                except OffsetOutOfRange:
                    result.partitions.append(
                        PartitionResult(
                            index,
                            ErrorCode.offset_out_of_range,
                            high_watermark,
                            high_watermark,
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
                size = region.size if region is not None else 0
                throttled = topic_config is not None and is_throttled(
                    topic_config, LEADER_REPLICAS, index, broker.broker_id
                )
                if (
                    size
                    and throttled
                    and bound is not None
                    and self.replica_id not in partition.isr
                    and quota.exceeded(bound, self.throttled_bytes)
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
                result.partitions.append(
                    PartitionResult(
                        index,
                        ErrorCode.none,
                        high_watermark,
                        high_watermark,  # last stable offset: no transactions yet
                        partition_log.log_start_offset,
                        region if region is not None else b"",
                        aborted_transactions=[] if self.read_committed else None,
                    )
                )
        if self.held_back and bound is not None:
            self.throttle_retry_s = quota.delay(bound)
        return topics, total

    def count_bytes_out(self, topics: list[TopicResult]) -> None:
        """Record bytes sent per topic (consumers) or as replication (followers)."""
        sent = 0
        for topic in topics:
            size = 0
            for partition in topic.partitions:
                size += records_size(partition)
            if size and self.replica_id < 0:
                self.broker.replica_manager.topic_counters_for(topic.name).bytes_out += size
                if self.served_as_follower:
                    self.broker.replica_manager.follower_served_bytes_total += sum(
                        records_size(partition)
                        for partition in topic.partitions
                        if (topic.name, partition.partition_index) in self.served_as_follower
                    )
            sent += size
        if self.replica_id >= 0:
            replicas = self.broker.replica_manager
            replicas.replication_bytes_out_total += sent
            # Matches Kafka: the leader quota counts what was sent for throttled
            # partitions after the fact, to every follower, in-sync ones included.
            quota = replicas.leader_replication_quota
            quota.record(self.throttled_bytes)
            quota.held_back_total += self.held_back


def _is_follower(partition: Any, replica_id: int, broker: BrokerServices) -> bool:
    """Matches Kafka's Partition.followerReplicaOrThrow: only an assigned replica other
    than the leader itself has follower state."""
    return replica_id != broker.broker_id and replica_id in partition.replicas


def _unknown_replica_error(requested: Any) -> ErrorCode:
    """Kafka's answer to a follower fetch from a replica it does not know: with a
    current leader epoch in the request, UNKNOWN_LEADER_EPOCH (the follower retries);
    without one, NOT_LEADER_OR_FOLLOWER."""
    if getattr(requested, "current_leader_epoch", -1) >= 0:
        return ErrorCode.unknown_leader_epoch
    return ErrorCode.not_leader_or_follower


def _check_leader_epoch(partition: Any, requested_epoch: int) -> None:
    """Matches Kafka's fencing of fetches that carry a current leader epoch (KIP-320)."""
    if requested_epoch < 0 or requested_epoch == partition.leader_epoch:
        return
    if requested_epoch > partition.leader_epoch:
        raise PartitionError(ErrorCode.unknown_leader_epoch)
    raise PartitionError(ErrorCode.fenced_leader_epoch)
