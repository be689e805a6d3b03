"""Waiting on a partition: the one delayed-operation primitive (Kafka's purgatory).

Kafka parks requests that cannot be answered yet in a ``DelayedOperationPurgatory`` keyed
by partition: a fetch waiting for data (``DelayedFetch``) and an acks=all produce waiting
for the high watermark (``DelayedProduce``), each completed when its partition changes or
its time runs out. Gregor's replica manager keeps the fetches in a ``Waiters``
(``append_waiters``; a waiter re-checks its condition when woken) and the produces in a
``ProducePurgatory`` (``delayed_produce.py``: in offset order, woken only by the high
watermark move that completes them, or by anything else about their partition).

A fetch watches for what could answer it, as Kafka's ``DelayedFetch.tryComplete`` checks
the log end offset for a follower and the high watermark (or last stable offset) for a
consumer: a follower's fetch wakes on appends (``notify_appended``), a consumer's on the
high watermark moving (``notify_committed``), and both on anything else about the
partition (``notify``: leadership, a failed log dir). Woken by every append and every
high watermark move, each acks=all message at RF=3 woke the consumer's fetch once (the
append, which it cannot read before the followers have it) and the first follower's
fetch once (the high watermark, which gives it nothing to copy): a task step and a read
of the partition each, on the leader, on the round trip's critical path.

What waits is a ``Wakeable`` (an asyncio future would do): a parked fetch
(``server/handlers/fetch.py``'s ``DelayedFetch``), whose ``set_result`` checks again and
answers in the notifying call, as Kafka's purgatory runs ``tryComplete`` on the thread
that appended. So a notification may run a fetch's read and write its response (and a
high watermark move a produce's) before returning.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

TopicPartition = tuple[str, int]


class Wakeable(Protocol):
    """What waits on a partition: ``set_result(None)`` wakes it, once per wait."""

    def done(self) -> bool: ...

    def set_result(self, result: None, /) -> None: ...


class PartitionListener(Protocol):
    """Told of every notification of a partition it listens to, for as long as it listens
    (a follower's fetch session on the leader: ``server/fetch_sessions.py``)."""

    def partition_changed(self, key: TopicPartition, wake: bool) -> None:
        """``wake``: anything but a high watermark move (records, leadership)."""


class Waiters:
    """Futures waiting on something per partition; notify wakes them all."""

    def __init__(self) -> None:
        # Waiting for appends (and everything else); waiting for the high watermark
        # (and everything else): ``watch(committed=...)`` says which.
        self._waiters: dict[TopicPartition, set[Wakeable]] = {}
        self._committed: dict[TopicPartition, set[Wakeable]] = {}
        # Standing interest, not one wait: kept until ``unlisten``, told of every kind of
        # notification (appends, the high watermark, anything else).
        self._listeners: dict[TopicPartition, set[PartitionListener]] = {}

    def listen(self, keys: Iterable[TopicPartition], listener: PartitionListener) -> None:
        for key in keys:
            self._listeners.setdefault(key, set()).add(listener)

    def unlisten(self, keys: Iterable[TopicPartition], listener: PartitionListener) -> None:
        for key in keys:
            listeners = self._listeners.get(key)
            if listeners is not None:
                listeners.discard(listener)
                if not listeners:
                    del self._listeners[key]

    def _tell_listeners(self, key: TopicPartition, wake: bool) -> None:
        listeners = self._listeners.get(key)
        if listeners:
            # A copy: a listener told wakes its session's parked fetch, whose answer may
            # end or change that session's listening.
            for listener in tuple(listeners):
                listener.partition_changed(key, wake)

    def watch_with(
        self, waiter: Wakeable, keys: list[TopicPartition], *, committed: bool = False
    ) -> None:
        """Wake ``waiter`` (a parked fetch, a waiting produce) when one of ``keys`` is
        notified. ``committed``: a reader of committed data only (a consumer's fetch),
        which ``notify_appended`` leaves alone; otherwise ``notify_committed`` does.

        A request that found nothing to answer must watch in the same call that looked
        (Kafka's tryCompleteElseWatch): a fetch handler that only returned a coroutine
        registered on a later turn of the loop, and an append in between was missed; the
        fetch then waited its whole max wait (500 ms for a follower, one acks=all round
        trip stalled)."""
        waiters = self._committed if committed else self._waiters
        for key in keys:
            waiters.setdefault(key, set()).add(waiter)

    def unwatch(self, waiter: Wakeable, keys: list[TopicPartition]) -> None:
        for by_key in (self._waiters, self._committed):
            for key in keys:
                waiters = by_key.get(key)
                if waiters is not None:
                    waiters.discard(waiter)
                    if not waiters:
                        del by_key[key]

    def pending(self) -> int:
        """Requests waiting (Kafka's purgatory size); one may wait on several keys."""
        return len(
            {
                future
                for by_key in (self._waiters, self._committed)
                for futures in by_key.values()
                for future in futures
            }
        )

    def notify(self, key: TopicPartition) -> None:
        """Wake every waiter of ``key``: something other than its data changed."""
        _wake(self._waiters.pop(key, None))
        _wake(self._committed.pop(key, None))
        self._tell_listeners(key, True)

    def notify_appended(self, key: TopicPartition) -> None:
        """Records were appended to ``key``'s log: wake all but committed-only readers."""
        _wake(self._waiters.pop(key, None))
        self._tell_listeners(key, True)

    def notify_committed(self, key: TopicPartition) -> None:
        """``key``'s high watermark moved: wake committed-only readers."""
        _wake(self._committed.pop(key, None))
        self._tell_listeners(key, False)


def _wake(waiters: set[Wakeable] | None) -> None:
    # Every waiter of the key is woken, so none stays watching it: one whose request was
    # dropped before it was answered goes too.
    if waiters:
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)
