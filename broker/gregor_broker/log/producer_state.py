"""Idempotent producers: per-partition producer state, Kafka's ProducerStateManager.

For every producer id that wrote to a partition, the broker remembers the producer
epoch and the metadata (sequence range, offsets) of its last five batches, as Kafka
does (``NumBatchesToRetain``). Before a leader appends a batch carrying a producer id,
``ProducerState.check`` decides, like Kafka's ``ProducerAppendInfo``:

- a batch whose epoch and sequence range match one of the last five batches is a
  duplicate (a retry of a write that landed): it is acknowledged with the original
  offsets and not written again;
- an epoch older than the producer's current one is fenced: INVALID_PRODUCER_EPOCH;
- a sequence that does not follow the last one is OUT_OF_ORDER_SEQUENCE_NUMBER (a new
  epoch must start at sequence 0); a producer the partition does not know may start
  anywhere (its state may have gone with retention or DeleteRecords).

State is a function of the batch headers in the log, in offset order: ``apply`` takes
headers that already carry their offsets, so a leader (after appending) and a follower
(copying batches with ``assign_offsets=False``) update it the same way. ``state()``
catches up with appends it was not told about by reading only the 61-byte batch headers.

Snapshots (Kafka's ``.snapshot`` files, ``ProducerSnapshot`` version 1, byte for byte):
``<offset>.snapshot`` holds every producer's epoch, last batch, coordinator epoch and
open transaction as of ``offset``. The log takes one when it rolls a segment and when
it closes, once producer state exists; opening a log loads the newest snapshot at or
below its end and scans only the batches after it, so a restart does not rescan whole
logs. Snapshots past a truncation point are deleted, older ones go with the segments.
The snapshot at a roll is taken and encoded on the event loop and written on another
thread (``SnapshotWrite``: a uniquely named ``.tmp``, fsync, rename); until it is
renamed into place, a truncation below its offset (or the partition's deletion)
cancels it, so a snapshot of batches a truncation removed never appears after the
truncation deleted the snapshots past it. A crash leaves at most a ``.tmp``, which
opening the log removes.
A snapshot keeps a producer's last batch only (as Kafka's): a retry of an older one of
its last five after a restart is OUT_OF_ORDER_SEQUENCE_NUMBER, not a duplicate.

Truncation. Matches Kafka's ``UnifiedLog.truncateTo``, which reloads producer state
after every truncation: when ``PartitionLog.truncations`` moved since the state was
built, the state is rebuilt from the remaining log. Comparing log end offsets is not
enough: a follower may truncate a batch and then copy other producers' batches past
where it was, and a retry of the truncated batch must then be appended again, not
answered as a duplicate at offsets that now hold someone else's records. Moving the log
start (retention, DeleteRecords) keeps the entries, as Kafka does since KIP-360.

Transactions (Kafka's ``ProducerAppendInfo``): a transactional batch of a producer with
no open transaction opens one at its base offset; a non-transactional batch while one is
open is INVALID_TXN_STATE; the producer's commit or abort marker (a control batch the
leader appends for the coordinator, ``check_marker`` first: an older producer epoch is
INVALID_PRODUCER_EPOCH, an older coordinator epoch TRANSACTION_COORDINATOR_FENCED) closes
it. The open transactions give the last stable offset (``transaction_index.py``
``OpenTransactions``); an aborted one becomes an entry of the ``.txnindex`` of the
segment holding its marker, written through ``ProducerStateLog.index_aborted_transaction``
(on the leader and on followers alike, since both apply the batches of their log).
Writes of the broker itself (the group coordinator's transactional offset commits, no
sequence numbers) are Kafka's origin COORDINATOR: epoch checked, sequence not.

Expiry (``producer.id.expiration.ms``, Kafka's ``removeExpiredProducers``): a producer
with no open transaction whose last batch or marker is older than the expiration (by its
timestamp) is forgotten; its next batch is then accepted at any sequence, as an unknown
producer's. The log manager runs it every ``producer.id.expiration.check.interval.ms``.
"""

from __future__ import annotations

import itertools
import logging
import os
import struct
import threading
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from crc32c import crc32c
from kio.schema.errors import ErrorCode

from ..protocol.control_records import ControlRecordType, EndTransactionMarker, marker_of
from ..protocol.record_batch import (
    CONTROL_FLAG,
    HEADER_SIZE,
    TRANSACTIONAL_FLAG,
    BatchHeader,
    read_header,
)
from .transaction_index import AbortedTxn, OpenTransactions


class ProducerStateLog(Protocol):
    """The partition log as its producer state reads it (``PartitionLog``, which owns
    the state: ``PartitionLog.producer_state``)."""

    directory: Path
    log_start_offset: int
    log_end_offset: int
    truncations: int

    def read(self, fetch_offset: int, max_bytes: int) -> Any: ...

    def index_aborted_transaction(self, entry: AbortedTxn) -> None: ...


log = logging.getLogger(__name__)

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
BATCHES_TO_RETAIN = 5  # Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN
_INT32_MAX = 2**31 - 1


class ProducerStateError(Exception):
    """A batch Kafka would refuse; ``error_code`` is what the producer gets back."""

    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


@dataclass(slots=True)  # not frozen: a frozen __init__ costs ~10x (hot path)
class BatchMetadata:
    """What Kafka keeps of one of a producer's recent batches."""

    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int
    max_timestamp: int


@dataclass(slots=True)
class ProducerEntry:
    producer_id: int
    producer_epoch: int
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=BATCHES_TO_RETAIN))
    # The epoch of the transaction coordinator that wrote this producer's last marker.
    coordinator_epoch: int = -1
    # The max timestamp of its last batch or marker (Kafka's lastTimestamp).
    last_timestamp: int = -1

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_sequence if self.batches else -1

    def find_duplicate(self, epoch: int, first: int, last: int) -> BatchMetadata | None:
        if epoch != self.producer_epoch:
            return None
        for batch in self.batches:
            if batch.first_sequence == first and batch.last_sequence == last:
                return batch
        return None


def last_sequence_of(header: BatchHeader) -> int:
    """Kafka's ``DefaultRecordBatch.lastSequence``: sequences wrap after Int.MAX_VALUE."""
    last = header.base_sequence + header.last_offset_delta
    return last - _INT32_MAX - 1 if last > _INT32_MAX else last


def _in_sequence(last_sequence: int, next_sequence: int) -> bool:
    return next_sequence == last_sequence + 1 or (
        next_sequence == 0 and last_sequence == _INT32_MAX
    )


def _is_idempotent(header: BatchHeader) -> bool:
    return header.producer_id != NO_PRODUCER_ID and not header.is_control


# A batch header, with the transaction marker it carries when it is a control batch.
LoggedBatch = tuple[BatchHeader, EndTransactionMarker | None]


class ProducerState:
    """The producer entries of one partition and the log offset they are current to."""

    def __init__(self, next_offset: int = 0, truncations: int = 0) -> None:
        self.entries: dict[int, ProducerEntry] = {}
        # Batches below this offset have been applied.
        self.next_offset = next_offset
        # The log's truncation count this state was built at (``PartitionLog.truncations``).
        self.truncations = truncations
        self.transactions = OpenTransactions()

    def check(
        self, headers: list[BatchHeader], *, from_client: bool = True
    ) -> BatchMetadata | None:
        """Validate batches about to be appended (offsets not assigned yet).

        Returns the original batch when the request is a retry of one already in the
        log (then nothing must be appended); raises ``ProducerStateError`` when Kafka
        would refuse the batch. ``from_client`` False is the broker's own write (Kafka's
        origin COORDINATOR): no sequence numbers, only the epoch is checked.
        """
        # Earlier batches of the same request count for the later ones.
        pending: dict[int, tuple[int, int]] = {}  # producer id -> (epoch, last sequence)
        open_txns = self.transactions.first_offsets
        opened: set[int] | None = None  # producers whose transaction a batch here opens
        for header in headers:
            if header.producer_id == NO_PRODUCER_ID or header.attributes & CONTROL_FLAG:
                continue
            producer_id = header.producer_id
            epoch = header.producer_epoch
            first = header.base_sequence
            entry = self.entries.get(producer_id)
            if header.attributes & TRANSACTIONAL_FLAG:
                if opened is None:
                    opened = set()
                opened.add(producer_id)
            elif (open_txns and producer_id in open_txns) or (opened and producer_id in opened):
                raise ProducerStateError(
                    ErrorCode.invalid_txn_state,
                    f"expected a transactional write from producer {producer_id}: its "
                    "transaction in this partition is still open",
                )
            if not from_client:
                current = entry.producer_epoch if entry is not None else NO_PRODUCER_EPOCH
                if current != NO_PRODUCER_EPOCH and epoch < current:
                    raise _fenced(producer_id, epoch, current)
                continue
            if entry is not None and producer_id not in pending:
                duplicate = entry.find_duplicate(epoch, first, last_sequence_of(header))
                if duplicate is not None:
                    return duplicate
            if producer_id in pending:
                current_epoch, current_last = pending[producer_id]
            elif entry is not None:
                current_epoch, current_last = entry.producer_epoch, entry.last_sequence
            else:
                current_epoch, current_last = NO_PRODUCER_EPOCH, -1
            if current_epoch != NO_PRODUCER_EPOCH and epoch < current_epoch:
                raise _fenced(producer_id, epoch, current_epoch)
            if epoch != current_epoch:
                if first != 0 and current_epoch != NO_PRODUCER_EPOCH:
                    raise ProducerStateError(
                        ErrorCode.out_of_order_sequence_number,
                        f"producer {producer_id} started epoch {epoch} at sequence {first}, not 0",
                    )
            elif current_last >= 0 and not _in_sequence(current_last, first):
                raise ProducerStateError(
                    ErrorCode.out_of_order_sequence_number,
                    f"producer {producer_id} sent sequence {first} after {current_last}",
                )
            pending[producer_id] = (epoch, last_sequence_of(header))
        return None

    def remove_expired(self, now_ms: int, expiration_ms: int) -> int:
        """Forget producers idle for ``expiration_ms`` (by their last batch's timestamp)
        with no open transaction (Kafka's ``removeExpiredProducers``); how many went."""
        open_txns = self.transactions.first_offsets
        expired = [
            producer_id
            for producer_id, entry in self.entries.items()
            if producer_id not in open_txns and now_ms - entry.last_timestamp >= expiration_ms
        ]
        for producer_id in expired:
            del self.entries[producer_id]
        return len(expired)

    def check_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int) -> None:
        """Before a leader appends a transaction marker (Kafka's ``appendEndTxnMarker``):
        INVALID_PRODUCER_EPOCH for an epoch older than the producer's,
        TRANSACTION_COORDINATOR_FENCED for a coordinator older than the last one that
        wrote a marker for it here."""
        entry = self.entries.get(producer_id)
        if entry is None:
            return
        if producer_epoch < entry.producer_epoch:
            raise _fenced(producer_id, producer_epoch, entry.producer_epoch)
        if coordinator_epoch < entry.coordinator_epoch:
            raise ProducerStateError(
                ErrorCode.transaction_coordinator_fenced,
                f"marker for producer {producer_id} from coordinator epoch "
                f"{coordinator_epoch}, older than {entry.coordinator_epoch} (a zombie coordinator)",
            )

    def apply(self, batches: list[LoggedBatch]) -> list[AbortedTxn]:
        """Record batches as they are in the log (base offsets assigned), in order.
        Returns the transactions their abort markers ended (for the ``.txnindex``)."""
        aborted: list[AbortedTxn] = []
        for header, marker in batches:
            next_offset = header.base_offset + header.last_offset_delta + 1
            if next_offset > self.next_offset:
                self.next_offset = next_offset
            producer_id = header.producer_id
            if producer_id == NO_PRODUCER_ID:
                continue
            entry = self.entries.get(producer_id)
            if entry is None:
                entry = ProducerEntry(producer_id, header.producer_epoch)
                self.entries[producer_id] = entry
            elif header.producer_epoch != entry.producer_epoch:
                entry.producer_epoch = header.producer_epoch
                entry.batches.clear()
            entry.last_timestamp = header.max_timestamp
            attributes = header.attributes
            if attributes & CONTROL_FLAG:
                if marker is None:
                    continue  # an emptied control batch (compaction) or not a marker
                entry.coordinator_epoch = marker.coordinator_epoch
                ended = self.transactions.on_marker(
                    producer_id, header.base_offset, aborted=marker.type == ControlRecordType.ABORT
                )
                if ended is not None:
                    aborted.append(ended)
                continue
            if attributes & TRANSACTIONAL_FLAG:
                self.transactions.on_transactional_batch(producer_id, header.base_offset)
            entry.batches.append(
                BatchMetadata(
                    header.base_sequence,
                    last_sequence_of(header),
                    header.base_offset,
                    next_offset - 1,
                    header.max_timestamp,
                )
            )
        return aborted


def _fenced(producer_id: int, epoch: int, current: int) -> ProducerStateError:
    return ProducerStateError(
        ErrorCode.invalid_producer_epoch,
        f"producer {producer_id} epoch {epoch} is older than the current "
        f"epoch {current}; a newer producer with this id fenced it",
    )


def _marker(
    batch: bytes | bytearray | memoryview, header: BatchHeader
) -> EndTransactionMarker | None:
    try:
        return marker_of(batch, header)
    except Exception:  # a control batch that does not parse is not a marker (Kafka skips it)
        return None


def logged_batches(buffer: bytes | bytearray, headers: list[BatchHeader]) -> list[LoggedBatch]:
    """The batches of an appended buffer (offsets as written) with their markers."""
    batches: list[LoggedBatch] = []
    for h in headers:
        header = read_header(buffer, h.position)
        batches.append((header, _marker(buffer, header) if header.is_control else None))
    return batches


def read_batch_headers(log: ProducerStateLog, start: int, end: int) -> list[LoggedBatch]:
    """Headers of the batches holding offsets [start, end), read from the segment files
    (61 bytes per batch; record data is read only for control batches, to decode their
    transaction marker)."""
    batches: list[LoggedBatch] = []
    offset = max(start, log.log_start_offset)
    while offset < end:
        found = log.read(offset, 2**31 - 1)
        if found is None:
            break
        position, stop = found.position, found.position + found.size
        last_next = offset
        while position + HEADER_SIZE <= stop:
            raw = os.pread(found.fd, HEADER_SIZE, position)
            if len(raw) < HEADER_SIZE:
                break
            header = read_header(raw, 0)
            if header.base_offset >= end:
                return batches
            if header.next_offset > offset:
                marker = None
                if header.is_control:
                    whole = os.pread(found.fd, header.size, position)
                    if len(whole) == header.size:
                        marker = _marker(whole, read_header(whole, 0))
                batches.append((header, marker))
            last_next = header.next_offset
            position += header.size
        if last_next <= offset:
            break
        offset = last_next
    return batches


SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1
_SNAPSHOT_HEAD = struct.Struct(">hIi")  # version, crc (over what follows it), entry count
_SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")
_CRC_END = 6  # the CRC covers the bytes from here on


# Distinguishes the temporary files of writes of the same offset's snapshot (a cancelled
# one may still be writing when the next starts).
_WRITE_SERIALS = itertools.count(1)


class CorruptSnapshot(ValueError):
    """A ``.snapshot`` that does not parse or whose CRC does not match."""


def snapshot_path(directory: Path, offset: int) -> Path:
    return directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"


def snapshot_offsets(directory: Path) -> list[int]:
    """Offsets of the snapshot files in ``directory``, oldest first."""
    offsets = []
    for entry in os.scandir(directory):
        name = entry.name
        if name.endswith(SNAPSHOT_SUFFIX) and name[:20].isdigit() and len(name) == 29:
            offsets.append(int(name[:20]))
    return sorted(offsets)


def encode_snapshot(state: ProducerState) -> bytes:
    """Kafka's ``ProducerSnapshot`` v1: each producer's epoch, last batch (sequence,
    offset, offset delta, timestamp), coordinator epoch and open transaction's first
    offset (-1: none)."""
    open_txns = state.transactions.first_offsets
    body = bytearray()
    for producer_id, entry in state.entries.items():
        if entry.batches:
            last = entry.batches[-1]
            fields = (
                last.last_sequence,
                last.last_offset,
                last.last_offset - last.first_offset,
                entry.last_timestamp,
            )
        else:
            fields = (-1, -1, 0, entry.last_timestamp)
        body += _SNAPSHOT_ENTRY.pack(
            producer_id,
            entry.producer_epoch,
            *fields,
            entry.coordinator_epoch,
            open_txns.get(producer_id, -1),
        )
    count = struct.pack(">i", len(state.entries))
    crc = crc32c(count + body)
    return struct.pack(">hI", SNAPSHOT_VERSION, crc) + count + bytes(body)


def decode_snapshot(data: bytes, next_offset: int) -> ProducerState:
    """The state a snapshot at ``next_offset`` holds; ``CorruptSnapshot`` if it is not one."""
    if len(data) < _SNAPSHOT_HEAD.size:
        raise CorruptSnapshot(f"{len(data)} bytes is shorter than a snapshot header")
    version, crc, count = _SNAPSHOT_HEAD.unpack_from(data)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshot(f"snapshot version {version}")
    if crc32c(data[_CRC_END:]) != crc:
        raise CorruptSnapshot("snapshot CRC mismatch")
    if count < 0 or len(data) != _SNAPSHOT_HEAD.size + count * _SNAPSHOT_ENTRY.size:
        raise CorruptSnapshot(f"{len(data)} bytes for {count} entries")
    state = ProducerState(next_offset)
    for i in range(count):
        (
            producer_id,
            epoch,
            last_sequence,
            last_offset,
            offset_delta,
            timestamp,
            coordinator_epoch,
            txn_first_offset,
        ) = _SNAPSHOT_ENTRY.unpack_from(data, _SNAPSHOT_HEAD.size + i * _SNAPSHOT_ENTRY.size)
        entry = ProducerEntry(
            producer_id, epoch, coordinator_epoch=coordinator_epoch, last_timestamp=timestamp
        )
        if last_offset >= 0:
            first_sequence = last_sequence - offset_delta
            if first_sequence < 0:  # Kafka's decrementSequence: sequences wrap
                first_sequence += _INT32_MAX + 1
            entry.batches.append(
                BatchMetadata(
                    first_sequence,
                    last_sequence,
                    last_offset - offset_delta,
                    last_offset,
                    timestamp,
                )
            )
        state.entries[producer_id] = entry
        if txn_first_offset >= 0:
            state.transactions.first_offsets[producer_id] = txn_first_offset
    return state


class SnapshotWrite:
    """One snapshot's file work, on any thread: write ``<offset>.snapshot.<n>.tmp``,
    fsync, rename it to ``<offset>.snapshot`` unless cancelled meanwhile, then drop the
    snapshots below the log start as it was when the snapshot was taken."""

    def __init__(self, directory: Path, offset: int, data: bytes, log_start_offset: int) -> None:
        self.directory = directory
        self.offset = offset
        self._data = data
        self._log_start_offset = log_start_offset
        self._lock = threading.Lock()
        self._cancelled = False
        self.done = threading.Event()

    def cancel(self) -> None:
        """No rename after this returns (one under way is finished first)."""
        with self._lock:
            self._cancelled = True

    def run(self) -> None:
        try:
            if not self._cancelled:
                self._write()
        except OSError:
            if not self._cancelled:  # else its directory went with the partition
                raise
        finally:
            self.done.set()

    def _write(self) -> None:
        path = snapshot_path(self.directory, self.offset)
        temporary = path.with_name(f"{path.name}.{next(_WRITE_SERIALS)}.tmp")
        with open(temporary, "wb") as file:
            file.write(self._data)
            file.flush()
            os.fsync(file.fileno())
        with self._lock:
            if self._cancelled:
                temporary.unlink(missing_ok=True)
                return
            os.replace(temporary, path)
        for offset in snapshot_offsets(self.directory):
            if offset < self._log_start_offset:
                snapshot_path(self.directory, offset).unlink(missing_ok=True)


class ProducerStateManager:
    """The producer state of one partition log (Kafka's ``ProducerStateManager``),
    rebuilt lazily from the log: plain producers pay nothing until an idempotent one
    appears."""

    def __init__(self, log: ProducerStateLog) -> None:
        self._log = log
        self._state: ProducerState | None = None
        self._writes: list[SnapshotWrite] = []  # taken, maybe not written yet

    # -- snapshots ---------------------------------------------------------------------

    def load_snapshot(self, max_offset: int) -> bool:
        """At open: delete snapshots past the log end and start from the newest one at
        or below ``max_offset`` (the log end after a clean shutdown, else the recovery
        point, so that the batches recovery checked are scanned again and their
        aborted transactions indexed); the batches after it are scanned on first use.
        False when there is none."""
        log = self._log
        skipped = False
        for offset in reversed(snapshot_offsets(log.directory)):
            path = snapshot_path(log.directory, offset)
            if offset > log.log_end_offset:
                path.unlink(missing_ok=True)  # recovery cut the log below it
                continue
            if offset > max_offset:
                skipped = True
                continue
            state = self._read_snapshot(path, offset)
            if state is not None:
                state.truncations = log.truncations
                self._state = state
                return True
        if skipped:
            # Producers wrote here, but only past the recovery point is there a
            # snapshot: scan from the log start on first use rather than from it.
            self._state = ProducerState(log.log_start_offset, log.truncations)
        return False

    def _read_snapshot(self, path: Path, offset: int) -> ProducerState | None:
        try:
            return decode_snapshot(path.read_bytes(), offset)
        except (OSError, CorruptSnapshot) as error:
            log.warning("ignoring producer state snapshot %s: %s", path, error)
            path.unlink(missing_ok=True)
            return None

    def take_snapshot(self) -> None:
        """Write ``<log end>.snapshot`` (fsynced) here and now, after the writes under
        way, when the state exists; drop snapshots below the log start (Kafka's
        snapshot at clean shutdown)."""
        self.wait_for_snapshot_writes()
        write = self.snapshot_write()
        if write is not None:
            write.run()

    def snapshot_write(self) -> SnapshotWrite | None:
        """The snapshot of the state at the log end, taken and encoded now, for
        ``SnapshotWrite.run`` on any thread (the log's snapshot at a roll); None
        without state. It stays known here until written, so that a truncation can
        cancel it."""
        if self._state is None:
            return None
        log = self._log
        state = self.state()
        write = SnapshotWrite(
            log.directory, log.log_end_offset, encode_snapshot(state), log.log_start_offset
        )
        self._writes = [w for w in self._writes if not w.done.is_set()]
        self._writes.append(write)
        return write

    def wait_for_snapshot_writes(self) -> None:
        for write in self._writes:
            write.done.wait()
        self._writes = []

    def cancel_snapshot_writes(self, after: int = -1) -> None:
        """Writes of snapshots past ``after`` not renamed into place yet never are."""
        for write in self._writes:
            if write.offset > after:
                write.cancel()

    def delete_snapshots_at(self, offsets: Iterable[int]) -> None:
        """Segments starting at ``offsets`` went without a successor starting there (the
        cleaner merged them into an earlier one): their roll snapshots go with them, as
        Kafka's ``replaceSegments`` removes them, or a compacted log that rolls often
        (``__consumer_offsets``) would keep a file for every roll it ever made."""
        for offset in offsets:
            snapshot_path(self._log.directory, offset).unlink(missing_ok=True)

    def delete_snapshots_after(self, offset: int) -> None:
        """A truncation to ``offset``: snapshots past it describe batches that are gone
        (those still being written first stop short of their rename)."""
        self.cancel_snapshot_writes(offset)
        for found in snapshot_offsets(self._log.directory):
            if found > offset:
                snapshot_path(self._log.directory, found).unlink(missing_ok=True)

    def _rebuild_start(self) -> ProducerState:
        """After a truncation: the newest snapshot at or below the log end, else empty
        state at the log start (Kafka's ``truncateAndReload``)."""
        log = self._log
        for offset in reversed(snapshot_offsets(log.directory)):
            if offset <= log.log_end_offset:
                state = self._read_snapshot(snapshot_path(log.directory, offset), offset)
                if state is not None:
                    state.truncations = log.truncations
                    return state
        return ProducerState(log.log_start_offset, log.truncations)

    @property
    def built(self) -> bool:
        """Whether the state exists (it is built on the first idempotent or
        transactional write, or the first read that needs the last stable offset)."""
        return self._state is not None

    def state(self) -> ProducerState:
        """The state current to the log's end: scans what it has not seen yet and
        starts over from the log when the log was truncated since it was built."""
        log = self._log
        state = self._state
        if (
            state is None
            or state.truncations != log.truncations
            or log.log_end_offset < state.next_offset
        ):
            state = self._state = self._rebuild_start()
        if state.next_offset < log.log_end_offset:
            self._index(state.apply(read_batch_headers(log, state.next_offset, log.log_end_offset)))
            state.next_offset = log.log_end_offset
        return state

    def _index(self, aborted: list[AbortedTxn]) -> None:
        for entry in aborted:
            self._log.index_aborted_transaction(entry)

    def check(
        self, headers: list[BatchHeader], *, from_client: bool = True
    ) -> BatchMetadata | None:
        """Before a leader's append: the batch it duplicates, or None to append it;
        ProducerStateError when Kafka would refuse it."""
        if self._state is None and not any(_is_idempotent(h) for h in headers):
            return None  # plain producers pay nothing until an idempotent one appears
        return self.state().check(headers, from_client=from_client)

    def check_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int) -> None:
        self.state().check_marker(producer_id, producer_epoch, coordinator_epoch)

    def remove_expired_producers(self, now_ms: int, expiration_ms: int) -> int:
        """``producer.id.expiration.ms``: drop idle producers (only once state exists)."""
        if self._state is None:
            return 0
        return self.state().remove_expired(now_ms, expiration_ms)

    def epoch_bumps(self, headers: list[BatchHeader]) -> list[tuple[int, int, int]]:
        """(producer id, current epoch, new epoch) for each batch about to be appended
        that starts a newer epoch of a producer the partition knows. An idempotent
        librdkafka producer bumps its epoch itself (KIP-360) after a message timed out or
        its sequences went out of sync, and sends again, from sequence 0, what was never
        acknowledged: a burst of these explains duplicates the broker cannot detect."""
        state = self._state
        if state is None:
            return []
        bumps = []
        for header in headers:
            if not _is_idempotent(header):
                continue
            entry = state.entries.get(header.producer_id)
            if entry is not None and header.producer_epoch > entry.producer_epoch:
                bumps.append((header.producer_id, entry.producer_epoch, header.producer_epoch))
        return bumps

    def record_append(self, buffer: bytes | bytearray, headers: list[BatchHeader]) -> None:
        """After an append (a leader's, offsets assigned, or a follower's copy): apply
        the batches. The first transactional batch or marker builds the state (a scan of
        the log, these batches included), so every replica indexes its aborted
        transactions as it appends their markers."""
        state = self._state
        if state is None:
            if any(h.is_transactional for h in headers):  # markers are transactional too
                self.state()
            return
        batches = logged_batches(buffer, headers)
        log = self._log
        if (
            state.truncations != log.truncations
            or not batches
            or batches[0][0].base_offset != state.next_offset
        ):
            self.state()  # out of step (a truncation, or appends it did not see): rescan
            return
        self._index(state.apply(batches))
        state.next_offset = max(state.next_offset, log.log_end_offset)

    def last_stable_offset(self, high_watermark: int) -> int:
        """Kafka's LSO: the first offset of the oldest transaction not yet decided and
        replicated, capped by ``high_watermark``. Builds the state if needed."""
        transactions = self.state().transactions
        if not transactions.first_offsets and not transactions.unreplicated:
            return high_watermark  # the fetch path's common case
        return transactions.last_stable_offset(high_watermark)

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        return self.state().transactions.first_unstable_offset(high_watermark)
