"""The follower's Fetch: a hand-written codec for both ends of a replication round trip (v11).

A follower sends one Fetch per replication round trip, and with acks=all every round
trip is on the producer's critical path. Built through kio's generic path (a dict turned
into dataclasses, kio's Python writer, and a full decode of the response into
dataclasses with the records copied out), a small Fetch cost the follower more Python
time than appending what it brought. This module writes the request's bytes directly and
reads the response into plain tuples whose records are views of the received frame.

Only what a replica sends: Fetch v11 (Kafka's FetchRequest.json), with its incremental
fetch session (KIP-227: a session id and epoch, forgotten topics; the fetcher keeps the
session, ``replication/fetcher.py``), an empty rack id.
``tests/unit/protocol/test_replica_fetch.py`` checks both directions byte for byte
against kio.

The leader's side: ``decode_request`` reads a follower's Fetch v11 body (replica id >= 0)
into plain objects carrying kio's field names, so the fetch handler, the fetch session
cache and the fetch reader take it as they take kio's ``FetchRequest``. The generic path
(the frame guard's walk of the schema, kio's decoder building dataclasses and a
``timedelta``) was a fifth of the leader's work per follower fetch. Anything it does not
recognise exactly (a consumer's replica id, read_committed, a rack id, trailing bytes, a
short frame) returns None and the generic path decodes, or refuses, the frame as before.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from datetime import timedelta
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
# What ends the request: rack_id "" (a replica has none to give).
_EMPTY_RACK = _I16.pack(0)


class FetchPosition(NamedTuple):
    """One partition a follower asks for."""

    partition: int
    current_leader_epoch: int
    fetch_offset: int
    log_start_offset: int
    partition_max_bytes: int


class FetchTopic(NamedTuple):
    """One topic of a follower's request (kio's ``FetchTopic`` field names)."""

    topic: str
    partitions: list[FetchPosition]


class ForgottenTopic(NamedTuple):
    """Partitions that leave a fetch session (kio's ``ForgottenTopic`` field names)."""

    topic: str
    partitions: list[int]


class ReplicaFetchRequest:
    """A follower's Fetch v11 as the leader reads it (kio's ``FetchRequest`` field names)."""

    __slots__ = (
        "forgotten_topics_data",
        "max_bytes",
        "max_wait_ms",
        "min_bytes",
        "replica_id",
        "session_epoch",
        "session_id",
        "topics",
    )

    # What ``decode_request`` accepts only at these values.
    isolation_level = 0
    rack_id = ""

    def __init__(
        self,
        replica_id: int,
        max_wait_ms: int,
        min_bytes: int,
        max_bytes: int,
        topics: list[FetchTopic],
        session_id: int = 0,
        session_epoch: int = -1,
        forgotten_topics_data: list[ForgottenTopic] | None = None,
    ) -> None:
        self.replica_id = replica_id
        self.max_wait_ms = max_wait_ms
        self.min_bytes = min_bytes
        self.max_bytes = max_bytes
        self.topics = topics
        self.session_id = session_id
        self.session_epoch = session_epoch
        self.forgotten_topics_data = forgotten_topics_data or []

    @property
    def max_wait(self) -> timedelta:
        return timedelta(milliseconds=self.max_wait_ms)


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
    session_id: int = 0


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
    session_id: int = 0,
    session_epoch: int = -1,
    forgotten: Sequence[tuple[str, Sequence[int]]] = (),
) -> bytes:
    """A whole Fetch v11 request frame (size prefix included). Without a session (id 0,
    epoch -1) it is a full fetch, as Kafka's sessionless fetchers send."""
    out = bytearray(4)  # size, patched below
    out += struct.pack(">hhih", FETCH_API_KEY, VERSION, correlation_id, len(client_id))
    out += client_id
    out += _REQUEST_HEAD.pack(
        replica_id, max_wait_ms, min_bytes, max_bytes, 0, session_id, session_epoch, len(topics)
    )
    pack = _PARTITION.pack
    for topic, partitions in topics:
        _write_name_and_count(out, topic, len(partitions))
        for position in partitions:
            out += pack(*position)
    out += _I32.pack(len(forgotten))
    for topic, indexes in forgotten:
        _write_name_and_count(out, topic, len(indexes))
        for index in indexes:
            out += _I32.pack(index)
    out += _EMPTY_RACK
    _I32.pack_into(out, 0, len(out) - 4)
    return bytes(out)


def _write_name_and_count(out: bytearray, topic: str, count: int) -> None:
    name = topic.encode()
    out += _I16.pack(len(name))
    out += name
    out += _I32.pack(count)


def decode_request(frame: bytes | memoryview, offset: int) -> ReplicaFetchRequest | None:
    """A follower's Fetch v11 body at ``offset`` of a request frame (without its size), or
    None when it is anything else: the caller decodes those the generic way."""
    try:
        replica_id, max_wait_ms, min_bytes, max_bytes, isolation, session, epoch, count = (
            _REQUEST_HEAD.unpack_from(frame, offset)
        )
        if replica_id < 0 or isolation != 0:
            return None
        position = offset + _REQUEST_HEAD.size
        end = len(frame)
        # Every topic takes at least 6 bytes: a count past the frame is not a request.
        if count < 0 or count * 6 > end - position:
            return None
        topics = []
        unpack_partition = _PARTITION.unpack_from
        partition_size = _PARTITION.size
        for _ in range(count):
            name, partitions, position = _name_and_count(frame, position, partition_size)
            positions = []
            for _ in range(partitions):
                positions.append(FetchPosition._make(unpack_partition(frame, position)))
                position += partition_size
            topics.append(FetchTopic(name, positions))
        (count,) = _I32.unpack_from(frame, position)
        position += 4
        if count < 0 or count * 6 > end - position:
            return None
        forgotten = []
        for _ in range(count):
            name, partitions, position = _name_and_count(frame, position, 4)
            indexes = list(struct.unpack_from(f">{partitions}i", frame, position))
            position += 4 * partitions
            forgotten.append(ForgottenTopic(name, indexes))
        if bytes(frame[position:]) != _EMPTY_RACK:
            return None  # a rack id, or bytes past the request
    except (struct.error, UnicodeDecodeError, _NotAReplicaFetch):
        return None
    return ReplicaFetchRequest(
        replica_id, max_wait_ms, min_bytes, max_bytes, topics, session, epoch, forgotten
    )


class _NotAReplicaFetch(ValueError):
    """A length or count that does not fit the frame: not a request this decoder reads."""


def _name_and_count(
    frame: bytes | memoryview, position: int, item_size: int
) -> tuple[str, int, int]:
    """A topic name, the count of the array after it (items of at least ``item_size``
    bytes, all within the frame) and the position past both."""
    (length,) = _I16.unpack_from(frame, position)
    position += 2
    if length < 0 or position + length > len(frame):
        raise _NotAReplicaFetch
    name = bytes(frame[position : position + length]).decode()
    position += length
    (count,) = _I32.unpack_from(frame, position)
    position += 4
    if count < 0 or count * item_size > len(frame) - position:
        raise _NotAReplicaFetch
    return name, count, position


def decode_response(frame: bytes | bytearray | memoryview) -> tuple[int, FetchedResponse]:
    """``(correlation_id, response)`` from a response frame without its size prefix."""
    view = memoryview(frame)
    try:
        correlation_id, _throttle, error_code, session_id = _RESPONSE_HEAD.unpack_from(view, 0)
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
    except (struct.error, UnicodeDecodeError) as error:
        raise MalformedResponse(str(error)) from error
    return correlation_id, FetchedResponse(error_code, partitions, session_id)
