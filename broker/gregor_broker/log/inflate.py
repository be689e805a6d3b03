"""Streaming, bounded decompression of a record batch's payload (gzip, snappy, lz4, zstd).

The log validator reads compressed batches through this module and nothing else: each
codec is inflated in chunks of at most ``CHUNK_BYTES`` and every inflated byte is charged
to a ``DecompressionBudget`` shared by one Produce request, so a decompression bomb costs
at most the budget in work and a few chunks in memory, never its inflated size (Kafka
also streams: ``DefaultRecordBatch.streamingIterator``). What it does not own: record
parsing (``validator.py``) and compressing (``protocol/records.py``).

Framing follows what Kafka producers send and Kafka consumers read: gzip members (several
allowed, like ``GZIPInputStream``), snappy in xerial's framing (``SnappyOutputStream``)
or as one raw block, LZ4 frames, zstd frames (several allowed, like ``ZstdInputStream``,
which reads across frames). A payload that is not valid for its codec, or has bytes after
its last frame or member, is CORRUPT_MESSAGE.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator

from ..protocol.record_batch import Compression, InvalidBatch

# Inflated bytes handed to the record walker per step; memory per batch stays a few of these.
CHUNK_BYTES = 128 * 1024
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = 16  # magic, version, compatible version
_INT32 = struct.Struct(">i")
# zstd's own default window limit (2^27), as Kafka's zstd-jni keeps it.
_ZSTD_MAX_WINDOW_LOG = 27
_ZSTD_MAGIC = 0xFD2FB528
_ZSTD_SKIPPABLE_MAGIC = 0x184D2A50
_UINT32_LE = struct.Struct("<I")


class DecompressionBudget:
    """The inflated bytes one Produce request may still produce while it is validated
    (``produce.decompressed.max.bytes``); over it the batch is MESSAGE_TOO_LARGE."""

    __slots__ = ("limit", "remaining")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.remaining = limit

    def charge(self, inflated: int) -> None:
        self.remaining -= inflated
        if self.remaining < 0:
            raise InvalidBatch(
                "MESSAGE_TOO_LARGE",
                f"compressed records inflate past produce.decompressed.max.bytes={self.limit}",
            )


def _corrupt(codec: Compression, error: object) -> InvalidBatch:
    return InvalidBatch("CORRUPT_MESSAGE", f"cannot decompress {codec.name} batch: {error}")


def inflate(codec: Compression, payload: bytes, budget: DecompressionBudget) -> Iterator[bytes]:
    """Yield the inflated payload in chunks, charging ``budget`` before each is yielded."""
    if codec is Compression.GZIP:
        chunks = _gzip(payload)
    elif codec is Compression.SNAPPY:
        chunks = _snappy(payload, budget)
    elif codec is Compression.LZ4:
        chunks = _lz4(payload)
    elif codec is Compression.ZSTD:
        chunks = _zstd(payload, budget)
    else:  # pragma: no cover - the validator handles NONE and unknown codecs itself
        raise ValueError(f"no streaming inflater for {codec!r}")
    try:
        for chunk in chunks:
            budget.charge(len(chunk))
            yield chunk
    except InvalidBatch:
        raise
    except Exception as error:  # every codec failure is a corrupt batch
        raise _corrupt(codec, error) from error


def _gzip(payload: bytes) -> Iterator[bytes]:
    data = payload
    while True:
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        while True:
            chunk = inflater.decompress(data, CHUNK_BYTES)
            if chunk:
                yield chunk
            data = inflater.unconsumed_tail
            if inflater.eof or (not data and not chunk):
                break
        if not inflater.eof:
            raise ValueError("gzip stream ends inside a member")
        data = inflater.unused_data
        if not data:
            return


def _snappy(payload: bytes, budget: DecompressionBudget) -> Iterator[bytes]:
    if not payload.startswith(_XERIAL_MAGIC):
        yield from _snappy_block(payload, budget)
        return
    if len(payload) < _XERIAL_HEADER:
        raise ValueError("xerial snappy header is truncated")
    position = _XERIAL_HEADER
    while position < len(payload):
        if len(payload) - position < 4:
            raise ValueError("xerial snappy chunk length is truncated")
        (length,) = _INT32.unpack_from(payload, position)
        position += 4
        if length < 0 or position + length > len(payload):
            raise ValueError(f"xerial snappy chunk of {length} bytes runs past the batch")
        yield from _snappy_block(payload[position : position + length], budget)
        position += length


def _snappy_block(block: bytes, budget: DecompressionBudget) -> Iterator[bytes]:
    """One raw snappy block. Raw snappy cannot be streamed, but a block declares its
    inflated length up front: refuse it before inflating when it would pass the budget
    (a block inflates at most ~21x, so its size is bounded by the batch size anyway)."""
    import snappy

    declared = _snappy_declared_length(block)
    if declared > budget.remaining:
        budget.charge(declared)
    inflated = snappy.uncompress(block)
    for start in range(0, len(inflated), CHUNK_BYTES):
        yield inflated[start : start + CHUNK_BYTES]


def _snappy_declared_length(block: bytes) -> int:
    result = 0
    for shift, byte in zip(range(0, 35, 7), block, strict=False):
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result
    raise ValueError("snappy block length is not a valid varint")


def _lz4(payload: bytes) -> Iterator[bytes]:
    import lz4.frame

    data = payload
    while True:
        inflater = lz4.frame.LZ4FrameDecompressor()
        chunk = inflater.decompress(data, max_length=CHUNK_BYTES)
        while True:
            if chunk:
                yield chunk
            if inflater.eof or inflater.needs_input:
                break
            chunk = inflater.decompress(b"", max_length=CHUNK_BYTES)
        if not inflater.eof:
            raise ValueError("lz4 stream ends inside a frame")
        data = inflater.unused_data
        if not data:
            return


def zstd_window_limit(budget: DecompressionBudget) -> int:
    """Largest window a zstd frame may declare: 1/8 of ``produce.decompressed.max.bytes``
    as a power of two (8 MiB by default, what zstd levels up to 19 use), at most zstd's
    default limit. The decoder fills its window as it inflates, so this bounds memory."""
    return 1 << min(_ZSTD_MAX_WINDOW_LOG, max(10, (budget.limit // 8).bit_length() - 1))


def _zstd(payload: bytes, budget: DecompressionBudget) -> Iterator[bytes]:
    import zstandard

    window_limit = zstd_window_limit(budget)
    _check_zstd_frames(payload, window_limit, budget)
    decompressor = zstandard.ZstdDecompressor(max_window_size=window_limit)
    with decompressor.stream_reader(
        payload, read_size=CHUNK_BYTES, read_across_frames=True
    ) as reader:
        while True:
            chunk = reader.read(CHUNK_BYTES)
            if not chunk:
                break
            yield chunk


def _check_zstd_frames(payload: bytes, window_limit: int, budget: DecompressionBudget) -> None:
    """The reader stops quietly at a truncated last frame: walk the frame and block
    headers (RFC 8878) to be sure the payload is whole frames and nothing else, and
    refuse a frame whose window is over ``window_limit`` with a clear INVALID_RECORD."""
    position = 0
    end = len(payload)
    while position < end:
        if end - position < 4:
            raise ValueError("zstd payload ends inside a frame magic number")
        (magic,) = _UINT32_LE.unpack_from(payload, position)
        position += 4
        if magic & 0xFFFFFFF0 == _ZSTD_SKIPPABLE_MAGIC:
            if end - position < 4:
                raise ValueError("zstd skippable frame is truncated")
            (size,) = _UINT32_LE.unpack_from(payload, position)
            position += 4 + size
            continue
        if magic != _ZSTD_MAGIC:
            raise ValueError("unknown zstd frame descriptor")
        if position >= end:
            raise ValueError("zstd frame header is truncated")
        descriptor = payload[position]
        position += 1
        content_size_flag = descriptor >> 6
        single_segment = descriptor & 0x20
        has_checksum = descriptor & 0x04
        if not single_segment:
            if position >= end:
                raise ValueError("zstd frame header is truncated")
            exponent, mantissa = payload[position] >> 3, payload[position] & 0x07
            window = (1 << (10 + exponent)) + ((1 << (10 + exponent)) >> 3) * mantissa
            _check_window(window, window_limit)
            position += 1
        position += (0, 1, 2, 4)[descriptor & 0x03]  # dictionary id
        size_bytes = (1 if single_segment else 0, 2, 4, 8)[content_size_flag]
        if single_segment:  # the window is the content size
            window = int.from_bytes(payload[position : position + size_bytes], "little")
            window += 256 if size_bytes == 2 else 0
            if window > budget.remaining:  # refused before inflating, like a snappy block
                budget.charge(window)
            _check_window(window, window_limit)
        position += size_bytes
        while True:
            if end - position < 3:
                raise ValueError("zstd frame ends inside a block header")
            header = payload[position] | payload[position + 1] << 8 | payload[position + 2] << 16
            position += 3
            block_type = (header >> 1) & 0x03
            if block_type == 3:
                raise ValueError("reserved zstd block type")
            position += 1 if block_type == 1 else header >> 3
            if header & 1:
                break
        position += 4 if has_checksum else 0
        if position > end:
            raise ValueError("zstd frame is truncated")


def _check_window(window: int, window_limit: int) -> None:
    if window > window_limit:
        raise InvalidBatch(
            "INVALID_RECORD",
            f"zstd frame declares a {window}-byte window; this broker allows "
            f"{window_limit} (1/8 of produce.decompressed.max.bytes)",
        )
