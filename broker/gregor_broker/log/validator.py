"""Validation of produced record batches before a leader appends them (Kafka's LogValidator).

The log owns what it stores, so every leader append from a client passes through here
after ``scan_batches`` has checked each batch's header, size and CRC. This module walks
every record of every batch (``record_walk.py``, compiled by ``make native`` where it can
be), inflating compressed batches in bounded chunks (``inflate.py``), and raises
``InvalidBatch`` with the error Kafka answers:

- request shape (Kafka's ``ProduceRequest.validateRecords``, Produce v3+): exactly one
  batch per partition, magic 2, no zstd before Produce v7 -> INVALID_RECORD /
  UNSUPPORTED_COMPRESSION_TYPE;
- batch (``LogValidator.validateBatch`` for client appends): base offset 0, a positive
  record count equal to lastOffsetDelta + 1, no control flag, a producer id only with a
  base sequence -> INVALID_RECORD; a compression codec other than 0-4 ->
  UNSUPPORTED_COMPRESSION_TYPE;
- records (``DefaultRecord.readFrom``): each record's length and varints inside its batch,
  offset deltas 0, 1, 2, ..., as many records as the header says and no bytes after them
  -> INVALID_RECORD; a compressed payload its codec cannot read -> CORRUPT_MESSAGE; more
  inflated bytes than the request's ``produce.decompressed.max.bytes`` -> MESSAGE_TOO_LARGE;
- compacted topics: a record without a key is a record error; the whole batch fails with
  INVALID_RECORD and KIP-467 ``record_errors`` (batch index and message per bad record).

The follower path does not come here: a follower stores what its leader validated.
Nothing here changes the batch or does I/O (but reading ``record_walk.py`` once at import,
to match the compiled walk against it).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from types import ModuleType

from ..protocol.record_batch import (
    ATTRIBUTES,
    BATCH_LENGTH,
    COMPRESSION_MASK,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    BatchHeader,
    Compression,
    InvalidBatch,
)
from . import record_walk
from .inflate import CHUNK_BYTES, DecompressionBudget, inflate
from .record_walk import MIN_RECORD_BODY, invalid, varint_tail

__all__ = [
    "DecompressionBudget",
    "RecordValidationError",
    "validate_produce_records",
    "validate_records",
]

# A record longer than this is walked field by field as it streams in instead of being
# gathered whole first, so memory stays bounded whatever a record declares.
_MAX_GATHERED_RECORD = 1024 * 1024
_ZSTD = int(Compression.ZSTD)
_SUPPORTED_CODECS = frozenset(int(c) for c in Compression)


def source_digest(path: str) -> str:
    """SHA-256 of a source file: what ``scripts/build-native`` stamps into the compiled walk."""
    with open(path, "rb") as source:
        return hashlib.sha256(source.read()).hexdigest()


def compiled_walk() -> ModuleType | None:
    """The mypyc build of ``record_walk`` (``make native``) when it was built from the
    ``record_walk.py`` beside it; None otherwise (never built here, or built from an
    older source: the Python walk then runs, never stale code)."""
    try:
        from . import _record_walk_native as native  # type: ignore[attr-defined]
    except ImportError:
        return None
    if getattr(native, "SOURCE_DIGEST", None) != source_digest(record_walk.__file__):
        return None
    return native


_walker: ModuleType = compiled_walk() or record_walk
_walk = _walker.walk
# "mypyc" or "python": which walk this process validates produced records with.
WALK = "mypyc" if _walker is not record_walk else "python"


class RecordValidationError(InvalidBatch):
    """INVALID_RECORD for particular records (Kafka's RecordValidationException): the
    whole batch fails and ``record_errors`` lists (batch index, message) per record."""

    def __init__(self, record_errors: list[tuple[int, str]]) -> None:
        shown = ", ".join(
            f"RecordError(batchIndex={index}, message='{message}')"
            for index, message in record_errors[:3]
        )
        super().__init__(
            "INVALID_RECORD",
            f"One or more records have been rejected due to {len(record_errors)} record "
            f"errors in total, and only showing the first three errors at most: [{shown}]",
        )
        self.record_errors = record_errors


def validate_produce_records(api_version: int, records: bytes | None) -> None:
    """Kafka's ``ProduceRequest.validateRecords``: what a Produce v3+ partition may carry,
    checked on the raw bytes before any batch is parsed."""
    if api_version < 3:
        return
    if not records or len(records) < LOG_OVERHEAD:
        raise invalid(
            f"Produce requests with version {api_version} must have at least one record "
            "batch per partition"
        )
    if len(records) > MAGIC and records[MAGIC] != 2:
        raise invalid(
            f"Produce requests with version {api_version} are only allowed to contain "
            "record batches with magic version 2"
        )
    if (
        api_version < 7
        and len(records) > ATTRIBUTES + 1
        and records[ATTRIBUTES + 1] & COMPRESSION_MASK == _ZSTD
    ):
        raise InvalidBatch(
            "UNSUPPORTED_COMPRESSION_TYPE",
            f"Produce requests with version {api_version} are not allowed to use ZStandard "
            "compression",
        )
    batch_length = int.from_bytes(records[BATCH_LENGTH : BATCH_LENGTH + 4], "big", signed=True)
    if batch_length >= 0 and LOG_OVERHEAD + batch_length < len(records):
        raise invalid(
            f"Produce requests with version {api_version} are only allowed to contain "
            "exactly one record batch per partition"
        )


def validate_records(
    buffer: bytes | bytearray,
    headers: list[BatchHeader],
    *,
    budget: DecompressionBudget,
    compacted: bool = False,
    topic_partition: str = "",
    from_client: bool = True,
) -> None:
    """Validate every batch in ``buffer`` (headers from ``scan_batches``) for a leader append.

    ``from_client`` applies Kafka's checks for client appends (the broker's own
    coordinators write batches that need no such checks but are walked all the same).
    """
    # The compiled walk reads ``bytes`` only (a leader's append buffer is a bytearray);
    # one copy of the request's records against a loop over every record.
    data = buffer if type(buffer) is bytes else bytes(buffer)
    for header in headers:
        if from_client:
            _validate_client_batch(header, topic_partition)
        codec = header.attributes & COMPRESSION_MASK
        if codec not in _SUPPORTED_CODECS:
            raise InvalidBatch(
                "UNSUPPORTED_COMPRESSION_TYPE",
                f"record batch uses unknown compression codec {codec} in {topic_partition}",
            )
        start = header.position + HEADER_SIZE
        end = header.position + header.size
        count = header.records_count
        if count <= 0:
            if count < 0:
                raise invalid(f"Found invalid record count {count} in {topic_partition}")
            continue  # an empty batch (only compaction writes one) has nothing to walk
        missing_keys: list[int] | None = [] if compacted else None
        if codec == 0:
            position, walked = _walk(data, start, end, 0, count, missing_keys, final=True)
            if walked < count:
                raise invalid("Incorrect declared batch size, premature EOF reached")
            if position != end:
                raise invalid("Incorrect declared batch size, records still remaining in file")
        else:
            chunks = inflate(Compression(codec), data[start:end], budget)
            _walk_stream(chunks, count, missing_keys)
        if missing_keys:
            message = (
                "Compacted topic cannot accept message without key in topic partition "
                f"{topic_partition}."
            )
            raise RecordValidationError([(index, message) for index in missing_keys])


def _validate_client_batch(header: BatchHeader, topic_partition: str) -> None:
    """Kafka's ``LogValidator.validateBatch`` and ``analyzeAndValidateRecords`` for a client."""
    if header.base_offset != 0:
        raise invalid(
            f"The baseOffset of the record batch in the append to {topic_partition} should "
            f"be 0, but it is {header.base_offset}"
        )
    count = header.records_count
    if header.last_offset_delta < 0:
        raise invalid(
            f"Batch has an invalid offset range: [0, {header.last_offset_delta}] in topic "
            f"partition {topic_partition}"
        )
    if count <= 0:
        raise invalid(
            f"Invalid reported count for record batch: {count} in topic partition {topic_partition}"
        )
    if header.last_offset_delta + 1 != count:
        raise invalid(
            f"Inconsistent batch offset range [0, {header.last_offset_delta}] and count of "
            f"records {count} in topic partition {topic_partition}"
        )
    if header.is_control:
        raise invalid(
            f"Clients are not allowed to write control records in topic partition {topic_partition}"
        )
    if header.producer_id >= 0 and header.base_sequence < 0:
        raise invalid(
            f"Invalid sequence number {header.base_sequence} in record batch with producerId "
            f"{header.producer_id} in topic partition {topic_partition}"
        )


class _Stream:
    """Inflated bytes arriving in chunks, consumed from the front (for big records)."""

    __slots__ = ("base", "chunks", "data", "position")

    def __init__(self, chunks: Iterator[bytes], data: bytes, position: int) -> None:
        self.chunks = chunks
        self.data = data
        self.position = position
        self.base = 0  # stream bytes dropped before data[0]

    @property
    def consumed(self) -> int:
        return self.base + self.position

    def fill(self, wanted: int) -> None:
        """Make ``wanted`` bytes available from ``position`` (fewer only at the end)."""
        while len(self.data) - self.position < wanted:
            chunk = next(self.chunks, None)
            if chunk is None:
                return
            self.base += self.position
            self.data = self.data[self.position :] + chunk
            self.position = 0

    def varint(self, max_bytes: int) -> int:
        self.fill(max_bytes)
        data = self.data
        byte = data[self.position]  # IndexError at the end of the stream
        self.position += 1
        if byte & 0x80:
            byte, self.position = varint_tail(data, self.position, byte, max_bytes)
        return (byte >> 1) ^ -(byte & 1)

    def skip(self, size: int) -> None:
        while True:
            available = len(self.data) - self.position
            if size <= available:
                self.position += size
                return
            size -= available
            chunk = next(self.chunks, None)
            if chunk is None:
                raise invalid("Incorrect declared batch size, premature EOF reached")
            self.base += len(self.data)
            self.data = chunk
            self.position = 0


def _walk_stream(chunks: Iterator[bytes], count: int, missing_keys: list[int] | None) -> None:
    """Walk ``count`` records from inflated chunks, holding only about a chunk at a time."""
    data = b""
    position = 0
    index = 0
    exhausted = False
    while index < count:
        while not exhausted and len(data) - position < CHUNK_BYTES:
            chunk = next(chunks, None)
            if chunk is None:
                exhausted = True
            else:
                data = data[position:] + chunk
                position = 0
        position, index = _walk(
            data, position, len(data), index, count, missing_keys, final=exhausted
        )
        if index >= count:
            break
        if exhausted:
            raise invalid("Incorrect declared batch size, premature EOF reached")
        # A record longer than what is buffered: gather it while it is small, else walk
        # it field by field as it streams so a huge record never sits in memory.
        if len(data) - position >= _MAX_GATHERED_RECORD:
            stream = _Stream(chunks, data, position)
            _walk_big_record(stream, index, missing_keys)
            data, position = stream.data, stream.position
            index += 1
        else:
            chunk = next(chunks, None)
            if chunk is None:
                exhausted = True
            else:
                data = data[position:] + chunk
                position = 0
    # Matches Kafka's ensureNoneRemaining, over every frame: nothing after the records.
    if len(data) > position or any(chunks):
        raise invalid("Incorrect declared batch size, records still remaining in file")


def _walk_big_record(stream: _Stream, index: int, missing_keys: list[int] | None) -> None:
    try:
        length = stream.varint(5)
        if length < MIN_RECORD_BODY:
            raise invalid(f"Found invalid record size {length} in record {index}")
        consumed_before = stream.consumed
        stream.skip(1)  # attributes
        stream.varint(10)  # timestamp delta
        offset_delta = stream.varint(5)
        if offset_delta != index:
            raise invalid(f"record {index} has offset delta {offset_delta}, not {index}")
        key_size = stream.varint(5)
        if key_size >= 0:
            stream.skip(key_size)
        elif key_size == -1:
            if missing_keys is not None:
                missing_keys.append(index)
        else:
            raise invalid(f"Found invalid key size {key_size} in record {index}")
        value_size = stream.varint(5)
        if value_size >= 0:
            stream.skip(value_size)
        elif value_size != -1:
            raise invalid(f"Found invalid value size {value_size} in record {index}")
        header_count = stream.varint(5)
        if header_count < 0 or header_count > length:
            raise invalid(f"Found invalid number of record headers {header_count}")
        for _ in range(header_count):
            key_size = stream.varint(5)
            if key_size < 0:
                raise invalid(f"Invalid header size {key_size} in record {index}")
            stream.skip(key_size)
            value_size = stream.varint(5)
            if value_size >= 0:
                stream.skip(value_size)
            elif value_size != -1:
                raise invalid(f"Invalid header size {value_size} in record {index}")
            if stream.consumed - consumed_before > length:
                break
        if stream.consumed - consumed_before != length:
            raise invalid(f"Invalid record size: expected {length} bytes in record {index}")
    except IndexError:
        raise invalid(f"Found invalid record structure in record {index}") from None
