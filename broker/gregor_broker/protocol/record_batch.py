"""Kafka record batch v2 ("magic 2") headers: scanning, validation, offset assignment.

This module owns the 61-byte batch header only. The produce and fetch paths work on
whole batches, as Kafka's broker does: records inside a batch stay as the producer
sent them (compressed or not). Per-record decoding lives in ``records.py`` and is used
only where Kafka also looks inside (compacted topics, tests, tools).

No I/O here: everything takes and returns bytes-like objects.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

from crc32c import crc32c

# Offsets of fields inside a batch (Kafka's DefaultRecordBatch).
BASE_OFFSET = 0
BATCH_LENGTH = 8
PARTITION_LEADER_EPOCH = 12
MAGIC = 16
CRC = 17
ATTRIBUTES = 21
LAST_OFFSET_DELTA = 23
BASE_TIMESTAMP = 27
MAX_TIMESTAMP = 35
PRODUCER_ID = 43
PRODUCER_EPOCH = 51
BASE_SEQUENCE = 53
RECORDS_COUNT = 57
HEADER_SIZE = 61
# baseOffset + batchLength: the bytes not counted by batchLength.
LOG_OVERHEAD = 12

_HEADER = struct.Struct(">qiibIhiqqqhii")
_OFFSET_AND_LENGTH = struct.Struct(">qi")
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_INT16 = struct.Struct(">h")

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_LOG_APPEND_TIME = 0x08
TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20


class Compression(IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class InvalidBatch(ValueError):
    """A batch that Kafka would reject; ``error`` names the Kafka error to return."""

    def __init__(self, error: str, message: str) -> None:
        super().__init__(message)
        self.error = error


@dataclass(slots=True)  # not frozen: a frozen __init__ costs ~10x (hot path)
class BatchHeader:
    """The header of one record batch, and where the batch sits in its buffer."""

    position: int
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies, header included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> Compression:
        return Compression(self.attributes & COMPRESSION_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG)

    @property
    def uses_log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_LOG_APPEND_TIME)


def read_header(buffer: bytes | bytearray | memoryview, position: int = 0) -> BatchHeader:
    """Parse the batch header at ``position``; the caller checks there are 61 bytes."""
    return BatchHeader(position, *_HEADER.unpack_from(buffer, position))


def peek_offset_and_length(
    buffer: bytes | bytearray | memoryview, position: int
) -> tuple[int, int]:
    """Base offset and batch length at ``position`` (12 bytes needed)."""
    return _OFFSET_AND_LENGTH.unpack_from(buffer, position)


def first_batch_is_transactional(records: bytes | None) -> bool:
    """Whether the first batch of a record set has the transactional flag (raw bytes,
    nothing validated yet: a record set too short to say is not transactional)."""
    return (
        records is not None
        and len(records) > ATTRIBUTES + 1
        and bool(records[ATTRIBUTES + 1] & TRANSACTIONAL_FLAG)
    )


def compute_crc(buffer: bytes | bytearray | memoryview, header: BatchHeader) -> int:
    """CRC-32C over attributes..end of batch, as the v2 format defines it."""
    start = header.position + ATTRIBUTES
    end = header.position + header.size
    return crc32c(memoryview(buffer)[start:end])


def scan_batches(
    buffer: bytes | bytearray | memoryview,
    *,
    verify_crc: bool = True,
    max_batch_size: int | None = None,
    dense: bool = True,
) -> list[BatchHeader]:
    """Split a produce request's record set into batch headers, validating each.

    Raises ``InvalidBatch`` with the Kafka error a broker returns: ``CORRUPT_MESSAGE``
    for a truncated or inconsistent batch or a bad CRC, ``UNSUPPORTED_FOR_MESSAGE_FORMAT``
    for a magic other than 2, ``MESSAGE_TOO_LARGE`` over ``max_batch_size``
    (Kafka's ``max.message.bytes`` limits the batch, not the record).
    With ``dense`` (the produce path), a batch whose last offset delta is not its record
    count minus one is ``INVALID_RECORD``: producers write dense batches. Batches already
    in a log (recovery, replication, the coordinator's loader) may have holes: the
    cleaner keeps a batch's offsets when it drops some of its records.
    """
    total = len(buffer)
    if total == 0:
        raise InvalidBatch("CORRUPT_MESSAGE", "empty record set")
    headers: list[BatchHeader] = []
    position = 0
    while position < total:
        if total - position < HEADER_SIZE:
            raise InvalidBatch("CORRUPT_MESSAGE", "record set ends inside a batch header")
        header = read_header(buffer, position)
        if header.magic != 2:
            raise InvalidBatch(
                "UNSUPPORTED_FOR_MESSAGE_FORMAT", f"record batch magic {header.magic} is not 2"
            )
        if header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
            raise InvalidBatch("CORRUPT_MESSAGE", f"batch length {header.batch_length} too small")
        if position + header.size > total:
            raise InvalidBatch("CORRUPT_MESSAGE", "record set ends inside a batch")
        if max_batch_size is not None and header.size > max_batch_size:
            raise InvalidBatch(
                "MESSAGE_TOO_LARGE",
                f"batch of {header.size} bytes exceeds max.message.bytes={max_batch_size}",
            )
        if header.records_count < 0 or header.last_offset_delta < 0:
            raise InvalidBatch("CORRUPT_MESSAGE", "negative record count or offset delta")
        if (
            dense
            and header.records_count > 0
            and header.last_offset_delta != header.records_count - 1
            and not header.is_control
        ):
            # Producers always write dense batches; only compaction leaves holes.
            raise InvalidBatch(
                "INVALID_RECORD",
                f"lastOffsetDelta {header.last_offset_delta} does not match "
                f"{header.records_count} records",
            )
        if verify_crc and compute_crc(buffer, header) != header.crc:
            raise InvalidBatch("CORRUPT_MESSAGE", "record batch CRC-32C mismatch")
        headers.append(header)
        position += header.size
    return headers


def assign_offsets(buffer: bytearray, headers: list[BatchHeader], first_offset: int) -> int:
    """Rewrite each batch's base offset in place, from ``first_offset``; return the next offset.

    The base offset is outside the CRC, so no checksum changes.
    """
    next_offset = first_offset
    for header in headers:
        _INT64.pack_into(buffer, header.position + BASE_OFFSET, next_offset)
        next_offset += header.last_offset_delta + 1
    return next_offset


def set_partition_leader_epoch(buffer: bytearray, headers: list[BatchHeader], epoch: int) -> None:
    """Stamp the leader epoch in place; like the base offset it is outside the CRC."""
    for header in headers:
        _INT32.pack_into(buffer, header.position + PARTITION_LEADER_EPOCH, epoch)


def set_log_append_time(buffer: bytearray, headers: list[BatchHeader], now_ms: int) -> None:
    """Apply ``message.timestamp.type=LogAppendTime``: set maxTimestamp and the
    timestamp-type bit, then recompute the CRC (both fields are inside it)."""
    for header in headers:
        position = header.position
        attributes = header.attributes | TIMESTAMP_TYPE_LOG_APPEND_TIME
        _INT16.pack_into(buffer, position + ATTRIBUTES, attributes)
        _INT64.pack_into(buffer, position + MAX_TIMESTAMP, now_ms)
        crc = crc32c(memoryview(buffer)[position + ATTRIBUTES : position + header.size])
        _UINT32.pack_into(buffer, position + CRC, crc)


def build_batch(
    records: list[bytes],
    *,
    base_offset: int = 0,
    base_timestamp: int = 0,
    max_timestamp: int | None = None,
    attributes: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    partition_leader_epoch: int = -1,
    records_payload: bytes | None = None,
    last_offset_delta: int | None = None,
) -> bytes:
    """Assemble a v2 batch around already-encoded records (or a compressed payload).

    Used by the log cleaner (which passes the original ``last_offset_delta`` so a
    batch keeps its offsets when records are dropped), tests, tools and the benchmark.
    """
    payload = records_payload if records_payload is not None else b"".join(records)
    count = len(records)
    body = (
        struct.pack(
            ">hiqqqhii",
            attributes,
            max(count - 1, 0) if last_offset_delta is None else last_offset_delta,
            base_timestamp,
            base_timestamp if max_timestamp is None else max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            count,
        )
        + payload
    )
    crc = crc32c(body)
    batch_length = 4 + 1 + 4 + len(body)  # leader epoch + magic + crc + body
    return struct.pack(">qiibI", base_offset, batch_length, partition_leader_epoch, 2, crc) + body


# Header fields ``rewrite_header`` may set: offset in the batch and struct format.
_REWRITABLE = {
    "base_offset": (BASE_OFFSET, _INT64),
    "batch_length": (BATCH_LENGTH, _INT32),
    "partition_leader_epoch": (PARTITION_LEADER_EPOCH, _INT32),
    "attributes": (ATTRIBUTES, _INT16),
    "last_offset_delta": (LAST_OFFSET_DELTA, _INT32),
    "producer_id": (PRODUCER_ID, _INT64),
    "producer_epoch": (PRODUCER_EPOCH, _INT16),
    "base_sequence": (BASE_SEQUENCE, _INT32),
    "records_count": (RECORDS_COUNT, _INT32),
}


def rewrite_header(batch: bytes, **fields: int) -> bytes:
    """The batch with header ``fields`` replaced and its CRC-32C made right again.

    For tests and tools that need a batch lying in exactly one field; the broker itself
    never rewrites a header this way.
    """
    out = bytearray(batch)
    for name, value in fields.items():
        position, codec = _REWRITABLE[name]
        codec.pack_into(out, position, value)
    _UINT32.pack_into(out, CRC, crc32c(memoryview(out)[ATTRIBUTES:]))
    return bytes(out)
