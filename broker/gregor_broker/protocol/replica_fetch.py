"""The follower's Fetch: a hand-written request encoder and response decoder (v11).

A follower sends one Fetch per replication round trip, and with acks=all every round
trip is on the producer's critical path. Built through kio's generic path (a dict turned
into dataclasses, kio's Python writer, and a full decode of the response into
dataclasses with the records copied out), a small Fetch cost the follower more Python
time than appending what it brought. This module writes the request's bytes directly and
reads the response into plain tuples whose records are views of the received frame.

Only what a replica sends: Fetch v11 (Kafka's FetchRequest.json), no fetch session
(session 0, epoch -1: a full fetch each time, as Gregor's fetchers always did), no
forgotten topics. ``tests/unit/protocol/test_replica_fetch.py`` checks both directions
byte for byte against kio.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import NamedTuple

FETCH_API_KEY = 1
VERSION = 11

_REQUEST_HEAD = struct.Struct(">iiiibiii")  # replica, max wait, min, max, isolation, session
_PARTITION = struct.Struct(">iiqqi")  # partition, current epoch, fetch offset, log start, max
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_RESPONSE_HEAD = struct.Struct(">iihi")  # correlation id, throttle, error, session id
_PARTITION_HEAD = struct.Struct(">ihqqq")  # index, error, hw, last stable, log start
_ABORTED = struct.Struct(">qq")
# What follows the topics: no forgotten topics, rack_id "" (a replica has none to give).
_REQUEST_TAIL = _I32.pack(0) + _I16.pack(0)


class FetchPosition(NamedTuple):
    """One partition a follower asks for."""

    partition: int
    current_leader_epoch: int
    fetch_offset: int
    log_start_offset: int
    partition_max_bytes: int


class FetchedPartition(NamedTuple):
    """One partition of the response; ``records`` is a view of the frame (may be empty)."""

    topic: str
    partition: int
    error_code: int
    high_watermark: int
    log_start_offset: int
    records: memoryview


class FetchedResponse(NamedTuple):
    error_code: int
    partitions: list[FetchedPartition]


class MalformedResponse(ValueError):
    """The leader's response does not parse as a Fetch v11 response."""


def encode_request(
    correlation_id: int,
    client_id: bytes,
    *,
    replica_id: int,
    max_wait_ms: int,
    min_bytes: int,
    max_bytes: int,
    topics: Sequence[tuple[str, Sequence[FetchPosition]]],
) -> bytes:
    """A whole Fetch v11 request frame (size prefix included)."""
    out = bytearray(4)  # size, patched below
    out += struct.pack(">hhih", FETCH_API_KEY, VERSION, correlation_id, len(client_id))
    out += client_id
    out += _REQUEST_HEAD.pack(replica_id, max_wait_ms, min_bytes, max_bytes, 0, 0, -1, len(topics))
    pack = _PARTITION.pack
    for topic, partitions in topics:
        name = topic.encode()
        out += _I16.pack(len(name))
        out += name
        out += _I32.pack(len(partitions))
        for position in partitions:
            out += pack(*position)
    out += _REQUEST_TAIL
    _I32.pack_into(out, 0, len(out) - 4)
    return bytes(out)


def decode_response(frame: bytes | bytearray | memoryview) -> tuple[int, FetchedResponse]:
    """``(correlation_id, response)`` from a response frame without its size prefix."""
    view = memoryview(frame)
    try:
        correlation_id, _throttle, error_code, _session = _RESPONSE_HEAD.unpack_from(view, 0)
        position = _RESPONSE_HEAD.size
        (topic_count,) = _I32.unpack_from(view, position)
        position += 4
        partitions: list[FetchedPartition] = []
        append = partitions.append
        for _ in range(topic_count):
            (length,) = _I16.unpack_from(view, position)
            position += 2
            if length < 0 or position + length > len(view):
                raise MalformedResponse("bad topic name length")
            topic = bytes(view[position : position + length]).decode()
            position += length
            (count,) = _I32.unpack_from(view, position)
            position += 4
            for _ in range(count):
                index, error, high_watermark, _lso, log_start = _PARTITION_HEAD.unpack_from(
                    view, position
                )
                position += _PARTITION_HEAD.size
                (aborted,) = _I32.unpack_from(view, position)
                position += 4 + max(aborted, 0) * _ABORTED.size
                position += 4  # preferred_read_replica
                (size,) = _I32.unpack_from(view, position)
                position += 4
                if size < 0:
                    records = view[position:position]
                else:
                    if position + size > len(view):
                        raise MalformedResponse("records run past the frame")
                    records = view[position : position + size]
                    position += size
                append(FetchedPartition(topic, index, error, high_watermark, log_start, records))
    except struct.error as error:
        raise MalformedResponse(str(error)) from error
    return correlation_id, FetchedResponse(error_code, partitions)
