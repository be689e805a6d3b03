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
        """Until one of ``keys`` is notified or ``timeout`` seconds pass. A timer sets
        the same future (``asyncio.wait_for`` wraps it in more futures and callbacks:
        this runs once per replication round trip on both sides of it)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        keys = list(keys)
        for key in keys:
            self._waiters.setdefault(key, set()).add(future)
        timer = loop.call_later(timeout, _expire, future)
        try:
            await future
        finally:
            timer.cancel()
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
        waiters = self._waiters.get(key)
        if waiters:
            for future in waiters:
                if not future.done():
                    future.set_result(None)


def _expire(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
