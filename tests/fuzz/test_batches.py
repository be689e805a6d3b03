"""The fuzzer's stored-batch validator rejects every lie it sends and accepts honest
batches (pure functions, no broker): otherwise ``stored_invalid`` would prove nothing."""

from __future__ import annotations

import random

import pytest

from gregor_broker.protocol.record_batch import CONTROL_FLAG, TRANSACTIONAL_FLAG, Compression
from gregor_broker.protocol.records import Record, encode_record, make_batch

from . import batches


@pytest.mark.parametrize("lie", batches.LIES)
def test_every_lie_is_judged_invalid(lie: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # Small bombs: the validator's judgement does not depend on the size.
    monkeypatch.setattr(batches, "BOMB_SIZES", {codec: [1 << 20] for codec in batches.CODECS})
    for seed in range(20):
        rng = random.Random(seed)
        record_set = batches._LIES[lie](rng)
        if lie == "two_batches":
            continue  # each batch alone is valid; a broker must refuse the pair
        if lie == "batch_length_lie":
            continue  # the stored form cannot exist: the length decides what is stored
        assert batches.why_invalid(record_set) is not None, f"{lie} (seed {seed}) passed"


@pytest.mark.parametrize("codec", list(Compression))
def test_honest_batches_are_valid(codec: Compression) -> None:
    records = [Record(i, i, b"key", b"value" * i) for i in range(5)]
    assert batches.why_invalid(make_batch(records, compression=codec)) is None
    assert batches.why_invalid(batches.valid_batch(random.Random(1))) is None


def test_a_transaction_with_its_marker_is_valid() -> None:
    marker_record = encode_record(Record(0, 0, b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00"))
    marker = batches.raw_batch(
        marker_record, count=1, attributes=CONTROL_FLAG | TRANSACTIONAL_FLAG, producer_id=7
    )
    data = batches.raw_batch(
        batches.records(2, random.Random(0)),
        count=2,
        attributes=TRANSACTIONAL_FLAG,
        producer_id=7,
        producer_epoch=0,
        base_sequence=0,
    )
    markers = batches.producers_with_markers([data, marker])
    assert markers == {7}
    assert batches.why_invalid(marker, markers) is None
    assert batches.why_invalid(data, markers) is None
    assert batches.why_invalid(data) is not None  # no marker: no transaction
