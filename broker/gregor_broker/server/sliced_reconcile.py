"""Applying metadata changes to local partitions in slices, so the event loop keeps serving.

Creating a partition's log (a directory, a segment file and two index files) costs about
a millisecond, several on a loaded machine; one CreateTopics of 1,000 partitions used to
hold the event loop for one to seven seconds while every other client waited (issue 9:
the Metadata tail at 10,000 partitions, the fuzzer's hangs). Kafka applies LeaderAndIsr on
its request handler threads; here the topics that changed are reconciled a slice at a
time, each slice bounded by a time budget, with the rest handed back to the loop. One
topic is not a unit of work either: a call creates, moves leadership of or drops at most
``CHANGES_PER_CALL`` partitions and hands back the topics it did not finish (the
fuzzer's CreateTopics of 1,000 partitions still held the loop for 1.5 to 8 s in one
call while slices counted topics).

A small change (the usual case: a test creating a few topics) is still applied at once,
before the loop runs anything else, as before.

A slice ends after 5 ms and a call makes at most 4 changes (two new logs and their
leaderships, 1-3 ms): the first FindCoordinator of a new broker creates the 50 partitions
of ``__consumer_offsets``, and slices of 20 ms with calls of 16 changes held the loop for
10-16 ms of CPU (22-38 ms of wall time on a busy machine) three times in a row while
another client waited. Short calls are cheap because a call resumes where the last one
stopped in a topic (``ReplicaManager.reconcile``) instead of walking its partitions again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Protocol

log = logging.getLogger(__name__)

# Topics reconciled before the clock is looked at: small changes finish in one go.
MIN_TOPICS_PER_SLICE = 64
# The loop time one slice may take before the rest waits for the next turn of the loop
# (as ``LogManager.sweep`` and the ISR shrink: 5 ms).
SLICE_BUDGET_S = 0.005
# Partition changes one call may make: create a log (a millisecond, several when the
# disk is busy), make a partition leader or follower, or drop one.
CHANGES_PER_CALL = 4


class Apply(Protocol):
    """``ReplicaManager.reconcile``: applies the topics, changing at most
    ``max_changes`` partitions; returns the topics it did not finish."""

    def __call__(self, topics: set[str], *, max_changes: int | None = None) -> set[str]: ...


class SlicedReconcile:
    """Collects changed topic names and applies them to local state a slice at a time."""

    def __init__(
        self,
        take_changed: Callable[[], set[str]],
        apply: Apply,
        *,
        budget_s: float = SLICE_BUDGET_S,
        min_topics: int = MIN_TOPICS_PER_SLICE,
        changes_per_call: int = CHANGES_PER_CALL,
    ) -> None:
        self._take_changed = take_changed
        self._apply = apply
        self._budget_s = budget_s
        self._min_topics = min_topics
        self._changes_per_call = changes_per_call
        self._pending: set[str] = set()
        self._scheduled = False

    @property
    def pending(self) -> int:
        """Topics changed but not yet applied."""
        return len(self._pending)

    def schedule(self) -> None:
        """Run a slice soon (on the running loop); once however often it is called."""
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self.run_slice)

    def run_slice(self) -> None:
        self._scheduled = False
        pending = self._pending
        pending |= self._take_changed()
        deadline = time.monotonic() + self._budget_s
        done = 0
        large = False  # a call left logs to create: the time budget holds from now on
        while pending:
            batch = {pending.pop() for _ in range(min(len(pending), 16))}
            try:
                unfinished = self._apply(batch, max_changes=self._changes_per_call)
            except Exception:
                log.exception("applying metadata to local partitions failed")
                unfinished = set()
            if unfinished:
                large = True
                pending |= unfinished
            done += len(batch) - len(unfinished)
            if (large or done >= self._min_topics) and time.monotonic() >= deadline:
                break
        if pending:
            self.schedule()
