"""The log cleaner: which compacted log to clean next, and when (Kafka's ``LogCleaner``
and ``LogCleanerManager``); the cleaning itself is ``cleaner.py``.

``log.cleaner.threads`` workers run as asyncio tasks on the broker's event loop. Each
takes the dirtiest compacted log whose dirty ratio reaches ``min.cleanable.dirty.ratio``
(or whose first dirty record is older than ``max.compaction.lag.ms``), plans a pass on
the loop, and has the copy done in a worker process of its own (``processes``, what the
broker uses): Kafka's cleaner threads run on other cores, and in Python only a process
does; a cleaning on the loop cost a producer about four fifths of its throughput
(``bench.compaction``). The worker runs at a lower priority (``worker_nice``), so where
it and the broker contend for a core the broker's request handling wins, and it dies
with the broker (``start_worker``). The swap happens back on the loop. In-process
(tests), the copy runs a batch at a time between turns of the loop. Either way it sleeps as long as
``log.cleaner.io.max.bytes.per.second`` asks. With nothing to clean a worker sleeps
``log.cleaner.backoff.ms``. Each worker has its own key map of
``log.cleaner.dedupe.buffer.size`` / threads bytes. A pass that fails with anything but a
disk error marks its partition uncleanable (Kafka's ``uncleanable-partitions-count``)
and the worker goes on.

Where each log's last pass ended is kept in ``cleaner-offset-checkpoint`` in its log dir
(Kafka's name and format), so a restart does not clean from scratch.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import ctypes
import logging
import multiprocessing
import os
import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from ..tasks import cancel_and_wait
from .checkpoints import read_offset_checkpoint, write_offset_checkpoint
from .cleaner import (
    OffsetMap,
    PassCopy,
    PassPlan,
    PassResult,
    cleanable_range,
    compaction_overdue,
    copy_in_worker,
    copy_pass,
    plan_pass,
    swap_pass,
)
from .log_manager import LogManager
from .partition_log import PartitionLog, wall_clock_ms

logger = logging.getLogger(__name__)

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
# Work done between two looks at the event loop: one batch, or this many bytes of them.
_YIELD_EVERY_BYTES = 64 * 1024


@dataclass(frozen=True, slots=True)
class CleanerConfig:
    """The broker's ``log.cleaner.*`` settings."""

    enable: bool = True
    threads: int = 1
    dedupe_buffer_size: int = 128 * 1024 * 1024
    io_max_bytes_per_second: float = float("inf")
    backoff_ms: int = 15_000
    processes: bool = False  # copy in worker processes (the broker) or on the loop
    worker_nice: int = 0  # what the worker processes add to their niceness


_PR_SET_PDEATHSIG = 1  # prctl(2)


def start_worker(nice: int, broker_pid: int) -> None:
    """Run in each cleaner worker process as it starts.

    It dies with the broker: a broker killed with SIGKILL cannot stop it, and a worker
    left behind would go on copying (and sleeping for the throttle) for the rest of its
    pass, holding a core and writing ``.cleaned`` files into a log directory the restarted
    broker cleans again. It is background work: ``nice`` more niceness and, above 0,
    ``SCHED_BATCH`` (it does not preempt others on waking), so the broker's event loop
    wins a core the two contend for, as request handlers win over Kafka's cleaner
    threads; the worker still takes any idle core. Where the system refuses either, the
    worker runs as it is."""
    with contextlib.suppress(OSError, AttributeError):  # AttributeError: not Linux
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != broker_pid:  # the broker died before prctl took effect
        os._exit(1)
    if nice <= 0:
        return
    with contextlib.suppress(OSError, AttributeError):
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
    with contextlib.suppress(OSError):
        os.nice(nice)


class Throttler:
    """Sleeps so that bytes pass at most ``rate`` per second (Kafka's ``Throttler``)."""

    def __init__(
        self,
        rate: float,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.rate = rate
        self._clock = clock
        self._sleep = sleep
        self._start = clock()
        self._bytes = 0

    async def maybe_throttle(self, count: int) -> None:
        self._bytes += count
        if self.rate == float("inf"):
            return
        elapsed = self._clock() - self._start
        wanted = self._bytes / self.rate
        if wanted > elapsed:
            await self._sleep(wanted - elapsed)
        if elapsed > 1.0:  # a window of about a second, like Kafka's check interval
            self._start, self._bytes = self._clock(), 0


@dataclass(slots=True)
class CleanerMetrics:
    """What Kafka's cleaner reports: ``max-dirty-percent``, ``cleaner-recopy-percent``,
    ``time-since-last-run-ms``, ``DeadThreadCount``, plus totals."""

    max_dirty_percent: float = 0.0
    recopy_percent: float = 0.0
    last_run_ms: int = 0
    dead_threads: int = 0
    passes: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    uncleanable_partitions: int = 0


class LogCleaner:
    """Cleans the compacted logs of one ``LogManager``."""

    def __init__(
        self,
        logs: LogManager,
        config: CleanerConfig,
        *,
        now_ms: Callable[[], int] = wall_clock_ms,
    ) -> None:
        self.logs = logs
        self.config = config
        self._now_ms = now_ms
        self.metrics = CleanerMetrics(last_run_ms=now_ms())
        self._checkpoints: dict[tuple[str, int], int] = {}
        self._in_progress: set[tuple[str, int]] = set()
        self._uncleanable: set[tuple[str, int]] = set()
        self._tasks: list[asyncio.Task[None]] = []
        self._pool: concurrent.futures.ProcessPoolExecutor | None = None
        self._wake = asyncio.Event()

    # -- life cycle ----------------------------------------------------------------------

    def start(self) -> None:
        for log_dir in self.logs.live_dirs:
            try:
                path = log_dir / CLEANER_OFFSET_CHECKPOINT
                self._checkpoints.update(read_offset_checkpoint(path))
            except (OSError, ValueError) as error:
                logger.warning("ignoring %s in %s: %s", CLEANER_OFFSET_CHECKPOINT, log_dir, error)
        if not self.config.enable:
            return
        if self.config.processes:
            self._pool = concurrent.futures.ProcessPoolExecutor(
                max_workers=max(self.config.threads, 1),
                mp_context=multiprocessing.get_context("spawn"),
                initializer=start_worker,
                initargs=(self.config.worker_nice, os.getpid()),
            )
        self._tasks = [
            asyncio.create_task(self._run(i), name=f"log-cleaner-{i}")
            for i in range(max(self.config.threads, 1))
        ]

    async def stop(self) -> None:
        # A task that died is already counted and logged (``dead_threads``).
        await cancel_and_wait(self._tasks, "log cleaner")
        self._tasks = []
        if self._pool is not None:
            # A copy still running finishes on its own; its .cleaned files are removed
            # when the log next opens.
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    def wake(self) -> None:
        """Look for work now instead of after the backoff (tests, a config change)."""
        self._wake.set()

    # -- choosing ------------------------------------------------------------------------

    def checkpoint_of(self, topic: str, partition: int) -> int | None:
        return self._checkpoints.get((topic, partition))

    def dirty_ratio(self, log: PartitionLog) -> float:
        checkpoint = self._checkpoints.get((log.topic, log.partition))
        return cleanable_range(log, checkpoint, self._now_ms()).dirty_ratio

    def grab_filthiest(self) -> PartitionLog | None:
        """The compacted log most in need of cleaning, marked in progress (Kafka's
        ``grabFilthiestCompactedLog``); None when none needs it."""
        now = self._now_ms()
        best: tuple[float, PartitionLog] | None = None
        max_ratio = 0.0
        for key, log in self.logs.logs().items():
            if not log.config.compacted or log.is_deleted:
                continue
            if key in self._in_progress or key in self._uncleanable:
                continue
            checkpoint = self._checkpoints.get(key)
            dirty = cleanable_range(log, checkpoint, now)
            if dirty.first_dirty >= dirty.first_uncleanable:
                continue
            ratio = dirty.dirty_ratio
            max_ratio = max(max_ratio, ratio)
            due = ratio >= log.config.min_cleanable_dirty_ratio
            if not due and not compaction_overdue(log, dirty.first_dirty, now):
                continue
            if best is None or ratio > best[0]:
                best = (ratio, log)
        self.metrics.max_dirty_percent = 100.0 * max_ratio
        if best is None:
            return None
        log = best[1]
        self._in_progress.add((log.topic, log.partition))
        return log

    # -- cleaning ------------------------------------------------------------------------

    async def _run(self, index: int) -> None:
        offset_map = OffsetMap(self.config.dedupe_buffer_size // max(self.config.threads, 1))
        throttler = Throttler(self.config.io_max_bytes_per_second)
        try:
            while True:
                log = self.grab_filthiest()
                if log is None:
                    self._wake.clear()
                    # asyncio.timeout, not wait_for (which can lose a cancellation
                    # on Python 3.11, and then ``stop`` would wait for good).
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(self.config.backoff_ms / 1000):
                            await self._wake.wait()
                    continue
                try:
                    await self.clean_log(log, offset_map, throttler)
                finally:
                    self._in_progress.discard((log.topic, log.partition))
                await asyncio.sleep(0)
        except asyncio.CancelledError:
            raise
        except Exception:
            self.metrics.dead_threads += 1
            logger.exception("log cleaner thread %d died", index)

    async def clean_log(
        self, log: PartitionLog, offset_map: OffsetMap, throttler: Throttler | None = None
    ) -> PassResult | None:
        """One pass over ``log``; the checkpoint moves to where it ended."""
        key = (log.topic, log.partition)
        started = time.monotonic()
        self.metrics.last_run_ms = self._now_ms()
        plan = plan_pass(log, self._checkpoints.get(key), self._now_ms())
        if plan is None:
            return None
        try:
            if self._pool is not None:
                copy = await asyncio.get_running_loop().run_in_executor(
                    self._pool,
                    copy_in_worker,
                    plan,
                    offset_map.buffer_bytes,
                    self.config.io_max_bytes_per_second,
                )
            else:
                copy = await self._copy_here(plan, offset_map, throttler)
        except FileNotFoundError:
            return None  # segments went while copying (retention, truncation): later
        except OSError as error:
            self.logs.failed_on(key, error)
            return None
        except Exception:
            self._uncleanable.add(key)
            self.metrics.uncleanable_partitions = len(self._uncleanable)
            logger.exception("cannot clean %s-%d; it is left uncleaned", *key)
            return None
        if copy is None:
            return None
        result = swap_pass(log, plan, copy)
        stats = result.stats
        self.metrics.passes += 1
        self.metrics.recopy_percent = stats.recopy_percent
        self.metrics.bytes_read += stats.bytes_read
        self.metrics.bytes_written += stats.bytes_written
        self._checkpoints[key] = result.end
        self._write_checkpoint(log)
        logger.info(
            "cleaned %s-%d up to offset %d in %.2f s: %d segments, %d of %d records kept, "
            "%.1f%% of %d bytes recopied%s",
            log.topic,
            log.partition,
            result.end,
            time.monotonic() - started,
            stats.segments_cleaned,
            stats.records_retained,
            stats.records_read,
            stats.recopy_percent,
            stats.bytes_read,
            " (the log changed meanwhile: swap refused)" if stats.swaps_refused else "",
        )
        return result

    async def _copy_here(
        self, plan: PassPlan, offset_map: OffsetMap, throttler: Throttler | None
    ) -> PassCopy | None:
        """The copy on the event loop, a piece at a time."""
        gen = copy_pass(plan, offset_map)
        pending = 0
        try:
            while True:
                pending += next(gen)
                if pending >= _YIELD_EVERY_BYTES:
                    if throttler is not None:
                        await throttler.maybe_throttle(pending)
                    pending = 0
                    await asyncio.sleep(0)
        except StopIteration as stop:
            return stop.value
        finally:
            gen.close()

    def _write_checkpoint(self, log: PartitionLog) -> None:
        log_dir = log.directory.parent
        present = self.logs.logs()
        entries = {
            key: offset
            for key, offset in self._checkpoints.items()
            if key in present and present[key].directory.parent == log_dir
        }
        try:
            write_offset_checkpoint(log_dir / CLEANER_OFFSET_CHECKPOINT, entries)
        except OSError as error:
            self.logs.log_dir_failed(log_dir, error)
