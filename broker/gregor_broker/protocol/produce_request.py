"""Produce request decoding, hand-written for the hot path.

Profiling unbatched produce showed decoding (the frame guard, kio's native decoder and
the frozen dataclasses it builds) taking a quarter of the broker's time for requests
whose only bulky field, the records, is copied out as it is anyway. This decoder reads
versions 3 to 11 directly; a test checks it against kio for every version, and the
request fuzzer feeds it the same garbage as the generic path.

Every read is bounds-checked: bytes that cannot be a Produce request raise
``MalformedRequest`` (the connection closes), never another exception.
"""

from __future__ import annotations

import struct

from .wire import MalformedRequest, read_unsigned_varint, skip_tagged_fields

MIN_VERSION = 3
MAX_VERSION = 11
FIRST_FLEXIBLE_VERSION = 9

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_ACKS_TIMEOUT = struct.Struct(">hi")


class PartitionProduceData:
    """One partition's records (``None`` when the producer sent a null batch)."""

    __slots__ = ("index", "records")

    def __init__(self, index: int, records: bytes | None) -> None:
        self.index = index
        self.records = records


class TopicProduceData:
    __slots__ = ("name", "partition_data")

    def __init__(self, name: str, partition_data: list[PartitionProduceData]) -> None:
        self.name = name
        self.partition_data = partition_data


class ProduceRequest:
    __slots__ = ("acks", "timeout_ms", "topic_data", "transactional_id")

    def __init__(
        self,
        transactional_id: str | None,
        acks: int,
        timeout_ms: int,
        topic_data: list[TopicProduceData],
    ) -> None:
        self.transactional_id = transactional_id
        self.acks = acks
        self.timeout_ms = timeout_ms
        self.topic_data = topic_data


class _Reader:
    """A cursor over one frame; each read checks that the bytes are there."""

    __slots__ = ("buffer", "end", "position")

    def __init__(self, buffer: bytes | memoryview, position: int) -> None:
        self.buffer = buffer
        self.position = position
        self.end = len(buffer)

    def take(self, size: int, what: str) -> int:
        """Advance over ``size`` bytes; returns where they start."""
        start = self.position
        if size < 0 or start + size > self.end:
            raise MalformedRequest(f"Produce request: {what} runs past the end of the frame")
        self.position = start + size
        return start

    def int32(self, what: str) -> int:
        return _I32.unpack_from(self.buffer, self.take(4, what))[0]

    def uvarint(self) -> int:
        value, self.position = read_unsigned_varint(self.buffer, self.position)
        return value

    def text(self, size: int, what: str) -> str:
        start = self.take(size, what)
        try:
            return bytes(self.buffer[start : start + size]).decode()
        except UnicodeDecodeError as error:
            raise MalformedRequest(f"Produce request: {what} is not UTF-8") from error

    def string(self, flexible: bool, what: str) -> str | None:
        """A (nullable) STRING: compact in flexible versions."""
        if flexible:
            size = self.uvarint() - 1
        else:
            size = _I16.unpack_from(self.buffer, self.take(2, what))[0]
        if size < 0:
            if size == -1:
                return None
            raise MalformedRequest(f"Produce request: {what} has length {size}")
        return self.text(size, what)

    def array_length(self, flexible: bool, what: str, min_item_size: int) -> int:
        size = self.uvarint() - 1 if flexible else self.int32(what)
        if size < 0:
            raise MalformedRequest(f"Produce request: {what} is null")
        if size * min_item_size > self.end - self.position:
            raise MalformedRequest(f"Produce request: {what} array runs past the end of the frame")
        return size

    def records(self, flexible: bool) -> bytes | None:
        size = self.uvarint() - 1 if flexible else self.int32("records length")
        if size < 0:
            if size == -1:
                return None
            raise MalformedRequest(f"Produce request: records have length {size}")
        start = self.take(size, "records")
        return bytes(self.buffer[start : start + size])

    def tagged_fields(self) -> None:
        self.position = skip_tagged_fields(self.buffer, self.position)


def decode_produce_request(
    buffer: bytes | memoryview, position: int, version: int
) -> ProduceRequest:
    """Decode the body of a Produce request that starts at ``position``."""
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise MalformedRequest(f"Produce v{version} is not supported")
    flexible = version >= FIRST_FLEXIBLE_VERSION
    reader = _Reader(buffer, position)
    transactional_id = reader.string(flexible, "transactional id")
    acks, timeout_ms = _ACKS_TIMEOUT.unpack_from(
        buffer, reader.take(_ACKS_TIMEOUT.size, "acks and timeout")
    )
    # The smallest topic: an empty name, no partitions (and no tagged fields).
    topic_count = reader.array_length(flexible, "topic", 3 if flexible else 6)
    topics = []
    for _ in range(topic_count):
        name = reader.string(flexible, "topic name")
        if name is None:
            raise MalformedRequest("Produce request: null topic name")
        # The smallest partition: an index and null records (and no tagged fields).
        partition_count = reader.array_length(flexible, "partition", 6 if flexible else 8)
        partitions = []
        for _ in range(partition_count):
            index = reader.int32("partition index")
            partitions.append(PartitionProduceData(index, reader.records(flexible)))
            if flexible:
                reader.tagged_fields()
        if flexible:
            reader.tagged_fields()
        topics.append(TopicProduceData(name, partitions))
    if flexible:
        reader.tagged_fields()
    return ProduceRequest(transactional_id, acks, timeout_ms, topics)
