"""The hand-written Produce request decoder reads exactly what kio reads, and refuses
what kio cannot read with MalformedRequest only (random garbage reaches it through
the request fuzzer, test_request_decoder_fuzz.py)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gregor_broker.protocol import entities
from gregor_broker.protocol.produce_request import decode_produce_request
from gregor_broker.protocol.wire import MalformedRequest

VERSIONS = range(3, 12)

partitions = st.lists(
    st.fixed_dictionaries(
        {
            "index": st.integers(-(2**31), 2**31 - 1),
            "records": st.one_of(st.none(), st.binary(max_size=64)),
        }
    ),
    max_size=3,
)
topics = st.lists(
    st.fixed_dictionaries(
        {"name": st.text(max_size=12), "partition_data": partitions},
    ),
    max_size=3,
)
requests = st.fixed_dictionaries(
    {
        "transactional_id": st.one_of(st.none(), st.text(max_size=10)),
        "acks": st.sampled_from([-1, 0, 1, 2]),
        "timeout": st.integers(0, 2**31 - 1),
        "topic_data": topics,
    }
)


def kio_encoded(version: int, data: dict) -> bytes:
    cls = entities.payload_class(0, version, "request")
    topic_cls, _ = entities.nested_entity_class(cls.__dataclass_fields__["topic_data"].type)
    partition_cls, _ = entities.nested_entity_class(
        topic_cls.__dataclass_fields__["partition_data"].type
    )
    request = entities.build(
        cls,
        {
            **data,
            "topic_data": tuple(
                entities.build(
                    topic_cls,
                    {
                        "name": topic["name"],
                        "partition_data": tuple(
                            entities.build(partition_cls, p) for p in topic["partition_data"]
                        ),
                    },
                )
                for topic in data["topic_data"]
            ),
        },
    )
    return entities.encode(request)


def as_plain(request) -> dict:
    return {
        "transactional_id": request.transactional_id,
        "acks": request.acks,
        "timeout": request.timeout_ms,
        "topic_data": [
            {
                "name": t.name,
                "partition_data": [
                    {"index": p.index, "records": p.records} for p in t.partition_data
                ],
            }
            for t in request.topic_data
        ],
    }


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=60, deadline=None)
@given(data=requests)
def test_decoder_reads_what_kio_wrote(version: int, data: dict) -> None:
    body = b"\x07prefix" + kio_encoded(version, data)
    decoded = decode_produce_request(body, 7, version)
    assert as_plain(decoded) == data
    # And kio's own reader agrees with the input (the test's encoder is right).
    kio_request, _ = entities.request_reader(0, version)(body, 7)
    assert kio_request.acks == data["acks"]
    assert len(kio_request.topic_data) == len(data["topic_data"])


@pytest.mark.parametrize("version", [3, 8, 9, 11])
def test_every_truncation_is_malformed(version: int) -> None:
    data = {
        "transactional_id": "tx",
        "acks": -1,
        "timeout": 30000,
        "topic_data": [
            {"name": "orders", "partition_data": [{"index": 2, "records": b"r" * 20}]},
            {"name": "audit", "partition_data": [{"index": 0, "records": None}]},
        ],
    }
    body = kio_encoded(version, data)
    assert as_plain(decode_produce_request(body, 0, version)) == data
    for cut in range(len(body)):
        with pytest.raises(MalformedRequest):
            decode_produce_request(body[:cut], 0, version)


@pytest.mark.parametrize("version", [3, 9])
def test_an_impossible_array_length_is_refused_before_any_work(version: int) -> None:
    flexible = version >= 9
    prefix = (b"\x00" if flexible else b"\xff\xff") + b"\x00\x01" + b"\x00\x00\x75\x30"
    huge = b"\xff\xff\xff\xff\x07" if flexible else b"\x7f\xff\xff\xff"
    with pytest.raises(MalformedRequest, match="array"):
        decode_produce_request(prefix + huge + b"\x00" * 16, 0, version)
