"""Records inside a v2 batch: varint coding, (de)compression, encode and decode.

The broker does not touch records on its hot paths. This module serves the places
where Kafka also looks inside a batch (a compacted topic rejects null keys) and the
tests and tools that need to build or read batches without a client library.
"""

from __future__ import annotations

import gzip
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

from .record_batch import HEADER_SIZE, BatchHeader, Compression, InvalidBatch, build_batch


def encode_varint(value: int) -> bytes:
    """Zigzag varint (Kafka's ``ByteUtils.writeVarlong``)."""
    value = (value << 1) ^ (value >> 63)
    out = bytearray()
    while value & ~0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def decode_varint(buffer: bytes | memoryview, position: int) -> tuple[int, int]:
    """Read a zigzag varint at ``position``; return (value, next position)."""
    result = 0
    shift = 0
    while True:
        if position >= len(buffer):
            raise InvalidBatch("CORRUPT_MESSAGE", "varint runs past the end of the batch")
        byte = buffer[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            break
        shift += 7
        if shift > 63:
            raise InvalidBatch("CORRUPT_MESSAGE", "varint longer than 10 bytes")
    return (result >> 1) ^ -(result & 1), position


@dataclass(frozen=True, slots=True)
class Record:
    offset_delta: int
    timestamp_delta: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = field(default_factory=tuple)


def _encode_bytes(value: bytes | None) -> bytes:
    if value is None:
        return encode_varint(-1)
    return encode_varint(len(value)) + value


def encode_record(record: Record) -> bytes:
    body = (
        b"\x00"
        + encode_varint(record.timestamp_delta)
        + encode_varint(record.offset_delta)
        + _encode_bytes(record.key)
        + _encode_bytes(record.value)
        + encode_varint(len(record.headers))
        + b"".join(_encode_bytes(k.encode()) + _encode_bytes(v) for k, v in record.headers)
    )
    return encode_varint(len(body)) + body


def _read_bytes(buffer: memoryview, position: int) -> tuple[bytes | None, int]:
    length, position = decode_varint(buffer, position)
    if length < 0:
        return None, position
    end = position + length
    if end > len(buffer):
        raise InvalidBatch("CORRUPT_MESSAGE", "record field runs past the end of the batch")
    return bytes(buffer[position:end]), end


def decode_records(payload: bytes, count: int) -> list[Record]:
    """Decode ``count`` uncompressed records."""
    view = memoryview(payload)
    position = 0
    records = []
    for _ in range(count):
        length, position = decode_varint(view, position)
        end = position + length
        if length < 0 or end > len(view):
            raise InvalidBatch("CORRUPT_MESSAGE", "record length runs past the end of the batch")
        position += 1  # attributes, unused in v2
        timestamp_delta, position = decode_varint(view, position)
        offset_delta, position = decode_varint(view, position)
        key, position = _read_bytes(view, position)
        value, position = _read_bytes(view, position)
        header_count, position = decode_varint(view, position)
        headers = []
        for _ in range(header_count):
            header_key, position = _read_bytes(view, position)
            header_value, position = _read_bytes(view, position)
            headers.append(((header_key or b"").decode("utf-8", "replace"), header_value))
        if position != end:
            raise InvalidBatch("CORRUPT_MESSAGE", "record length does not match its fields")
        records.append(Record(offset_delta, timestamp_delta, key, value, tuple(headers)))
    return records


class RecordSpan(NamedTuple):
    """Where one record sits in an uncompressed records payload, with what the log
    cleaner decides on: its key and whether it has a value (a tombstone has none).
    The cleaner copies ``payload[start:end]`` unchanged, so headers and deltas keep
    their exact bytes. A named tuple, not a frozen dataclass: one is made per record
    twice a pass, and a frozen dataclass's ``__init__`` cost more than reading it."""

    start: int
    end: int
    offset_delta: int
    timestamp_delta: int
    key: bytes | None
    has_value: bool


def iter_record_spans(payload: bytes | memoryview, count: int) -> Iterator[RecordSpan]:
    """The ``count`` records of an uncompressed payload, without decoding values or
    headers.

    The log cleaner calls this for every record it maps and every record it filters, so
    the common case is inlined: a varint of one byte (small deltas, short keys) is read
    here, longer ones by ``decode_varint``; a read past the end is a corrupt batch."""
    data = bytes(payload)
    size = len(data)
    position = 0
    try:
        for _ in range(count):
            start = position
            length, position = decode_varint(data, position)
            end = position + length
            if length < 0 or end > size:
                raise InvalidBatch(
                    "CORRUPT_MESSAGE", "record length runs past the end of the batch"
                )
            position += 1  # attributes, unused in v2
            byte = data[position]
            if byte < 0x80:
                timestamp_delta, position = (byte >> 1) ^ -(byte & 1), position + 1
            else:
                timestamp_delta, position = decode_varint(data, position)
            byte = data[position]
            if byte < 0x80:
                offset_delta, position = (byte >> 1) ^ -(byte & 1), position + 1
            else:
                offset_delta, position = decode_varint(data, position)
            byte = data[position]
            if byte < 0x80:
                key_length, position = (byte >> 1) ^ -(byte & 1), position + 1
            else:
                key_length, position = decode_varint(data, position)
            if key_length < 0:
                key = None
            else:
                key_end = position + key_length
                if key_end > end:
                    raise InvalidBatch(
                        "CORRUPT_MESSAGE", "record field runs past the end of the batch"
                    )
                key, position = data[position:key_end], key_end
            # The value's length is negative (a tombstone: -1) exactly when its zigzag
            # varint's first byte is odd.
            has_value = not data[position] & 1
            yield RecordSpan(start, end, offset_delta, timestamp_delta, key, has_value)
            position = end
    except IndexError:
        raise InvalidBatch("CORRUPT_MESSAGE", "record runs past the end of the batch") from None


def _snappy_decompress(data: bytes) -> bytes:
    import snappy

    # Kafka's Java producer frames snappy like xerial's SnappyOutputStream.
    xerial_magic = b"\x82SNAPPY\x00"
    if data.startswith(xerial_magic):
        out = bytearray()
        position = 16
        while position < len(data):
            (length,) = struct.unpack_from(">i", data, position)
            position += 4
            out += snappy.decompress(data[position : position + length])
            position += length
        return bytes(out)
    return snappy.decompress(data)


def decompress(codec: Compression, data: bytes) -> bytes:
    if codec is Compression.NONE:
        return data
    if codec is Compression.GZIP:
        return gzip.decompress(data)
    if codec is Compression.SNAPPY:
        return _snappy_decompress(data)
    if codec is Compression.LZ4:
        import lz4.frame

        return lz4.frame.decompress(data)
    if codec is Compression.ZSTD:
        import zstandard

        return zstandard.ZstdDecompressor().decompressobj().decompress(data)
    raise InvalidBatch("CORRUPT_MESSAGE", f"unknown compression codec {codec}")


def compress(codec: Compression, data: bytes) -> bytes:
    if codec is Compression.NONE:
        return data
    if codec is Compression.GZIP:
        return gzip.compress(data)
    if codec is Compression.SNAPPY:
        import snappy

        return snappy.compress(data)
    if codec is Compression.LZ4:
        import lz4.frame

        return lz4.frame.compress(data)
    if codec is Compression.ZSTD:
        import zstandard

        return zstandard.ZstdCompressor().compress(data)
    raise ValueError(f"unknown compression codec {codec}")


def iter_batch_records(buffer: bytes | memoryview, header: BatchHeader) -> Iterator[Record]:
    """Decode the records of one batch (decompressing if needed)."""
    start = header.position + HEADER_SIZE
    payload = bytes(memoryview(buffer)[start : header.position + header.size])
    try:
        payload = decompress(header.compression, payload)
    except InvalidBatch:
        raise
    except Exception as error:  # any codec failure means a corrupt batch
        raise InvalidBatch("CORRUPT_MESSAGE", f"cannot decompress batch: {error}") from error
    yield from decode_records(payload, header.records_count)


def make_batch(
    records: list[Record],
    *,
    compression: Compression = Compression.NONE,
    base_offset: int = 0,
    base_timestamp: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
) -> bytes:
    """A complete v2 batch from records; for tests, tools and the benchmark."""
    encoded = b"".join(encode_record(r) for r in records)
    max_delta = max((r.timestamp_delta for r in records), default=0)
    return build_batch(
        [b""] * len(records),
        base_offset=base_offset,
        base_timestamp=base_timestamp,
        max_timestamp=base_timestamp + max_delta,
        attributes=int(compression),
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        records_payload=compress(compression, encoded),
    )
