"""Stopping background tasks: the one way a component's ``stop`` cancels its tasks.

Bottom of the broker's layers, beside ``stats`` (nothing here imports the rest of
Gregor), so that every layer's ``stop`` shares it.

The pattern it replaces, ``task.cancel()`` then ``with suppress(CancelledError): await
task``, has two faults. It swallows a cancellation of the stop itself: awaiting a task
directly hands the caller's cancellation to that task, whose ``CancelledError`` then
comes back and is suppressed as if it were the task's own, so a ``Broker.stop`` bounded
by a timeout (or cancelled at exit) could go on as if never cancelled. And it is unbounded:
a task that loses its cancellation (Python 3.11's ``asyncio.wait_for`` can) hangs the
stop for good. ``asyncio.wait`` waits without awaiting the tasks themselves, so the
caller's cancellation stays the caller's, and takes a timeout.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any

log = logging.getLogger(__name__)

# Long enough for any task of ours to unwind after its cancellation; a task still running
# after it has lost its cancellation, and waiting longer would not help.
STOP_TIMEOUT_S = 10.0


async def cancel_and_wait(
    tasks: Iterable[asyncio.Task[Any] | None],
    what: str,
    timeout: float = STOP_TIMEOUT_S,
) -> set[asyncio.Task[Any]]:
    """Cancel ``tasks`` and wait, at most ``timeout`` seconds, for them to end; the ones
    still running then (logged, as left behind) are returned.

    What a task ended with (its cancellation, an exception) is consumed: its owner is
    stopping it and has nothing to do with either. A cancellation of the caller is not:
    it raises ``CancelledError`` here, as any await would. ``None`` entries (a task never
    started) are skipped; cancelling a task already cancelled or done is harmless."""
    started = [task for task in tasks if task is not None]
    for task in started:
        task.cancel()
    if not started:
        return set()
    done, pending = await asyncio.wait(started, timeout=timeout)
    for task in done:
        if not task.cancelled() and task.exception() is not None:
            log.debug("%s: task %s ended with", what, task.get_name(), exc_info=task.exception())
    if pending:
        log.error(
            "%s: %d tasks did not stop within %.0f s; left behind: %s",
            what,
            len(pending),
            timeout,
            ", ".join(sorted(task.get_name() for task in pending)),
        )
    return pending
