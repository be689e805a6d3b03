"""``iter_record_spans`` (the log cleaner's view of records, with its inlined one-byte
varints) agrees with the full decoder on any records, long varints included, and refuses a
truncated payload as a corrupt batch."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gregor_broker.protocol.record_batch import InvalidBatch
from gregor_broker.protocol.records import (
    Record,
    decode_records,
    encode_record,
    iter_record_spans,
)

deltas = st.one_of(st.integers(-64, 63), st.integers(-(2**40), 2**40))
optional_bytes = st.one_of(st.none(), st.binary(max_size=300))
records = st.lists(
    st.builds(
        Record,
        offset_delta=deltas,
        timestamp_delta=deltas,
        key=optional_bytes,
        value=optional_bytes,
        headers=st.lists(st.tuples(st.text(max_size=5), optional_bytes), max_size=2).map(tuple),
    ),
    max_size=20,
)


@given(records)
def test_spans_agree_with_the_decoder(batch: list[Record]) -> None:
    payload = b"".join(encode_record(r) for r in batch)
    spans = list(iter_record_spans(payload, len(batch)))
    decoded = decode_records(payload, len(batch))
    assert [(s.offset_delta, s.timestamp_delta, s.key, s.has_value) for s in spans] == [
        (r.offset_delta, r.timestamp_delta, r.key, r.value is not None) for r in decoded
    ]
    # The spans tile the payload: the cleaner copies them byte for byte.
    assert b"".join(payload[s.start : s.end] for s in spans) == payload


@given(records.filter(bool), st.data())
def test_a_truncated_payload_is_a_corrupt_batch(batch: list[Record], data) -> None:
    payload = b"".join(encode_record(r) for r in batch)
    cut = data.draw(st.integers(0, len(payload) - 1))
    with pytest.raises(InvalidBatch):
        list(iter_record_spans(payload[:cut], len(batch)))
