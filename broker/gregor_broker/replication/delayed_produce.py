"""An acks=all produce waiting for the high watermark (Kafka's ``DelayedProduce``).

Kafka parks such a produce in its produce purgatory and completes it on the thread whose
action made it completable: the follower fetch that moves the high watermark past the
append runs ``tryComplete`` and sends the producer's answer. Gregor's waiting produce was
a coroutine awaiting a future: woken by that fetch, it ran on a later turn of the event
loop as a task step (a future, a timer and a task per produce, and the connection's own
task writing the answer in order), behind the rest of the fetch that woke it.

A ``DelayedProduce`` watches its partitions in ``high_watermark_waiters`` and, when woken,
checks every append again in that call; once each has an outcome it resolves ``answer``
(a ``Deferred``, one ``ErrorCode`` per append, in the order given), which the produce
handler, the request router and the connection chain on, so the answer is written in the
call that completed it. One timer ends the wait (REQUEST_TIMED_OUT for what is still
short of the high watermark).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from kio.schema.errors import ErrorCode

from ..deferred import Deferred
from .purgatory import TopicPartition, Waiters

# One append: its partition, the leader epoch it was appended in, its last offset, and
# the slot of its outcome.
_Pending = tuple[TopicPartition, int, int, int]
# The answer for one append now, or None while the high watermark is short of it.
Outcome = Callable[[TopicPartition, int, int], "ErrorCode | None"]


class DelayedProduce:
    """The appends of one produce request, answered together once all have an outcome."""

    __slots__ = ("_keys", "_outcome", "_outcomes", "_pending", "_timer", "_waiters", "answer")

    def __init__(
        self,
        waiters: Waiters,
        outcome: Outcome,
        appends: Sequence[tuple[TopicPartition, int, int]],
        timeout_s: float,
    ) -> None:
        """``appends``: (partition, leader epoch when appended, last offset) each."""
        self.answer = Deferred()
        self._waiters = waiters
        self._outcome = outcome
        self._outcomes = [ErrorCode.none] * len(appends)
        self._pending: list[_Pending] = [
            (key, epoch, last_offset, slot)
            for slot, (key, epoch, last_offset) in enumerate(appends)
        ]
        # Every partition watched, unwatched together once answered.
        self._keys = list(dict.fromkeys(key for key, _epoch, _last_offset in appends))
        self._timer: asyncio.TimerHandle | None = None
        # Kafka's tryCompleteElseWatch: checked and, if it must wait, watching in this
        # call, so no high watermark move in between is missed.
        if not self._check():
            waiters.watch_with(self, self._keys)
            self._timer = asyncio.get_running_loop().call_later(timeout_s, self._expire)

    def done(self) -> bool:
        return self.answer.settled

    def set_result(self, _woken: None, /) -> None:
        """Woken by one of its partitions (the high watermark moved, or leadership or
        the ISR changed): check again, and answer if every append has its outcome."""
        if self.answer.settled:
            return
        if not self._checked():
            # The notification took this waiter off the woken partition only: it
            # watches that one again (and the others still, unchanged).
            self._waiters.watch_with(self, [item[0] for item in self._pending])

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
        self._waiters.unwatch(self, self._keys)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
