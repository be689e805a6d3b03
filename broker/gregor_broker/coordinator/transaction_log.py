"""The records of ``__transaction_state``, in Kafka's exact formats
(``TransactionLogKey.json``, ``TransactionLogValue.json``).

- key: version int16 (0), then ``transactional_id`` string (int16 length);
- value version 0: ``producer_id`` int64, ``producer_epoch`` int16,
  ``transaction_timeout_ms`` int32, ``transaction_status`` int8, ``transaction_partitions``
  (nullable array of topic string + partition ids int32[]), ``last_update_ms`` int64,
  ``start_ms`` int64;
- value version 1 (flexible, what Kafka writes since 3.x's transactions V2 work): the same
  fields with compact strings/arrays and tagged fields: 0 ``previous_producer_id``,
  1 ``next_producer_id``, 2 ``client_transaction_version``;
- a null value is a tombstone (the transactional id expired).

The status byte is Kafka's ``TransactionState`` id (``transaction_metadata.State``).
Pure functions only.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from ..protocol.wire import encode_unsigned_varint, read_unsigned_varint

TRANSACTION_STATE_TOPIC = "__transaction_state"
KEY_VERSION = 0
VALUE_VERSION = 1

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class TransactionLogFormatError(ValueError):
    """A key or value that does not parse as the version it claims."""


@dataclass(frozen=True, slots=True)
class TransactionLogValue:
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    status: int
    partitions: dict[str, tuple[int, ...]] | None
    last_update_ms: int
    start_ms: int
    previous_producer_id: int = -1
    next_producer_id: int = -1
    client_transaction_version: int = 0
    unknown_tags: dict[int, bytes] = field(default_factory=dict)


def encode_key(transactional_id: str) -> bytes:
    data = transactional_id.encode("utf-8")
    return _I16.pack(KEY_VERSION) + _I16.pack(len(data)) + data


def decode_key(data: bytes) -> str:
    if len(data) < 4:
        raise TransactionLogFormatError("transaction log key shorter than 4 bytes")
    version, length = struct.unpack_from(">hh", data)
    if version != KEY_VERSION:
        raise TransactionLogFormatError(f"transaction log key version {version}")
    if length < 0 or 4 + length != len(data):
        raise TransactionLogFormatError("transaction log key length does not match")
    return data[4 : 4 + length].decode("utf-8")


def _compact_string(value: str) -> bytes:
    data = value.encode("utf-8")
    return encode_unsigned_varint(len(data) + 1) + data


def _tag(tag: int, payload: bytes) -> bytes:
    return encode_unsigned_varint(tag) + encode_unsigned_varint(len(payload)) + payload


def encode_value(value: TransactionLogValue, version: int = VALUE_VERSION) -> bytes:
    out = [_I16.pack(version), _I64.pack(value.producer_id), _I16.pack(value.producer_epoch)]
    out += [_I32.pack(value.transaction_timeout_ms), _I8.pack(value.status)]
    partitions = value.partitions
    if version == 0:
        if partitions is None:
            out.append(_I32.pack(-1))
        else:
            out.append(_I32.pack(len(partitions)))
            for topic, ids in partitions.items():
                data = topic.encode("utf-8")
                out += [_I16.pack(len(data)), data, _I32.pack(len(ids))]
                out += [_I32.pack(i) for i in ids]
        out += [_I64.pack(value.last_update_ms), _I64.pack(value.start_ms)]
        return b"".join(out)
    if partitions is None:
        out.append(encode_unsigned_varint(0))
    else:
        out.append(encode_unsigned_varint(len(partitions) + 1))
        for topic, ids in partitions.items():
            out += [_compact_string(topic), encode_unsigned_varint(len(ids) + 1)]
            out += [_I32.pack(i) for i in ids]
            out.append(encode_unsigned_varint(0))  # no tagged fields per topic
    out += [_I64.pack(value.last_update_ms), _I64.pack(value.start_ms)]
    tags: dict[int, bytes] = dict(value.unknown_tags)
    if value.previous_producer_id != -1:
        tags[0] = _I64.pack(value.previous_producer_id)
    if value.next_producer_id != -1:
        tags[1] = _I64.pack(value.next_producer_id)
    if value.client_transaction_version != 0:
        tags[2] = _I16.pack(value.client_transaction_version)
    out.append(encode_unsigned_varint(len(tags)))
    out += [_tag(tag, tags[tag]) for tag in sorted(tags)]
    return b"".join(out)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = memoryview(data)
        self.position = 0

    def take(self, size: int) -> memoryview:
        end = self.position + size
        if size < 0 or end > len(self.data):
            raise TransactionLogFormatError("transaction log value ends early")
        chunk = self.data[self.position : end]
        self.position = end
        return chunk

    def unpack(self, codec: struct.Struct) -> int:
        return codec.unpack(self.take(codec.size))[0]

    def uvarint(self) -> int:
        try:
            value, self.position = read_unsigned_varint(self.data, self.position)
        except Exception as error:
            raise TransactionLogFormatError(f"bad varint: {error}") from error
        return value


def decode_value(data: bytes) -> TransactionLogValue:
    reader = _Reader(data)
    version = reader.unpack(_I16)
    if version not in (0, 1):
        raise TransactionLogFormatError(f"transaction log value version {version}")
    producer_id = reader.unpack(_I64)
    producer_epoch = reader.unpack(_I16)
    timeout_ms = reader.unpack(_I32)
    status = reader.unpack(_I8)
    partitions: dict[str, tuple[int, ...]] | None
    if version == 0:
        count = reader.unpack(_I32)
        partitions = None if count < 0 else {}
        for _ in range(max(count, 0)):
            topic = bytes(reader.take(reader.unpack(_I16))).decode("utf-8")
            ids = tuple(reader.unpack(_I32) for _ in range(reader.unpack(_I32)))
            partitions[topic] = ids  # type: ignore[index]
        last_update, start = reader.unpack(_I64), reader.unpack(_I64)
        return TransactionLogValue(
            producer_id, producer_epoch, timeout_ms, status, partitions, last_update, start
        )
    count = reader.uvarint() - 1
    partitions = None if count < 0 else {}
    for _ in range(max(count, 0)):
        topic = bytes(reader.take(reader.uvarint() - 1)).decode("utf-8")
        ids = tuple(reader.unpack(_I32) for _ in range(reader.uvarint() - 1))
        for _ in range(reader.uvarint()):  # tagged fields of the topic entry: skipped
            reader.uvarint()
            reader.take(reader.uvarint())
        partitions[topic] = ids  # type: ignore[index]
    last_update, start = reader.unpack(_I64), reader.unpack(_I64)
    previous, following, client_version = -1, -1, 0
    unknown: dict[int, bytes] = {}
    for _ in range(reader.uvarint()):
        tag = reader.uvarint()
        payload = bytes(reader.take(reader.uvarint()))
        if tag == 0 and len(payload) == 8:
            previous = _I64.unpack(payload)[0]
        elif tag == 1 and len(payload) == 8:
            following = _I64.unpack(payload)[0]
        elif tag == 2 and len(payload) == 2:
            client_version = _I16.unpack(payload)[0]
        else:
            unknown[tag] = payload
    return TransactionLogValue(
        producer_id,
        producer_epoch,
        timeout_ms,
        status,
        partitions,
        last_update,
        start,
        previous,
        following,
        client_version,
        unknown,
    )
