"""All partition logs of a broker, across its ``log.dirs``.

Owns what lives directly in a log dir: ``meta.properties``, the offset checkpoint files
(recovery points, log start offsets, high watermarks), the ``.kafka_cleanshutdown``
marker, and the choice of log dir for a new partition. Start-up loads every
``<topic>-<partition>`` directory, recovering those that did not shut down cleanly.
It does not schedule anything: the broker calls ``checkpoint``, ``run_retention`` and
``flush_due`` periodically.

The log manager's threads (``_remover_pool``, one pool for all of it) do the file work
that waits on the file system's journal, seconds under heavy disk I/O while the one
event loop answered nobody: a new partition's directory and first files, a deleted
partition's rename and removal, and, for every log (``submit``, its ``LogThreads``), the
fsyncs of flushes (a roll's and the periodic ones), the producer snapshots written at a
roll, and the unlinks and last closes of deleted segments. ``_off_loop`` is the one way
in: the work on a thread, then the event loop told. Only while an event loop runs:
without one (tools, tests) the logs do that work themselves.

Log dir failure (Kafka's ``LogDirFailureChannel`` and ``LogManager.handleLogDirFailure``).
Any ``OSError`` while writing to a log dir (ENOSPC on append, roll, flush, checkpoint;
EIO; a dir that went away) takes the whole dir offline: ``log_dir_failed`` abandons its
logs without writing to them again, remembers their partitions as offline (never
recreated elsewhere until the broker restarts) and tells ``dir_failure_listeners``
(the replica manager answers KAFKA_STORAGE_ERROR for them and the broker tells the
controller). A dir taken offline gets no clean-shutdown marker: the next start recovers
it. Callers that write use ``failed_on(key, error)`` to report what they hit.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import shutil
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .checkpoints import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    CorruptCheckpoint,
    read_offset_checkpoint,
    write_atomically,
    write_offset_checkpoint,
)
from .log_config import LogConfig
from .open_files import OPEN_FILES
from .partition_log import (
    PartitionLog,
    log_delete_dir_name,
    parse_partition_directory,
    remove_partition_files,
    wall_clock_ms,
)
from .segment import prepare_first_segment

logger = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
_REMOVER_THREADS = 4
META_PROPERTIES = "meta.properties"


class InconsistentBrokerMetadata(RuntimeError):
    """A log dir's meta.properties belongs to another broker or cluster."""


class LogDirOffline(Exception):
    """Kafka's KafkaStorageException: the partition's log dir failed, or no log dir is
    left to create it in."""


TopicPartition = tuple[str, int]
# Logs a periodic sweep handles per turn of the event loop, and the loop time one turn
# may take, whichever ends it first (see ``LogManager.sweep``).
SWEEP_SLICE = 256
SWEEP_TURN_S = 0.005
DirFailureListener = Callable[[Path, list[TopicPartition]], None]

# (generation, {log dir: (recovery points, log start offsets, high watermarks)})
_CheckpointSnapshot = tuple[
    int,
    dict[
        Path, tuple[dict[TopicPartition, int], dict[TopicPartition, int], dict[TopicPartition, int]]
    ],
]


def read_meta_properties(path: Path) -> dict[str, str]:
    properties: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "!")):
            continue
        key, _, value = line.partition("=")
        properties[key.strip()] = value.strip()
    return properties


class _PartitionFiles:
    """A partition's directory in the hands of the log manager's threads: being made for
    a new partition (``new``) or renamed away and removed for a deleted one. ``done`` is
    set once they are finished with it, after the outcome is recorded."""

    __slots__ = ("done", "error", "fd", "log_dir", "new")

    def __init__(self, log_dir: Path, *, new: bool) -> None:
        self.log_dir = log_dir
        self.new = new
        self.done = threading.Event()
        # A new partition's outcome: its first segment's open .log (None: the directory
        # existed), or why it could not be made.
        self.fd: int | None = None
        self.error: OSError | None = None


class LogManager:
    def __init__(
        self,
        log_dirs: list[Path],
        *,
        default_config: LogConfig,
        now_ms: Callable[[], int] = wall_clock_ms,
        max_open_files: int | None = None,
    ) -> None:
        if max_open_files is not None:
            # log.max.open.files: the bound is per process, like the descriptor limit.
            OPEN_FILES.max_open = max_open_files
        if not log_dirs:
            raise ValueError("log.dirs is empty: give the broker at least one log directory")
        self.log_dirs = [Path(d) for d in log_dirs]
        self.default_config = default_config
        self._now_ms = now_ms
        self._logs: dict[tuple[str, int], PartitionLog] = {}
        self._dir_of: dict[tuple[str, int], Path] = {}
        self._partitions_in: dict[Path, int] = dict.fromkeys(self.log_dirs, 0)
        self._deleted: list[PartitionLog] = []
        # Offset checkpoints: the latest snapshot taken and written (see write_checkpoints).
        self._checkpoint_lock = threading.Lock()
        self._checkpoint_generation = 0
        self._checkpoint_written = 0
        # The log manager's threads (module docstring), started when first needed.
        self._remover: ThreadPoolExecutor | None = None
        # Partitions whose directory the threads are making or removing. A new one stays,
        # once made, until ``get_or_create`` opens it (its log dir is counted already); a
        # deleted one until the event loop is told it is gone (a partition created again
        # meanwhile waits for its old directory).
        self._files: dict[TopicPartition, _PartitionFiles] = {}
        # File work that failed on the threads: (log dir, error), taken offline on the
        # event loop when the work is reported done (or by the next periodic job).
        self._thread_failures: list[tuple[Path, OSError]] = []
        self._closed = False  # from then on the logs do their file work themselves
        # Called on the event loop with a partition's key once the threads are done with
        # its files: a deleted one's directory renamed away, a new one's made (the
        # replica manager then creates the partitions it held back).
        self.ready_listeners: list[Callable[[TopicPartition], None]] = []
        self._broker_id: int | None = None
        self._cluster_id: str | None = None
        # Failed log dirs (dir -> what failed) and the partitions that were on them.
        self.offline_dirs: dict[Path, str] = {}
        self._offline: dict[TopicPartition, Path] = {}
        self.dir_failure_listeners: list[DirFailureListener] = []
        for log_dir in self.log_dirs:
            log_dir.mkdir(parents=True, exist_ok=True)

    # -- start-up ------------------------------------------------------------------------

    def load(self, config_for: Callable[[str], LogConfig]) -> None:
        """Open every partition directory; recover those without a clean shutdown."""
        for log_dir in self.log_dirs:
            marker = log_dir / CLEAN_SHUTDOWN_FILE
            clean = marker.exists()
            recovery_points = self._read_checkpoint(log_dir / RECOVERY_POINT_CHECKPOINT)
            start_offsets = self._read_checkpoint(log_dir / LOG_START_OFFSET_CHECKPOINT)
            high_watermarks = self._read_checkpoint(log_dir / REPLICATION_OFFSET_CHECKPOINT)
            for entry in sorted(os.scandir(log_dir), key=lambda e: e.name):
                if not entry.is_dir():
                    continue
                if entry.name.endswith("-delete"):
                    # A deletion interrupted by a stop: finish it.
                    shutil.rmtree(entry.path, ignore_errors=True)
                    continue
                try:
                    key = parse_partition_directory(entry.name)
                except ValueError:
                    logger.warning("ignoring %s: not a <topic>-<partition> directory", entry.path)
                    continue
                if key in self._logs:
                    raise RuntimeError(
                        f"partition {key[0]}-{key[1]} exists in both {self._dir_of[key]} and "
                        f"{log_dir}; remove the stale copy before starting the broker"
                    )
                log = PartitionLog.open(
                    Path(entry.path),
                    config_for(key[0]),
                    recovery_point=recovery_points.get(key, 0),
                    log_start_offset=start_offsets.get(key, 0),
                    now_ms=self._now_ms,
                    had_clean_shutdown=clean,
                )
                # Matches Kafka: without a checkpointed high watermark, assume nothing
                # is committed; the leader (or, alone, this broker) moves it forward.
                log.update_high_watermark(high_watermarks.get(key, log.log_start_offset))
                log.threads = self
                self._logs[key] = log
                self._dir_of[key] = log_dir
                self._partitions_in[log_dir] += 1
            # A crash from now on must not look clean (Kafka deletes the marker too).
            marker.unlink(missing_ok=True)
            if self._broker_id is not None and not (log_dir / META_PROPERTIES).exists():
                self._write_meta(log_dir)

    @staticmethod
    def _read_checkpoint(path: Path) -> dict[tuple[str, int], int]:
        try:
            return read_offset_checkpoint(path)
        except (CorruptCheckpoint, OSError) as error:
            # Safe fallback: a missing recovery point means full recovery.
            logger.warning("ignoring unreadable checkpoint: %s", error)
            return {}

    def write_meta_properties(self, broker_id: int, cluster_id: str) -> None:
        """Write Kafka's meta.properties in every log dir, or check the existing one."""
        for log_dir in self.log_dirs:
            path = log_dir / META_PROPERTIES
            if not path.exists():
                continue
            properties = read_meta_properties(path)
            if properties.get("cluster.id", cluster_id) != cluster_id:
                raise InconsistentBrokerMetadata(
                    f"{path} says cluster.id={properties['cluster.id']} but this broker joins "
                    f"cluster {cluster_id}; point log.dirs at this cluster's data or remove "
                    f"the directory's contents"
                )
            if properties.get("broker.id", str(broker_id)) != str(broker_id):
                raise InconsistentBrokerMetadata(
                    f"{path} says broker.id={properties['broker.id']} but this broker is "
                    f"broker.id={broker_id}; set broker.id={properties['broker.id']} or use "
                    f"another log directory"
                )
        self._broker_id, self._cluster_id = broker_id, cluster_id
        for log_dir in self.log_dirs:
            if not (log_dir / META_PROPERTIES).exists():
                self._write_meta(log_dir)

    def _write_meta(self, log_dir: Path) -> None:
        write_atomically(
            log_dir / META_PROPERTIES,
            "#\n#Written by Gregor\n"
            f"version=0\nbroker.id={self._broker_id}\ncluster.id={self._cluster_id}\n",
        )

    # -- partitions ----------------------------------------------------------------------

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def get_or_create(self, topic: str, partition: int, config: LogConfig) -> PartitionLog:
        """The partition's log, created in the online log dir holding the fewest
        partitions; LogDirOffline when its dir failed or no dir is left."""
        key = (topic, partition)
        log = self._logs.get(key)
        if log is not None:
            return log
        if key in self._offline:
            raise LogDirOffline(
                f"{topic}-{partition} is offline: log dir {self._offline[key]} failed"
            )
        live = self.live_dirs
        if not live:
            raise LogDirOffline(f"cannot create {topic}-{partition}: every log dir has failed")
        # Kafka's nextLogDirs: the live log dir holding the fewest partitions (counted as
        # they come and go: counting them per new partition was quadratic).
        counts = self._partitions_in
        prepared = self._files.pop(key, None)
        if prepared is not None and not prepared.new:
            # Deleted and created again before the threads renamed the old directory away
            # (it may be in this log dir): wait for it rather than open the old files.
            prepared.done.wait()
            prepared = None
        if prepared is None:
            log_dir = min(live, key=lambda d: counts[d])
            counts[log_dir] += 1
        else:
            prepared.done.wait()  # made already when the replica manager asks
            log_dir = prepared.log_dir
            if log_dir in self.offline_dirs:
                counts[log_dir] -= 1
                if prepared.fd is not None:
                    os.close(prepared.fd)
                raise LogDirOffline(f"cannot create {topic}-{partition}: {log_dir} failed")
        directory = log_dir / f"{topic}-{partition}"
        try:
            if prepared is not None and prepared.error is not None:
                raise prepared.error
            if prepared is not None and prepared.fd is not None:
                log = PartitionLog.open_prepared(
                    directory, config, prepared.fd, now_ms=self._now_ms
                )
            else:
                log = PartitionLog.open(directory, config, now_ms=self._now_ms)
        except OSError as error:
            counts[log_dir] -= 1
            self.log_dir_failed(log_dir, error)
            raise LogDirOffline(
                f"cannot create {topic}-{partition} in {log_dir}: {error}"
            ) from error
        log.threads = self
        self._logs[key] = log
        self._dir_of[key] = log_dir
        return log

    def creating(self, key: TopicPartition) -> bool:
        """Whether ``key``'s new log is still being made off the event loop: started
        here for a partition this broker does not have yet, when an event loop runs
        (``get_or_create`` then opens it without a file system call). A mkdir and three
        file creations each wait on the file system's journal, for seconds under heavy
        disk I/O, and the broker answered nobody meanwhile. False once it can be opened
        (``ready_listeners`` are told), and without a running loop (tools, tests:
        ``get_or_create`` makes it there)."""
        files = self._files.get(key)
        if files is not None and files.new:
            return not files.done.is_set()
        if key in self._logs or key in self._offline:
            return False
        live = self.live_dirs
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return False
        if not live:
            return False
        counts = self._partitions_in
        log_dir = min(live, key=lambda d: counts[d])
        counts[log_dir] += 1  # so that the next new partitions spread over the dirs
        prepared = self._files[key] = _PartitionFiles(log_dir, new=True)
        directory = log_dir / f"{key[0]}-{key[1]}"

        def make() -> None:
            if files is not None:
                # Its old directory goes first (gone already: callers ask ``removing``).
                files.done.wait()
            try:
                prepared.fd = prepare_first_segment(directory)
            except OSError as error:
                prepared.error = error  # raised by get_or_create, as if made there

        self._off_loop(directory, make, functools.partial(self._tell_ready, key), prepared.done)
        return True

    def preparing(self) -> list[TopicPartition]:
        """New partitions being made, or made and not opened yet."""
        return [key for key, files in self._files.items() if files.new]

    def discard_prepared(self, key: TopicPartition) -> None:
        """A partition made ready but no longer wanted here (its topic was deleted
        meanwhile): its directory goes as a deleted partition's does."""
        prepared = self._files.get(key)
        if prepared is None or not prepared.new:
            return
        self._partitions_in[prepared.log_dir] -= 1
        directory = prepared.log_dir / f"{key[0]}-{key[1]}"
        to = directory.with_name(log_delete_dir_name(*key))

        def discard() -> None:
            prepared.done.wait()
            if prepared.fd is not None:  # else nothing was made (or the directory was there)
                remove_partition_files(directory, to, [prepared.fd])

        self._remove(key, directory, discard)

    # -- log dir failure -----------------------------------------------------------------

    @property
    def live_dirs(self) -> list[Path]:
        return [d for d in self.log_dirs if d not in self.offline_dirs]

    def is_offline(self, key: TopicPartition) -> bool:
        return key in self._offline

    def offline_partitions(self) -> dict[TopicPartition, Path]:
        return dict(self._offline)

    def failed_on(self, key: TopicPartition, error: OSError) -> None:
        """A write to ``key``'s log failed: its whole log dir goes offline."""
        log_dir = self._dir_of.get(key)
        if log_dir is not None:
            self.log_dir_failed(log_dir, error)

    def log_dir_failed(self, log_dir: Path, error: BaseException) -> None:
        """Take ``log_dir`` offline (once): abandon its logs, remember their partitions,
        tell the listeners."""
        if log_dir in self.offline_dirs:
            return
        self.offline_dirs[log_dir] = str(error)
        keys = [key for key, d in self._dir_of.items() if d == log_dir]
        for key in keys:
            log = self._logs.pop(key)
            del self._dir_of[key]
            self._partitions_in[log_dir] -= 1
            self._offline[key] = log_dir
            log.abandon()
            if log.close_deleted_segments():
                self._deleted.append(log)
        logger.error(
            "log dir %s is offline after %s; %d partitions on it are offline: %s",
            log_dir,
            error,
            len(keys),
            ", ".join(f"{t}-{p}" for t, p in keys) or "none",
        )
        for listener in self.dir_failure_listeners:
            try:
                listener(log_dir, keys)
            except Exception:
                logger.exception("log dir failure listener failed for %s", log_dir)

    def delete_log(self, topic: str, partition: int) -> None:
        """Forget the partition's log and remove its files on the log manager's threads
        (the rename, the closes and the unlinks each wait on the file system:
        milliseconds, seconds under heavy disk I/O or for thousands of partitions)."""
        key = (topic, partition)
        log = self._logs.get(key)
        if log is None:
            self._offline.pop(key, None)  # an offline partition's files stay where they are
            return
        log_dir = self._dir_of.pop(key)
        del self._logs[key]
        self._partitions_in[log_dir] -= 1

        def remove(directory: Path, to: Path, descriptors: list[int]) -> None:
            self._remove(key, directory, lambda: remove_partition_files(directory, to, descriptors))

        log.delete(remove)
        if log.close_deleted_segments():
            self._deleted.append(log)

    def _remove(self, key: TopicPartition, directory: Path, work: Callable[[], None]) -> None:
        """A partition's directory goes on the threads (``work``: ``remove_partition_files``);
        ``removing(key)`` until it has. A failed rename takes the log dir offline (as a
        failed write does), from the event loop's next periodic job."""
        removal = self._files[key] = _PartitionFiles(directory.parent, new=False)
        self._off_loop(directory, work, functools.partial(self._tell_ready, key), removal.done)

    def _remover_pool(self) -> ThreadPoolExecutor:
        """The log manager's threads (module docstring)."""
        if self._remover is None:
            # Several threads: removal is unlink calls waiting on the file system, and
            # one thread took minutes for the 40,000 files of 8,000 partitions.
            self._remover = ThreadPoolExecutor(_REMOVER_THREADS, thread_name_prefix="log-remover")
        return self._remover

    def _off_loop(
        self,
        directory: Path,
        work: Callable[[], object],
        then: Callable[[], None],
        done: threading.Event | None = None,
    ) -> None:
        """Run file work off the event loop: ``work`` on the log manager's threads, then
        ``then`` on the event loop running now (none: tools and tests, nobody is told).
        An ``OSError`` out of ``work`` takes ``directory``'s log dir offline, on the loop
        (``_take_thread_failures``: from ``then``, or the next periodic job); ``done`` is
        set, on the thread, once that is recorded."""
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None

        def run() -> None:
            try:
                work()
            except OSError as error:
                self._thread_failures.append((directory.parent, error))
            except Exception:
                logger.exception("file work for %s failed", directory)
            finally:
                if done is not None:
                    done.set()
                if loop is not None:
                    with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                        loop.call_soon_threadsafe(then)

        self._remover_pool().submit(run)

    def submit(
        self,
        log: PartitionLog,
        work: Callable[[], object],
        done: Callable[[], None] | None = None,
    ) -> bool:
        """``LogThreads`` for every log: ``work`` on the threads, then ``done`` on the
        event loop; an ``OSError`` takes the log's dir offline there, as one on the loop
        does (``failed_on``). False without a running event loop, or once closed."""
        if not self.running():
            return False

        def finished() -> None:
            try:
                if done is not None:
                    done()
            finally:
                self._take_thread_failures()

        self._off_loop(log.directory, work, finished)
        return True

    def running(self) -> bool:
        """``LogThreads``: whether ``submit`` runs work on the threads now."""
        if self._closed:
            return False
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return False
        return True

    def _take_thread_failures(self) -> None:
        while self._thread_failures:
            log_dir, error = self._thread_failures.pop()
            if log_dir in self._partitions_in:
                self.log_dir_failed(log_dir, error)

    def _tell_ready(self, key: TopicPartition) -> None:
        """On the event loop: the threads are done with ``key``'s files. A finished
        removal is forgotten (there is nothing left to wait for), then the listeners
        are told."""
        files = self._files.get(key)
        if files is not None and not files.new and files.done.is_set():
            del self._files[key]
        for listener in self.ready_listeners:
            try:
                listener(key)
            except Exception:
                logger.exception("log files listener failed for %s-%d", *key)

    def removing(self, key: TopicPartition) -> bool:
        """Whether the deleted partition ``key``'s directory is still to be renamed
        away: ``get_or_create`` would wait for the threads."""
        files = self._files.get(key)
        return files is not None and not files.new and not files.done.is_set()

    def wait_for_removals(self) -> None:
        """Block until the threads have renamed every deleted partition's directory
        and closed its descriptors (a test aid; ``close`` waits for all their work)."""
        for files in list(self._files.values()):
            if not files.new:
                files.done.wait()

    def logs(self) -> dict[tuple[str, int], PartitionLog]:
        return dict(self._logs)

    # -- periodic work -------------------------------------------------------------------

    def checkpoint(self) -> None:
        """Write the three offset checkpoints of every log dir."""
        for log_dir, error in self.write_checkpoints(self.checkpoint_snapshot()):
            self.log_dir_failed(log_dir, error)

    async def checkpoint_off_loop(self) -> None:
        """``checkpoint`` for the periodic job: the offsets are read on the loop, the
        files written and fsynced in a thread (at 10,000 partitions, three files and six
        fsyncs held the event loop for tens to hundreds of milliseconds)."""
        snapshot = self.checkpoint_snapshot()
        for log_dir, error in await asyncio.to_thread(self.write_checkpoints, snapshot):
            self.log_dir_failed(log_dir, error)

    def checkpoint_snapshot(self) -> _CheckpointSnapshot:
        """Every live dir's recovery points, log start offsets and high watermarks, now."""
        self._checkpoint_generation += 1
        dirs = {}
        for log_dir in self.live_dirs:
            mine = [(key, log) for key, log in self._logs.items() if self._dir_of[key] == log_dir]
            dirs[log_dir] = (
                {key: log.recovery_point for key, log in mine},
                {key: log.log_start_offset for key, log in mine},
                {key: log.high_watermark for key, log in mine},
            )
        return self._checkpoint_generation, dirs

    def write_checkpoints(self, snapshot: _CheckpointSnapshot) -> list[tuple[Path, OSError]]:
        """Write a snapshot's files (any thread); the dirs that failed. A snapshot older
        than one already written is dropped, so a slow background write never replaces
        what shutdown wrote."""
        generation, dirs = snapshot
        failed = []
        with self._checkpoint_lock:
            if generation < self._checkpoint_written:
                return failed
            self._checkpoint_written = generation
            for log_dir, (recovery, start, high_watermark) in dirs.items():
                try:
                    write_offset_checkpoint(log_dir / RECOVERY_POINT_CHECKPOINT, recovery)
                    write_offset_checkpoint(log_dir / LOG_START_OFFSET_CHECKPOINT, start)
                    write_offset_checkpoint(log_dir / REPLICATION_OFFSET_CHECKPOINT, high_watermark)
                except OSError as error:
                    failed.append((log_dir, error))
        return failed

    def _reap_deleted(self) -> None:
        self._deleted = [log for log in self._deleted if log.close_deleted_segments()]
        self._take_thread_failures()

    def run_retention(self) -> int:
        """Apply retention to every log; return how many segments were deleted."""
        self._reap_deleted()
        deleted = 0
        for key, log in list(self._logs.items()):
            try:
                deleted += log.apply_retention()
            except OSError as error:
                self.failed_on(key, error)
        return deleted

    def remove_expired_producers(self, expiration_ms: int) -> int:
        """``producer.id.expiration.ms`` over every log; how many producer ids went."""
        now = self._now_ms()
        removed = 0
        for log in list(self._logs.values()):
            removed += log.producer_state.remove_expired_producers(now, expiration_ms)
        return removed

    def flush_due(self) -> None:
        self._reap_deleted()
        for key, log in list(self._logs.items()):
            try:
                log.flush_if_due()
            except OSError as error:
                self.failed_on(key, error)

    async def sweep(self, action: Callable[[PartitionLog], object]) -> None:
        """Run ``action`` on every log, giving the event loop a turn every
        ``SWEEP_SLICE`` logs: the periodic jobs (roll, flush) touch every log, and at
        10,000 partitions one pass in one callback held the loop for tens of
        milliseconds, hundreds on a loaded machine, in front of every request (the
        Metadata tail of issue 9). A turn also ends after ``SWEEP_TURN_S``: on a starved
        machine 256 logs took 100 ms and more. A log deleted or taken offline meanwhile
        is skipped."""
        logs = list(self._logs.items())
        taken = 0
        turn_ends = time.perf_counter() + SWEEP_TURN_S
        for key, log in logs:
            if taken == SWEEP_SLICE or time.perf_counter() >= turn_ends:
                await asyncio.sleep(0)
                taken = 0
                turn_ends = time.perf_counter() + SWEEP_TURN_S
            taken += 1
            if self._logs.get(key) is not log:
                continue
            try:
                action(log)
            except OSError as error:
                self.failed_on(key, error)

    async def flush_due_sliced(self) -> None:
        """``flush_due`` for the periodic job, a slice of logs at a time."""
        self._reap_deleted()
        await self.sweep(PartitionLog.flush_if_due)

    async def roll_due_sliced(self) -> None:
        """``roll_due`` for the periodic job, a slice of logs at a time."""
        await self.sweep(PartitionLog.maybe_roll)

    def roll_due(self) -> None:
        """Roll every log whose active segment is older than segment.ms."""
        for key, log in list(self._logs.items()):
            try:
                log.maybe_roll()
            except OSError as error:
                self.failed_on(key, error)

    def close(self) -> None:
        """Flush and close every log (each waits for its file work in flight first),
        wait for the threads, checkpoint, then mark each log dir clean (a failed dir,
        the threads' failures included, is left unmarked, so the next start recovers
        it)."""
        for key, log in list(self._logs.items()):
            try:
                log.close()
            except OSError as error:
                self.failed_on(key, error)
        for log in self._deleted:
            log.close_deleted_segments(force=True)
        self._deleted = []
        self._closed = True
        if self._remover is not None:
            self._remover.shutdown(wait=True)
            self._remover = None
        self._take_thread_failures()
        for files in self._files.values():
            if files.new and files.fd is not None:  # made, never opened: loaded at next start
                os.close(files.fd)
        self._files.clear()
        self.checkpoint()
        for log_dir in self.live_dirs:
            try:
                write_atomically(log_dir / CLEAN_SHUTDOWN_FILE, "")
            except OSError as error:
                logger.error(
                    "cannot mark %s clean: %s; it is recovered at the next start", log_dir, error
                )
