"""The compiled record walk (``make native``, mypyc) answers exactly as the Python walk
it is built from, and the validator uses it only while it matches that source.

Valid records of every shape (hypothesis, as in test_validator.py) and mutated ones
(bytes flipped, cut short, counts that lie) go through both walks: the same positions and
counts, the same missing keys, or the same ``InvalidBatch`` with the same message.
"""

from __future__ import annotations

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings

from gregor_broker.log import record_walk, validator
from gregor_broker.protocol.record_batch import InvalidBatch
from gregor_broker.protocol.records import Record, encode_record

native = validator.compiled_walk()
needs_native = pytest.mark.skipif(
    native is None,
    reason="make native did not compile the record walk on this machine (no C compiler, "
    "Python headers or mypy): the Python walk runs, and test_validator.py covers it",
)

optional_bytes = st.one_of(st.none(), st.binary(max_size=200))
records = st.lists(
    st.tuples(
        st.integers(-(2**40), 2**40),  # timestamp delta
        optional_bytes,  # key
        optional_bytes,  # value
        st.lists(st.tuples(st.text(max_size=10), optional_bytes), max_size=3),
    ),
    min_size=1,
    max_size=30,
)


def _outcome(walker, data: bytes, count: int, *, compacted: bool, final: bool) -> tuple:
    missing: list[int] | None = [] if compacted else None
    try:
        position, walked = walker.walk(data, 0, len(data), 0, count, missing, final=final)
    except InvalidBatch as error:
        return ("invalid", error.error, str(error))
    return ("walked", position, walked, missing)


def _payload(fields: list[tuple]) -> bytes:
    return b"".join(
        encode_record(Record(i, ts, key, value, tuple(headers)))
        for i, (ts, key, value, headers) in enumerate(fields)
    )


@needs_native
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records, st.booleans(), st.booleans())
def test_valid_records_walk_the_same(fields, compacted, final) -> None:
    data = _payload(fields)
    expected = _outcome(record_walk, data, len(fields), compacted=compacted, final=final)
    assert expected[0] == "walked"
    assert _outcome(native, data, len(fields), compacted=compacted, final=final) == expected


@needs_native
@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_mutated_records_walk_the_same(data) -> None:
    fields = data.draw(records)
    payload = bytearray(_payload(fields))
    for _ in range(data.draw(st.integers(0, 4))):
        payload[data.draw(st.integers(0, len(payload) - 1))] = data.draw(st.integers(0, 255))
    payload = payload[: data.draw(st.integers(0, len(payload)))]
    count = data.draw(st.integers(0, len(fields) + 2))
    compacted = data.draw(st.booleans())
    final = data.draw(st.booleans())
    expected = _outcome(record_walk, bytes(payload), count, compacted=compacted, final=final)
    assert _outcome(native, bytes(payload), count, compacted=compacted, final=final) == expected


@needs_native
def test_the_validator_walks_with_the_compiled_walk_built_from_this_source() -> None:
    assert validator.WALK == "mypyc"
    assert validator._walker is native
    assert validator.source_digest(record_walk.__file__) == native.SOURCE_DIGEST


@needs_native
def test_a_compiled_walk_from_another_source_is_not_used(monkeypatch) -> None:
    monkeypatch.setattr(native, "SOURCE_DIGEST", "0" * 64)
    assert validator.compiled_walk() is None
