"""The follower's hand-written Fetch v11 codec (fetch sessions included) reads and writes
exactly what kio does."""

from __future__ import annotations

import contextlib
import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gregor_broker.protocol import entities, replica_fetch
from gregor_broker.protocol.fetch_response import (
    PartitionResult,
    TopicResult,
    encode_fetch_response,
)
from gregor_broker.protocol.replica_fetch import FetchPosition
from gregor_broker.protocol.wire import frame, response_header

TOPICS = [
    ("orders", [FetchPosition(0, 7, 1234, 0, 1048576), FetchPosition(3, 7, 0, 0, 65536)]),
    ("päyments", [FetchPosition(1, 2, 5_000_000_000, 17, 1)]),
]


# What follower 2's requests below say besides their topics and session.
FOLLOWER_2 = {"replica_id": 2, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 10485760}


def test_request_matches_kio_byte_for_byte() -> None:
    ours = replica_fetch.encode_request(99, b"gregor-replica-2", **FOLLOWER_2, topics=TOPICS)
    request = entities.build(
        entities.payload_class(1, 11, "request"),
        {
            "replica_id": 2,
            "max_wait": 500,
            "min_bytes": 1,
            "max_bytes": 10485760,
            "isolation_level": 0,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [
                {"topic": topic, "partitions": [p._asdict() for p in partitions]}
                for topic, partitions in TOPICS
            ],
            "forgotten_topics_data": [],
            "rack_id": "",
        },
    )
    header = struct.pack(">hhih", 1, 11, 99, 16) + b"gregor-replica-2"
    assert ours == frame(header, entities.encode(request))


def test_an_incremental_session_request_matches_kio_byte_for_byte() -> None:
    """A fetch in a session (KIP-227): its id and epoch, and the partitions it forgets."""
    ours = replica_fetch.encode_request(
        99,
        b"gregor-replica-2",
        **FOLLOWER_2,
        topics=TOPICS[:1],
        session_id=1234567,
        session_epoch=42,
        forgotten=[("päyments", [1, 4]), ("gone", [0])],
    )
    request = _kio_request(
        session_id=1234567,
        session_epoch=42,
        topics=[
            {"topic": topic, "partitions": [p._asdict() for p in partitions]}
            for topic, partitions in TOPICS[:1]
        ],
        forgotten_topics_data=[
            {"topic": "päyments", "partitions": [1, 4]},
            {"topic": "gone", "partitions": [0]},
        ],
    )
    frame_bytes, _offset = _request_frame(request)  # correlation id 99, the same client
    assert ours == struct.pack(">i", len(frame_bytes)) + frame_bytes


def test_request_without_partitions_matches_kio() -> None:
    ours = replica_fetch.encode_request(
        1, b"", replica_id=0, max_wait_ms=0, min_bytes=0, max_bytes=0, topics=[]
    )
    request = entities.build(
        entities.payload_class(1, 11, "request"),
        {
            "replica_id": 0,
            "max_wait": 0,
            "min_bytes": 0,
            "max_bytes": 0,
            "isolation_level": 0,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [],
            "forgotten_topics_data": [],
            "rack_id": "",
        },
    )
    assert ours == frame(struct.pack(">hhih", 1, 11, 1, 0), entities.encode(request))


def _kio_response() -> bytes:
    body = entities.encode_response(
        1,
        11,
        {
            "throttle_time": 3,
            "error_code": 0,
            "session_id": 0,
            "responses": [
                {
                    "topic": "orders",
                    "partitions": [
                        {
                            "partition_index": 0,
                            "error_code": 0,
                            "high_watermark": 40,
                            "last_stable_offset": 40,
                            "log_start_offset": 2,
                            "aborted_transactions": [
                                {"producer_id": 5, "first_offset": 6},
                            ],
                            "preferred_read_replica": -1,
                            "records": b"batch-bytes",
                        },
                        {
                            "partition_index": 3,
                            "error_code": 74,  # FENCED_LEADER_EPOCH
                            "high_watermark": -1,
                            "last_stable_offset": -1,
                            "log_start_offset": -1,
                            "aborted_transactions": None,
                            "preferred_read_replica": -1,
                            "records": None,
                        },
                    ],
                },
                {
                    "topic": "päyments",
                    "partitions": [
                        {
                            "partition_index": 1,
                            "error_code": 0,
                            "high_watermark": 5_000_000_001,
                            "last_stable_offset": 5_000_000_001,
                            "log_start_offset": 17,
                            "aborted_transactions": [],
                            "preferred_read_replica": 2,
                            "records": b"",
                        }
                    ],
                },
            ],
        },
    )
    return response_header(77, False) + body


def test_response_decoder_reads_what_kio_writes() -> None:
    correlation_id, response = replica_fetch.decode_response(_kio_response())
    assert correlation_id == 77
    assert response.error_code == 0
    assert response.session_id == 0
    got = [
        (p.topic, p.partition, p.error_code, p.high_watermark, p.log_start_offset, bytes(p.records))
        for p in response.partitions
    ]
    assert got == [
        ("orders", 0, 0, 40, 2, b"batch-bytes"),
        ("orders", 3, 74, -1, -1, b""),
        ("päyments", 1, 0, 5_000_000_001, 17, b""),
    ]


def test_response_decoder_reads_the_brokers_own_encoder() -> None:
    """What a Gregor leader sends (the sendfile encoder, records as bytes here)."""
    parts, size = encode_fetch_response(
        11,
        5,
        session_id=31337,
        topics=[
            TopicResult(
                "orders", None, [PartitionResult(2, 0, 9, 9, 0, b"abc", aborted_transactions=None)]
            )
        ],
    )
    data = b"".join(parts)
    assert len(data) == size
    correlation_id, response = replica_fetch.decode_response(data[4:])
    assert correlation_id == 5
    assert response.session_id == 31337
    assert [(p.partition, p.high_watermark, bytes(p.records)) for p in response.partitions] == [
        (2, 9, b"abc")
    ]


@pytest.mark.parametrize("cut", [3, 12, 20, 40, 60])
def test_truncated_response_is_malformed(cut: int) -> None:
    data = _kio_response()
    with pytest.raises(replica_fetch.MalformedResponse):
        replica_fetch.decode_response(data[:cut])


def _kio_request(**overrides: object) -> object:
    """A Fetch v11 request body built by kio, decoded back by kio (the generic path)."""
    data = {
        "replica_id": 2,
        "max_wait": 500,
        "min_bytes": 1,
        "max_bytes": 10485760,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {"topic": topic, "partitions": [p._asdict() for p in partitions]}
            for topic, partitions in TOPICS
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }
    data.update(overrides)
    return entities.build(entities.payload_class(1, 11, "request"), data)


def _request_frame(request: object) -> tuple[bytes, int]:
    """A request frame without its size, and where its body starts."""
    header = struct.pack(">hhih", 1, 11, 99, 16) + b"gregor-replica-2"
    return header + entities.encode(request), len(header)


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        # An incremental fetch session: its id and epoch, and partitions it forgets.
        {
            "session_id": 5,
            "session_epoch": 3,
            "forgotten_topics_data": [
                {"topic": "orders", "partitions": [1, 2]},
                {"topic": "x", "partitions": []},
            ],
        },
        {"session_id": 0, "session_epoch": 0},  # a full fetch asking for a session
    ],
)
def test_leader_reads_a_followers_request_as_kio_does(overrides: dict[str, object]) -> None:
    """The leader's decoder gives the fetch path the same values as kio's decoder."""
    frame_bytes, offset = _request_frame(_kio_request(**overrides))
    ours = replica_fetch.decode_request(memoryview(frame_bytes), offset)
    theirs, _size = entities.request_reader(1, 11)(memoryview(frame_bytes), offset)
    assert ours is not None
    _assert_read_alike(ours, theirs)


def _assert_read_alike(ours: Any, theirs: Any) -> None:
    """The lean decoder's request and kio's carry the same values."""
    for field in (
        "replica_id",
        "max_wait",
        "min_bytes",
        "max_bytes",
        "isolation_level",
        "session_id",
        "session_epoch",
        "rack_id",
    ):
        assert getattr(ours, field) == getattr(theirs, field), field
    assert _positions(ours.topics) == _positions(theirs.topics)
    assert [(f.topic, list(f.partitions)) for f in ours.forgotten_topics_data] == [
        (f.topic, list(f.partitions)) for f in theirs.forgotten_topics_data
    ]


def test_leader_reads_its_own_followers_encoder() -> None:
    data = replica_fetch.encode_request(
        7, b"gregor-replica-3", replica_id=3, max_wait_ms=0, min_bytes=1, max_bytes=9, topics=TOPICS
    )[4:]
    request = replica_fetch.decode_request(data, 2 + 2 + 4 + 2 + len(b"gregor-replica-3"))
    assert request is not None
    assert (request.replica_id, request.max_wait_ms, request.max_bytes) == (3, 0, 9)
    assert [(t.topic, list(t.partitions)) for t in request.topics] == [
        (topic, list(partitions)) for topic, partitions in TOPICS
    ]


@pytest.mark.parametrize(
    "overrides",
    [
        {"replica_id": -1},  # a consumer: the generic path (rack, isolation, quotas)
        {"isolation_level": 1},
        {"rack_id": "rack-a"},
    ],
)
def test_anything_but_a_plain_follower_fetch_is_left_to_the_generic_path(
    overrides: dict[str, object],
) -> None:
    frame_bytes, offset = _request_frame(_kio_request(**overrides))
    assert replica_fetch.decode_request(memoryview(frame_bytes), offset) is None


@pytest.mark.parametrize("cut", [1, 10, 30, 45, 60, -1])
def test_a_truncated_or_padded_request_is_left_to_the_generic_path(cut: int) -> None:
    frame_bytes, offset = _request_frame(_kio_request())
    damaged = frame_bytes + b"\x00" if cut == -1 else frame_bytes[: offset + cut]
    assert replica_fetch.decode_request(memoryview(damaged), offset) is None


def test_a_forgotten_partition_count_past_the_frame_is_left_to_the_generic_path() -> None:
    frame_bytes, offset = _request_frame(
        _kio_request(forgotten_topics_data=[{"topic": "orders", "partitions": [1]}])
    )
    # The forgotten topic's partition count: before its one index and the empty rack id.
    count_at = len(frame_bytes) - 2 - 4 - 4
    damaged = frame_bytes[:count_at] + struct.pack(">i", 2**28) + frame_bytes[count_at + 4 :]
    assert replica_fetch.decode_request(memoryview(damaged), offset) is None


def test_an_array_count_past_the_frame_is_left_to_the_generic_path() -> None:
    frame_bytes, offset = _request_frame(_kio_request())
    count_at = offset + 4 * 4 + 1 + 4 + 4
    damaged = frame_bytes[:count_at] + struct.pack(">i", 2**30) + frame_bytes[count_at + 4 :]
    assert replica_fetch.decode_request(memoryview(damaged), offset) is None


# Damaged frames (property tests). The leader's ``decode_request`` takes a follower's frame
# before kio's decoder sees it, so whatever it accepts must be exactly what kio reads from
# the same bytes: a damaged frame it misread would move a follower's log end offset, and
# with it the high watermark, to a value the follower never sent. Everything else it must
# leave to the generic path (None). The follower's ``decode_response`` must read the frame
# or say it is malformed (the fetcher then drops the connection), never fail another way.

_REQUESTS = [
    _request_frame(_kio_request()),
    _request_frame(
        _kio_request(
            session_id=5,
            session_epoch=3,
            forgotten_topics_data=[
                {"topic": "orders", "partitions": [1, 2]},
                {"topic": "x", "partitions": []},
            ],
        )
    ),
]
_RESPONSE = _kio_response()
# Integers a damaged count, length or offset tends to take.
_EXTREMES = [0, -1, 1, 2, 255, 65_536, 2**31 - 1, -(2**31)]


@st.composite
def _damaged(draw: st.DrawFn, frame: bytes, start: int) -> bytes:
    """``frame`` with one to four bytes flipped, set, inserted or deleted, or an int32
    overwritten, at or after ``start``."""
    data = bytearray(frame)
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "set", "insert", "delete", "int32"]))
        at = draw(st.integers(start, max(start, len(data) - 1)))
        if kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif kind == "delete":
            del data[at : at + draw(st.integers(1, 8))]
        elif kind == "int32" and at + 4 <= len(data):
            struct.pack_into(">i", data, at, draw(st.sampled_from(_EXTREMES)))
        elif kind == "flip" and at < len(data):
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "set" and at < len(data):
            data[at] = draw(st.integers(0, 255))
    return bytes(data)


@st.composite
def _damaged_request(draw: st.DrawFn) -> tuple[bytes, int]:
    frame, offset = draw(st.sampled_from(_REQUESTS))
    return draw(_damaged(frame, offset)), offset


def _positions(topics: Any) -> list[tuple[str, list[tuple[int, ...]]]]:
    fields = FetchPosition._fields
    return [(t.topic, [tuple(getattr(p, f) for f in fields) for p in t.partitions]) for t in topics]


@settings(max_examples=3000, deadline=None, suppress_health_check=list(HealthCheck))
@given(_damaged_request())
def test_a_damaged_request_is_read_as_kio_reads_it_or_left_to_kio(
    damaged: tuple[bytes, int],
) -> None:
    data, offset = damaged
    ours = replica_fetch.decode_request(memoryview(data), offset)
    if ours is None:
        return
    theirs, size = entities.request_reader(1, 11)(memoryview(data), offset)
    assert offset + size == len(data)
    _assert_read_alike(ours, theirs)


@settings(max_examples=3000, deadline=None, suppress_health_check=list(HealthCheck))
@given(_damaged(_RESPONSE, 0))
def test_a_damaged_response_is_read_or_called_malformed(data: bytes) -> None:
    """Any exception but MalformedResponse fails this test."""
    with contextlib.suppress(replica_fetch.MalformedResponse):
        replica_fetch.decode_response(data)


def test_a_topic_name_that_is_not_utf8_makes_the_response_malformed() -> None:
    at = _RESPONSE.index(b"orders")
    damaged = _RESPONSE[:at] + b"\xff" + _RESPONSE[at + 1 :]
    with pytest.raises(replica_fetch.MalformedResponse):
        replica_fetch.decode_response(damaged)
