"""Fetch: long-polling reads served from segment files with sendfile.

The handler owns the request: its session, long poll and framing. Each partition is
resolved to a file region by replication's ``FetchReader`` (``replication/fetch_reader.py``,
Kafka's ``ReplicaManager.readFromLocalLog``, over ``PartitionLog.read``) and the fetch
encoder frames them; the handler never reads record bytes (the connection sends the
regions, or reads a small answer's in to write it once). Matches Kafka:
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

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...deferred import Deferred
from ...protocol.fetch_response import (
    EmptyFetchResponse,
    TopicResult,
    encode_fetch_response,
    records_size,
)
from ...protocol.replica_fetch import ReplicaFetchRequest
from ...protocol.requests import FetchRequest
from ...protocol.response import FetchResult
from ...replication.fetch_reader import FetchReader
from ...security.acl import AclOperation, ResourceType
from ..fetch_sessions import FetchContext
from ..quotas import ANONYMOUS
from ..request_router import RequestContext
from ..services import BrokerServices


def handle_fetch(
    broker: BrokerServices, context: RequestContext, request: FetchRequest
) -> FetchResult | Deferred:
    # A follower's Fetch v11 arrives as a ReplicaFetchRequest (protocol/replica_fetch.py):
    # the lean decoder's objects carry kio's field names.
    version = context.version
    replica_id = _replica_id(request)
    fetch = broker.fetch_sessions.new_context(request, version, replica_id >= 0, _now_ms())
    if fetch.error_code:
        return EmptyFetchResponse(fetch.error_code)
    if type(request) is ReplicaFetchRequest:  # a follower's, read by the lean decoder
        max_wait_ms = request.max_wait_ms
    else:
        max_wait_ms = int(request.max_wait.total_seconds() * 1000)
    read = FetchReader(
        broker.replica_manager,
        request,
        fetch.runs,
        replica_id,
        _refused(broker, context, replica_id) if broker.authorizer.enabled else None,
    )
    if broker.quotas.active and replica_id < 0:
        read.max_bytes = broker.quotas.fetch_max_bytes(
            ANONYMOUS, context.header.client_id or "", request.max_bytes
        )
    topics, total = _read(read, fetch)
    if (
        total >= request.min_bytes
        or max_wait_ms <= 0
        or read.had_error
        or read.redirected
        or not (read.keys or fetch.skipping)
    ):
        return _respond(context, topics, read, fetch)
    # Parked now, in the call that found too little: nothing between the read and the
    # parking can be missed.
    return DelayedFetch(broker, context, read, fetch, max_wait_ms).answer


def _refused(
    broker: BrokerServices, context: RequestContext, replica_id: int
) -> Callable[[list[str]], set[str]]:
    """Kafka's Fetch authorization: a follower needs ClusterAction on the cluster (else
    every partition is refused), a consumer Read on each topic."""
    authorizer = broker.authorizer

    def refused(names: list[str]) -> set[str]:
        if replica_id >= 0:
            if authorizer.authorize_cluster(context, AclOperation.CLUSTER_ACTION):
                return set()
            return set(names)
        allowed = authorizer.filter_authorized(
            context, AclOperation.READ, ResourceType.TOPIC, names
        )
        return set(names) - allowed

    return refused


class DelayedFetch:
    """A fetch waiting until it can answer (Kafka's ``DelayedFetch``).

    It parks on what can answer it: a consumer's on the high watermark of what it reads,
    a follower's on appends to what it reads and (``FetchContext.park``) on its
    session's partitions it skipped; and on a timer (``max_wait``, or sooner when the
    leader replication throttle frees up). Whichever wakes it first (``set_result``, the
    purgatory's ``Wakeable``), it reads again in that call and answers there if it can:
    the append that gives a follower its records sends the follower's response, the
    follower fetch that moves the high watermark sends the consumer's. Otherwise it parks
    again, until its time is up; then it answers with what there is.
    """

    __slots__ = ("_context", "_deadline", "_fetch", "_read", "_timer", "_waiters", "answer")

    def __init__(
        self,
        broker: BrokerServices,
        context: RequestContext,
        read: FetchReader,
        fetch: FetchContext,
        max_wait_ms: int,
    ) -> None:
        self.answer = Deferred()
        self._context = context
        self._read = read
        self._fetch = fetch
        self._waiters = broker.replica_manager.append_waiters
        self._deadline = time.monotonic() + max_wait_ms / 1000
        self._timer: asyncio.TimerHandle | None = None
        self._park()

    def _park(self) -> None:
        read = self._read
        self._waiters.watch_with(self, read.keys, committed=read.replica_id < 0)
        self._fetch.park(self)
        delay = self._deadline - time.monotonic()
        if read.throttle_retry_s is not None:
            # Gregor's addition: Kafka's delayed fetch wakes only on new data or at
            # max_wait; waking when the leader quota frees up keeps the copy at its rate.
            delay = min(delay, read.throttle_retry_s)
        self._timer = asyncio.get_running_loop().call_later(max(delay, 0.0), self.set_result, None)

    def done(self) -> bool:
        """Not parked: woken already (or answered)."""
        return self._timer is None

    def set_result(self, _result: None = None) -> None:
        """Woken (a notification, the session, the timer): read, then answer or park."""
        timer = self._timer
        if timer is None:
            return
        self._timer = None
        timer.cancel()
        read = self._read
        self._waiters.unwatch(self, read.keys)
        try:
            topics, total = _read(read, self._fetch)
            if not (
                total >= read.request.min_bytes
                or read.had_error
                or read.redirected
                or self._fetch.skipped_changed
                or time.monotonic() >= self._deadline
            ):
                self._park()
                return
        except Exception as error:  # the router answers UNKNOWN_SERVER_ERROR
            self.answer.fail(error)
            return
        # Outside the try: what the answer's consumers do is theirs to handle.
        self.answer.resolve(_respond(self._context, topics, read, self._fetch))


def _read(read: FetchReader, fetch: FetchContext) -> tuple[list[TopicResult], int]:
    """One read, and the session told in the same step which partitions it found quiet
    (a notification between the two would otherwise be lost)."""
    topics, total = read.once()
    fetch.after_read(topics)
    return topics, total


# Bytes of a partition's entry besides its records (index, error, offsets, lengths).
_PARTITION_OVERHEAD = 40


def _respond(
    context: RequestContext, topics: list[TopicResult], read: FetchReader, fetch: FetchContext
) -> FetchResponse:
    return FetchResponse(context, topics, read, fetch)


@dataclass(slots=True, eq=False)
class FetchResponse:
    """A fetch's result before its session sees it, so that a quota throttle can still
    answer instead (Kafka's getThrottledResponse) without creating or advancing a
    session. The router encodes it (``encode_frame``) after deciding the throttle; a
    throttled client gets ``throttled(ms)`` instead, so ``throttle_time`` stays 0."""

    context: RequestContext
    topics: list[TopicResult]
    read: FetchReader
    fetch: FetchContext
    throttle_time: int = 0

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
        parts, size = encode_fetch_response(
            version,
            correlation_id,
            throttle_time_ms=self.throttle_time,
            error_code=error_code,
            session_id=session_id,
            topics=topics,
        )
        return parts, size

    def throttled(self, throttle_ms: int) -> EmptyFetchResponse:
        """The empty response a throttled client gets; its session is left as it was."""
        error_code, session_id = self.fetch.throttled()
        return EmptyFetchResponse(error_code, session_id, throttle_ms)


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


def _replica_id(request: Any) -> int:
    replica_state = getattr(request, "replica_state", None)  # Fetch v15+
    if replica_state is not None:
        return replica_state.replica_id
    return getattr(request, "replica_id", -1)
