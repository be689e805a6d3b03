"""Waiting on a partition: the one delayed-operation primitive (Kafka's purgatory).

Kafka parks requests that cannot be answered yet in a ``DelayedOperationPurgatory`` keyed
by partition: a fetch waiting for data (``DelayedFetch``) and an acks=all produce waiting
for the high watermark (``DelayedProduce``), each completed when its partition changes or
its time runs out. Gregor's replica manager keeps two ``Waiters`` (``append_waiters``,
``high_watermark_waiters``); a waiter re-checks its condition when woken.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

TopicPartition = tuple[str, int]


class Waiters:
    """Futures waiting on something per partition; notify wakes them all."""

    def __init__(self) -> None:
        self._waiters: dict[TopicPartition, set[asyncio.Future[None]]] = {}

    async def wait_any(self, keys: Iterable[TopicPartition], timeout: float) -> None:
        """Until one of ``keys`` is notified or ``timeout`` seconds pass."""
        keys = list(keys)
        await self.wait_watched(self.watch(keys), keys, timeout)

    def watch(self, keys: list[TopicPartition]) -> asyncio.Future[None]:
        """A future set when one of ``keys`` is notified, registered now.

        A request that found nothing to answer must watch in the same call that looked
        (Kafka's tryCompleteElseWatch): a fetch handler that only returns a coroutine
        registers on a later turn of the loop, and an append in between was missed; the
        fetch then waited its whole max wait (500 ms for a follower, one acks=all round
        trip stalled)."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        for key in keys:
            self._waiters.setdefault(key, set()).add(future)
        return future

    async def wait_watched(
        self, future: asyncio.Future[None], keys: list[TopicPartition], timeout: float
    ) -> None:
        """Until ``future`` (from ``watch(keys)``) is set or ``timeout`` seconds pass; at
        once if it already is. Either way it stops watching. A timer sets the same
        future (``asyncio.wait_for`` wraps it in more futures and callbacks: this runs
        once per replication round trip on both sides of it)."""
        timer = None
        try:
            if not future.done():
                timer = asyncio.get_running_loop().call_later(timeout, _expire, future)
                await future
        finally:
            if timer is not None:
                timer.cancel()
            self.unwatch(future, keys)

    def unwatch(self, future: asyncio.Future[None], keys: list[TopicPartition]) -> None:
        for key in keys:
            waiters = self._waiters.get(key)
            if waiters is not None:
                waiters.discard(future)
                if not waiters:
                    del self._waiters[key]

    def pending(self) -> int:
        """Requests waiting (Kafka's purgatory size); one may wait on several keys."""
        return len({future for futures in self._waiters.values() for future in futures})

    def notify(self, key: TopicPartition) -> None:
        # Every future of the key is set, so none stays watching it: a future whose
        # waiter never ran (its request dropped before its first step) goes too.
        waiters = self._waiters.pop(key, None)
        if waiters:
            for future in waiters:
                if not future.done():
                    future.set_result(None)


def _expire(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
