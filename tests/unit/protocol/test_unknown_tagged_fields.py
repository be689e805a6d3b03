"""Unknown tagged fields in a flexible request are skipped, as KIP-482 requires.

A newer client may add a tagged field to any flexible request (or its header); a broker
that does not know the tag must ignore it and answer. kio's decoder refuses unknown
tags, so the frame guard copies such a body without them before kio sees it. Checked
for every flexible API and version Gregor advertises, at the top level, inside a nested
struct and in the request header.
"""

from __future__ import annotations

import struct
import uuid

import pytest
from tests.request_samples import request_frame, sample_request, with_unknown_tag

from gregor_broker.protocol import entities
from gregor_broker.protocol.wire import MalformedRequest, encode_unsigned_varint
from gregor_broker.server.handlers import API_TABLE
from gregor_broker.server.request_router import RequestRouter

ROUTER = RequestRouter(broker=None, apis=API_TABLE)  # type: ignore[arg-type]
FLEXIBLE = [
    (spec.key, version)
    for spec in API_TABLE.values()
    for version in range(spec.min_version, spec.max_version + 1)
    if entities.is_flexible(spec.key, version)
]


def _decoded(frame: bytes):
    _spec, header, request = ROUTER.decode(memoryview(frame)[4:])
    return header, request


@pytest.mark.parametrize(("key", "version"), FLEXIBLE)
def test_an_unknown_tag_in_a_request_body_is_skipped(key: int, version: int) -> None:
    body = entities.encode(sample_request(key, version))
    _header, expected = _decoded(request_frame(key, version, body))
    header, request = _decoded(request_frame(key, version, with_unknown_tag(body)))
    assert request == expected
    assert header.correlation_id == 7


def test_an_unknown_tag_inside_a_nested_struct_is_skipped() -> None:
    topic_id = uuid.uuid4()
    unknown = encode_unsigned_varint(1) + encode_unsigned_varint(77) + b"\x03abc"
    topic = b"\x07orders" + topic_id.bytes  # compact string (length + 1), uuid
    body = b"\x02" + topic + unknown + struct.pack(">i", 5000) + b"\x00"
    _header, request = _decoded(request_frame(20, 6, body))
    (state,) = request.topics
    assert (state.name, state.topic_id) == ("orders", topic_id)
    assert request.timeout.total_seconds() == 5


def test_known_tags_are_kept_next_to_unknown_ones() -> None:
    # Fetch v12 knows tag 0 (cluster_id) at the top level.
    body = entities.encode(sample_request(1, 12))
    tags = (
        encode_unsigned_varint(2)
        + encode_unsigned_varint(0)
        + encode_unsigned_varint(len(b"\x08cluster"))
        + b"\x08cluster"
        + encode_unsigned_varint(99)
        + b"\x01\x00"
    )
    _header, request = _decoded(request_frame(1, 12, body[:-1] + tags))
    assert request.cluster_id == "cluster"


def test_an_unknown_tag_in_a_request_header_is_skipped() -> None:
    body = entities.encode(sample_request(18, 3))
    header_tags = encode_unsigned_varint(1) + encode_unsigned_varint(5) + b"\x02hi"
    header, request = _decoded(request_frame(18, 3, body, header_tags=header_tags))
    assert header.client_id == "sample"
    assert request == sample_request(18, 3)


def test_an_unknown_tag_that_runs_past_the_frame_is_still_malformed() -> None:
    body = entities.encode(sample_request(18, 3))
    lying = body[:-1] + encode_unsigned_varint(1) + encode_unsigned_varint(9) + b"\x40abc"
    with pytest.raises(MalformedRequest):
        _decoded(request_frame(18, 3, lying))
