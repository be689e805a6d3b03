"""Fetch response encoding with record bytes left out, for ``sendfile(2)``.

The fetch path must not copy record data through Python. This encoder writes every
byte of a Fetch response except the records themselves, and returns the response
as a list of parts: ``bytes`` built here, and the caller's file regions (any object
with a ``size``) in the places where Kafka puts each partition's records. The
connection then writes the bytes and sends the regions with ``sendfile``.

Hand-written rather than built with kio because kio would need the record bytes in
memory. Layouts follow Kafka's FetchResponse.json for versions 4 to 16.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol
from uuid import UUID

from .wire import encode_array_length, encode_string, encode_unsigned_varint

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_PARTITION_HEAD = struct.Struct(">ihqqq")  # index, error, hw, lso, log start
_PARTITION_HEAD_V4 = struct.Struct(">ihqq")  # index, error, hw, lso


class FileRegion(Protocol):
    size: int


@dataclass(slots=True)
class PartitionResult:
    partition_index: int
    error_code: int = 0
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    # Matches Kafka: a partition with an error carries an empty record set
    # (MemoryRecords.EMPTY), never null; librdkafka drops a whole response holding a null
    # one, so an OFFSET_OUT_OF_RANGE never triggers its auto.offset.reset.
    records: bytes | Any | None = b""  # bytes, a FileRegion, or None (null)
    aborted_transactions: list[tuple[int, int]] | None = None
    preferred_read_replica: int = -1
    diverging_epoch: tuple[int, int] | None = None  # (epoch, end_offset)
    current_leader: tuple[int, int] | None = None  # (leader_id, leader_epoch)


# A partition an incremental fetch session need not answer (nothing it would carry
# differs from what the session last sent). Shared: never changed, never encoded (the
# session's ``finish`` drops it).
UNCHANGED_PARTITION = PartitionResult(-1)


@dataclass(slots=True)
class TopicResult:
    name: str
    topic_id: UUID | None
    partitions: list[PartitionResult] = field(default_factory=list)


def records_size(result: PartitionResult) -> int:
    """Bytes of a partition's records (bytes or a file region; 0 for none)."""
    records = result.records
    if records is None:
        return 0
    if isinstance(records, bytes | bytearray):
        return len(records)
    return records.size


@dataclass(slots=True)
class EmptyFetchResponse:
    """A fetch answered with no partitions: a session error, or a client throttled by a
    quota (Kafka's ``FetchContext.getThrottledResponse``: the session is left as it was,
    a session error is kept)."""

    error_code: int = 0
    session_id: int = 0
    throttle_time: int = 0

    @property
    def size(self) -> int:
        """No records: nothing counts against the fetch byte rate."""
        return 0

    def encode_frame(self, version: int, correlation_id: int) -> tuple[list[Any], int]:
        return encode_fetch_response(
            version,
            correlation_id,
            throttle_time_ms=self.throttle_time,
            error_code=self.error_code,
            session_id=self.session_id,
        )

    def throttled(self, throttle_ms: int) -> EmptyFetchResponse:
        return EmptyFetchResponse(self.error_code, self.session_id, throttle_ms)


class _Parts:
    """Accumulates bytes, flushing them into a part when a file region arrives."""

    __slots__ = ("buffer", "parts", "size")

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.parts: list[Any] = []
        self.size = 0

    def region(self, region: Any) -> None:
        if self.buffer:
            self.parts.append(bytes(self.buffer))
            self.size += len(self.buffer)
            self.buffer.clear()
        self.parts.append(region)
        self.size += region.size

    def finish(self) -> tuple[list[Any], int]:
        if self.buffer:
            self.parts.append(bytes(self.buffer))
            self.size += len(self.buffer)
        return self.parts, self.size


def _tagged(tags: list[tuple[int, bytes]]) -> bytes:
    out = bytearray(encode_unsigned_varint(len(tags)))
    for tag, payload in tags:
        out += encode_unsigned_varint(tag) + encode_unsigned_varint(len(payload)) + payload
    return bytes(out)


def encode_fetch_response(
    version: int,
    correlation_id: int,
    *,
    throttle_time_ms: int = 0,
    error_code: int = 0,
    session_id: int = 0,
    topics: Sequence[TopicResult] = (),
) -> tuple[list[Any], int]:
    """Encode a whole response frame (size prefix and header included).

    Returns ``(parts, total_size)``: parts are ``bytes`` or the records' file regions.
    """
    if not 4 <= version <= 16:
        raise ValueError(f"fetch response v{version} is not supported by this encoder")
    flexible = version >= 12
    out = _Parts()
    buffer = out.buffer
    buffer += b"\x00\x00\x00\x00"  # size, patched below
    buffer += _I32.pack(correlation_id)
    if flexible:
        buffer += b"\x00"
    buffer += _I32.pack(throttle_time_ms)
    if version >= 7:
        buffer += _I16.pack(error_code) + _I32.pack(session_id)
    buffer += encode_array_length(len(topics), flexible)
    for topic in topics:
        buffer = out.buffer
        if version >= 13:
            buffer += (topic.topic_id or UUID(int=0)).bytes
        else:
            buffer += encode_string(topic.name, flexible)
        partitions = topic.partitions
        buffer += encode_array_length(len(partitions), flexible)
        for partition in partitions:
            buffer = out.buffer
            if version >= 5:
                buffer += _PARTITION_HEAD.pack(
                    partition.partition_index,
                    partition.error_code,
                    partition.high_watermark,
                    partition.last_stable_offset,
                    partition.log_start_offset,
                )
            else:
                buffer += _PARTITION_HEAD_V4.pack(
                    partition.partition_index,
                    partition.error_code,
                    partition.high_watermark,
                    partition.last_stable_offset,
                )
            aborted = partition.aborted_transactions
            if aborted is None:
                buffer += b"\x00" if flexible else b"\xff\xff\xff\xff"
            else:
                buffer += encode_array_length(len(aborted), flexible)
                for producer_id, first_offset in aborted:
                    buffer += struct.pack(">qq", producer_id, first_offset)
                    if flexible:
                        buffer += b"\x00"
            if version >= 11:
                buffer += _I32.pack(partition.preferred_read_replica)
            records = partition.records
            if records is None:
                buffer += b"\x00" if flexible else b"\xff\xff\xff\xff"
            else:
                size = len(records) if isinstance(records, bytes | bytearray) else records.size
                buffer += encode_unsigned_varint(size + 1) if flexible else _I32.pack(size)
                if isinstance(records, bytes | bytearray):
                    buffer += records
                else:
                    out.region(records)
                    buffer = out.buffer
            if flexible:
                tags = []
                if partition.diverging_epoch is not None:
                    epoch, end_offset = partition.diverging_epoch
                    tags.append((0, struct.pack(">iq", epoch, end_offset) + b"\x00"))
                if partition.current_leader is not None:
                    leader_id, leader_epoch = partition.current_leader
                    tags.append((1, struct.pack(">ii", leader_id, leader_epoch) + b"\x00"))
                buffer += _tagged(tags)
        if flexible:
            out.buffer += b"\x00"
    if flexible:
        out.buffer += b"\x00"
    parts, total = out.finish()
    first = bytearray(parts[0])
    _I32.pack_into(first, 0, total - 4)
    parts[0] = bytes(first)
    return parts, total
