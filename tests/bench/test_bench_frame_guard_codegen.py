"""The frame guard's generated checkers agree with the generic walk they are made from.

``frame_guard`` generates one checker per request class for speed (a hot spot found with
``make bench --profile``). For every API and version Gregor serves, real requests and
mutated or truncated ones must get the same verdict from both: the same end position,
or MalformedRequest from both.
"""

from __future__ import annotations

import struct

from bench.decode_cost import fetch_frame, produce_frame
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gregor_broker.protocol import entities
from gregor_broker.protocol.frame_guard import _compiled as compiled_checker
from gregor_broker.protocol.frame_guard import check_request_generic
from gregor_broker.protocol.wire import MalformedRequest, parse_request_header
from gregor_broker.server.handlers import API_TABLE

VERSIONS = [
    (spec.key, version)
    for spec in API_TABLE.values()
    for version in range(spec.min_version, spec.max_version + 1)
]


def _verdict(check, cls: type, body: bytes) -> object:
    view = memoryview(body)
    try:
        return check(cls, view)
    except MalformedRequest:
        return "malformed"


def _generated(cls: type, view: memoryview) -> int:
    from gregor_broker.protocol.frame_guard import _copy_entity, _NeedsCopy

    try:
        return compiled_checker(cls)(view, 0, len(view))
    except _NeedsCopy:  # check_request then walks the body again, copying it
        return _copy_entity(view, 0, len(view), cls, bytearray())


def _generic(cls: type, view: memoryview) -> int:
    from gregor_broker.protocol.frame_guard import _check_entity

    return _check_entity(view, 0, len(view), cls)


def _same_verdict(key: int, version: int, body: bytes) -> None:
    cls = entities.payload_class(key, version, "request")
    assert _verdict(_generated, cls, body) == _verdict(_generic, cls, body), (key, version)


@settings(max_examples=3000, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.sampled_from(VERSIONS), st.binary(max_size=120))
def test_generated_and_generic_checkers_agree_on_any_body(api, body: bytes) -> None:
    _same_verdict(*api, body)


def _bodies() -> list[tuple[int, int, bytes]]:
    frames = [(0, v, produce_frame(v, 3)) for v in (3, 7, 9, 11)]
    frames += [(1, v, fetch_frame(v, 2)) for v in (4, 11, 12, 16)]
    bodies = []
    for key, version, frame in frames:
        header = parse_request_header(frame, entities.is_flexible(key, version))
        bodies.append((key, version, frame[header.body_offset :]))
    return bodies


BODIES = _bodies()


@settings(max_examples=2000, deadline=None)
@given(
    st.sampled_from(BODIES),
    st.integers(0, 2000),
    st.integers(0, 255),
    st.integers(0, 2000),
)
def test_generated_and_generic_checkers_agree_on_mutated_requests(
    case, where: int, byte: int, cut: int
) -> None:
    key, version, body = case
    mutated = bytearray(body)
    mutated[where % len(mutated)] = byte
    _same_verdict(key, version, bytes(mutated))
    _same_verdict(key, version, bytes(mutated[: cut % (len(mutated) + 1)]))


def test_real_requests_pass_both_checkers_to_their_last_byte() -> None:
    for key, version, body in BODIES:
        cls = entities.payload_class(key, version, "request")
        assert _generated(cls, memoryview(body)) == len(body)
        check_request_generic(cls, body, 0)


def test_a_huge_array_count_is_refused_by_the_generated_checker() -> None:
    cls = entities.payload_class(0, 7, "request")
    body = struct.pack(">hhi", -1, 1, 30000) + struct.pack(">i", 2**31 - 1)
    assert _verdict(_generated, cls, body) == "malformed"
