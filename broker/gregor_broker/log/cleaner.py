"""Log compaction of one partition log: the work of Kafka's ``Cleaner`` (``LogCleaner``
schedules it, see ``log_cleaner.py``).

For every key, a compacted log keeps at least the last value; offsets never change.
One cleaning pass over a log, as Kafka does it:

1. **Range.** The dirty part is [first dirty offset, first uncleanable offset). The first
   dirty offset is the cleaner checkpoint (where the last pass stopped), else the log
   start; the first uncleanable offset is the smallest of the active segment's base
   (the active segment is never cleaned), the high watermark, and the base of the first
   segment holding a record younger than ``min.compaction.lag.ms``.
2. **Offset map.** Walk the dirty part and map each key's MD5 to its latest offset
   (Kafka's ``SkimpyOffsetMap``: 24 bytes an entry against ``log.cleaner.dedupe.buffer.size``).
   When the map is full the pass covers less: ``end`` is the offset of the first record
   it could not map.
3. **Clean.** Segments from the log start up to ``end`` are rewritten in groups (each
   group's total at most ``segment.bytes``) into ``<base>.log.cleaned``. A record is
   kept when it is at or past ``end``, or is its key's latest; a tombstone (null value)
   also goes once its segment is older than the delete horizon (the last cleaned
   segment's modification time minus ``delete.retention.ms``, Kafka's rule), and a
   keyless record always goes. A batch whose records all stay is copied byte for byte;
   one that loses records is rebuilt with its base offset, last offset delta, producer
   id, epoch, base sequence and codec (recompressed); one that loses all is dropped,
   except the last batch of a producer, which stays as an empty batch so producer
   state survives (Kafka's rule).
   Transactions (Kafka's ``CleanedTransactionMetadata``): the records of aborted
   transactions (from the ``.txnindex`` files) go, and never enter the offset map; the
   range ends at the last stable offset, so open transactions are not touched. An ABORT
   marker stays while this pass removes data of its transaction (and its ``.txnindex``
   entry goes to the cleaned copy's index); a COMMIT marker stays while data of its
   transaction is still in the log before it (Kafka looks in the same group only).
   Otherwise a marker goes like a tombstone, once its
   segment is past the delete horizon (``delete.retention.ms``); the last batch of a
   producer stays as an empty batch.
4. **Swap.** ``PartitionLog.replace_segments`` swaps the cleaned segment in with Kafka's
   suffix protocol (``.cleaned`` -> ``.swap`` -> no suffix); see there for crashes.

The pass is a generator: each ``next()`` does a bounded piece of work (one batch) and
yields the bytes it read, so the scheduler can throttle I/O and give the event loop
back between pieces. Appends, retention, truncation or deletion may change the log
between pieces; the swap refuses then and the pass is simply lost.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections import deque
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..protocol.control_records import ControlRecordType, marker_of
from ..protocol.record_batch import (
    COMPRESSION_MASK,
    HEADER_SIZE,
    TIMESTAMP_TYPE_LOG_APPEND_TIME,
    BatchHeader,
    Compression,
    build_batch,
    read_header,
)
from ..protocol.records import compress, decompress, iter_record_spans
from .log_config import LogConfig
from .partition_log import PartitionLog
from .segment import LogSegment, iter_headers
from .transaction_index import AbortedTxn, TransactionIndex

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
# Kafka's SkimpyOffsetMap: a 16-byte MD5 and an 8-byte offset per entry, at most 90% full.
BYTES_PER_ENTRY = 24
LOAD_FACTOR = 0.9
_MAX_RELATIVE_OFFSET = 2**31 - 1


class OffsetMap:
    """Key hash -> latest offset, bounded like Kafka's ``SkimpyOffsetMap``."""

    def __init__(self, buffer_bytes: int) -> None:
        self.buffer_bytes = buffer_bytes
        self.slots = max(int(buffer_bytes // BYTES_PER_ENTRY * LOAD_FACTOR), 1)
        self._offsets: dict[bytes, int] = {}

    def __len__(self) -> int:
        return len(self._offsets)

    @staticmethod
    def hash(key: bytes) -> bytes:
        return hashlib.md5(key, usedforsecurity=False).digest()

    def put(self, key: bytes, offset: int) -> bool:
        """Record ``offset`` as the key's latest; False (nothing recorded) when the key
        is new and the map is full."""
        digest = self.hash(key)
        if digest not in self._offsets and len(self._offsets) >= self.slots:
            return False
        self._offsets[digest] = offset
        return True

    def get(self, key: bytes) -> int:
        return self._offsets.get(self.hash(key), -1)

    def clear(self) -> None:
        self._offsets.clear()


class CleanedTransactions:
    """Which transactional batches a pass drops and which markers may go (Kafka's
    ``CleanedTransactionMetadata``), fed the batches of a range in offset order with the
    aborted transactions overlapping it."""

    def __init__(self, aborted: Sequence[AbortedTxn], index: TransactionIndex | None = None):
        self._pending = deque(sorted(aborted, key=lambda txn: txn.first_offset))
        # Producer id -> its aborted transaction being walked, and whether a batch of it
        # was seen in this range.
        self._aborted: dict[int, tuple[AbortedTxn, bool]] = {}
        self._committed: set[int] = set()
        self.index = index  # the cleaned copy's .txnindex

    def _consume_up_to(self, offset: int) -> None:
        while self._pending and self._pending[0].first_offset <= offset:
            txn = self._pending.popleft()
            self._aborted.setdefault(txn.producer_id, (txn, False))

    def on_batch(self, header: BatchHeader) -> bool:
        """A data batch: True when it belongs to an aborted transaction (its records go)."""
        self._consume_up_to(header.last_offset)
        if not header.is_transactional:
            return False
        ongoing = self._aborted.get(header.producer_id)
        if ongoing is not None:
            self._aborted[header.producer_id] = (ongoing[0], True)
            return True
        self._committed.add(header.producer_id)
        return False

    def on_control_batch(self, data: bytes, header: BatchHeader) -> bool:
        """A control batch: True when the marker may go (once past the delete horizon)."""
        self._consume_up_to(header.last_offset)
        if header.records_count == 0:
            return True  # already emptied by an earlier pass
        try:
            marker = marker_of(data, header)
        except Exception:
            marker = None
        if marker is None:
            return False  # not a transaction marker: kept
        producer_id = header.producer_id
        if marker.type == ControlRecordType.ABORT:
            ongoing = self._aborted.pop(producer_id, None)
            if ongoing is not None and ongoing[1]:
                # Data of the transaction was dropped here: keep the marker (and its
                # index entry) until a later pass finds nothing of it.
                if self.index is not None:
                    self.index.append(ongoing[0])
                return False
            return True
        if producer_id in self._committed:
            self._committed.discard(producer_id)
            return False
        return True


@dataclass(slots=True)
class CleanerStats:
    """What one pass did (Kafka's ``CleanerStats``), for logs and metrics."""

    bytes_read: int = 0
    bytes_written: int = 0
    map_bytes_read: int = 0
    map_records: int = 0
    records_read: int = 0
    records_retained: int = 0
    batches_rebuilt: int = 0
    segments_cleaned: int = 0
    swaps_refused: int = 0

    @property
    def recopy_percent(self) -> float:
        """Share of what was read that was written again (Kafka's recopy percent)."""
        return 100.0 * self.bytes_written / self.bytes_read if self.bytes_read else 0.0


@dataclass(frozen=True, slots=True)
class CleanableRange:
    first_dirty: int
    first_uncleanable: int
    clean_bytes: int  # bytes of segments wholly below first_dirty
    dirty_bytes: int  # bytes of segments in [first_dirty, first_uncleanable)

    @property
    def dirty_ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0


@dataclass(slots=True)
class PassResult:
    end: int  # the next pass starts here (the new cleaner checkpoint)
    stats: CleanerStats = field(default_factory=CleanerStats)


def cleanable_range(log: PartitionLog, checkpoint: int | None, now_ms: int) -> CleanableRange:
    """The dirty part of ``log`` (step 1). ``checkpoint`` is where the last pass ended."""
    segments = log.segments
    first_dirty = log.log_start_offset
    if checkpoint is not None and log.log_start_offset <= checkpoint <= log.log_end_offset:
        first_dirty = checkpoint
    first_uncleanable = min(segments[-1].base_offset, log.last_stable_offset)
    min_lag = log.config.min_compaction_lag_ms
    if min_lag > 0:
        for segment in segments[:-1]:
            if segment.base_offset >= first_uncleanable:
                break
            segment.ensure_indexes(None)
            if segment.max_timestamp > now_ms - min_lag:
                first_uncleanable = min(first_uncleanable, segment.base_offset)
                break
    first_dirty = min(first_dirty, first_uncleanable)
    clean_bytes = dirty_bytes = 0
    for i, segment in enumerate(segments):
        upper = segments[i + 1].base_offset if i + 1 < len(segments) else log.log_end_offset
        if upper <= first_dirty:
            clean_bytes += segment.size
        elif segment.base_offset < first_uncleanable:
            dirty_bytes += segment.size
    return CleanableRange(first_dirty, first_uncleanable, clean_bytes, dirty_bytes)


def compaction_overdue(log: PartitionLog, first_dirty: int, now_ms: int) -> bool:
    """``max.compaction.lag.ms``: the first dirty batch is older than the lag, so the log
    must be cleaned whatever its dirty ratio (Kafka's rule: the first batch's timestamp)."""
    max_lag = log.config.max_compaction_lag_ms
    if max_lag >= 2**63 - 1:
        return False
    segments = log.segments
    for i, segment in enumerate(segments[:-1]):
        if segments[i + 1].base_offset <= first_dirty:
            continue
        for _, header in iter_headers(segment.fd, 0, segment.size):
            if header.last_offset >= first_dirty:
                return header.base_timestamp < now_ms - max_lag
    return False


def _read_batches(segment: LogSegment) -> Generator[tuple[bytes, BatchHeader], None, None]:
    """Each batch of a rolled segment with its bytes; the header's position is 0."""
    for position, header in iter_headers(segment.fd, 0, segment.size):
        data = os.pread(segment.fd, header.size, position)
        if len(data) < header.size:
            return
        yield data, read_header(data)


def _payload(data: bytes, header: BatchHeader) -> bytes:
    body = data[HEADER_SIZE : header.size]
    return decompress(header.compression, body)


def build_offset_map(
    segments: list[LogSegment],
    start: int,
    stop: int,
    offset_map: OffsetMap,
    stats: CleanerStats,
    aborted: Sequence[AbortedTxn] = (),
) -> Generator[int, None, int]:
    """Map every keyed record in [start, stop) outside aborted transactions (step 2);
    return the end offset: every record below it is in the map."""
    transactions = CleanedTransactions(aborted)
    for segment in segments:
        for data, header in _read_batches(segment):
            if header.last_offset < start:
                continue
            if header.base_offset >= stop:
                return stop
            stats.map_bytes_read += header.size
            if header.is_control:
                transactions.on_control_batch(data, header)
                yield header.size
                continue
            if transactions.on_batch(header) or header.records_count == 0:
                yield header.size
                continue
            for span in iter_record_spans(_payload(data, header), header.records_count):
                offset = header.base_offset + span.offset_delta
                if offset < start or span.key is None:
                    continue
                if offset >= stop:
                    return stop
                if not offset_map.put(span.key, offset):
                    return offset
                stats.map_records += 1
            yield header.size
    return stop


def producer_last_offsets(segments: list[LogSegment]) -> dict[int, int]:
    """Producer id -> last offset of its last batch in these segments (headers only)."""
    last: dict[int, int] = {}
    for segment in segments:
        for _, header in iter_headers(segment.fd, 0, segment.size):
            if header.producer_id >= 0:
                last[header.producer_id] = header.last_offset
    return last


def group_segments(
    segments: list[LogSegment], end: int, segment_bytes: int
) -> list[list[LogSegment]]:
    """Consecutive segments with base below ``end`` in groups of at most
    ``segment_bytes`` (Kafka's ``groupSegmentsBySize``); offsets in a group stay within a
    32-bit relative offset of its base."""
    groups: list[list[LogSegment]] = []
    eligible = [s for s in segments if s.base_offset < end]
    i = 0
    while i < len(eligible):
        group = [eligible[i]]
        size = eligible[i].size
        i += 1
        while i < len(eligible):
            candidate = eligible[i]
            upper = eligible[i + 1].base_offset if i + 1 < len(eligible) else end
            if size + candidate.size > segment_bytes:
                break
            if upper - 1 - group[0].base_offset > _MAX_RELATIVE_OFFSET:
                break
            group.append(candidate)
            size += candidate.size
            i += 1
        groups.append(group)
    return groups


def _empty_batch(header: BatchHeader) -> bytes:
    """The header of a batch whose records all went, kept for its producer's state
    (Kafka's ``writeEmptyHeader``: no compression, both timestamps the max)."""
    return build_batch(
        [],
        base_offset=header.base_offset,
        base_timestamp=header.max_timestamp,
        max_timestamp=header.max_timestamp,
        attributes=header.attributes & ~COMPRESSION_MASK,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        partition_leader_epoch=header.partition_leader_epoch,
        last_offset_delta=header.last_offset_delta,
    )


def filter_batch(
    data: bytes,
    header: BatchHeader,
    *,
    offset_map: OffsetMap,
    end: int,
    retain_tombstones: bool,
    producer_last: dict[int, int],
    stats: CleanerStats,
    transactions: CleanedTransactions | None = None,
) -> bytes | None:
    """The batch as it stays in the cleaned log, or None when it goes."""
    keeps_producer = (
        header.producer_id >= 0 and producer_last.get(header.producer_id) == header.last_offset
    )
    if header.is_control:
        if transactions is None or not transactions.on_control_batch(data, header):
            return data
        if retain_tombstones:
            return data  # a marker goes like a tombstone: past the delete horizon
        if keeps_producer:
            return data if header.records_count == 0 else _empty_batch(header)
        return None
    if transactions is not None and transactions.on_batch(header):
        # An aborted transaction's records: gone (the producer's last batch stays empty).
        stats.records_read += header.records_count
        if not keeps_producer:
            return None
        return data if header.records_count == 0 else _empty_batch(header)
    if header.records_count == 0:
        return data if keeps_producer else None
    payload = _payload(data, header)
    spans = list(iter_record_spans(payload, header.records_count))
    stats.records_read += len(spans)
    kept = []
    for span in spans:
        offset = header.base_offset + span.offset_delta
        if offset >= end:
            kept.append(span)  # past what the map covers: not this pass's business
        elif span.key is None or offset_map.get(span.key) > offset:
            continue  # keyless, or a newer value of the key exists
        elif span.has_value or retain_tombstones:
            kept.append(span)
    stats.records_retained += len(kept)
    if len(kept) == len(spans):
        return data
    if not kept:
        return _empty_batch(header) if keeps_producer else None
    stats.batches_rebuilt += 1
    view = memoryview(payload)
    records = b"".join(view[span.start : span.end] for span in kept)
    if header.attributes & TIMESTAMP_TYPE_LOG_APPEND_TIME:
        max_timestamp = header.max_timestamp
    else:
        max_timestamp = header.base_timestamp + max(span.timestamp_delta for span in kept)
    return build_batch(
        [b""] * len(kept),
        base_offset=header.base_offset,
        base_timestamp=header.base_timestamp,
        max_timestamp=max_timestamp,
        attributes=header.attributes,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        partition_leader_epoch=header.partition_leader_epoch,
        records_payload=compress(Compression(header.compression), records),
        last_offset_delta=header.last_offset_delta,
    )


def clean_group(
    directory: Path,
    config: LogConfig,
    group: list[LogSegment],
    *,
    offset_map: OffsetMap,
    end: int,
    delete_horizon_ms: int,
    producer_last: dict[int, int],
    stats: CleanerStats,
    transactions: CleanedTransactions | None = None,
) -> Generator[int, None, LogSegment]:
    """Write the cleaned copy of ``group`` as ``<base>.log.cleaned`` (step 3), fsynced,
    with its indexes (``.index.cleaned``, ``.timeindex.cleaned``, ``.txnindex.cleaned``
    for the aborted transactions whose markers it keeps with data). ``transactions``
    walks the whole pass, group after group."""
    cleaned = LogSegment.create(
        directory,
        group[0].base_offset,
        index_interval_bytes=config.index_interval_bytes,
        max_index_bytes=config.segment_index_bytes,
        created_ms=0,
        file_suffix=CLEANED_SUFFIX,
    )
    cleaned.txn_index_path.unlink(missing_ok=True)  # a stale copy of an interrupted pass
    if transactions is None:
        transactions = CleanedTransactions(())
    transactions.index = cleaned.txn_index
    try:
        for segment in group:
            retain_tombstones = segment.last_modified_ms() > delete_horizon_ms
            for data, header in _read_batches(segment):
                stats.bytes_read += header.size
                kept = filter_batch(
                    data,
                    header,
                    offset_map=offset_map,
                    end=end,
                    retain_tombstones=retain_tombstones,
                    producer_last=producer_last,
                    stats=stats,
                    transactions=transactions,
                )
                if kept is not None:
                    kept_header = read_header(kept)
                    cleaned.append(kept, [kept_header], kept_header.base_offset, -1)
                    stats.bytes_written += len(kept)
                yield header.size
        cleaned.seal()
        cleaned.sync()
    except BaseException:
        cleaned.close_fd()
        cleaned.unlink_files()
        raise
    cleaned.close_fd()
    # The copy is as old as what it replaces (Kafka: the group's last modification time),
    # which the delete horizon of later passes reads.
    modified = max(segment.last_modified_ms() for segment in group)
    os.utime(cleaned.log_path, ns=(modified * 1_000_000, modified * 1_000_000))
    return cleaned


def delete_horizon_ms(log: PartitionLog, first_dirty: int) -> int:
    """Tombstones in segments modified at or before this go (Kafka's legacy rule: the
    last segment below the first dirty offset, minus ``delete.retention.ms``)."""
    last_clean: LogSegment | None = None
    segments = log.segments
    for i, segment in enumerate(segments):
        upper = segments[i + 1].base_offset if i + 1 < len(segments) else log.log_end_offset
        if upper <= first_dirty:
            last_clean = segment
    if last_clean is None:
        return 0
    return last_clean.last_modified_ms() - log.config.delete_retention_ms


@dataclass(frozen=True, slots=True)
class PassPlan:
    """What a pass copies, taken from the live log on the event loop (step 1). Plain
    data, so a worker process can do the copy (steps 2-3) while the broker serves."""

    directory: Path
    config: LogConfig
    segments: tuple[tuple[int, int, int], ...]  # (base offset, size, serial), active last
    first_dirty: int
    first_uncleanable: int
    delete_horizon_ms: int
    # Every aborted transaction of the log (its .txnindex entries), oldest first.
    aborted: tuple[AbortedTxn, ...] = ()


@dataclass(frozen=True, slots=True)
class CleanedGroup:
    """A ``<first base>.log.cleaned`` copy written for these segments."""

    segments: tuple[tuple[int, int, int], ...]  # as in PassPlan
    size: int


@dataclass(slots=True)
class PassCopy:
    end: int
    groups: list[CleanedGroup]
    stats: CleanerStats


def plan_pass(log: PartitionLog, checkpoint: int | None, now_ms: int) -> PassPlan | None:
    """Step 1 for ``log``; None when nothing is cleanable."""
    dirty = cleanable_range(log, checkpoint, now_ms)
    if dirty.first_dirty >= dirty.first_uncleanable:
        return None
    return PassPlan(
        log.directory,
        log.config,
        tuple((s.base_offset, s.size, s.serial) for s in log.segments),
        dirty.first_dirty,
        dirty.first_uncleanable,
        delete_horizon_ms(log, dirty.first_dirty),
        tuple(log.collect_aborted_transactions(log.log_start_offset, log.log_end_offset)),
    )


def copy_pass(plan: PassPlan, offset_map: OffsetMap) -> Generator[int, None, PassCopy | None]:
    """Steps 2-3 on the files alone: map the dirty range, write a ``.cleaned`` copy of
    each group. Reads segments through descriptors of its own, up to the sizes planned
    (the active segment may grow meanwhile); whatever changes on disk meanwhile, the
    swap notices. None when the map could not take a single new key."""
    config = plan.config
    segments = [
        LogSegment(
            plan.directory,
            base,
            size=size,
            index_interval_bytes=config.index_interval_bytes,
            max_index_bytes=config.segment_index_bytes,
            created_ms=0,
        )
        for base, size, _ in plan.segments
    ]
    serial_of = {base: (base, size, serial) for base, size, serial in plan.segments}
    stats = CleanerStats()
    offset_map.clear()
    written: list[CleanedGroup] = []
    try:
        # Open (and pin) every file before the first piece: retention or truncation may
        # unlink them meanwhile, and an open descriptor still reads the planned bytes.
        pins = [segment.pin() for segment in segments]
        for segment in segments:
            segment.fd  # noqa: B018 - opens it
    except FileNotFoundError:
        for segment in segments:
            segment.close_fd()
        return None  # a segment went between the plan and the copy: try again later
    try:
        rolled = segments[:-1]
        end = yield from build_offset_map(
            rolled, plan.first_dirty, plan.first_uncleanable, offset_map, stats, plan.aborted
        )
        if end <= plan.first_dirty:
            return None  # the map cannot hold even one new key
        producer_last = producer_last_offsets(segments)
        # One walk over every group: a COMMIT marker stays while data of its transaction
        # is anywhere before it in the pass, not only in its own group (Kafka's walk is
        # per group, so a marker could go while its data stays in an earlier group, and
        # a producer state rebuilt from that log would see the transaction still open).
        transactions = CleanedTransactions(plan.aborted)
        for group in group_segments(rolled, end, config.segment_bytes):
            cleaned = yield from clean_group(
                plan.directory,
                config,
                group,
                offset_map=offset_map,
                end=end,
                delete_horizon_ms=plan.delete_horizon_ms,
                producer_last=producer_last,
                stats=stats,
                transactions=transactions,
            )
            written.append(
                CleanedGroup(tuple(serial_of[s.base_offset] for s in group), cleaned.size)
            )
        return PassCopy(end, written, stats)
    except BaseException:
        for group in written:
            discard_cleaned(plan.directory, group)
        raise
    finally:
        del pins
        for segment in segments:
            segment.close_fd()


def discard_cleaned(directory: Path, group: CleanedGroup) -> None:
    stem = f"{group.segments[0][0]:020d}"
    for kind in ("log", "index", "timeindex", "txnindex"):
        (directory / f"{stem}.{kind}{CLEANED_SUFFIX}").unlink(missing_ok=True)


def swap_pass(log: PartitionLog, plan: PassPlan, copy: PassCopy) -> PassResult:
    """Step 4: swap each group's copy in, oldest first; at the first group whose
    segments changed meanwhile, stop and discard the rest (a later group's copy may
    drop a tombstone whose older values only an earlier group's copy removes)."""
    stats = copy.stats
    for i, group in enumerate(copy.groups):
        cleaned = LogSegment(
            plan.directory,
            group.segments[0][0],
            size=group.size,
            index_interval_bytes=plan.config.index_interval_bytes,
            max_index_bytes=plan.config.segment_index_bytes,
            created_ms=0,
            file_suffix=CLEANED_SUFFIX,
        )
        if log.replace_segments(group.segments, cleaned, CLEANED_SUFFIX, SWAP_SUFFIX):
            stats.segments_cleaned += len(group.segments)
            continue
        stats.swaps_refused += 1
        for rest in copy.groups[i:]:
            discard_cleaned(plan.directory, rest)
        return PassResult(plan.first_dirty, stats)
    return PassResult(copy.end, stats)


def clean(
    log: PartitionLog,
    checkpoint: int | None,
    *,
    offset_map: OffsetMap,
    now_ms: int,
) -> Generator[int, None, PassResult | None]:
    """One cleaning pass over ``log`` in this process (steps 1-4); None when there is
    nothing to clean. Yields bytes read after each piece of work."""
    plan = plan_pass(log, checkpoint, now_ms)
    if plan is None:
        return None
    copy = yield from copy_pass(plan, offset_map)
    if copy is None:
        return None
    return swap_pass(log, plan, copy)


def copy_in_worker(plan: PassPlan, map_bytes: int, max_bytes_per_second: float) -> PassCopy | None:
    """Steps 2-3 in a worker process (the broker's cleaner workers run here so that
    cleaning uses another core, as Kafka's cleaner threads do), throttled by sleeping."""
    started = time.monotonic()
    done = 0
    gen = copy_pass(plan, OffsetMap(map_bytes))
    try:
        while True:
            done += next(gen)
            if max_bytes_per_second != float("inf"):
                ahead = done / max_bytes_per_second - (time.monotonic() - started)
                if ahead > 0:
                    time.sleep(ahead)
    except StopIteration as stop:
        return stop.value
