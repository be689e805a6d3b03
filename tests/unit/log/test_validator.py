"""The log validator: valid batches always pass untouched, lies always fail with Kafka's code.

Pure tests (no broker): hypothesis builds valid batches of every codec and checks they
pass and are stored byte for byte; crafted batches check each refusal; mutated batches
check that the validator answers only with ``InvalidBatch``, never a crash.
"""

from __future__ import annotations

import gzip
import struct
import tempfile
from pathlib import Path

import hypothesis.strategies as st
import lz4.frame
import pytest
import snappy
import zstandard
from hypothesis import HealthCheck, given, settings
from log_helpers import FakeClock, slice_bytes

from gregor_broker.log import LogConfig, PartitionLog
from gregor_broker.log.inflate import CHUNK_BYTES
from gregor_broker.log.validator import (
    DecompressionBudget,
    RecordValidationError,
    validate_produce_records,
    validate_records,
)
from gregor_broker.protocol.record_batch import (
    HEADER_SIZE,
    InvalidBatch,
    build_batch,
    rewrite_header,
    scan_batches,
)
from gregor_broker.protocol.records import (
    Compression,
    Record,
    encode_record,
    iter_batch_records,
    make_batch,
)

MIB = 1024 * 1024


def _validate(batch: bytes, *, compacted: bool = False, limit: int = 64 * MIB) -> None:
    validate_records(
        batch, scan_batches(batch), budget=DecompressionBudget(limit), compacted=compacted
    )


def _error(batch: bytes, **kwargs) -> InvalidBatch:
    with pytest.raises(InvalidBatch) as raised:
        _validate(batch, **kwargs)
    return raised.value


def _around(payload: bytes, count: int, codec: int = 0) -> bytes:
    return build_batch([b""] * count, attributes=codec, records_payload=payload)


def _encoded(records: list[Record]) -> bytes:
    return b"".join(encode_record(r) for r in records)


def _keyed(count: int, value: bytes = b"value") -> list[Record]:
    return [Record(i, i, b"key-%d" % i, value) for i in range(count)]


optional_bytes = st.one_of(st.none(), st.binary(max_size=300))
record_fields = st.tuples(
    st.integers(-(2**40), 2**40),  # timestamp delta: any varlong
    optional_bytes,  # key
    optional_bytes,  # value
    st.lists(st.tuples(st.text(max_size=20), optional_bytes), max_size=3),
)


@st.composite
def valid_batches(draw) -> tuple[bytes, bool]:
    fields = draw(st.lists(record_fields, min_size=1, max_size=40))
    compacted = draw(st.booleans())
    records = [
        Record(i, ts, (key if key is not None else b"") if compacted else key, value, tuple(hs))
        for i, (ts, key, value, hs) in enumerate(fields)
    ]
    codec = draw(st.sampled_from(list(Compression)))
    idempotent = draw(st.booleans())
    batch = make_batch(
        records,
        compression=codec,
        producer_id=7 if idempotent else -1,
        producer_epoch=0 if idempotent else -1,
        base_sequence=draw(st.integers(0, 2**31 - 1)) if idempotent else -1,
    )
    return batch, compacted


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(valid_batches())
def test_a_valid_batch_always_passes_and_is_stored_byte_for_byte(case) -> None:
    batch, compacted = case
    buffer = bytearray(batch)
    headers = scan_batches(buffer)
    validate_records(
        bytes(buffer), headers, budget=DecompressionBudget(64 * MIB), compacted=compacted
    )
    assert buffer == batch  # validation never touches the batch
    with tempfile.TemporaryDirectory() as directory:
        log = PartitionLog.open(Path(directory) / "t-0", LogConfig(), now_ms=FakeClock())
        log.append(buffer, headers)
        stored = slice_bytes(log.read(0, 1 << 24))
        log.close()
    assert stored == batch


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_a_mutated_batch_is_refused_with_a_kafka_error_or_passes_but_never_crashes(data):
    """Flip bytes of the records (CRC made right again): any outcome but an exception
    other than InvalidBatch, and a pass only if the records still parse as records."""
    codec = data.draw(st.sampled_from(list(Compression)))
    batch = bytearray(make_batch(_keyed(data.draw(st.integers(1, 20))), compression=codec))
    for _ in range(data.draw(st.integers(1, 4))):
        position = data.draw(st.integers(HEADER_SIZE, len(batch) - 1))
        batch[position] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        batch = batch[: data.draw(st.integers(HEADER_SIZE, len(batch)))]
        struct.pack_into(">i", batch, 8, len(batch) - 12)
    from crc32c import crc32c

    struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))
    compacted = data.draw(st.booleans())
    try:
        _validate(bytes(batch), compacted=compacted, limit=4 * MIB)
    except InvalidBatch as error:
        assert error.error in ("INVALID_RECORD", "CORRUPT_MESSAGE", "MESSAGE_TOO_LARGE")
        return
    # Passed: an independent decoder (protocol/records.py) reads the same records.
    header = scan_batches(batch)[0]
    decoded = list(iter_batch_records(bytes(batch), header))
    assert [r.offset_delta for r in decoded] == list(range(header.records_count))
    assert not compacted or all(r.key is not None for r in decoded)


@pytest.mark.parametrize("codec", list(Compression))
def test_records_longer_than_a_chunk_are_walked_as_they_stream(codec) -> None:
    """A record bigger than what the walker gathers (1 MiB) still validates, and its
    missing key is still found."""
    records = [
        Record(0, 0, b"k", b"a" * 100),
        Record(1, 0, None, bytes(range(256)) * (12 * 1024), (("h", b"x" * 3 * CHUNK_BYTES),)),
        Record(2, 0, b"k", b"z"),
    ]
    batch = make_batch(records, compression=codec)
    _validate(batch)
    error = _error(batch, compacted=True)
    assert isinstance(error, RecordValidationError)
    assert [index for index, _ in error.record_errors] == [1]


def test_compacted_topic_lists_every_keyless_record() -> None:
    records = [Record(i, 0, None if i % 10 == 0 else b"k", b"v") for i in range(100)]
    for codec in Compression:
        error = _error(make_batch(records, compression=codec), compacted=True)
        assert isinstance(error, RecordValidationError)
        assert error.error == "INVALID_RECORD"
        assert [index for index, _ in error.record_errors] == list(range(0, 100, 10))
        assert "10 record errors" in str(error)
    _validate(make_batch(records))  # keys are only required on compacted topics


@pytest.mark.parametrize(
    ("payload", "count"),
    [
        (_encoded(_keyed(3)), 1),  # a header saying 1 record holding 3
        (_encoded(_keyed(1)), 3),  # ... 3 records holding 1
        (_encoded(_keyed(2))[:-1], 2),  # the last record cut short
        (b"\x7e" + _encoded(_keyed(1))[1:], 1),  # a record length past the batch
        (b"\x01" + b"\x00" * 10, 1),  # a negative record length
        (b"\xff" * 12, 1),  # a varint longer than 5 bytes
        (_encoded([Record(0, 0, b"k", b"v"), Record(5, 0, b"k", b"v")]), 2),  # delta skips
    ],
)
def test_records_that_do_not_match_their_header_are_invalid_record(payload, count) -> None:
    for codec in Compression:
        compressed = payload if codec is Compression.NONE else _compress(codec, payload)
        assert _error(_around(compressed, count, codec)).error == "INVALID_RECORD"


def _compress(codec: Compression, payload: bytes) -> bytes:
    from gregor_broker.protocol.records import compress

    return compress(codec, payload)


def test_a_header_count_larger_than_the_headers_present_is_invalid_record() -> None:
    from gregor_broker.protocol.records import encode_varint

    header = encode_varint(1) + b"h" + encode_varint(1) + b"x"
    for declared in (2, 3):  # one header present
        body = b"\x00" + encode_varint(0) + encode_varint(0) + encode_varint(1) + b"k"
        body += encode_varint(1) + b"v" + encode_varint(declared) + header
        record = encode_varint(len(body)) + body
        assert _error(_around(record + _encoded([Record(1, 0, b"k", b"v")]), 2)).error == (
            "INVALID_RECORD"
        )
    body = b"\x00" + encode_varint(0) + encode_varint(0) + encode_varint(1) + b"k"
    body += encode_varint(1) + b"v" + encode_varint(1) + header
    _validate(_around(encode_varint(len(body)) + body, 1))  # the honest record passes


def test_a_field_running_past_its_record_is_invalid_record() -> None:
    good = encode_record(Record(0, 0, b"key", b"value"))
    body = bytearray(good)
    body[4] = 0x40  # the key length (zigzag 32) now runs past the record's end
    assert _error(_around(bytes(body), 1)).error == "INVALID_RECORD"


@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.LZ4, Compression.ZSTD])
def test_bytes_after_the_last_record_are_invalid_record(codec) -> None:
    payload = _compress(codec, _encoded(_keyed(3)) + b"\x00\x00")
    assert _error(_around(payload, 3, codec)).error == "INVALID_RECORD"


@pytest.mark.parametrize("codec", [c for c in Compression if c is not Compression.NONE])
def test_a_payload_the_codec_cannot_read_is_corrupt_message(codec) -> None:
    assert _error(_around(b"\x00garbage" * 10, 3, codec)).error == "CORRUPT_MESSAGE"
    whole = _compress(codec, _encoded(_keyed(30)))
    if codec is not Compression.SNAPPY:  # raw snappy has no end marker to miss
        assert _error(_around(whole[:-3], 30, codec)).error == "CORRUPT_MESSAGE"
    assert _error(_around(whole + b"junk", 30, codec)).error == "CORRUPT_MESSAGE"


@pytest.mark.parametrize("codec", [5, 6, 7])
def test_an_unknown_codec_is_unsupported_compression_type(codec) -> None:
    error = _error(_around(_encoded(_keyed(2)), 2, codec))
    assert error.error == "UNSUPPORTED_COMPRESSION_TYPE"


def test_every_frame_and_member_is_read() -> None:
    """Producers may concatenate zstd/LZ4 frames, gzip members, xerial snappy chunks."""
    first, second = _encoded(_keyed(3)), _encoded([Record(i, 0, b"k", b"v") for i in (3, 4)])
    xerial = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    for part in (first, second):
        block = snappy.compress(part)
        xerial += struct.pack(">i", len(block)) + block
    payloads = {
        Compression.ZSTD: zstandard.ZstdCompressor().compress(first)
        + zstandard.ZstdCompressor().compress(second),
        Compression.LZ4: lz4.frame.compress(first) + lz4.frame.compress(second),
        Compression.GZIP: gzip.compress(first) + gzip.compress(second),
        Compression.SNAPPY: xerial,
    }
    for codec, payload in payloads.items():
        _validate(_around(payload, 5, codec))
        keyless_second = _encoded([Record(i, 0, None, b"v") for i in (3, 4)])
        if codec is Compression.ZSTD:
            payload = zstandard.ZstdCompressor().compress(
                first
            ) + zstandard.ZstdCompressor().compress(keyless_second)
            error = _error(_around(payload, 5, codec), compacted=True)
            assert [index for index, _ in error.record_errors] == [3, 4]


def test_inflating_past_the_budget_is_message_too_large_and_the_budget_is_shared() -> None:
    value = b"\x00" * (24 * MIB)  # zstd level 3: a 2 MiB window, 1/8 of 16 MiB
    batch = make_batch([Record(0, 0, b"k", value)], compression=Compression.ZSTD)
    assert len(batch) < 4096
    assert _error(batch, limit=16 * MIB).error == "MESSAGE_TOO_LARGE"
    budget = DecompressionBudget(40 * MIB)
    headers = scan_batches(batch)
    validate_records(batch, headers, budget=budget)  # 24 MiB of the request's 40
    with pytest.raises(InvalidBatch) as raised:
        validate_records(batch, headers, budget=budget)  # 48 MiB in total
    assert raised.value.error == "MESSAGE_TOO_LARGE"
    # A raw snappy block declares its size: refused before it is inflated.
    raw = snappy.compress(_encoded([Record(0, 0, b"k", b"\x00" * (3 * MIB))]))
    assert _error(_around(raw, 1, Compression.SNAPPY), limit=MIB).error == "MESSAGE_TOO_LARGE"


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"base_offset": 5}, "INVALID_RECORD"),
        ({"attributes": 0x20}, "INVALID_RECORD"),  # control batch from a client
        ({"records_count": 0, "last_offset_delta": 0}, "INVALID_RECORD"),
        ({"records_count": 2**31 - 1, "last_offset_delta": 2**31 - 2}, "INVALID_RECORD"),
        ({"records_count": 3, "last_offset_delta": 1}, "INVALID_RECORD"),
        ({"producer_id": 9, "base_sequence": -1}, "INVALID_RECORD"),
    ],
)
def test_client_batch_rules(fields, error) -> None:
    assert _error(rewrite_header(make_batch(_keyed(3)), **fields)).error == error


def test_produce_request_rules_for_v3_and_later() -> None:
    one = make_batch(_keyed(2))
    validate_produce_records(9, one)
    zstd = make_batch(_keyed(2), compression=Compression.ZSTD)
    validate_produce_records(7, zstd)
    cases = [
        (9, one + one, "INVALID_RECORD"),  # one batch per partition
        (9, b"", "INVALID_RECORD"),
        (9, None, "INVALID_RECORD"),
        (9, one[:16] + b"\x01" + one[17:], "INVALID_RECORD"),  # magic 1
        (6, zstd, "UNSUPPORTED_COMPRESSION_TYPE"),
    ]
    for version, records, expected in cases:
        with pytest.raises(InvalidBatch) as raised:
            validate_produce_records(version, records)
        assert raised.value.error == expected


def test_a_zstd_window_over_an_eighth_of_the_limit_is_refused_before_inflating() -> None:
    """A zstd decoder fills its window as it inflates: a frame may declare at most 1/8 of
    produce.decompressed.max.bytes (8 MiB by default, enough for levels up to 19)."""
    records = _encoded(_keyed(50, b"x" * 1000))
    streamed = zstandard.ZstdCompressor(level=22).compressobj()  # no content size known
    ultra = streamed.compress(records) + streamed.flush()
    error = _error(_around(ultra, 50, Compression.ZSTD), limit=100 * MIB)
    assert error.error == "INVALID_RECORD"
    assert "window" in str(error)
    _validate(_around(ultra, 50, Compression.ZSTD), limit=1024 * MIB)  # 128 MiB allowed
    streamed = zstandard.ZstdCompressor(level=19).compressobj()
    level_19 = streamed.compress(records) + streamed.flush()
    _validate(_around(level_19, 50, Compression.ZSTD), limit=100 * MIB)
