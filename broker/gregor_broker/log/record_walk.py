"""The walk over a batch's records: the per-record loop of produce validation.

``validator.py`` (Kafka's LogValidator) checks each produced batch's records through
``walk``: every record's length, varints, offset delta and key, and that the records fill
the batch exactly. It runs once per record of every produced batch, so it is the produce
path's one loop whose cost grows with the records, not the requests: as Python it costs
about 2.4 us a record on our machines, six times what the rest of a 100-byte record's
batched produce costs.

``make native`` (scripts/build-native) compiles a copy of this module with mypyc into
``_record_walk_native`` (about 0.1 us a record). ``validator.py`` uses the compiled copy
only when it was built from this very source (its ``SOURCE_DIGEST``); anywhere else (no C
compiler, an edited source not rebuilt yet, a wheel install) this module runs as Python,
with the same results, errors and messages. Keep it to what mypyc compiles well: plain
functions over ``bytes``, ints and lists, no imports beyond the exception it raises.
"""

from __future__ import annotations

from ..protocol.record_batch import InvalidBatch

__all__ = ["MIN_RECORD_BODY", "invalid", "varint_tail", "walk"]

# Shortest record body: attributes, timestamp delta, offset delta, key, value, header count.
MIN_RECORD_BODY = 6


def invalid(message: str) -> InvalidBatch:
    return InvalidBatch("INVALID_RECORD", message)


def varint_tail(data: bytes, position: int, first: int, max_bytes: int) -> tuple[int, int]:
    """The rest of an unsigned varint whose first byte ``first`` had its high bit set."""
    result = first & 0x7F
    shift = 7
    while True:
        if shift >= 7 * max_bytes:
            raise invalid("Found invalid record structure: varint too long")
        byte = data[position]  # IndexError past the data: caught by the caller
        position += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, position
        shift += 7


def walk(
    data: bytes,
    position: int,
    end: int,
    index: int,
    count: int,
    missing_keys: list[int] | None,
    *,
    final: bool,
) -> tuple[int, int]:
    """Walk whole records in ``data[position:end]`` from record ``index`` up to ``count``.

    Returns (position after the last whole record, records walked so far). With
    ``final`` a record cut off by ``end`` is invalid; without it the walk stops before
    it so the caller can bring more inflated bytes.

    This loop is the uncompressed produce hot path, so it reads varints inline for the
    one- and two-byte cases and keeps them zigzag-encoded (``z``): an even ``z`` is the
    size ``z >> 1``, ``z == 1`` is -1 (null), any other odd ``z`` is negative.
    """
    try:
        while index < count:
            record_start = position
            if position >= end:
                break
            z = data[position]
            if z < 0x80:
                position += 1
            elif not final and end - position < 6:
                return record_start, index
            elif data[position + 1] < 0x80:
                z = (z & 0x7F) | data[position + 1] << 7
                position += 2
            else:
                z, position = varint_tail(data, position + 1, z, 5)
            if z & 1 or z < 2 * MIN_RECORD_BODY:
                raise invalid(f"Found invalid record size {(z >> 1) ^ -(z & 1)} in record {index}")
            record_end = position + (z >> 1)
            if record_end > end:
                if final:
                    raise invalid(
                        f"Invalid record size: expected {z >> 1} bytes in record payload, but "
                        f"instead the buffer has only {end - position} remaining bytes"
                    )
                return record_start, index
            # attributes (unused in v2), then the timestamp delta: only its extent matters
            varint_start = position = position + 1
            while data[position] & 0x80:
                position += 1
            position += 1
            if position - varint_start > 10:
                raise invalid(f"Found invalid record structure: varlong too long in {index}")
            # offset delta: producers number records 0, 1, 2, ...
            z = data[position]
            if z < 0x80:
                position += 1
            elif data[position + 1] < 0x80:
                z = (z & 0x7F) | data[position + 1] << 7
                position += 2
            else:
                z, position = varint_tail(data, position + 1, z, 5)
            if z != index << 1:
                raise invalid(f"record {index} has offset delta {(z >> 1) ^ -(z & 1)}, not {index}")
            # key
            z = data[position]
            if z < 0x80:
                position += 1
            elif data[position + 1] < 0x80:
                z = (z & 0x7F) | data[position + 1] << 7
                position += 2
            else:
                z, position = varint_tail(data, position + 1, z, 5)
            if not z & 1:
                position += z >> 1
            elif z == 1:
                if missing_keys is not None:
                    missing_keys.append(index)
            else:
                raise invalid(f"Found invalid key size {(z >> 1) ^ -1} in record {index}")
            # value
            z = data[position]
            if z < 0x80:
                position += 1
            elif data[position + 1] < 0x80:
                z = (z & 0x7F) | data[position + 1] << 7
                position += 2
            else:
                z, position = varint_tail(data, position + 1, z, 5)
            if not z & 1:
                position += z >> 1
            elif z != 1:
                raise invalid(f"Found invalid value size {(z >> 1) ^ -1} in record {index}")
            # headers (a value that ran past the record is caught by the size check below)
            z = data[position]
            position += 1
            if z:
                if z & 0x80:
                    z, position = varint_tail(data, position, z, 5)
                position = walk_headers(data, position, record_end, (z >> 1) ^ -(z & 1), index)
            if position != record_end:
                raise invalid(
                    f"Invalid record size: expected to read {record_end - record_start} bytes "
                    f"in record payload, but instead read {position - record_start}"
                )
            index += 1
    except IndexError:
        raise invalid(f"Found invalid record structure in record {index}") from None
    return position, index


def walk_headers(data: bytes, position: int, record_end: int, count: int, index: int) -> int:
    if count < 0 or count > record_end - position:
        raise invalid(f"Found invalid number of record headers {count} in record {index}")
    for _ in range(count):
        if position > record_end:
            break  # the caller's size check refuses the record
        for is_key in (True, False):
            byte = data[position]
            position += 1
            if byte & 0x80:
                byte, position = varint_tail(data, position, byte, 5)
            size = (byte >> 1) ^ -(byte & 1)
            if size >= 0:
                position += size
            elif is_key or size != -1:
                raise invalid(f"Invalid header size {size} in record {index}")
    return position
