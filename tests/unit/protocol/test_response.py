"""The one response shape (protocol/response.py): each kind frames itself, with the
throttle time quotas set, read back with kio as a client reads it."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from gregor_broker.protocol import entities
from gregor_broker.protocol.fetch_response import EmptyFetchResponse
from gregor_broker.protocol.response import BodyResponse, NoResponse

HEARTBEAT, FETCH, API_VERSIONS = 12, 1, 18


def decode(api_key: int, version: int, frame: bytes) -> tuple[int, Any]:
    """(correlation id, response) of a frame: size, header (v1 with tags when flexible,
    v0 for ApiVersions), body."""
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    correlation_id = int.from_bytes(frame[4:8], "big")
    flexible = entities.is_flexible(api_key, version) and api_key != API_VERSIONS
    response, size = entities.response_reader(api_key, version)(frame, 8 + flexible)
    assert 8 + flexible + size == len(frame)
    return correlation_id, response


def test_a_body_response_is_encoded_with_kio_and_carries_the_throttle_time() -> None:
    response = BodyResponse(HEARTBEAT, {"throttle_time": 0, "error_code": ErrorCode.none})
    assert decode(HEARTBEAT, 4, response.encode_frame(4, 7)) == (
        7,
        entities.build(
            entities.payload_class(HEARTBEAT, 4, "response"),
            {"throttle_time": 0, "error_code": ErrorCode.none},
        ),
    )
    response.throttle_time = 1500  # a quota throttled the client
    _id, throttled = decode(HEARTBEAT, 4, response.encode_frame(4, 8))
    assert throttled.throttle_time.total_seconds() == 1.5


def test_api_versions_answers_with_header_v0_even_when_flexible() -> None:
    response = BodyResponse(
        API_VERSIONS,
        {"error_code": ErrorCode.unsupported_version, "api_keys": [], "throttle_time": 0},
    )
    frame = response.encode_frame(3, 9)
    correlation_id, decoded = decode(API_VERSIONS, 3, frame)
    assert correlation_id == 9
    assert decoded.error_code is ErrorCode.unsupported_version


def test_no_response_frames_nothing() -> None:
    assert NoResponse().encode_frame(9, 1) is None


def test_a_throttled_fetch_session_error_keeps_its_error() -> None:
    """Kafka's SessionErrorContext.getThrottledResponse: the session's error and the
    throttle time, no partitions, nothing counted against the fetch byte rate."""
    failed = EmptyFetchResponse(ErrorCode.fetch_session_id_not_found.value)
    throttled = failed.throttled(250)
    assert throttled.size == failed.size == 0
    parts, size = throttled.encode_frame(12, 3)
    frame = b"".join(parts)
    assert len(frame) == size
    correlation_id, decoded = decode(FETCH, 12, frame)
    assert correlation_id == 3
    assert decoded.error_code is ErrorCode.fetch_session_id_not_found
    assert decoded.throttle_time.total_seconds() == 0.25
    assert decoded.responses == ()
