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
(copying batches with ``assign_offsets=False``) update it the same way. Nothing is
persisted: after a restart ``state_for`` rebuilds the state by reading only the 61-byte
batch headers from the log start (Kafka also keeps ``.snapshot`` files to skip that scan;
Gregor does not write them yet). ``state_for`` also catches up with appends it was not
told about (a follower's copies).

Truncation. Matches Kafka's ``UnifiedLog.truncateTo``, which reloads producer state
after every truncation: when ``PartitionLog.truncations`` moved since the state was
built, the state is rebuilt from the remaining log. Comparing log end offsets is not
enough: a follower may truncate a batch and then copy other producers' batches past
where it was, and a retry of the truncated batch must then be appended again, not
answered as a duplicate at offsets that now hold someone else's records. Moving the log
start (retention, DeleteRecords) keeps the entries, as Kafka does since KIP-360.

Not handled here: transactions (control batches are skipped) and the expiry of idle
producer ids (``producer.id.expiration.ms``); entries live as long as the broker runs.
"""

from __future__ import annotations

import os
import weakref
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from ..protocol.record_batch import HEADER_SIZE, BatchHeader, read_header

if TYPE_CHECKING:
    from .partition_log import PartitionLog

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


class ProducerState:
    """The producer entries of one partition and the log offset they are current to."""

    def __init__(self, next_offset: int = 0, truncations: int = 0) -> None:
        self.entries: dict[int, ProducerEntry] = {}
        # Batches below this offset have been applied.
        self.next_offset = next_offset
        # The log's truncation count this state was built at (``PartitionLog.truncations``).
        self.truncations = truncations

    def check(self, headers: list[BatchHeader]) -> BatchMetadata | None:
        """Validate batches about to be appended (offsets not assigned yet).

        Returns the original batch when the request is a retry of one already in the
        log (then nothing must be appended); raises ``ProducerStateError`` when Kafka
        would refuse the batch.
        """
        # Earlier batches of the same request count for the later ones.
        pending: dict[int, tuple[int, int]] = {}  # producer id -> (epoch, last sequence)
        for header in headers:
            if not _is_idempotent(header):
                continue
            producer_id = header.producer_id
            epoch = header.producer_epoch
            first = header.base_sequence
            entry = self.entries.get(producer_id)
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
                raise ProducerStateError(
                    ErrorCode.invalid_producer_epoch,
                    f"producer {producer_id} epoch {epoch} is older than the current "
                    f"epoch {current_epoch}; a newer producer with this id fenced it",
                )
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

    def apply(self, headers: list[BatchHeader]) -> None:
        """Record batches as they are in the log (base offsets assigned), in order."""
        for header in headers:
            if header.next_offset > self.next_offset:
                self.next_offset = header.next_offset
            if not _is_idempotent(header):
                continue
            entry = self.entries.get(header.producer_id)
            if entry is None:
                entry = ProducerEntry(header.producer_id, header.producer_epoch)
                self.entries[header.producer_id] = entry
            elif header.producer_epoch != entry.producer_epoch:
                entry.producer_epoch = header.producer_epoch
                entry.batches.clear()
            entry.batches.append(
                BatchMetadata(
                    header.base_sequence,
                    last_sequence_of(header),
                    header.base_offset,
                    header.last_offset,
                    header.max_timestamp,
                )
            )


def read_batch_headers(log: PartitionLog, start: int, end: int) -> list[BatchHeader]:
    """Headers of the batches holding offsets [start, end), read from the segment files
    (61 bytes per batch; record data is never read)."""
    headers: list[BatchHeader] = []
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
                return headers
            if header.next_offset > offset:
                headers.append(header)
            last_next = header.next_offset
            position += header.size
        if last_next <= offset:
            break
        offset = last_next
    return headers


class ProducerStates:
    """Producer state of every local partition log, rebuilt lazily from the log."""

    def __init__(self) -> None:
        self._states: weakref.WeakKeyDictionary[PartitionLog, ProducerState] = (
            weakref.WeakKeyDictionary()
        )

    def state_for(self, log: PartitionLog) -> ProducerState:
        """The state current to ``log``'s end: scans what it has not seen yet and
        starts over from the log when the log was truncated since it was built."""
        state = self._states.get(log)
        if (
            state is None
            or state.truncations != log.truncations
            or log.log_end_offset < state.next_offset
        ):
            state = ProducerState(log.log_start_offset, log.truncations)
            self._states[log] = state
        if state.next_offset < log.log_end_offset:
            state.apply(read_batch_headers(log, state.next_offset, log.log_end_offset))
            state.next_offset = log.log_end_offset
        return state

    def check(self, log: PartitionLog, headers: list[BatchHeader]) -> BatchMetadata | None:
        if not any(_is_idempotent(h) for h in headers) and log not in self._states:
            return None  # plain producers pay nothing until an idempotent one appears
        return self.state_for(log).check(headers)

    def epoch_bumps(
        self, log: PartitionLog, headers: list[BatchHeader]
    ) -> list[tuple[int, int, int]]:
        """(producer id, current epoch, new epoch) for each batch about to be appended
        that starts a newer epoch of a producer the partition knows. An idempotent
        librdkafka producer bumps its epoch itself (KIP-360) after a message timed out or
        its sequences went out of sync, and sends again, from sequence 0, what was never
        acknowledged: a burst of these explains duplicates the broker cannot detect."""
        state = self._states.get(log)
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

    def record_append(self, log: PartitionLog, buffer: bytes | bytearray, headers: list) -> None:
        """After an append: apply the batches with the offsets the log gave them."""
        state = self._states.get(log)
        if state is None:
            return
        state.apply([read_header(buffer, h.position) for h in headers])
