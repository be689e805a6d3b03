"""The log of one partition: an ordered list of segments in ``<log.dir>/<topic>-<partition>``.

Owns offsets (log start, log end, high watermark, recovery point), appends, reads as
file slices for ``sendfile``, timestamp lookups, rolling, retention, DeleteRecords,
truncation, flushing and start-up recovery. It does not own replication (who moves
the high watermark once followers exist), the log dir's checkpoint files
(``log_manager.py``) or any socket: a read returns a ``FileSlice`` and the fetch path
sends it.

Writes go to the page cache. What waits on the file system's journal (seconds under
heavy disk I/O, while the broker's one event loop answered nobody) runs on the log
manager's threads when it gives the log its ``LogThreads`` (``threads``; it does so while
an event loop runs): the fsyncs of ``flush_if_due`` (``flush.ms`` and segments rolled
since the last flush), the producer snapshot written at a roll, and the unlinks and last
closes of deleted segments. The log decides on the event loop what to do and applies the
outcome there; without ``threads`` (tools, tests, start-up recovery) it does the same
work itself. The explicit flushes stay on the caller's thread: ``flush.messages`` (a
durability the user chose per append) and ``close`` (shutdown).

Flush off the loop. ``flush_if_due`` chooses the segments to fsync and the offset the
recovery point may then take, writes their pending index entries, pins their
descriptors (``segment.Pin``: a deletion meanwhile defers its close, and
``close_deleted_segments`` never closes a segment being flushed, so no thread ever
fsyncs a descriptor number closed and reused) and hands the fsyncs to a thread. One
flush per log is in flight at a time. The recovery point moves when the fsyncs are done,
on the event loop, and only if no truncation happened meanwhile (the recovery point
never claims data that was not fsynced). A failed fsync takes the log dir offline
as a failed write does (``LogManager.log_dir_failed``), from the event loop. A roll
starts such a flush of the segments it closed, as Kafka's roll schedules one, whatever
``log.flush.scheduler.interval.ms`` (whose default, Kafka's, never runs the periodic
job): only with the threads, never on the caller's thread.

Deletion rule (sendfile safety). A ``FileSlice`` carries the segment's own descriptor,
and the fetch path may still be sending from it when retention, DeleteRecords,
truncation or topic deletion removes the segment. Removing a segment therefore only
unlinks (or, for a whole partition, renames then removes) its files: Linux keeps an
unlinked file's data alive while a descriptor is open. Every ``FileSlice`` pins its
segment (``segment.Pin``): an unpinned descriptor closes at once, a pinned one when its
last slice is dropped, and at the latest ``file.delete.delay.ms`` later, by a later call
on the log (``apply_retention``, ``flush_if_due``, ``maybe_roll``,
``close_deleted_segments``); ``LogManager.run_retention`` and ``flush_due`` make those
calls periodically. A fetch response must therefore be written within
``file.delete.delay.ms`` (default 60 s) of the read. Idle descriptors of live segments
are closed past ``log.max.open.files`` (``open_files.py``), never while pinned.
Truncation of the active segment (``truncate_to``, replication only) shortens the file in
place, as Kafka does; a slice over the truncated bytes may then send short, which the
fetch path treats like a closed connection. A deleted segment's last close runs on the
log manager's threads (it frees the file's blocks).

Unlinks off the loop, and file names. A segment's files are named after its base
offset, and the same name can come back (a truncation, full or partial, then appends
that roll at a base deleted before). Retention and DeleteRecords hand the unlinks to a
thread and remember them by base offset until done; creating a segment at a base whose
unlink is still pending first finishes that unlink (waiting for the thread if it is
running it, doing it here if it has not started), so a late unlink never removes a new
file. Truncation and the cleaner's swap unlink at once, on the event loop: their
unlinks must be done before what follows them (a truncated follower's crash must not
bring back the segments it cut; the swap renames the cleaned copy to the first old
segment's name and a crash must not find both the copy and the segments it replaces).
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import logging
import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from ..protocol import record_batch
from ..protocol.control_records import ControlRecordType, EndTransactionMarker, build_marker_batch
from ..protocol.record_batch import BatchHeader
from ..stats import RateLimitedLog
from .checkpoints import LEADER_EPOCH_CHECKPOINT, LeaderEpochCache, fsync_file_and_directory
from .inflate import DecompressionBudget
from .log_config import LogConfig
from .producer_state import ProducerStateError, ProducerStateManager
from .segment import LogSegment, Pin, fsync_segment_files, iter_headers, unlink_all
from .transaction_index import AbortedTxn
from .validator import validate_produce_records, validate_records

_MAX_RELATIVE_OFFSET = 2**31 - 1
_LEFTOVER_SUFFIXES = (".deleted", ".cleaned", ".swap", ".tmp")
_LOG_SWAP_SUFFIX = ".log.swap"


def remove_partition_files(directory: Path, renamed: Path, descriptors: list[int]) -> None:
    """A deleted partition's files: rename its directory to ``renamed`` (the durable
    step: a broker restarted after it finishes the removal, not the partition), close
    ``descriptors``, remove the files. The descriptors are closed even if the rename
    fails (OSError, raised after)."""
    try:
        os.rename(directory, renamed)
    finally:
        for fd in descriptors:
            with contextlib.suppress(OSError):
                os.close(fd)
    shutil.rmtree(renamed, ignore_errors=True)


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


log = logging.getLogger(__name__)
# Idempotent producers' epoch bumps and refused sequences, at INFO: what explains a storm
# of re-sends in a fault campaign's logs, bounded when a client loops on them.
producer_state_log = RateLimitedLog(log, lines_per_interval=50)


@dataclass(slots=True)  # not frozen: a frozen __init__ costs ~10x (hot path)
class FileSlice:
    """Bytes of one segment file for ``os.sendfile``: whole batches."""

    fd: int
    position: int
    size: int
    # Keeps ``fd`` open while the slice lives (log.max.open.files closes idle files).
    pin: object = None


class LogThreads(Protocol):
    """Where a log's slow file work runs: the log manager's threads."""

    def submit(
        self,
        log: PartitionLog,
        work: Callable[[], object],
        done: Callable[[], None] | None = None,
    ) -> bool:
        """Run ``work`` on a thread, then ``done`` on the event loop; an ``OSError`` of
        ``work`` takes ``log``'s dir offline. False, running nothing, when that cannot
        be (no event loop runs): the log then does the work itself."""
        ...

    def running(self) -> bool:
        """Whether ``submit`` would run work on a thread now."""
        ...


@dataclass(slots=True, eq=False)
class _Flush:
    """One flush: what the event loop chose to make durable, the fsyncs to do (on a
    thread, or on the caller's), and the pins that keep their descriptors open."""

    end: int  # the recovery point once done
    truncations: int  # ``PartitionLog.truncations`` when chosen
    segments: list[LogSegment]
    pins: list[Pin]
    files: list[tuple[int, list[Path]]]  # (.log descriptor, index files) per segment
    epoch_checkpoint: Path | None  # leader-epoch-checkpoint written without fsync
    done: threading.Event = field(default_factory=threading.Event)
    failed: bool = False

    def run(self) -> None:
        try:
            for fd, paths in self.files:
                fsync_segment_files(fd, paths)
            if self.epoch_checkpoint is not None:
                # Gone: the partition was deleted meanwhile.
                with contextlib.suppress(FileNotFoundError):
                    fsync_file_and_directory(self.epoch_checkpoint)
        except BaseException:
            self.failed = True
            raise
        finally:
            self.done.set()


class _Unlink:
    """A deleted segment's files, unlinked once: by a thread, or by the event loop when
    a new segment is about to take their names (whichever comes first)."""

    __slots__ = ("_lock", "_paths")

    def __init__(self, paths: list[Path]) -> None:
        self._paths = paths
        self._lock = threading.Lock()

    def run(self) -> None:
        with self._lock:
            paths, self._paths = self._paths, []
            unlink_all(paths)


@dataclass(slots=True)  # not frozen: a frozen __init__ costs ~10x (hot path)
class AppendResult:
    first_offset: int
    last_offset: int
    log_append_time: int  # -1 unless message.timestamp.type=LogAppendTime
    log_start_offset: int
    # A retried idempotent batch: acknowledged with the offsets it was written at, not
    # written again.
    duplicate: bool = False


class OffsetOutOfRange(Exception):
    """Kafka's OFFSET_OUT_OF_RANGE: the offset is outside [log start, log end]."""


class UnexpectedAppendOffset(ValueError):
    """An append with pre-assigned offsets (replication) that would go backwards, or
    whose batch headers do not cover its buffer from its first byte to its last."""


def parse_partition_directory(name: str) -> tuple[str, int]:
    """("orders", 3) from "orders-3"; ValueError when the name is not "<topic>-<partition>"."""
    topic, separator, partition = name.rpartition("-")
    if not separator or not topic or not partition.isdigit():
        raise ValueError(f"log directory {name!r} is not named <topic>-<partition>")
    return topic, int(partition)


def log_delete_dir_name(topic: str, partition: int) -> str:
    """``<topic>-<partition>.<uuid>-delete``, with the topic cut so the name fits in 255
    bytes: matches Kafka's ``UnifiedLog.logDeleteDirName`` (a 249-character topic name
    would otherwise make the rename fail with ENAMETOOLONG)."""
    suffix = f"-{partition}.{uuid.uuid4().hex}-delete"
    return topic[: max(0, 255 - len(suffix))] + suffix


class PartitionLog:
    """A partition's segments and offsets. Create with ``PartitionLog.open``."""

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        now_ms: Callable[[], int],
        *,
        new: bool = False,
    ) -> None:
        """``new``: ``directory`` was just made (nothing in it to read)."""
        self.directory = directory
        self.topic, self.partition = parse_partition_directory(directory.name)
        self.config = config
        self._now_ms = now_ms
        self._segments: list[LogSegment] = []
        self._base_offsets: list[int] = []
        self.log_start_offset = 0
        self.log_end_offset = 0
        self._high_watermark = 0
        self.recovery_point = 0
        # Until replication owns the high watermark, it follows the log end offset (a
        # single replica is its own ISR). ``stop_following_log_end`` hands it to
        # replication, which moves it through ``maybe_increment_high_watermark``.
        self._high_watermark_follows_log_end = True
        # Idempotent producers' state (sequence numbers, duplicates), rebuilt from the log.
        self.producer_state = ProducerStateManager(self)
        self.leader_epoch_cache = LeaderEpochCache(
            directory / LEADER_EPOCH_CHECKPOINT, lambda: self.log_end_offset, new=new
        )
        self._deleted_segments: list[tuple[int, LogSegment]] = []  # (close after ms, segment)
        # The log manager's threads, set by it while an event loop runs (module docstring).
        self.threads: LogThreads | None = None
        self._flushing: _Flush | None = None  # the flush in flight on a thread
        # Base offset -> unlink of a deleted segment's files not done yet (on a thread).
        self._unlinking: dict[int, _Unlink] = {}
        # Counts truncations (``truncate_to`` that removed batches, or a full truncation):
        # state derived from the log's contents (idempotent producers) is rebuilt when it
        # changes, even if the log has since grown back past where it was.
        self.truncations = 0
        self._last_flush_ms = now_ms()
        self._closed = False
        self._deleted = False

    # -- opening and recovery ------------------------------------------------------------

    @classmethod
    def open(
        cls,
        directory: Path,
        config: LogConfig,
        *,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        now_ms: Callable[[], int] = wall_clock_ms,
        had_clean_shutdown: bool = False,
    ) -> PartitionLog:
        """Open (or create) the log in ``directory``. Without a clean shutdown, every
        segment from the one holding ``recovery_point`` on is validated batch by batch
        and cut at the first torn or corrupt batch."""
        try:
            directory.mkdir(parents=True)
        except FileExistsError:
            fresh = False
        else:
            fresh = True
        log = cls(directory, config, now_ms, new=fresh)
        if fresh and log_start_offset <= 0:
            log._start_empty()
        else:
            log._load(recovery_point, log_start_offset, had_clean_shutdown)
        return log

    @classmethod
    def open_prepared(
        cls,
        directory: Path,
        config: LogConfig,
        fd: int,
        *,
        now_ms: Callable[[], int] = wall_clock_ms,
    ) -> PartitionLog:
        """A new, empty log in the directory ``prepare_first_segment`` made, whose first
        ``.log`` descriptor is ``fd``: ``open`` of a new partition without a file system
        call on the caller's thread (the event loop's)."""
        log = cls(directory, config, now_ms, new=True)
        log._add_segment(log._segment(0, fd=fd))
        return log

    def _start_empty(self) -> None:
        """A log in a directory just created: one empty segment at offset 0, nothing to
        recover. Skips ``_load``'s scans of the directory (swaps, leftovers, indexes,
        producer snapshots), which a new partition cannot have: creating thousands of
        partitions spent a third of each log's creation there."""
        self._add_segment(self._segment(0))

    def _segment(
        self, base_offset: int, *, size: int | None = None, fd: int | None = None
    ) -> LogSegment:
        kwargs = {
            "index_interval_bytes": self.config.index_interval_bytes,
            "max_index_bytes": self.config.segment_index_bytes,
            "created_ms": self._now_ms(),
        }
        if size is None:
            unlinking = self._unlinking.pop(base_offset, None)
            if unlinking is not None:
                # A deleted segment's files by the same name, still to be unlinked:
                # finish that first, or the unlink would remove the new files.
                unlinking.run()
            return LogSegment.create(self.directory, base_offset, fd=fd, **kwargs)
        return LogSegment(self.directory, base_offset, size=size, **kwargs)

    def _complete_swaps(self) -> None:
        """Finish cleanings a crash interrupted (Kafka's swap recovery). A
        ``<base>.log.swap`` is a cleaned copy already complete and fsynced: the segments
        it replaces are those with a base in [base, its next offset) (at least the one
        at ``base``); they go, with their indexes, and the swap file takes the name
        ``<base>.log``. A ``.cleaned`` file never reached that point and goes (in
        ``_load``), leaving the old segments as they were."""
        names = [entry.name for entry in os.scandir(self.directory)]
        swaps = sorted(name for name in names if name.endswith(_LOG_SWAP_SUFFIX))
        for name in swaps:
            base = int(name[:20])
            swap_path = self.directory / name
            next_offset = base + 1
            fd = os.open(swap_path, os.O_RDONLY | os.O_CLOEXEC)
            try:
                for _, header in iter_headers(fd, 0, os.fstat(fd).st_size):
                    next_offset = max(next_offset, header.next_offset)
            finally:
                os.close(fd)
            for entry in os.scandir(self.directory):
                stem, _, suffix = entry.name.partition(".")
                replaced = stem.isdigit() and base <= int(stem) < next_offset
                if replaced and suffix in ("log", "index", "timeindex", "txnindex"):
                    os.unlink(entry.path)
            os.replace(swap_path, self.directory / f"{base:020d}.log")
            txn_swap = self.directory / f"{base:020d}.txnindex.swap"
            if txn_swap.exists():
                os.replace(txn_swap, self.directory / f"{base:020d}.txnindex")

    def _load(self, recovery_point: int, log_start_offset: int, had_clean_shutdown: bool) -> None:
        base_offsets: list[int] = []
        index_files: list[Path] = []
        self._complete_swaps()
        for entry in os.scandir(self.directory):
            name = entry.name
            if name.endswith(_LEFTOVER_SUFFIXES):
                # Interrupted deletes, compactions or checkpoint writes (Kafka's suffixes).
                os.unlink(entry.path)
            elif name.endswith(".log") and len(name) == 24 and name[:20].isdigit():
                base_offsets.append(int(name[:20]))
            elif name.endswith((".index", ".timeindex", ".txnindex")):
                index_files.append(Path(entry.path))
        base_offsets.sort()
        known = {f"{base:020d}" for base in base_offsets}
        for path in index_files:
            if path.name.split(".")[0] not in known:
                path.unlink()  # an index without its log is useless
        for base in base_offsets:
            size = (self.directory / f"{base:020d}.log").stat().st_size
            self._segments.append(self._segment(base, size=size))
        self._base_offsets = base_offsets

        if not self._segments:
            start = max(log_start_offset, 0)
            self._add_segment(self._segment(start))
            log_end_offset = start
        elif had_clean_shutdown:
            log_end_offset = self._load_active_after_clean_shutdown()
        else:
            log_end_offset = self._recover_from(recovery_point)

        first_base = self._segments[0].base_offset
        log_start_offset = max(log_start_offset, first_base)
        if log_start_offset > log_end_offset:
            # The checkpointed start is past the surviving data: start afresh there.
            for segment in self._segments:
                self._delete_segment(segment)
            self._segments, self._base_offsets = [], []
            self._add_segment(self._segment(log_start_offset))
            log_end_offset = log_start_offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset
        self._high_watermark = log_end_offset
        self.recovery_point = max(min(recovery_point, log_end_offset), 0)
        self.leader_epoch_cache.truncate_from_end(log_end_offset)
        # Entries written for markers that recovery cut off (the index is appended after
        # its marker; what is missing the first scan of producer state writes again).
        self._segments[-1].txn_index.truncate_to(log_end_offset)
        self.producer_state.load_snapshot(
            log_end_offset if had_clean_shutdown else self.recovery_point
        )
        self.leader_epoch_cache.truncate_from_start(log_start_offset)

    def _load_active_after_clean_shutdown(self) -> int:
        active = self._segments[-1]
        active.ensure_indexes(None)
        if active.size == 0:
            return active.base_offset
        next_offset = active.next_offset_from_index()
        if next_offset is not None:
            return next_offset
        # The marker said clean but the tail does not parse: recover the active segment.
        return self._recover_from(active.base_offset)

    def _recover_from(self, recovery_point: int) -> int:
        """Validate segments from the one holding ``recovery_point``; return the log end."""
        first = max(bisect.bisect_right(self._base_offsets, recovery_point) - 1, 0)
        for i in range(first, len(self._segments)):
            segment = self._segments[i]
            size_before = segment.size
            segment.recover(verify_crc=True, min_offset=segment.base_offset, truncate=True)
            if segment.size < size_before:
                # Everything after a torn or corrupt batch is gone (Kafka's recovery).
                for later in self._segments[i + 1 :]:
                    later.unlink_files()
                    later.close_fd()
                del self._segments[i + 1 :]
                del self._base_offsets[i + 1 :]
                break
        active = self._segments[-1]
        active.ensure_indexes(None)
        if active.size == 0:
            return active.base_offset
        next_offset = active.next_offset_from_index()
        if next_offset is None:  # cannot happen after recovery; be safe
            next_offset = active.recover(
                verify_crc=True, min_offset=active.base_offset, truncate=True
            )
        return next_offset if next_offset is not None else active.base_offset

    # -- bookkeeping ---------------------------------------------------------------------

    def _add_segment(self, segment: LogSegment) -> None:
        self._segments.append(segment)
        self._base_offsets.append(segment.base_offset)

    def _next_base(self, i: int) -> int | None:
        return self._base_offsets[i + 1] if i + 1 < len(self._base_offsets) else None

    def _indexed(self, i: int) -> LogSegment:
        segment = self._segments[i]
        if not segment.indexes_loaded:
            segment.ensure_indexes(self._next_base(i))
        return segment

    def _off_loop(self, work: Callable[[], object], done: Callable[[], None] | None = None) -> bool:
        """Hand ``work`` to the log manager's threads; False when the caller must do it."""
        threads = self.threads
        return threads is not None and threads.submit(self, work, done)

    def _close_fd(self, fd: int) -> None:
        """Close a deleted segment's descriptor, on a thread when there are threads: the
        last close of an unlinked file frees its blocks, which waits on the journal."""
        if not self._off_loop(functools.partial(os.close, fd)):
            os.close(fd)

    def _delete_segment(self, segment: LogSegment, *, unlink_now: bool = False) -> None:
        """Unlink the files, close the descriptor once nothing pins it and at the latest
        after file.delete.delay.ms (deletion rule). The unlinks go to a thread unless
        ``unlink_now`` (truncation, the cleaner's swap: module docstring)."""
        if unlink_now:
            segment.unlink_files()
        else:
            unlink = _Unlink(segment.file_paths())
            base = segment.base_offset
            if self._off_loop(unlink.run, functools.partial(self._unlinked, base, unlink)):
                self._unlinking[base] = unlink
            else:
                unlink.run()
        if segment.is_open and not segment.close_when_unpinned(self._close_fd):
            deadline = self._now_ms() + self.config.file_delete_delay_ms
            self._deleted_segments.append((deadline, segment))

    def _unlinked(self, base_offset: int, unlink: _Unlink) -> None:
        if self._unlinking.get(base_offset) is unlink:
            del self._unlinking[base_offset]

    def close_deleted_segments(self, *, force: bool = False) -> int:
        """Close descriptors of deleted segments whose delay has passed (``force``: all,
        once the flush in flight is done); return how many are still waiting. A segment
        a flush is fsyncing waits for it, whatever the delay."""
        if force:
            self._settle_flush()
        if not self._deleted_segments:
            return 0
        now = self._now_ms()
        flushing = self._flushing.segments if self._flushing is not None else ()
        waiting = []
        for deadline, segment in self._deleted_segments:
            if segment in flushing:
                waiting.append((deadline, segment))
            elif force or now >= deadline:
                fd = segment.detach_fd()
                if fd is not None:
                    self._close_fd(fd)
            elif segment.is_open and not segment.close_when_unpinned(self._close_fd):
                waiting.append((deadline, segment))
        self._deleted_segments = waiting
        return len(waiting)

    @property
    def segments(self) -> list[LogSegment]:
        """The segments, oldest first (a copy; the last is the active one)."""
        return list(self._segments)

    def replace_segments(
        self,
        old: tuple[tuple[int, int, int], ...],
        cleaned: LogSegment,
        cleaned_suffix: str,
        swap_suffix: str,
    ) -> bool:
        """Swap the cleaner's copy of the segments ``old`` ((base offset, size, serial)
        each) in (Kafka's ``replaceSegments``); False, changing nothing, when they are no
        longer a run of rolled segments of this log with those sizes (retention,
        truncation or deletion got there first).

        Crash safety: renaming ``.cleaned`` to ``.swap`` is the commit point (the copy
        is fsynced before); then the old segments are unlinked (readers keep their
        descriptors, the deletion rule) and the swap file takes the plain name. Start-up
        completes a swap found on disk (``_complete_swaps``). The producer snapshots of
        the segments merged into an earlier one go too (Kafka's ``deletedNotReplaced``)."""
        if self._closed or not old:
            return False
        first = bisect.bisect_left(self._base_offsets, old[0][0])
        stop = first + len(old)
        if stop >= len(self._segments) or any(
            (segment.base_offset, segment.size, segment.serial) != expected
            for segment, expected in zip(self._segments[first:stop], old, strict=True)
        ):
            return False
        cleaned.change_file_suffixes(cleaned_suffix, swap_suffix)
        _fsync_directory(self.directory)
        for segment in self._segments[first:stop]:
            # At once: the copy takes the first one's name next (module docstring).
            self._delete_segment(segment, unlink_now=True)
        cleaned.change_file_suffixes(swap_suffix, "")
        _fsync_directory(self.directory)
        self._segments[first:stop] = [cleaned]
        self._base_offsets[first:stop] = [cleaned.base_offset]
        self.producer_state.delete_snapshots_at(base for base, _, _ in old[1:])
        return True

    @property
    def segment_base_offsets(self) -> list[int]:
        return list(self._base_offsets)

    @property
    def size_bytes(self) -> int:
        return sum(segment.size for segment in self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    def update_config(self, config: LogConfig) -> None:
        """New topic settings apply from now on (index sizes from the next segment)."""
        self.config = config
        for segment in self._segments:
            segment.index_interval_bytes = config.index_interval_bytes

    def __repr__(self) -> str:
        return (
            f"PartitionLog({self.topic}-{self.partition}, log_start_offset="
            f"{self.log_start_offset}, log_end_offset={self.log_end_offset}, "
            f"segments={len(self._segments)})"
        )

    # -- append --------------------------------------------------------------------------

    def validate_append(
        self,
        records: bytes | None,
        *,
        budget: DecompressionBudget,
        api_version: int | None = None,
    ) -> list[BatchHeader]:
        """Validate a leader's incoming batches (Kafka's ``LogValidator``) and return
        their headers. ``api_version`` is the Produce request's (None for the broker's
        own writes); ``budget`` bounds what compressed batches may inflate to. Raises
        ``InvalidBatch`` (its ``error`` names the Kafka code) or ``RecordValidationError``."""
        if api_version is not None:
            validate_produce_records(api_version, records)
        if not records:
            raise record_batch.InvalidBatch("CORRUPT_MESSAGE", "produce without records")
        config = self.config
        headers = record_batch.scan_batches(records, max_batch_size=config.max_message_bytes)
        validate_records(
            records,
            headers,
            budget=budget,
            compacted=config.compacted,
            topic_partition=f"{self.topic}-{self.partition}",
            # Kafka's origin COORDINATOR: the broker's own writes skip the client checks
            # (TxnOffsetCommit's transactional batches carry no sequence number).
            from_client=api_version is not None,
        )
        return headers

    def append_as_leader(
        self,
        buffer: bytearray,
        headers: list[BatchHeader],
        *,
        leader_epoch: int,
        from_client: bool = True,
    ) -> AppendResult:
        """Append validated batches as the leader: offsets assigned here, idempotent
        producers deduplicated and sequence-checked first (``ProducerStateError`` when
        Kafka would refuse the batch; a retry of a batch already written comes back
        with its original offsets and ``duplicate`` set, and is not written again).
        ``from_client`` False: the broker's own write (no sequence checks)."""
        try:
            duplicate = self.producer_state.check(headers, from_client=from_client)
        except ProducerStateError as error:
            producer_state_log.info("%s-%d refused a batch: %s", self.topic, self.partition, error)
            raise
        for producer_id, old_epoch, new_epoch in self.producer_state.epoch_bumps(headers):
            producer_state_log.info(
                "%s-%d: producer %d moved from epoch %d to %d (a client-side bump after "
                "a timeout or a sequence error: what it re-sends may be stored twice)",
                self.topic,
                self.partition,
                producer_id,
                old_epoch,
                new_epoch,
            )
        if duplicate is not None:
            return AppendResult(
                duplicate.first_offset, duplicate.last_offset, -1, self.log_start_offset, True
            )
        result = self.append(buffer, headers, leader_epoch=leader_epoch)
        self.producer_state.record_append(buffer, headers)
        return result

    def append_txn_marker(
        self,
        *,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        commit: bool,
        leader_epoch: int,
    ) -> AppendResult:
        """Append a transaction marker as the leader (WriteTxnMarkers): a control batch
        that ends the producer's transaction here. ``ProducerStateError`` when its
        producer epoch or coordinator epoch is stale (Kafka's ``appendEndTxnMarker``)."""
        self.producer_state.check_marker(producer_id, producer_epoch, coordinator_epoch)
        marker = EndTransactionMarker(
            ControlRecordType.COMMIT if commit else ControlRecordType.ABORT, coordinator_epoch
        )
        buffer = bytearray(
            build_marker_batch(
                marker,
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                timestamp=self._now_ms(),
            )
        )
        headers = record_batch.scan_batches(buffer, verify_crc=False)
        result = self.append(buffer, headers, leader_epoch=leader_epoch)
        self.producer_state.record_append(buffer, headers)
        return result

    def append_as_follower(self, buffer: bytearray, headers: list[BatchHeader]) -> AppendResult:
        """Append batches copied from the leader (offsets as the leader gave them) and
        apply them to the producer state, so that a follower's open transactions and
        ``.txnindex`` follow its log as the leader's do."""
        result = self.append(buffer, headers, assign_offsets=False)
        self.producer_state.record_append(buffer, headers)
        return result

    # -- transactions --------------------------------------------------------------------

    def index_aborted_transaction(self, entry: AbortedTxn) -> None:
        """Record an aborted transaction in the ``.txnindex`` of the segment holding its
        marker, unless it is there already (a rescan of the log after a restart or a
        truncation finds markers already indexed)."""
        i = bisect.bisect_right(self._base_offsets, entry.last_offset) - 1
        if i < 0:
            return
        index = self._segments[i].txn_index
        if index.entries and index.entries[-1].last_offset >= entry.last_offset:
            return
        index.append(entry)

    @property
    def last_stable_offset(self) -> int:
        """Kafka's LSO: read_committed consumers read up to it (the first offset of the
        oldest undecided transaction, else the high watermark)."""
        if not self.producer_state.built and self.log_end_offset == self.log_start_offset:
            return self._high_watermark
        return self.producer_state.last_stable_offset(self._high_watermark)

    @property
    def known_last_stable_offset(self) -> int:
        """The LSO when the producer state is built, else the high watermark: for
        answers that carry an LSO but do not depend on it (read_uncommitted fetches,
        followers), which must not make a restarted broker scan the log."""
        if not self.producer_state.built:
            return self._high_watermark
        return self.producer_state.last_stable_offset(self._high_watermark)

    @property
    def first_unstable_offset(self) -> int | None:
        return self.producer_state.first_unstable_offset(self._high_watermark)

    def active_producers(self) -> list[tuple[int, int, int, int, int, int]]:
        """Kafka's ``activeProducers`` (DescribeProducers): (producer id, epoch, last
        sequence, last timestamp, coordinator epoch, open transaction's first offset or
        -1) for every producer this partition knows."""
        state = self.producer_state.state()
        open_txns = state.transactions.first_offsets
        return [
            (
                producer_id,
                entry.producer_epoch,
                entry.last_sequence,
                entry.last_timestamp,
                entry.coordinator_epoch,
                open_txns.get(producer_id, -1),
            )
            for producer_id, entry in state.entries.items()
        ]

    def open_transactions(self) -> dict[int, int]:
        """Producer id -> first offset of its open transaction in this partition."""
        return dict(self.producer_state.state().transactions.first_offsets)

    def collect_aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [fetch_offset, upper_bound), from the
        ``.txnindex`` of the segment holding ``fetch_offset`` on (Kafka's
        ``collectAbortedTransactions``)."""
        self.producer_state.state()  # indexes markers a restart has not scanned yet
        found: list[AbortedTxn] = []
        first = max(bisect.bisect_right(self._base_offsets, fetch_offset) - 1, 0)
        for segment in self._segments[first:]:
            # A marker may sit past the bound in a later segment: search on until an
            # entry's LSO says nothing later can overlap (Kafka's isComplete).
            entries, complete = segment.txn_index.collect(fetch_offset, upper_bound)
            found.extend(entries)
            if complete:
                break
        return found

    def append(
        self,
        buffer: bytearray,
        headers: list[BatchHeader],
        *,
        assign_offsets: bool = True,
        leader_epoch: int | None = None,
    ) -> AppendResult:
        """Append validated batches (``headers`` from ``scan_batches`` over ``buffer``)."""
        if not headers:
            raise ValueError("append needs at least one record batch")
        # A new leader of an empty log deferred its first epoch's checkpoint: on disk
        # before any batch is, so a crash after the append still finds it.
        self.leader_epoch_cache.write_deferred()
        now = self._now_ms()
        if assign_offsets:
            first_offset = self.log_end_offset
            next_offset = record_batch.assign_offsets(buffer, headers, first_offset)
        else:
            first_offset = headers[0].base_offset
            expected = self.log_end_offset
            position = 0
            for header in headers:
                if header.base_offset < expected:
                    raise UnexpectedAppendOffset(
                        f"{self.topic}-{self.partition}: batch at offset {header.base_offset} "
                        f"is below the next expected offset {expected}"
                    )
                if header.position != position:
                    break
                expected = header.next_offset
                position += header.size
            if position != len(buffer):
                # The whole buffer is written, the headers indexed: bytes no header
                # covers would put offsets in the segment its index does not know of
                # (the follower wrote batches it had left out, chaos seed 20261130).
                raise UnexpectedAppendOffset(
                    f"{self.topic}-{self.partition}: the batches' headers cover {position} "
                    f"of the {len(buffer)} bytes to append"
                )
            next_offset = expected
        if leader_epoch is not None:
            record_batch.set_partition_leader_epoch(buffer, headers, leader_epoch)
        log_append_time = -1
        # Only the leader stamps LogAppendTime; a follower keeps the leader's bytes as
        # they are (Kafka's follower append never rewrites a batch).
        if assign_offsets and self.config.message_timestamp_type == "LogAppendTime":
            log_append_time = now
            record_batch.set_log_append_time(buffer, headers, now)

        active = self._segments[-1]
        if self._should_roll(active, len(buffer), next_offset - 1, now):
            active = self._roll(first_offset)
        if active.size == 0:
            active.created_ms = now  # segment.ms counts from the segment's first batch
        active.append(buffer, headers, first_offset, log_append_time)

        self.log_end_offset = next_offset
        if self._high_watermark_follows_log_end:
            self._high_watermark = next_offset
        cache = self.leader_epoch_cache
        if leader_epoch is not None:
            if leader_epoch > cache.latest_epoch():
                cache.assign(leader_epoch, first_offset)
        elif not assign_offsets:
            # A follower learns epochs from the batches it copies.
            for header in headers:
                if header.partition_leader_epoch > cache.latest_epoch():
                    cache.assign(header.partition_leader_epoch, header.base_offset)
        if next_offset - self.recovery_point >= self.config.flush_messages:
            self.flush()
        return AppendResult(first_offset, next_offset - 1, log_append_time, self.log_start_offset)

    def _should_roll(self, active: LogSegment, size: int, last_offset: int, now: int) -> bool:
        if last_offset - active.base_offset > _MAX_RELATIVE_OFFSET:
            return True
        if active.size == 0:
            return False
        return (
            active.size + size > self.config.segment_bytes
            or now - active.created_ms > self.config.segment_ms
            or active.offset_index.is_full
            or active.time_index.is_full
        )

    def _roll(self, base_offset: int) -> LogSegment:
        active = self._segments[-1]
        if active.base_offset == base_offset:
            return active
        if active.size == 0:
            # An empty active segment is replaced rather than kept behind the new one.
            self._segments.pop()
            self._base_offsets.pop()
            self._delete_segment(active)
        else:
            active.seal()
        segment = self._segment(base_offset)
        self._add_segment(segment)
        if base_offset == self.log_end_offset:
            self._snapshot_at_roll()
        self._flush_rolled()
        return segment

    def _flush_rolled(self) -> None:
        """Kafka's flush of the segments a roll closed, scheduled at the roll
        (``flushUptoOffsetExclusive`` on its scheduler), whatever
        ``log.flush.scheduler.interval.ms``: on the log manager's threads only. Without
        them (tools, tests) the periodic ``flush_if_due`` does it, if it runs. One
        rolled while a flush is in flight is flushed when that one is done."""
        threads = self.threads
        if self._flushing is None and threads is not None and threads.running():
            self._flush_off_loop(self._base_offsets[-1])

    def _snapshot_at_roll(self) -> None:
        """Kafka's producer snapshot at every roll: the state taken and encoded here (it
        must describe the log end at the roll), the file written, fsynced and renamed
        into place on the log manager's threads (Kafka 3.x flushes it on its scheduler).
        A truncation cancels one not renamed yet (``delete_snapshots_after``)."""
        write = self.producer_state.snapshot_write()
        if write is not None and not self._off_loop(write.run):
            write.run()

    def maybe_roll(self) -> None:
        """Roll the active segment if segment.ms has passed since its first batch."""
        self.close_deleted_segments()
        active = self._segments[-1]
        if active.size > 0 and self._now_ms() - active.created_ms > self.config.segment_ms:
            self._roll(self.log_end_offset)

    # -- reads ---------------------------------------------------------------------------

    def _check_in_range(self, offset: int) -> None:
        if offset < self.log_start_offset or offset > self.log_end_offset:
            raise OffsetOutOfRange(
                f"offset {offset} is outside {self.topic}-{self.partition}'s range "
                f"[{self.log_start_offset}, {self.log_end_offset}]"
            )

    def read(
        self,
        fetch_offset: int,
        max_bytes: int,
        *,
        max_offset: int | None = None,
        min_one_batch: bool = True,
    ) -> FileSlice | None:
        """Whole batches from the one holding ``fetch_offset``, within one segment."""
        if fetch_offset < self.log_start_offset or fetch_offset > self.log_end_offset:
            self._check_in_range(fetch_offset)
        if fetch_offset == self.log_end_offset or (
            max_offset is not None and fetch_offset >= max_offset
        ):
            # Matches Kafka: a fetch at the log end (or the high watermark) returns no
            # records, not an error.
            return None
        i = bisect.bisect_right(self._base_offsets, fetch_offset) - 1
        count = len(self._segments)
        while 0 <= i < count:
            segment = self._segments[i]
            if not segment.indexes_loaded:
                segment.ensure_indexes(self._next_base(i))
            found = segment.read_range(fetch_offset, max_bytes, max_offset, min_one_batch)
            if found is not None:
                position, size = found
                if size <= 0:
                    return None
                return FileSlice(segment.fd, position, size, segment.pin())
            i += 1  # nothing at or after the offset here (a gap): try the next segment
            if i < count and max_offset is not None and self._base_offsets[i] >= max_offset:
                return None
        return None

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record whose timestamp is >= ``timestamp_ms``."""
        for i in range(len(self._segments)):
            next_base = self._next_base(i)
            if next_base is not None and next_base <= self.log_start_offset:
                continue
            segment = self._indexed(i)
            if segment.max_timestamp < timestamp_ms:
                continue
            found = segment.find_offset_by_timestamp(timestamp_ms, self.log_start_offset)
            if found is not None:
                return found
        return None

    def max_timestamp_offset(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with the log's largest timestamp."""
        best: LogSegment | None = None
        for i in range(len(self._segments)):
            segment = self._indexed(i)
            if segment.max_timestamp >= 0 and (
                best is None or segment.max_timestamp > best.max_timestamp
            ):
                best = segment
        return best.max_timestamp_record() if best is not None else None

    # -- the high watermark ---------------------------------------------------------------
    # The log is its only writer (like Kafka's UnifiedLog.updateHighWatermark): callers
    # say what it should become, the log holds it within [log start, log end].

    @property
    def high_watermark(self) -> int:
        """The offset below which every in-sync replica has the records (consumers read
        up to it; it never exceeds the log end offset)."""
        return self._high_watermark

    def update_high_watermark(self, offset: int) -> int:
        """Set the high watermark, held within [log start, log end] (Kafka's
        ``updateHighWatermark``: at load, from the checkpoint). Returns the new value."""
        self._high_watermark = max(min(offset, self.log_end_offset), self.log_start_offset)
        return self._high_watermark

    def maybe_increment_high_watermark(self, offset: int) -> bool:
        """Move the high watermark forward to ``offset`` (at most the log end offset),
        never back (Kafka's ``maybeIncrementHighWatermark``); True if it moved."""
        offset = min(offset, self.log_end_offset)
        if offset > self._high_watermark:
            self._high_watermark = offset
            return True
        return False

    def stop_following_log_end(self) -> None:
        """Replication owns the high watermark from now on: appends no longer move it;
        the leader's ISR rule or the follower's copy of the leader's does."""
        self._high_watermark_follows_log_end = False

    # -- removing data -------------------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Drop every batch at or after ``offset`` (a batch holding it goes whole)."""
        if offset >= self.log_end_offset:
            return
        self.truncations += 1
        kept = offset >= self.log_start_offset
        if not kept:
            for segment in self._segments:
                self._delete_segment(segment, unlink_now=True)
            self._segments, self._base_offsets = [], []
            self._add_segment(self._segment(max(offset, 0)))
            self.log_start_offset = self.log_end_offset = max(offset, 0)
        else:
            while len(self._segments) > 1 and self._segments[-1].base_offset > offset:
                self._base_offsets.pop()
                # At once: a crash must not bring back what was cut (module docstring).
                self._delete_segment(self._segments.pop(), unlink_now=True)
            segment = self._indexed(len(self._segments) - 1)
            next_offset = segment.truncate_to(offset)
            self.log_end_offset = next_offset if next_offset is not None else segment.base_offset
            self.log_start_offset = min(self.log_start_offset, self.log_end_offset)
        self._high_watermark = min(self._high_watermark, self.log_end_offset)
        self.recovery_point = min(self.recovery_point, self.log_end_offset)
        self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
        # A full truncation leaves nothing a snapshot could describe.
        self.producer_state.delete_snapshots_after(self.log_end_offset if kept else -1)

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: move the log start to ``offset`` and delete whole segments below."""
        if offset < 0 or offset > self.high_watermark:
            raise OffsetOutOfRange(
                f"cannot delete records of {self.topic}-{self.partition} before offset "
                f"{offset}: it must be between 0 and the high watermark {self.high_watermark}"
            )
        self.close_deleted_segments()
        if offset > self.log_start_offset:
            self.log_start_offset = offset
            self._delete_segments_below_log_start()
            self.leader_epoch_cache.truncate_from_start(offset)
        return self.log_start_offset

    def _delete_segments_below_log_start(self) -> int:
        deleted = 0
        while len(self._segments) > 1 and self._base_offsets[1] <= self.log_start_offset:
            self._base_offsets.pop(0)
            self._delete_segment(self._segments.pop(0))
            deleted += 1
        return deleted

    def apply_retention(self) -> int:
        """Delete segments by retention.ms (segment's largest timestamp) and retention.bytes,
        then any wholly below the log start; return how many were deleted."""
        self.close_deleted_segments()
        if not self.config.deletes_by_retention:
            return 0
        deleted = 0
        now = self._now_ms()
        retention_ms = self.config.retention_ms
        if retention_ms >= 0:

            def breaches_time(i: int) -> bool:
                segment = self._indexed(i)
                largest = segment.max_timestamp
                if largest < 0:
                    largest = segment.last_modified_ms()
                return now - largest > retention_ms

            deleted += self._delete_old_segments(breaches_time)
        retention_bytes = self.config.retention_bytes
        if retention_bytes >= 0:
            excess = self.size_bytes - retention_bytes

            def breaches_size(i: int) -> bool:
                nonlocal excess
                size = self._segments[i].size
                if excess - size >= 0:
                    excess -= size
                    return True
                return False

            deleted += self._delete_old_segments(breaches_size)
        deleted += self._delete_segments_below_log_start()
        return deleted

    def _delete_old_segments(self, breaches: Callable[[int], bool]) -> int:
        # Kafka's deletableSegments: oldest first, stop at the first segment that must
        # stay; only segments wholly below the high watermark; never the last segment
        # when it is empty.
        count = 0
        total = len(self._segments)
        while count < total:
            next_base = self._next_base(count)
            upper = next_base if next_base is not None else self.log_end_offset
            last_and_empty = next_base is None and self._segments[count].size == 0
            if self.high_watermark >= upper and not last_and_empty and breaches(count):
                count += 1
            else:
                break
        if not count:
            return 0
        if count == total:
            self._roll(self.log_end_offset)  # matches Kafka: roll, then delete the old active
        doomed = self._segments[:count]
        del self._segments[:count]
        del self._base_offsets[:count]
        for segment in doomed:
            self._delete_segment(segment)
        if self._base_offsets[0] > self.log_start_offset:
            self.log_start_offset = self._base_offsets[0]
            self.leader_epoch_cache.truncate_from_start(self.log_start_offset)
        return count

    # -- durability ----------------------------------------------------------------------

    def flush(self, up_to: int | None = None) -> None:
        """fsync segments (and their indexes) holding offsets below ``up_to`` (default: the
        log end) that were not flushed yet; advance the recovery point. On the caller's
        thread, after the flush in flight (if any): for ``flush.messages`` (the user
        chose that durability for every append) and ``close``."""
        self._settle_flush()
        flush = self._begin_flush(up_to)
        if flush is not None:
            self._flush_here(flush)

    def flush_if_due(self) -> None:
        """flush.ms, plus segments rolled since the last flush (Kafka flushes a rolled
        segment in the background; here the periodic caller does), with the fsyncs on
        the log manager's threads (module docstring); nothing while a flush is in
        flight."""
        self.close_deleted_segments()
        if self._flushing is not None:
            return
        if self.log_end_offset > self.recovery_point and (
            self._now_ms() - self._last_flush_ms >= self.config.flush_ms
        ):
            self._flush_off_loop(None)
        elif self.recovery_point < self._base_offsets[-1]:
            self._flush_off_loop(self._base_offsets[-1])

    def _flush_off_loop(self, up_to: int | None) -> None:
        flush = self._begin_flush(up_to)
        if flush is None:
            return
        if self._off_loop(flush.run, functools.partial(self._flushed, flush)):
            self._flushing = flush
        else:
            self._flush_here(flush)

    def _flush_here(self, flush: _Flush) -> None:
        """``flush``'s fsyncs on the caller's thread, then its outcome applied."""
        try:
            flush.run()
        finally:
            self._finish_flush(flush)

    def _begin_flush(self, up_to: int | None) -> _Flush | None:
        """The event loop's part of a flush: what to fsync (segments holding offsets in
        [recovery point, ``up_to``)), their index entries written, their descriptors
        pinned. None when there is nothing to do."""
        end = self.log_end_offset if up_to is None else min(up_to, self.log_end_offset)
        self._last_flush_ms = self._now_ms()
        # An epoch a new leader of an empty log wrote without fsync.
        epoch_checkpoint = self.leader_epoch_cache.take_unsynced()
        segments: list[LogSegment] = []
        if end > self.recovery_point:
            first = max(bisect.bisect_right(self._base_offsets, self.recovery_point) - 1, 0)
            for i in range(first, len(self._segments)):
                if self._base_offsets[i] >= end and i > first:
                    break
                segments.append(self._segments[i])
        elif epoch_checkpoint is None:
            return None
        pins = [segment.pin() for segment in segments]
        files = [(segment.fd, segment.prepare_sync()) for segment in segments]
        return _Flush(end, self.truncations, segments, pins, files, epoch_checkpoint)

    def _flushed(self, flush: _Flush) -> None:
        """On the event loop, once a thread is done with ``flush``; then the segments
        rolled meanwhile, if any (``_flush_rolled``)."""
        if self._flushing is flush:
            self._flushing = None
            self._finish_flush(flush)
            if (
                not flush.failed
                and not self._closed
                and self.recovery_point < self._base_offsets[-1]
            ):
                self._flush_rolled()

    def _settle_flush(self) -> None:
        """Wait for the flush in flight, if any, and apply it (close, a flush on the
        caller's thread, forced closes of deleted segments)."""
        flush = self._flushing
        if flush is not None:
            flush.done.wait()
            self._flushed(flush)

    def _finish_flush(self, flush: _Flush) -> None:
        """Unpin (a segment deleted meanwhile closes now) and move the recovery point,
        unless the fsyncs failed or a truncation happened since they were chosen (its
        end may now hold other, unsynced batches)."""
        flush.pins.clear()
        if not flush.failed and flush.truncations == self.truncations:
            self.recovery_point = max(self.recovery_point, min(flush.end, self.log_end_offset))

    def close(self) -> None:
        """Flush everything and close descriptors (deleted segments' included)."""
        if self._deleted:
            self.close_deleted_segments(force=True)
            return
        if self._closed:
            return
        self._closed = True
        self._settle_flush()
        if self._segments:
            self._segments[-1].seal()
            self.flush()
            self.producer_state.take_snapshot()  # Kafka's snapshot at clean shutdown
        for segment in self._segments:
            segment.close()
        self.close_deleted_segments(force=True)

    def delete(self, remove: Callable[[Path, Path, list[int]], None] | None = None) -> None:
        """Remove the partition from disk (topic deletion): rename the directory to
        ``log_delete_dir_name`` (so a crash cannot resurrect it), close the descriptors
        no fetch is sending from, remove the files (``remove_partition_files``). The log
        manager passes ``remove``, which does those steps on a background thread: each
        is a file system operation that waits on the journal, and under heavy disk I/O
        the rename alone held the event loop for seconds. A descriptor a fetch response
        is still sending from is closed when the send is done, or after the delete delay.
        """
        if self._deleted:
            return
        self._deleted = True
        # Snapshots a thread is writing stop short (their directory is going).
        self.producer_state.cancel_snapshot_writes()
        renamed = self.directory.with_name(log_delete_dir_name(self.topic, self.partition))
        deadline = self._now_ms() + self.config.file_delete_delay_ms
        descriptors = []
        for segment in self._segments:
            if not segment.is_open:
                continue
            if segment.pins == 0:
                fd = segment.detach_fd()
                if fd is not None:
                    descriptors.append(fd)
            elif not segment.close_when_unpinned(self._close_fd):
                self._deleted_segments.append((deadline, segment))
        self._segments, self._base_offsets = [], []
        self._closed = True
        (remove or remove_partition_files)(self.directory, renamed, descriptors)

    def abandon(self) -> None:
        """Stop using the log without writing anything (its log dir failed): no flush,
        no index writes, files left as they are for recovery at the next start.
        Descriptors follow the deletion rule (a fetch may still be sending from them)."""
        if self._closed:
            return
        self._closed = True
        deadline = self._now_ms() + self.config.file_delete_delay_ms
        for segment in self._segments:
            if segment.is_open:
                self._deleted_segments.append((deadline, segment))
        self._segments, self._base_offsets = [], []

    @property
    def is_deleted(self) -> bool:
        return self._deleted
