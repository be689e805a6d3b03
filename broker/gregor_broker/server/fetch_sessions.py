"""Incremental fetch sessions (KIP-227): the session cache and each fetch's session context.

Owns what Kafka's ``FetchManager`` and ``FetchSessionCache`` decide: which partitions a
Fetch reads (the request's, or the whole set of its session), which of the results go
back (all of them, or in an incremental fetch only the partitions that changed), the
session id and epoch bookkeeping, and which session to evict when the cache is full.

Does not own: reading logs, long polls and encoding (``handlers/fetch.py``), resolving
topic ids to names (the handler, from the metadata cache), or time: callers pass
``now_ms`` from a monotonic clock. Nothing here does I/O, so it is tested without a
broker (``tests/unit/test_fetch_sessions.py``).

A fetch's session fields (``session_id``, ``session_epoch``; Fetch v7+) mean, as in Kafka:

- epoch -1 (FINAL_EPOCH): a full fetch without a session; a session id names a session
  to close first;
- epoch 0 (INITIAL_EPOCH): a full fetch that asks for a new session (closing the one
  it names); the response carries the new id, or 0 when the cache has no room;
- epoch > 0: an incremental fetch in session ``session_id``. Its partitions are added to
  the session or update their fetch offset and limits, ``forgotten_topics_data`` leaves
  it, the whole session is read, and only partitions with records, a new high watermark
  or log start offset, or an error are returned. An unknown id is
  FETCH_SESSION_ID_NOT_FOUND, any epoch but the session's next one
  INVALID_FETCH_SESSION_EPOCH, and a v13+ (topic id) session used by a v7-12 (topic
  name) fetch or the other way round FETCH_SESSION_TOPIC_ID_ERROR.

Sessions are not bound to a connection (Kafka does not bind them either). Kafka shards
its cache in 8 to spread lock contention; Gregor's single event loop needs no locks, so
one cache holds every slot and evicts over all of them.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any
from uuid import UUID

from kio.schema.errors import ErrorCode

from ..protocol.fetch_metadata import FINAL_EPOCH, INITIAL_EPOCH, INVALID_SESSION_ID, next_epoch
from ..protocol.fetch_response import (
    UNCHANGED_PARTITION,
    PartitionResult,
    TopicResult,
    records_size,
)
from ..replication.purgatory import Waiters

log = logging.getLogger(__name__)

_MAX_SESSION_ID = 2**31 - 1
_ORDER = attrgetter("order")

# A follower's session on the leader reads only the partitions that changed since they
# were last found quiet, and all of them this often: what no notification covers (a log
# start moved by retention, a deleted partition, an ISR change) reaches the follower
# within it, and the quiet partitions' follower fetch times (the ISR lag check) stay
# this fresh.
FULL_PASS_MS = 250

TopicKey = str | UUID
"""How a session names a topic: its name (Fetch v7-12) or its topic id (v13+)."""


@dataclass(slots=True, eq=False)
class CachedPartition:
    """One partition of a session: what the fetcher last asked for and was last sent.

    The request fields share the names of kio's ``FetchPartition`` (``partition``,
    ``fetch_offset``, ``partition_max_bytes``, ``current_leader_epoch``), so the fetch
    reader takes either. ``log_start_offset`` is the fetcher's (a follower's) own;
    ``local_log_start_offset`` is this broker's, as last returned.
    """

    topic_key: TopicKey
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    log_start_offset: int = -1
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    high_watermark: int = -1
    local_log_start_offset: int = -1
    # The session's fetch order (``FetchSession.partitions``' order), as a number: a read
    # of a few partitions of a large session sorts them by it.
    order: int = 0

    @classmethod
    def from_request(cls, topic_key: TopicKey, requested: Any) -> CachedPartition:
        return cls(
            topic_key,
            requested.partition,
            requested.fetch_offset,
            requested.partition_max_bytes,
            getattr(requested, "log_start_offset", -1),
            getattr(requested, "current_leader_epoch", -1),
            getattr(requested, "last_fetched_epoch", -1),
        )

    def update_request(self, requested: Any) -> None:
        self.fetch_offset = requested.fetch_offset
        self.partition_max_bytes = requested.partition_max_bytes
        self.log_start_offset = getattr(requested, "log_start_offset", -1)
        self.current_leader_epoch = getattr(requested, "current_leader_epoch", -1)
        self.last_fetched_epoch = getattr(requested, "last_fetched_epoch", -1)

    def maybe_update_response_data(self, result: PartitionResult) -> bool:
        """Whether an incremental response must carry this partition; remembers what it sends.

        Matches Kafka's ``CachedPartition.maybeUpdateResponseData``: records, a changed
        high watermark or log start offset, a preferred read replica, a diverging epoch
        and any error are sent. An error also forgets the high watermark, so the partition
        is sent again once the error is gone.
        """
        must_respond = records_size(result) > 0
        if self.high_watermark != result.high_watermark:
            must_respond = True
            self.high_watermark = result.high_watermark
        if self.local_log_start_offset != result.log_start_offset:
            must_respond = True
            self.local_log_start_offset = result.log_start_offset
        if result.preferred_read_replica >= 0 or result.diverging_epoch is not None:
            must_respond = True
        if result.error_code:
            self.high_watermark = -1
            must_respond = True
        return must_respond


@dataclass(slots=True, eq=False)
class FetchSession:
    """A session: its partitions in fetch order, its next expected epoch, its use times.

    ``privileged``: created by a follower (replica id >= 0); such sessions may evict
    consumers' sessions. ``cached_size`` and ``last_used_ms`` are what the cache saw at
    the last ``touch``, as Kafka's eviction keys are.
    """

    id: int
    privileged: bool
    uses_topic_ids: bool
    partitions: dict[tuple[TopicKey, int], CachedPartition]
    creation_ms: int
    last_used_ms: int
    epoch: int
    cached_size: int = -1
    next_order: int = 0
    # A follower's session (``FetchSessionCache.watch_partitions``): the partitions its
    # fetches read, told by the replica manager's notifications (``partition_changed``);
    # the others were found quiet (the follower has all of them, nothing to send) and
    # nothing has happened to them since. None: every fetch reads every partition.
    active: set[tuple[TopicKey, int]] | None = None
    full_pass_due_ms: int = 0
    # Set when a partition found quiet (not read by the current fetch, or read and found
    # quiet) has new records or anything but a high watermark move: the waiting fetch
    # answers at once, and the next one reads it.
    skipped_changed: bool = False
    parked: Any = None  # the waiting fetch's future
    waiters: Waiters | None = None

    def __post_init__(self) -> None:
        for cached in self.partitions.values():
            cached.order = self.next_order
            self.next_order += 1

    def listen(self, waiters: Waiters) -> None:
        """Read only what changed from now on: ``waiters`` (the replica manager's
        ``append_waiters``) tell this session of its partitions' notifications."""
        self.waiters = waiters
        self.active = set(self.partitions)
        waiters.listen(self.partitions, self)

    def stop_listening(self) -> None:
        if self.waiters is not None:
            self.waiters.unlisten(self.partitions, self)
            self.waiters = None

    def partition_changed(self, key: tuple[str, int], wake: bool) -> None:
        """A notification of ``key``: its next read is due. ``wake``: records or
        anything but the high watermark, which a follower's waiting fetch answers now
        (as Kafka's DelayedFetch wakes for a follower on the log end, not on the high
        watermark)."""
        active = self.active
        if active is None or key in active or key not in self.partitions:
            return
        active.add(key)
        if wake:
            self.skipped_changed = True
            parked = self.parked
            if parked is not None and not parked.done():
                parked.set_result(None)

    def update(self, request: Any, uses_topic_ids: bool) -> tuple[int, int, int]:
        """Apply an incremental request: (added, updated, removed) partition counts.

        Matches Kafka's ``FetchSession.update``: request partitions first, then
        ``forgotten_topics_data``, so a partition in both leaves the session.
        """
        added = updated = removed = 0
        partitions = self.partitions
        active = self.active
        for topic in request.topics:
            topic_key = topic.topic_id if uses_topic_ids else topic.topic
            for requested in topic.partitions:
                key = (topic_key, requested.partition)
                cached = partitions.get(key)
                if cached is None:
                    cached = partitions[key] = CachedPartition.from_request(topic_key, requested)
                    cached.order = self.next_order
                    self.next_order += 1
                    if self.waiters is not None:
                        self.waiters.listen((key,), self)
                    added += 1
                else:
                    cached.update_request(requested)
                    updated += 1
                if active is not None:
                    active.add(key)  # the follower moved on: its fetch reads it
        for forgotten in getattr(request, "forgotten_topics_data", None) or ():
            topic_key = forgotten.topic_id if uses_topic_ids else forgotten.topic
            for index in forgotten.partitions:
                key = (topic_key, index)
                if partitions.pop(key, None) is not None:
                    if self.waiters is not None:
                        self.waiters.unlisten((key,), self)
                    if active is not None:
                        active.discard(key)
                    removed += 1
        return added, updated, removed

    def move_to_end(self, cached: CachedPartition) -> None:
        key = (cached.topic_key, cached.partition)
        if self.partitions.get(key) is cached:
            self.partitions[key] = self.partitions.pop(key)
            cached.order = self.next_order
            self.next_order += 1


@dataclass(slots=True)
class TopicRun:
    """Consecutive partitions of one topic, in the order a fetch reads and returns them.

    ``name`` is None for a topic known by id only until the handler resolves it (and
    stays None for an unknown topic id). ``partitions`` are kio ``FetchPartition``s
    (sessionless and full fetches) or ``CachedPartition``s (incremental fetches).
    """

    name: str | None
    topic_id: UUID | None
    partitions: Sequence[Any]


def _request_runs(request: Any, uses_topic_ids: bool) -> list[TopicRun]:
    if uses_topic_ids:
        return [TopicRun(None, topic.topic_id, topic.partitions) for topic in request.topics]
    return [TopicRun(topic.topic, None, topic.partitions) for topic in request.topics]


def _session_runs(session: FetchSession, partitions: Iterable[CachedPartition]) -> list[TopicRun]:
    runs: list[TopicRun] = []
    current: list[CachedPartition] = []
    previous: TopicKey | None = None
    for cached in partitions:
        if not current or cached.topic_key != previous:
            current = []
            previous = cached.topic_key
            if session.uses_topic_ids:
                assert isinstance(previous, UUID)
                runs.append(TopicRun(None, previous, current))
            else:
                assert isinstance(previous, str)
                runs.append(TopicRun(previous, None, current))
        current.append(cached)
    return runs


class FetchContext:
    """What one fetch reads (``runs``) and how its results become the response (``finish``).

    ``finish`` takes one ``TopicResult`` per run with one ``PartitionResult`` per
    partition, in the runs' order, and returns ``(error_code, session_id, topics)`` for
    the response. It is called once, when the response is built (after any long poll).
    """

    error_code: int = ErrorCode.none
    runs: list[TopicRun]

    def finish(self, topics: list[TopicResult], now_ms: int) -> tuple[int, int, list[TopicResult]]:
        raise NotImplementedError

    def throttled(self) -> tuple[int, int]:
        """``(error_code, session_id)`` of the empty response a quota-throttled fetch gets
        instead of ``finish`` (Kafka's getThrottledResponse): no session is created and
        none advanced by the results the client never sees."""
        return self.error_code, INVALID_SESSION_ID

    # A follower's incremental fetch that reads only part of its session (the handler
    # calls these around every read and wait; nothing to do for the others).
    skipping = False  # some session partitions are not read: wait even with none

    def after_read(self, topics: list[TopicResult]) -> None:
        """Called in the same step as each read: the results' quiet partitions."""

    def park(self, future: Any) -> None:
        """The future the waiting fetch waits on: a skipped partition's news sets it."""

    @property
    def skipped_changed(self) -> bool:
        """A partition found quiet has news since: answer now, the next fetch reads it."""
        return False


class SessionErrorContext(FetchContext):
    """Matches Kafka: a session error answers no partitions and session id 0."""

    def __init__(self, error_code: int) -> None:
        self.error_code = error_code
        self.runs = []

    def finish(self, topics: list[TopicResult], now_ms: int) -> tuple[int, int, list[TopicResult]]:
        return self.error_code, INVALID_SESSION_ID, []


class SessionlessContext(FetchContext):
    """A full fetch that neither has nor gets a session (epoch -1, Fetch v4-6)."""

    def __init__(self, runs: list[TopicRun]) -> None:
        self.runs = runs

    def finish(self, topics: list[TopicResult], now_ms: int) -> tuple[int, int, list[TopicResult]]:
        return ErrorCode.none, INVALID_SESSION_ID, topics


class FullContext(FetchContext):
    """A full fetch at epoch 0: every partition is returned and a session made of them,
    if the cache has or can make room."""

    def __init__(
        self,
        cache: FetchSessionCache,
        runs: list[TopicRun],
        uses_topic_ids: bool,
        privileged: bool,
    ) -> None:
        self.cache = cache
        self.runs = runs
        self.uses_topic_ids = uses_topic_ids
        self.privileged = privileged

    def finish(self, topics: list[TopicResult], now_ms: int) -> tuple[int, int, list[TopicResult]]:
        size = sum(len(run.partitions) for run in self.runs)
        session_id = self.cache.maybe_create_session(
            now_ms,
            self.privileged,
            size,
            self.uses_topic_ids,
            lambda: self._cached_partitions(topics),
        )
        return ErrorCode.none, session_id, topics

    def _cached_partitions(
        self, topics: list[TopicResult]
    ) -> dict[tuple[TopicKey, int], CachedPartition]:
        partitions: dict[tuple[TopicKey, int], CachedPartition] = {}
        for run, topic in zip(self.runs, topics, strict=True):
            topic_key = run.topic_id if self.uses_topic_ids else run.name
            if topic_key is None:
                # A zero topic id (kio reads it as None) names no topic: its partitions
                # were answered UNKNOWN_TOPIC_ID and have nothing to keep in a session.
                continue
            for requested, result in zip(run.partitions, topic.partitions, strict=True):
                cached = CachedPartition.from_request(topic_key, requested)
                cached.high_watermark = result.high_watermark
                cached.local_log_start_offset = result.log_start_offset
                partitions[(topic_key, requested.partition)] = cached
        return partitions


class IncrementalContext(FetchContext):
    """An incremental fetch: reads the session, answers only what changed.

    A consumer's session is read whole on every fetch, as Kafka's is. A follower's
    (``FetchSession.active``) is read whole every ``FULL_PASS_MS``; in between only the
    partitions the fetch names or the replica manager has notified since they were last
    found quiet: a follower with a thousand partitions at rest and one busy one made the
    leader read the thousand on every round trip (round seven, docs/performance.md)."""

    def __init__(self, session: FetchSession, now_ms: int = 0) -> None:
        self.session = session
        self.expected_epoch = session.epoch
        session.skipped_changed = False
        session.parked = None
        active = session.active
        if active is None:
            self.runs = _session_runs(session, session.partitions.values())
        elif len(active) == len(session.partitions) or now_ms >= session.full_pass_due_ms:
            session.full_pass_due_ms = now_ms + FULL_PASS_MS
            active.update(session.partitions)
            self.runs = _session_runs(session, session.partitions.values())
        else:
            partitions = session.partitions
            reading = sorted((partitions[key] for key in active), key=_ORDER)
            self.runs = _session_runs(session, reading)
            self.skipping = True

    def after_read(self, topics: list[TopicResult]) -> None:
        active = self.session.active
        if active is None:
            return
        for run, topic in zip(self.runs, topics, strict=True):
            for cached, result in zip(run.partitions, topic.partitions, strict=True):
                if result is UNCHANGED_PARTITION:
                    active.discard((cached.topic_key, cached.partition))

    def park(self, future: Any) -> None:
        if self.session.active is not None:
            self.session.parked = future

    @property
    def skipped_changed(self) -> bool:
        return self.session.skipped_changed

    def throttled(self) -> tuple[int, int]:
        if self.session.epoch != self.expected_epoch:
            return ErrorCode.invalid_fetch_session_epoch, self.session.id
        return ErrorCode.none, self.session.id

    def finish(self, topics: list[TopicResult], now_ms: int) -> tuple[int, int, list[TopicResult]]:
        session = self.session
        if session.epoch != self.expected_epoch:
            # Matches Kafka: another request moved the session on while this one waited
            # (a duplicate request); this one gets no partitions.
            log.info(
                "fetch session %d expected epoch %d, but got %d: possible duplicate request",
                session.id,
                self.expected_epoch,
                session.epoch,
            )
            return ErrorCode.invalid_fetch_session_epoch, session.id, []
        answered: list[TopicResult] = []
        with_records: list[CachedPartition] = []
        for run, topic in zip(self.runs, topics, strict=True):
            kept = []
            for cached, result in zip(run.partitions, topic.partitions, strict=True):
                if result is UNCHANGED_PARTITION:
                    continue  # the reader found nothing to send (an idle follower's)
                if cached.maybe_update_response_data(result):
                    kept.append(result)
                    if records_size(result) > 0:
                        with_records.append(cached)
            if not kept:
                continue
            last = answered[-1] if answered else None
            if last is not None and last.name == topic.name and last.topic_id == topic.topic_id:
                # Matches Kafka's FetchResponse: consecutive partitions of a topic share
                # one topic entry.
                last.partitions.extend(kept)
            else:
                topic.partitions = kept
                answered.append(topic)
        # Matches Kafka: partitions that returned records go to the back of the session,
        # so that under max_bytes the next fetches serve the others first.
        for cached in with_records:
            session.move_to_end(cached)
        return ErrorCode.none, session.id, answered


class FetchSessionCache:
    """Kafka's ``FetchSessionCache`` and ``FetchManager.newContext`` in one object.

    ``max_entries`` is ``max.incremental.fetch.session.cache.slots`` (0 turns sessions
    off); ``eviction_ms`` is how long a session must go unused before any new session
    may take its slot (Kafka's 120000 ms, ``min.incremental.fetch.session.eviction.ms``).
    """

    def __init__(
        self, max_entries: int, eviction_ms: int, rng: random.Random | None = None
    ) -> None:
        self.max_entries = max_entries
        self.eviction_ms = eviction_ms
        self.sessions: dict[int, FetchSession] = {}
        # Least recently used first: touch() re-inserts, and now_ms never goes back.
        self._last_used: dict[int, FetchSession] = {}
        self.partitions_total = 0  # sum of the sessions' sizes as of their last touch
        self.created_total = 0
        self.evictions_total = 0
        self._random = rng or random.Random()
        self.partition_waiters: Waiters | None = None

    def watch_partitions(self, waiters: Waiters) -> None:
        """Followers' sessions made from now on read only what changed, as ``waiters``
        (the replica manager's ``append_waiters``) tell them."""
        self.partition_waiters = waiters

    def __len__(self) -> int:
        return len(self.sessions)

    def get(self, session_id: int) -> FetchSession | None:
        return self.sessions.get(session_id)

    # the FetchManager part -----------------------------------------------------------------

    def new_context(
        self, request: Any, version: int, privileged: bool, now_ms: int
    ) -> FetchContext:
        """The context of one Fetch request (kio's FetchRequest of ``version``).

        Matches Kafka's ``FetchManager.newContext``. ``privileged``: the fetch comes from
        a follower (replica id >= 0).
        """
        session_id = getattr(request, "session_id", INVALID_SESSION_ID)
        epoch = getattr(request, "session_epoch", FINAL_EPOCH)
        uses_topic_ids = version >= 13
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID and self.remove(session_id) is not None:
                # Any session a full fetch names is closed.
                log.debug("fetch session %d closed by a full fetch", session_id)
            runs = _request_runs(request, uses_topic_ids)
            if epoch == FINAL_EPOCH:
                return SessionlessContext(runs)
            return FullContext(self, runs, uses_topic_ids, privileged)
        session = self.sessions.get(session_id)
        if session is None:
            log.debug("fetch session %d not found", session_id)
            return SessionErrorContext(ErrorCode.fetch_session_id_not_found)
        if session.epoch != epoch:
            log.debug(
                "fetch session %d: expected epoch %d, got %d", session_id, session.epoch, epoch
            )
            return SessionErrorContext(ErrorCode.invalid_fetch_session_epoch)
        if session.uses_topic_ids != uses_topic_ids:
            return SessionErrorContext(ErrorCode.fetch_session_topic_id_error)
        added, updated, removed = session.update(request, uses_topic_ids)
        if not session.partitions:
            # Matches Kafka: a session left without partitions is closed, and the fetch
            # answered like a sessionless one.
            log.debug("fetch session %d closed: its last partitions were forgotten", session_id)
            self.remove(session)
            return SessionlessContext(_request_runs(request, uses_topic_ids))
        self.touch(session, now_ms)
        session.epoch = next_epoch(session.epoch)
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "incremental fetch in session %d, next epoch %d: added %d, updated %d, "
                "removed %d, %d partitions",
                session.id,
                session.epoch,
                added,
                updated,
                removed,
                len(session.partitions),
            )
        return IncrementalContext(session, now_ms)

    # the cache part -------------------------------------------------------------------------

    def maybe_create_session(
        self,
        now_ms: int,
        privileged: bool,
        size: int,
        uses_topic_ids: bool,
        create_partitions: Callable[[], dict[tuple[TopicKey, int], CachedPartition]],
    ) -> int:
        """A new session's id, or INVALID_SESSION_ID when there is no room for it."""
        if len(self.sessions) >= self.max_entries and not self._try_evict(privileged, size, now_ms):
            log.debug("no fetch session created for privileged=%s, size=%d", privileged, size)
            return INVALID_SESSION_ID
        session = FetchSession(
            id=self._new_session_id(),
            privileged=privileged,
            uses_topic_ids=uses_topic_ids,
            partitions=create_partitions(),
            creation_ms=now_ms,
            last_used_ms=now_ms,
            epoch=next_epoch(INITIAL_EPOCH),
        )
        if privileged and not uses_topic_ids and self.partition_waiters is not None:
            session.listen(self.partition_waiters)
        self.sessions[session.id] = session
        self.touch(session, now_ms)
        self.created_total += 1
        log.debug(
            "created fetch session %d (privileged=%s, %d partitions)",
            session.id,
            privileged,
            len(session.partitions),
        )
        return session.id

    def _new_session_id(self) -> int:
        while True:
            session_id = self._random.randint(1, _MAX_SESSION_ID - 1)
            if session_id not in self.sessions:
                return session_id

    def _try_evict(self, privileged: bool, size: int, now_ms: int) -> bool:
        """Make room for a new session; True when a session was evicted.

        Matches Kafka's ``tryEvict``: the least recently used session goes if it has been
        unused for longer than ``eviction_ms``. Otherwise the least valuable evictable
        session goes if the new one is worth more, valued as (privileged, size, id):
        unprivileged below privileged, then fewer partitions below more. A session is
        evictable when it had existed longer than ``eviction_ms`` at its last use, and
        by a privileged (follower) newcomer also when it is a consumer's.
        """
        if not self._last_used:
            return False
        oldest = next(iter(self._last_used.values()))
        if now_ms - oldest.last_used_ms > self.eviction_ms:
            log.debug(
                "evicting fetch session %d: unused for %d ms",
                oldest.id,
                now_ms - oldest.last_used_ms,
            )
            self._evict(oldest)
            return True
        victim: FetchSession | None = None
        victim_key: tuple[bool, int, int] | None = None
        for session in self.sessions.values():
            settled = session.last_used_ms - session.creation_ms > self.eviction_ms
            if not settled and not (privileged and not session.privileged):
                continue
            key = (session.privileged, session.cached_size, session.id)
            if victim_key is None or key < victim_key:
                victim, victim_key = session, key
        if victim is None or victim_key is None or (privileged, size, 0) < victim_key:
            return False
        log.debug(
            "evicting fetch session %d (privileged=%s, %d partitions) for a new one "
            "(privileged=%s, %d partitions)",
            victim.id,
            victim.privileged,
            victim.cached_size,
            privileged,
            size,
        )
        self._evict(victim)
        return True

    def _evict(self, session: FetchSession) -> None:
        self.remove(session)
        self.evictions_total += 1

    def remove(self, session: FetchSession | int) -> FetchSession | None:
        """Drop a session (or a session id) from the cache; the session, or None."""
        session_id = session if isinstance(session, int) else session.id
        removed = self.sessions.pop(session_id, None)
        if removed is not None:
            removed.stop_listening()
            self._last_used.pop(session_id, None)
            self.partitions_total -= max(removed.cached_size, 0)
        return removed

    def touch(self, session: FetchSession, now_ms: int) -> None:
        """Record a use: the session becomes the most recently used, at its current size."""
        self._last_used.pop(session.id, None)
        self._last_used[session.id] = session
        session.last_used_ms = now_ms
        if session.cached_size >= 0:
            self.partitions_total -= session.cached_size
        session.cached_size = len(session.partitions)
        self.partitions_total += session.cached_size
