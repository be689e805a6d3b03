"""Record batch v2 headers: validation and in-place offset assignment."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gregor_broker.protocol.record_batch import (
    CRC,
    InvalidBatch,
    assign_offsets,
    scan_batches,
)
from gregor_broker.protocol.records import Compression, Record, iter_batch_records, make_batch


def _records(n: int) -> list[Record]:
    return [
        Record(i, i, f"key-{i}".encode(), f"value-{i}".encode(), (("h", b"v"),)) for i in range(n)
    ]


@pytest.mark.parametrize("codec", list(Compression))
def test_batches_round_trip_under_every_codec(codec: Compression) -> None:
    batch = make_batch(_records(5), compression=codec, base_timestamp=1_000)
    [header] = scan_batches(batch)
    assert header.records_count == 5
    assert header.compression is codec
    assert header.max_timestamp == 1_004
    assert [r.key for r in iter_batch_records(batch, header)] == [
        f"key-{i}".encode() for i in range(5)
    ]


def test_offsets_are_assigned_by_rewriting_base_offsets_without_touching_crc() -> None:
    buffer = bytearray(make_batch(_records(3)) + make_batch(_records(2)))
    headers = scan_batches(buffer)
    next_offset = assign_offsets(buffer, headers, 100)
    assert next_offset == 105
    rescanned = scan_batches(buffer)  # CRC still valid: base offset is outside it
    assert [h.base_offset for h in rescanned] == [100, 103]


def test_a_flipped_bit_is_a_corrupt_message() -> None:
    buffer = bytearray(make_batch(_records(3)))
    buffer[-1] ^= 0x01
    with pytest.raises(InvalidBatch) as error:
        scan_batches(buffer)
    assert error.value.error == "CORRUPT_MESSAGE"


def test_a_wrong_crc_field_is_a_corrupt_message() -> None:
    buffer = bytearray(make_batch(_records(1)))
    buffer[CRC] ^= 0xFF
    with pytest.raises(InvalidBatch, match="CRC"):
        scan_batches(buffer)


def test_a_truncated_batch_is_a_corrupt_message() -> None:
    batch = make_batch(_records(3))
    with pytest.raises(InvalidBatch) as error:
        scan_batches(batch[:-5])
    assert error.value.error == "CORRUPT_MESSAGE"


def test_a_batch_over_max_message_bytes_is_too_large() -> None:
    batch = make_batch([Record(0, 0, b"k", b"x" * 2000)])
    with pytest.raises(InvalidBatch) as error:
        scan_batches(batch, max_batch_size=1000)
    assert error.value.error == "MESSAGE_TOO_LARGE"


def test_old_message_formats_are_refused() -> None:
    buffer = bytearray(make_batch(_records(1)))
    buffer[16] = 1  # magic
    with pytest.raises(InvalidBatch) as error:
        scan_batches(buffer)
    assert error.value.error == "UNSUPPORTED_FOR_MESSAGE_FORMAT"


@given(st.binary(max_size=300))
def test_scanning_garbage_raises_invalid_batch_or_succeeds_never_crashes(data: bytes) -> None:
    try:
        headers = scan_batches(data)
    except InvalidBatch:
        return
    assert sum(h.size for h in headers) == len(data)
