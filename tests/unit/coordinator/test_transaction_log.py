"""``__transaction_state`` records in Kafka's formats."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gregor_broker.coordinator.transaction_log import (
    TransactionLogFormatError,
    TransactionLogValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)


def test_the_key_is_version_0_and_an_int16_string():
    assert encode_key("payments") == struct.pack(">hh", 0, 8) + b"payments"
    assert decode_key(encode_key("payments")) == "payments"
    with pytest.raises(TransactionLogFormatError):
        decode_key(struct.pack(">hh", 1, 1) + b"x")


def test_value_version_0_layout_matches_kafka():
    value = TransactionLogValue(5, 2, 60000, 1, {"orders": (0, 3)}, 111, 100)
    expected = (
        struct.pack(">hqhib", 0, 5, 2, 60000, 1)
        + struct.pack(">i", 1)
        + struct.pack(">h", 6)
        + b"orders"
        + struct.pack(">iii", 2, 0, 3)
        + struct.pack(">qq", 111, 100)
    )
    assert encode_value(value, version=0) == expected
    assert decode_value(expected) == value


values = st.builds(
    TransactionLogValue,
    producer_id=st.integers(-1, 2**63 - 1),
    producer_epoch=st.integers(-1, 2**15 - 1),
    transaction_timeout_ms=st.integers(0, 2**31 - 1),
    status=st.integers(0, 7),
    partitions=st.one_of(
        st.none(),
        st.dictionaries(st.text(min_size=1, max_size=20), st.tuples(st.integers(0, 100))),
    ),
    last_update_ms=st.integers(0, 2**62),
    start_ms=st.integers(-1, 2**62),
    previous_producer_id=st.integers(-1, 2**62),
    next_producer_id=st.integers(-1, 2**62),
    client_transaction_version=st.integers(0, 2),
)


@given(values)
def test_flexible_values_round_trip(value):
    assert decode_value(encode_value(value)) == value


def test_unknown_tags_are_kept_and_truncation_is_an_error():
    value = TransactionLogValue(5, 2, 1, 0, None, 1, 1, unknown_tags={9: b"\x01\x02"})
    data = encode_value(value)
    assert decode_value(data) == value
    with pytest.raises(TransactionLogFormatError):
        decode_value(data[:-3])
