"""The first use of a request version, done off the event loop.

The first request of an API version pays for its kio classes (imported on demand), the
frame guard's generated checker, kio's reader and writer and the response builder's
plan: 2 to 15 ms a version, 0.4 s of CPU for all 208 versions the broker serves. Paid
on the event loop, a client sending every version once (a fuzzer, a newer client
probing) stalled every other connection for that long. ``Preparer`` does this work on
one background thread: a cold request waits there (so at most one preparation runs at a
time, whatever the number of connections), and after startup the remaining versions are
prepared one by one with pauses, so they cost neither the start nor the clients.

The thread works in steps of a few milliseconds at most (``preparation``: one checker
or one builder each), and it is handed the next step by the event loop, once the loop
has run again. A thread that ran through a backlog on its own held the interpreter lock
whenever the loop let go of it: each socket call of the loop (a recv, a send, the poll)
lets the lock go, and the loop then waited the interpreter's switch interval (5 ms) to
get it back: turns of the loop of 3-10 ms of CPU took 80-210 ms, py-spy showing it
waiting in ``transport.write``, and another client's worst ApiVersions while a fuzzer
used every version was 222-336 ms (three runs; 46-101 ms with steps). Now the thread
takes the lock for at most one step per turn of the loop.

Other rare, expensive first-time work (hashing a huge group id) can run on the same
thread with ``run_off_loop``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from collections.abc import Iterable, Iterator
from typing import Any

from ..tasks import cancel_and_wait
from . import entities
from .frame_guard import checker_classes, prepare_checker

log = logging.getLogger(__name__)

# Preparing in the background starts this long after startup (brokers of short tests
# never pay for it) and pauses this long between versions (a small share of one core).
BACKGROUND_DELAY_S = 10.0
BACKGROUND_PAUSE_S = 0.05
# Starts the log line that says the background preparation is over.
PREPARED_LOG_LINE = "request versions prepared"


def preparation(api_key: int, version: int) -> Iterator[None]:
    """Everything the first request and response of ``api_key`` v``version`` need, in
    steps of a few milliseconds at most: it yields between them (855 steps for the 208
    versions served, median 0.3 ms of CPU, the largest 3.4 ms: Fetch's response builder)."""
    request_class = entities.payload_class(api_key, version, "request")
    entities.is_flexible(api_key, version)
    for entity_class in checker_classes(request_class):
        prepare_checker(entity_class)
        yield
    entities.request_reader(api_key, version)
    response_class = entities.payload_class(api_key, version, "response")
    yield
    entities.prepare_builder(response_class)


def prepare(api_key: int, version: int) -> None:
    """``preparation`` in one go."""
    for _step in preparation(api_key, version):
        pass


def _next_step(steps: Iterator[None]) -> bool:
    """Run one step of ``steps``; False once there was none left."""
    return next(steps, StopIteration) is not StopIteration


class Preparer:
    """One thread that prepares request versions; ``ready`` says which are done."""

    def __init__(self) -> None:
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="gregor-prepare"
        )
        self._ready: set[tuple[int, int]] = set()
        self._task: asyncio.Task[None] | None = None
        # One preparation at a time, in the order the requests came.
        self._turn = asyncio.Lock()

    def ready(self, api_key: int, version: int) -> bool:
        return (api_key, version) in self._ready

    def prepare_now(self, api_key: int, version: int) -> None:
        """Prepare on the calling thread (benchmarks and tests that call the router
        directly and want its answer, not a coroutine)."""
        prepare(api_key, version)
        self._ready.add((api_key, version))

    def mark_ready(self, api_key: int, version: int) -> None:
        self._ready.add((api_key, version))

    async def prepare(self, api_key: int, version: int) -> None:
        """Prepare on the thread, one step per turn of the event loop (see above)."""
        if (api_key, version) in self._ready:
            return
        loop = asyncio.get_running_loop()
        async with self._turn:
            if (api_key, version) in self._ready:
                return
            steps = preparation(api_key, version)
            while await loop.run_in_executor(self._executor, _next_step, steps):
                pass
        self._ready.add((api_key, version))

    async def run_off_loop(self, function: Any, *args: Any) -> Any:
        """``function(*args)`` on the preparation thread (one at a time)."""
        return await asyncio.get_running_loop().run_in_executor(self._executor, function, *args)

    def start_background(self, versions: Iterable[tuple[int, int]]) -> None:
        self._task = asyncio.create_task(self._prepare_all(list(versions)))

    async def _prepare_all(self, versions: list[tuple[int, int]]) -> None:
        await asyncio.sleep(BACKGROUND_DELAY_S)
        started = time.monotonic()
        for api_key, version in versions:
            try:
                await self.prepare(api_key, version)
            except Exception:  # a schema kio cannot load: its requests will say so
                log.debug("cannot prepare api %d v%d", api_key, version, exc_info=True)
            await asyncio.sleep(BACKGROUND_PAUSE_S)
        # The end of the broker's start-up work: a benchmark measures from here on
        # (``bench/targets.py``), as the steady state clients see.
        log.info(
            "%s: %d in the background in %.1f s",
            PREPARED_LOG_LINE,
            len(versions),
            time.monotonic() - started,
        )

    async def stop(self) -> None:
        await cancel_and_wait([self._task], "request preparer")
        self._executor.shutdown(wait=False, cancel_futures=True)
