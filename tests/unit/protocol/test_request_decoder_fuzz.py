"""The request decoder turns any bytes into a request or MalformedRequest, nothing else.

A broker closes a connection on MalformedRequest; any other exception would be a bug
that a client could trigger at will. Hypothesis feeds the decoder mutated real
requests and plain garbage, and the test counts the inputs it tried.
"""

from __future__ import annotations

import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gregor_broker.protocol.wire import MalformedRequest
from gregor_broker.server.handlers import API_TABLE
from gregor_broker.server.request_router import RequestRouter, UnsupportedApiVersions

ROUTER = RequestRouter(broker=None, apis=API_TABLE)  # type: ignore[arg-type]
TRIED = {"inputs": 0, "decoded": 0, "refused": 0}


def _decode(frame: bytes) -> None:
    TRIED["inputs"] += 1
    try:
        ROUTER.decode(frame)
    except (MalformedRequest, UnsupportedApiVersions):
        TRIED["refused"] += 1
        return
    TRIED["decoded"] += 1


api_and_version = st.sampled_from(
    [
        (spec.key, v)
        for spec in API_TABLE.values()
        for v in range(spec.min_version, spec.max_version + 1)
    ]
)


@settings(max_examples=3000, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(api_and_version, st.integers(-(2**31), 2**31 - 1), st.binary(max_size=200))
def _valid_header_then_any_body(api: tuple[int, int], correlation_id: int, body: bytes) -> None:
    key, version = api
    header = struct.pack(">hhih", key, version, correlation_id, 3) + b"cli"
    # Flexible versions carry a tagged-field section after the client id.
    _decode(header + b"\x00" + body)
    _decode(header + body)


@settings(max_examples=2000, deadline=None)
@given(st.binary(max_size=100))
def _pure_garbage(data: bytes) -> None:
    _decode(data)


def test_decoder_turns_fuzzed_frames_into_requests_or_malformed_errors() -> None:
    TRIED.update(inputs=0, decoded=0, refused=0)
    _valid_header_then_any_body()
    _pure_garbage()
    # Both outcomes must occur, or one branch of the check would be dead.
    assert TRIED["inputs"] >= 5000, TRIED
    assert TRIED["decoded"] > 0 and TRIED["refused"] > 0, TRIED
    print(f"decoder fuzz: {TRIED}")


def test_an_array_length_beyond_the_frame_is_malformed_not_a_giant_allocation() -> None:
    # Found by this fuzzer: a Fetch v13 whose topic array claims ~10^10 elements made
    # kio's native decoder try to allocate 189 GB and abort the broker process.
    frame = bytes.fromhex(
        "0001000d000000010003636c690011e583b6280b95c636c2808be5b877a7ec4f4d792205b5736f"
        "fdabac94586fb65ddb37c4fd4534ab7693e479d045fbaf9f6a48"
    )
    try:
        ROUTER.decode(frame)
    except MalformedRequest as error:
        assert "array" in str(error) or "past the end" in str(error)
    else:
        raise AssertionError("a frame with an impossible array length was decoded")
