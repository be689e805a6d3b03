"""An acks=all produce waiting for the high watermark (Kafka's ``DelayedProduce``).

Kafka parks such a produce in its produce purgatory and completes it on the thread whose
action made it completable: the follower fetch that moves the high watermark past the
append runs ``tryComplete`` and sends the producer's answer. Gregor's waiting produce was
a coroutine awaiting a future: woken by that fetch, it ran on a later turn of the event
loop as a task step (a future, a timer and a task per produce, and the connection's own
task writing the answer in order), behind the rest of the fetch that woke it.

A ``DelayedProduce`` watches its partitions in ``produce_purgatory`` and, when woken,
checks every append again in that call; once each has an outcome it resolves ``answer``
(a ``Deferred``, one ``ErrorCode`` per append, in the order given), which the produce
handler, the request router and the connection chain on, so the answer is written in the
call that completed it. One timer ends the wait (REQUEST_TIMED_OUT for what is still
short of the high watermark).

The produces waiting on a partition are kept in offset order (``ProducePurgatory``), as
Kafka keys its produce purgatory by partition and checks each operation's required
offset: a high watermark move wakes only the produces it completes. Woken all together
(as by a plain ``Waiters``), the five or so produces in flight on a partition were each
checked again at every follower fetch, a fifth of the leader's Python per fetch in the
batched RF=3 row's profile (docs/performance.md, round fourteen).
"""

from __future__ import annotations

import asyncio
import bisect
import itertools
from collections.abc import Callable, Sequence

from kio.schema.errors import ErrorCode

from ..deferred import Deferred
from .purgatory import TopicPartition

# One append: its partition, the leader epoch it was appended in, its last offset, and
# the slot of its outcome.
_Pending = tuple[TopicPartition, int, int, int]
# The answer for one append now, or None while the high watermark is short of it.
Outcome = Callable[[TopicPartition, int, int], "ErrorCode | None"]
# A produce waiting on one partition: the last offset it needs below the high watermark,
# a tie-breaker (produces never compare), the produce.
_Entry = tuple[int, int, "DelayedProduce"]


class ProducePurgatory:
    """acks=all produces waiting for the high watermark, per partition in offset order."""

    def __init__(self) -> None:
        self._waiting: dict[TopicPartition, list[_Entry]] = {}
        self._order = itertools.count()

    def watch(self, produce: DelayedProduce, key: TopicPartition, last_offset: int) -> _Entry:
        """Wake ``produce`` once ``key``'s high watermark passes ``last_offset`` (or on
        anything else about ``key``); the entry is what ``unwatch`` takes back."""
        entry = (last_offset, next(self._order), produce)
        waiting = self._waiting.setdefault(key, [])
        # Appends come in offset order: almost always the end of the list.
        if not waiting or waiting[-1] < entry:
            waiting.append(entry)
        else:
            bisect.insort(waiting, entry)
        return entry

    def unwatch(self, key: TopicPartition, entry: _Entry) -> None:
        waiting = self._waiting.get(key)
        if waiting is None:
            return
        index = bisect.bisect_left(waiting, entry)
        if index < len(waiting) and waiting[index] is entry:
            del waiting[index]
            if not waiting:
                del self._waiting[key]

    def pending(self) -> int:
        """Produces waiting (Kafka's purgatory size); one may wait on several partitions."""
        return len({entry[2] for waiting in self._waiting.values() for entry in waiting})

    def notify_high_watermark(self, key: TopicPartition, high_watermark: int) -> None:
        """``key``'s high watermark moved: wake the produces it passed, and only those."""
        waiting = self._waiting.get(key)
        if not waiting or waiting[0][0] >= high_watermark:
            return
        passed = bisect.bisect_left(waiting, (high_watermark,))
        woken = waiting[:passed]
        del waiting[:passed]
        if not waiting:
            del self._waiting[key]
        for _offset, _order, produce in woken:
            produce.woken(key)

    def notify(self, key: TopicPartition) -> None:
        """Something other than the high watermark changed for ``key`` (leadership, the
        ISR, the log dir): wake every produce waiting on it."""
        for _offset, _order, produce in self._waiting.pop(key, ()):
            produce.woken(key)


class DelayedProduce:
    """The appends of one produce request, answered together once all have an outcome."""

    __slots__ = ("_outcome", "_outcomes", "_pending", "_purgatory", "_timer", "_watched", "answer")

    def __init__(
        self,
        purgatory: ProducePurgatory,
        outcome: Outcome,
        appends: Sequence[tuple[TopicPartition, int, int]],
        timeout_s: float,
    ) -> None:
        """``appends``: (partition, leader epoch when appended, last offset) each, one per
        partition (a produce request names a partition once)."""
        self.answer = Deferred()
        self._purgatory = purgatory
        self._outcome = outcome
        self._outcomes = [ErrorCode.none] * len(appends)
        self._pending: list[_Pending] = [
            (key, epoch, last_offset, slot)
            for slot, (key, epoch, last_offset) in enumerate(appends)
        ]
        # The purgatory's entry for each partition watched.
        self._watched: dict[TopicPartition, _Entry] = {}
        self._timer: asyncio.TimerHandle | None = None
        # Kafka's tryCompleteElseWatch: checked and, if it must wait, watching in this
        # call, so no high watermark move in between is missed.
        if not self._check():
            self._watch_pending()
            self._timer = asyncio.get_running_loop().call_later(timeout_s, self._expire)

    def woken(self, key: TopicPartition) -> None:
        """Woken by ``key`` (its high watermark passed this append, or leadership or the
        ISR changed), whose purgatory entry is gone: check again, answer if every append
        has its outcome, else watch ``key`` again if it is still short there."""
        self._watched.pop(key, None)
        if self.answer.settled:
            return
        if not self._checked():
            self._watch_pending()

    def _watch_pending(self) -> None:
        purgatory = self._purgatory
        for key, _epoch, last_offset, _slot in self._pending:
            if key not in self._watched:
                self._watched[key] = purgatory.watch(self, key, last_offset)

    def _check(self) -> bool:
        """Record every outcome there is; True (and answered) once none is missing."""
        still = []
        for item in self._pending:
            key, epoch, last_offset, slot = item
            outcome = self._outcome(key, epoch, last_offset)
            if outcome is None:
                still.append(item)
            else:
                self._outcomes[slot] = outcome
        self._pending = still
        if still:
            return False
        self._complete()
        return True

    def _checked(self) -> bool:
        """``_check``; a failure fails the answer (the router answers
        UNKNOWN_SERVER_ERROR). True once answered either way."""
        try:
            return self._check()
        except Exception as error:
            self._fail(error)
            return True

    def _expire(self) -> None:
        self._timer = None
        if self.answer.settled or self._checked():
            return
        for *_rest, slot in self._pending:
            self._outcomes[slot] = ErrorCode.request_timed_out
        self._pending = []
        self._complete()

    def _complete(self) -> None:
        self._stop_watching()
        # What the answer's consumers do is theirs to handle (nothing they raise may
        # reach the follower fetch that woke this produce).
        self.answer.resolve(self._outcomes)

    def _fail(self, error: Exception) -> None:
        self._stop_watching()
        self.answer.fail(error)

    def _stop_watching(self) -> None:
        for key, entry in self._watched.items():
            self._purgatory.unwatch(key, entry)
        self._watched.clear()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
