"""An answer that is not ready yet, completed by a call rather than by a task.

Kafka completes a delayed operation (``DelayedOperation.tryComplete``, then
``onComplete``) on the thread whose action made it completable: the append that gives a
parked follower fetch its records sends that fetch's response. A coroutine cannot be
resumed from a call: awaiting a future, it waits for a ``Task`` step that the event loop
runs after everything already queued, behind the rest of the request that woke it. On
an acks=all round trip that wait sat twice on the critical path (the followers'
responses after the producer's append, the consumer's after the high watermark moved),
each time behind the waking request's remaining work.

A handler that waits returns a ``Deferred`` instead of a coroutine; the request router
chains its response encoding onto it (``then``) and the connection chains the write, so
whoever resolves it writes the answer in the same call. It is also awaitable, for code
(and tests) that simply wants the answer. An acks=all produce waiting for the high
watermark (``replication/delayed_produce.py``) answers the same way, which is why this
sits at the bottom of the layers, beside ``tasks``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Generator
from typing import Any

# Called once with (value, None) or (None, error).
Callback = Callable[[Any, BaseException | None], None]


class Deferred:
    """One value or one error, delivered to one callback as soon as both are there."""

    __slots__ = ("_callback", "_error", "_settled", "_value")

    def __init__(self) -> None:
        self._callback: Callback | None = None
        self._value: Any = None
        self._error: BaseException | None = None
        self._settled = False

    @property
    def settled(self) -> bool:
        return self._settled

    def then(self, callback: Callback) -> None:
        """Deliver the outcome to ``callback``: at once if settled, else when it is."""
        if self._callback is not None:
            raise RuntimeError("a Deferred has one consumer")
        self._callback = callback
        if self._settled:
            self._deliver()

    def resolve(self, value: Any) -> None:
        self._settle(value, None)

    def fail(self, error: BaseException) -> None:
        self._settle(None, error)

    def _settle(self, value: Any, error: BaseException | None) -> None:
        if self._settled:
            raise RuntimeError("a Deferred settles once")
        self._settled = True
        self._value = value
        self._error = error
        if self._callback is not None:
            self._deliver()

    def _deliver(self) -> None:
        callback = self._callback
        self._callback = None
        callback(self._value, self._error)  # type: ignore[misc]

    def __await__(self) -> Generator[Any, None, Any]:
        future = asyncio.get_running_loop().create_future()

        def settle(value: Any, error: BaseException | None) -> None:
            if future.done():
                return  # the awaiting task was cancelled
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(value)

        self.then(settle)
        return future.__await__()
