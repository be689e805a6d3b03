"""Record batches that lie, and the check that none of them was stored.

``lying_batch(rng)`` returns ``(name, records)``: a v2 record set whose CRC is usually
right (so a broker that checks only the CRC is fooled) but whose content Kafka's
``LogValidator`` rejects: counts that disagree with the records, a record longer than its
batch, garbage where compressed records should be, an unknown codec, the control or
transactional flag from a client, two batches in one partition, a producer id without a
sequence, and compression bombs of each codec (a few KB that inflate to many MB).
``valid_batch`` is the control: it must be stored.

``invalid_stored(log_dir, topics)`` walks what a broker stored on disk and returns every
batch Kafka would have refused, with the reason.
"""

from __future__ import annotations

import os
import random
import struct
from functools import cache
from pathlib import Path

from crc32c import crc32c

from gregor_broker.log.segment import iter_headers
from gregor_broker.protocol.record_batch import (
    CONTROL_FLAG,
    HEADER_SIZE,
    TRANSACTIONAL_FLAG,
    Compression,
)
from gregor_broker.protocol.records import Record, decode_records, decode_varint, encode_record

CODECS = [Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD]
# Inflated sizes of the bombs: the biggest is far above any sane per-request budget.
# Snappy compresses zeros only about 21:1, so its bombs stay small enough to send.
BOMB_SIZES = {
    Compression.GZIP: [4 << 20, 64 << 20, 256 << 20],
    Compression.SNAPPY: [1 << 20, 4 << 20],
    Compression.LZ4: [4 << 20, 64 << 20, 256 << 20],
    Compression.ZSTD: [4 << 20, 64 << 20, 256 << 20],
}
MAX_INFLATE = 64 << 20  # the validator's own bound when reading stored batches


def raw_batch(
    payload: bytes,
    *,
    count: int,
    last_offset_delta: int | None = None,
    attributes: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    batch_length_delta: int = 0,
    crc_delta: int = 0,
) -> bytes:
    """A v2 batch with whatever header fields the caller wants, CRC computed (then
    optionally broken by ``crc_delta``)."""
    delta = count - 1 if last_offset_delta is None else last_offset_delta
    body = (
        struct.pack(
            ">hiqqqhii",
            attributes,
            delta,
            1_700_000_000_000,
            1_700_000_000_000,
            producer_id,
            producer_epoch,
            base_sequence,
            count,
        )
        + payload
    )
    crc = (crc32c(body) + crc_delta) & 0xFFFFFFFF
    length = 4 + 1 + 4 + len(body) + batch_length_delta
    return struct.pack(">qiibI", 0, length, -1, 2, crc) + body


def records(count: int, rng: random.Random) -> bytes:
    return b"".join(
        encode_record(Record(i, 0, None, rng.randbytes(rng.randint(0, 40)))) for i in range(count)
    )


@cache
def bomb(codec: Compression, size: int) -> bytes:
    """``size`` zero bytes compressed with ``codec`` (zeros are not valid records either)."""
    zeros = bytes(size)
    if codec is Compression.GZIP:
        import gzip

        return gzip.compress(zeros, compresslevel=9)
    if codec is Compression.SNAPPY:
        import snappy

        return snappy.compress(zeros)
    if codec is Compression.LZ4:
        import lz4.frame

        return lz4.frame.compress(zeros)
    import zstandard

    return zstandard.ZstdCompressor(level=19).compress(zeros)


def valid_batch(rng: random.Random) -> bytes:
    count = rng.randint(1, 5)
    return raw_batch(records(count, rng), count=count)


def lying_batch(rng: random.Random) -> tuple[str, bytes]:
    """One lie, picked at random; returns its name and the record set."""
    lie = rng.choice(LIES)
    return lie, _LIES[lie](rng)


def _count_smaller(rng: random.Random) -> bytes:
    return raw_batch(records(3, rng), count=1)  # one record announced, three inside


def _count_larger(rng: random.Random) -> bytes:
    return raw_batch(records(1, rng), count=rng.choice([2, 1000, 2**31 - 1]))


def _count_zero(rng: random.Random) -> bytes:
    return raw_batch(rng.choice([b"", records(1, rng)]), count=0, last_offset_delta=0)


def _count_negative(rng: random.Random) -> bytes:
    return raw_batch(records(1, rng), count=-1, last_offset_delta=0)


def _record_longer_than_batch(rng: random.Random) -> bytes:
    record = bytearray(records(1, rng))
    record[0] = 0x7E  # varint 63: longer than what follows
    return raw_batch(bytes(record), count=1)


def _wrong_offset_delta(rng: random.Random) -> bytes:
    payload = b"".join(encode_record(Record(5 + i, 0, None, b"v")) for i in range(2))
    return raw_batch(payload, count=2)


def _garbage_uncompressed(rng: random.Random) -> bytes:
    return raw_batch(rng.randbytes(rng.randint(1, 300)), count=rng.randint(1, 4))


def _garbage_compressed(rng: random.Random) -> bytes:
    codec = rng.choice([*CODECS, 5, 6, 7])
    return raw_batch(rng.randbytes(rng.randint(1, 300)), count=1, attributes=int(codec))


def _unknown_codec(rng: random.Random) -> bytes:
    return raw_batch(records(1, rng), count=1, attributes=rng.choice([5, 6, 7]))


def _control_flag(rng: random.Random) -> bytes:
    count = rng.choice([1, 1001])
    return raw_batch(records(1, rng), count=count, attributes=CONTROL_FLAG)


def _transactional_flag(rng: random.Random) -> bytes:
    return raw_batch(
        records(1, rng),
        count=1,
        attributes=TRANSACTIONAL_FLAG,
        producer_id=rng.randint(0, 1000),
        producer_epoch=0,
        base_sequence=0,
    )


def _two_batches(rng: random.Random) -> bytes:
    return valid_batch(rng) + valid_batch(rng)


def _producer_without_sequence(rng: random.Random) -> bytes:
    return raw_batch(records(1, rng), count=1, producer_id=rng.randint(0, 1000), producer_epoch=0)


def _bad_crc(rng: random.Random) -> bytes:
    return raw_batch(records(2, rng), count=2, crc_delta=rng.randint(1, 1000))


def _batch_length_lie(rng: random.Random) -> bytes:
    return raw_batch(
        records(2, rng), count=2, batch_length_delta=rng.choice([-50, -1, 1, 1000, 2**30])
    )


def _bomb(rng: random.Random) -> bytes:
    codec = rng.choice(CODECS)
    payload = bomb(codec, rng.choice(BOMB_SIZES[codec]))
    if codec is Compression.ZSTD and rng.random() < 0.5:
        payload = bomb(codec, 1 << 20) + payload  # two frames: check beyond the first
    return raw_batch(payload, count=rng.choice([1, 1000]), attributes=int(codec))


_LIES = {
    "count_smaller": _count_smaller,
    "count_larger": _count_larger,
    "count_zero": _count_zero,
    "count_negative": _count_negative,
    "record_longer_than_batch": _record_longer_than_batch,
    "wrong_offset_delta": _wrong_offset_delta,
    "garbage_uncompressed": _garbage_uncompressed,
    "garbage_compressed": _garbage_compressed,
    "unknown_codec": _unknown_codec,
    "control_flag": _control_flag,
    "transactional_flag": _transactional_flag,
    "two_batches": _two_batches,
    "producer_without_sequence": _producer_without_sequence,
    "bad_crc": _bad_crc,
    "batch_length_lie": _batch_length_lie,
    "bomb": _bomb,
}
LIES = sorted(_LIES)


# what a broker stored ------------------------------------------------------------------
def _inflate(codec: int, data: bytes) -> bytes:
    """Decompress with a bound, streaming; raises ValueError on garbage or a bomb."""
    if codec == Compression.NONE:
        return data
    if codec == Compression.GZIP:
        import zlib

        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        out = inflater.decompress(data, MAX_INFLATE + 1)
        if len(out) > MAX_INFLATE or inflater.unconsumed_tail or not inflater.eof:
            raise ValueError("gzip payload does not inflate to one bounded stream")
        return out
    if codec == Compression.SNAPPY:
        import snappy

        if len(data) > MAX_INFLATE // 8:
            raise ValueError("snappy payload too large to check")
        if not data.startswith(b"\x82SNAPPY\x00"):
            return snappy.decompress(data)
        out = bytearray()  # xerial framing, as Kafka's Java producer writes it
        position = 16
        while position < len(data):
            (size,) = struct.unpack_from(">i", data, position)
            out += snappy.decompress(data[position + 4 : position + 4 + size])
            position += 4 + size
        return bytes(out)
    if codec == Compression.LZ4:
        import lz4.frame

        inflater = lz4.frame.LZ4FrameDecompressor()
        out = inflater.decompress(data, max_length=MAX_INFLATE + 1)
        if len(out) > MAX_INFLATE or not inflater.eof:
            raise ValueError("lz4 payload does not inflate to one bounded frame")
        return out
    if codec == Compression.ZSTD:
        import zstandard

        out = bytearray()
        remaining = data
        while remaining:  # a zstd payload may hold several frames
            inflater = zstandard.ZstdDecompressor().decompressobj()
            out += inflater.decompress(remaining)
            if len(out) > MAX_INFLATE:
                raise ValueError("zstd payload inflates beyond the bound")
            remaining = inflater.unused_data
        return bytes(out)
    raise ValueError(f"unknown compression codec {codec}")


def why_invalid(batch: bytes, marker_producers: frozenset[int] = frozenset()) -> str | None:
    """Why Kafka would refuse this stored batch from a client, or None if it would not.

    A control batch is valid only as a transaction marker (the broker writes those); a
    transactional batch only from a producer whose transaction left a marker in the same
    partition (``marker_producers``; the coordinator aborts an unfinished transaction
    after its timeout, which writes one).
    """
    (
        _base,
        _length,
        _epoch,
        magic,
        crc,
        attributes,
        last_delta,
        _ts,
        _max_ts,
        producer_id,
        _producer_epoch,
        base_sequence,
        count,
    ) = struct.unpack_from(">qiibIhiqqqhii", batch)
    if magic != 2:
        return f"magic {magic}"
    if crc32c(batch[21:]) != crc:
        return "CRC mismatch"
    if attributes & CONTROL_FLAG:
        return None if _is_marker(batch, count) else "control batch that is no transaction marker"
    if attributes & TRANSACTIONAL_FLAG and producer_id not in marker_producers:
        return f"transactional batch of producer {producer_id} with no transaction marker"
    if count <= 0:
        return f"record count {count}"
    if last_delta != count - 1:
        return f"last offset delta {last_delta} with {count} records"
    if producer_id >= 0 and base_sequence < 0:
        return f"producer id {producer_id} with base sequence {base_sequence}"
    codec = attributes & 0x07
    try:
        payload = _inflate(codec, batch[HEADER_SIZE:])
    except Exception as error:
        return f"codec {codec} payload does not decompress: {error!r:.120}"
    return _why_records_invalid(payload, count)


def _is_marker(batch: bytes, count: int) -> bool:
    """One record whose key is (version 0, type ABORT 0 or COMMIT 1)."""
    if count != 1 or batch[22] & 0x07:  # markers are never compressed
        return False
    try:
        record = next(iter(decode_records(batch[HEADER_SIZE:], 1)))
    except Exception:
        return False
    return record.key in (b"\x00\x00\x00\x00", b"\x00\x00\x00\x01")


def producers_with_markers(batches_: list[bytes]) -> frozenset[int]:
    return frozenset(
        struct.unpack_from(">q", batch, 43)[0]
        for batch in batches_
        if struct.unpack_from(">h", batch, 21)[0] & CONTROL_FLAG and _is_marker(batch, 1)
    )


def _why_records_invalid(payload: bytes, count: int) -> str | None:
    view = memoryview(payload)
    position = 0
    for expected_delta in range(count):
        try:
            length, start = decode_varint(view, position)
            end = start + length
            if length <= 0 or end > len(view):
                return f"record {expected_delta}: length {length} runs past the batch"
            _, position = decode_varint(view, start + 1)  # timestamp delta
            offset_delta, position = decode_varint(view, position)
        except Exception as error:
            return f"record {expected_delta} does not parse: {error!r:.80}"
        if offset_delta != expected_delta:
            return f"record {expected_delta} has offset delta {offset_delta}"
        position = end
    if position != len(view):
        return f"{len(view) - position} bytes after the {count} records"
    return None


def invalid_stored(log_dir: Path, skip_topics: set[str]) -> list[str]:
    """Every stored batch (outside ``skip_topics``) that Kafka would have refused."""
    problems = []
    for partition_dir in sorted(log_dir.iterdir()):
        if not partition_dir.is_dir() or "-" not in partition_dir.name:
            continue
        topic = partition_dir.name.rsplit("-", 1)[0]
        if topic in skip_topics or topic.startswith("__") or partition_dir.name.endswith("-delete"):
            continue
        stored: list[tuple[int, bytes]] = []
        for segment in sorted(partition_dir.glob("*.log")):
            try:
                fd = os.open(segment, os.O_RDONLY)
            except FileNotFoundError:
                continue  # deleted meanwhile
            try:
                size = os.fstat(fd).st_size
                for position, header in iter_headers(fd, 0, size):
                    stored.append((header.base_offset, os.pread(fd, header.size, position)))
            finally:
                os.close(fd)
        markers = producers_with_markers([batch for _, batch in stored])
        for base_offset, batch in stored:
            reason = why_invalid(batch, markers)
            if reason is not None:
                problems.append(f"{partition_dir.name} offset {base_offset}: {reason}")
    return problems
