"""The records of ``__consumer_offsets``, in Kafka's exact key and value formats.

Kafka's group coordinator writes two kinds of records to ``__consumer_offsets``
(``GroupMetadataManager``; the schemas are Kafka's ``OffsetCommitKey.json``,
``OffsetCommitValue.json``, ``GroupMetadataKey.json`` and ``GroupMetadataValue.json``).
kio does not model these record schemas, so they are encoded here by hand:

- key version 0 or 1: ``OffsetCommitKey`` (group string, topic string, partition int32);
  value ``OffsetCommitValue`` v0..v3 (Kafka writes v3, or v1 when the commit carries an
  explicit expiry, as OffsetCommit v2..v4's retention time does);
- key version 2: ``GroupMetadataKey`` (group string); value ``GroupMetadataValue``
  v0..v3 (Kafka writes v3: generation, protocol, leader, state timestamp and members
  with their subscription and assignment);
- a record with a key and a null value is a tombstone: the offset or group is gone.

Strings are int16-length UTF-8 (-1 for null), bytes int32-length, all big-endian, each
key and value starting with its int16 version. Other key versions (KIP-848's new group
records, transaction records) are skipped by the loader, as Kafka's old coordinator does.
Pure functions only: no I/O.
"""

from __future__ import annotations

import array
import operator
import struct
import sys
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field

OFFSETS_TOPIC = "__consumer_offsets"

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_METADATA_VALUE_VERSION = 3

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


# Group ids longer than this (in UTF-16 code units) take over a millisecond to hash:
# their hashes are kept (``_long_hashes``), and handlers compute them off the event loop
# first (``hash_is_cheap``). Kafka limits group ids only by the request size.
LONG_STRING_UNITS = 4096
_LONG_HASHES_KEPT = 1024
# Keyed by (length, Python's hash of the string), not by the string: the cache keeps no
# megabyte-long ids alive. Python's string hash is a keyed 64-bit SipHash, computed in C
# and stored in the string object.
_long_hashes: OrderedDict[tuple[int, int], int] = OrderedDict()
_MASK = 0xFFFFFFFF
_STRIDE = 16
_STRIDE_POWER = pow(31, _STRIDE, 1 << 32)
_STRIDE_WEIGHTS = tuple(pow(31, _STRIDE - 1 - j, 1 << 32) for j in range(_STRIDE))


def java_string_hashcode(value: str) -> int:
    """Java's ``String.hashCode``: over UTF-16 code units, in 32-bit two's complement."""
    if len(value) > LONG_STRING_UNITS:
        key = (len(value), hash(value))
        found = _long_hashes.get(key)
        if found is None:
            found = _long_hashes[key] = _hashcode(value)
            if len(_long_hashes) > _LONG_HASHES_KEPT:
                _long_hashes.popitem(last=False)
        return found
    return _hashcode(value)


def hash_is_cheap(value: str) -> bool:
    """Whether ``java_string_hashcode(value)`` answers at once (short or already known)."""
    return len(value) <= LONG_STRING_UNITS or (len(value), hash(value)) in _long_hashes


def _hashcode(value: str) -> int:
    """h = h * 31 + unit, _STRIDE units per step (h * 31^16 + a weighted sum): about 3x
    fewer interpreted operations than one unit at a time."""
    units = array.array(
        "H", value.encode("utf-16-le" if sys.byteorder == "little" else "utf-16-be")
    )
    count = len(units)
    whole = count - count % _STRIDE
    result = 0
    if whole:
        columns = [units[j:whole:_STRIDE] for j in range(_STRIDE)]
        power, weights = _STRIDE_POWER, _STRIDE_WEIGHTS
        for row in zip(*columns, strict=True):
            result = (result * power + sum(map(operator.mul, row, weights))) & _MASK
    for unit in units[whole:]:
        result = (result * 31 + unit) & _MASK
    return result - (1 << 32) if result & 0x80000000 else result


def partition_for(group_id: str, num_partitions: int) -> int:
    """The ``__consumer_offsets`` partition of a group: Kafka's
    ``Utils.abs(groupId.hashCode) % groupMetadataTopicPartitionCount``."""
    code = java_string_hashcode(group_id)
    absolute = 0 if code == -(2**31) else abs(code)
    return absolute % num_partitions


class RecordFormatError(ValueError):
    """A key or value that does not parse as the version it claims."""


# -- primitive writers and a reader --------------------------------------------------------


def _string(value: str | None) -> bytes:
    if value is None:
        return _I16.pack(-1)
    data = value.encode("utf-8")
    return _I16.pack(len(data)) + data


def _bytes(value: bytes | None) -> bytes:
    if value is None:
        return _I32.pack(-1)
    return _I32.pack(len(value)) + value


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.position = 0

    def _take(self, size: int) -> bytes:
        end = self.position + size
        if size < 0 or end > len(self.data):
            raise RecordFormatError("record field runs past the end")
        chunk = self.data[self.position : end]
        self.position = end
        return chunk

    def i16(self) -> int:
        return _I16.unpack(self._take(2))[0]

    def i32(self) -> int:
        return _I32.unpack(self._take(4))[0]

    def i64(self) -> int:
        return _I64.unpack(self._take(8))[0]

    def string(self) -> str | None:
        length = self.i16()
        if length < 0:
            return None
        return self._take(length).decode("utf-8")

    def bytes(self) -> bytes | None:
        length = self.i32()
        if length < 0:
            return None
        return self._take(length)


# -- offsets ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    """A committed offset (Kafka's ``OffsetAndMetadata``); times in ms, -1 for none."""

    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class MemberRecord:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: tuple[MemberRecord, ...] = field(default_factory=tuple)


def encode_offset_commit_key(key: OffsetCommitKey) -> bytes:
    return (
        _I16.pack(OFFSET_COMMIT_KEY_VERSION)
        + _string(key.group)
        + _string(key.topic)
        + _I32.pack(key.partition)
    )


def encode_offset_commit_value(value: OffsetAndMetadata) -> bytes:
    """v3, or v1 when an explicit expiry must be kept (Kafka does the same)."""
    if value.expire_timestamp >= 0:
        return (
            _I16.pack(OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY)
            + _I64.pack(value.offset)
            + _string(value.metadata)
            + _I64.pack(value.commit_timestamp)
            + _I64.pack(value.expire_timestamp)
        )
    return (
        _I16.pack(OFFSET_COMMIT_VALUE_VERSION)
        + _I64.pack(value.offset)
        + _I32.pack(value.leader_epoch)
        + _string(value.metadata)
        + _I64.pack(value.commit_timestamp)
    )


def encode_group_metadata_key(key: GroupMetadataKey) -> bytes:
    return _I16.pack(GROUP_METADATA_KEY_VERSION) + _string(key.group)


def encode_group_metadata_value(value: GroupMetadataValue) -> bytes:
    parts = [
        _I16.pack(GROUP_METADATA_VALUE_VERSION),
        _string(value.protocol_type),
        _I32.pack(value.generation),
        _string(value.protocol),
        _string(value.leader),
        _I64.pack(value.current_state_timestamp),
        _I32.pack(len(value.members)),
    ]
    for member in value.members:
        parts += [
            _string(member.member_id),
            _string(member.group_instance_id),
            _string(member.client_id),
            _string(member.client_host),
            _I32.pack(member.rebalance_timeout_ms),
            _I32.pack(member.session_timeout_ms),
            _bytes(member.subscription),
            _bytes(member.assignment),
        ]
    return b"".join(parts)


def decode_key(data: bytes) -> OffsetCommitKey | GroupMetadataKey | None:
    """The key of a record, or None for key versions this coordinator does not own."""
    reader = _Reader(data)
    version = reader.i16()
    if version in (0, 1):
        group, topic = reader.string(), reader.string()
        partition = reader.i32()
        if group is None or topic is None:
            raise RecordFormatError("offset commit key with a null group or topic")
        return OffsetCommitKey(group, topic, partition)
    if version == GROUP_METADATA_KEY_VERSION:
        group = reader.string()
        if group is None:
            raise RecordFormatError("group metadata key with a null group")
        return GroupMetadataKey(group)
    return None


def decode_offset_commit_value(data: bytes) -> OffsetAndMetadata:
    reader = _Reader(data)
    version = reader.i16()
    if version not in (0, 1, 2, 3):
        raise RecordFormatError(f"unknown OffsetCommitValue version {version}")
    offset = reader.i64()
    leader_epoch = reader.i32() if version >= 3 else -1
    metadata = reader.string() or ""
    commit_timestamp = reader.i64()
    expire_timestamp = reader.i64() if version == 1 else -1
    return OffsetAndMetadata(offset, leader_epoch, metadata, commit_timestamp, expire_timestamp)


def decode_group_metadata_value(data: bytes) -> GroupMetadataValue:
    reader = _Reader(data)
    version = reader.i16()
    if version not in (0, 1, 2, 3):
        raise RecordFormatError(f"unknown GroupMetadataValue version {version}")
    protocol_type = reader.string() or ""
    generation = reader.i32()
    protocol = reader.string()
    leader = reader.string()
    state_timestamp = reader.i64() if version >= 2 else -1
    count = reader.i32()
    members = []
    for _ in range(max(count, 0)):
        member_id = reader.string() or ""
        instance_id = reader.string() if version >= 3 else None
        client_id = reader.string() or ""
        client_host = reader.string() or ""
        if version == 0:
            # v0 has no rebalance timeout: the session timeout stood in for it.
            rebalance_timeout = session_timeout = reader.i32()
        else:
            rebalance_timeout = reader.i32()
            session_timeout = reader.i32()
        members.append(
            MemberRecord(
                member_id,
                instance_id,
                client_id,
                client_host,
                rebalance_timeout,
                session_timeout,
                reader.bytes() or b"",
                reader.bytes() or b"",
            )
        )
    return GroupMetadataValue(
        protocol_type, generation, protocol, leader, state_timestamp, tuple(members)
    )


# -- replay ----------------------------------------------------------------------------


@dataclass(slots=True)
class LoadedPartition:
    """What replaying one ``__consumer_offsets`` partition in offset order leaves:
    the latest value of every key (tombstones remove), as compaction would."""

    offsets: dict[str, dict[tuple[str, int], OffsetAndMetadata]] = field(default_factory=dict)
    groups: dict[str, GroupMetadataValue] = field(default_factory=dict)
    # Transactional offset commits whose producer has no marker in the partition yet:
    # group -> producer id -> offsets.
    pending_txn_offsets: dict[str, dict[int, dict[tuple[str, int], OffsetAndMetadata]]] = field(
        default_factory=dict
    )
    records: int = 0
    skipped: int = 0


def replay(records: Iterable[tuple[bytes | None, bytes | None]]) -> LoadedPartition:
    loaded = LoadedPartition()
    for key_bytes, value_bytes in records:
        loaded.records += 1
        if key_bytes is None:
            loaded.skipped += 1
            continue
        try:
            key = decode_key(key_bytes)
            if isinstance(key, OffsetCommitKey):
                group_offsets = loaded.offsets.setdefault(key.group, {})
                if value_bytes is None:
                    group_offsets.pop((key.topic, key.partition), None)
                else:
                    group_offsets[(key.topic, key.partition)] = decode_offset_commit_value(
                        value_bytes
                    )
            elif isinstance(key, GroupMetadataKey):
                if value_bytes is None:
                    loaded.groups.pop(key.group, None)
                else:
                    loaded.groups[key.group] = decode_group_metadata_value(value_bytes)
            else:
                loaded.skipped += 1
        except RecordFormatError:
            loaded.skipped += 1
    for group in [g for g, offsets in loaded.offsets.items() if not offsets]:
        del loaded.offsets[group]
    return loaded
