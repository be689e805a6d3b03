"""Valid requests for every API and version, built from kio's schemas.

``sample_request(api_key, version)`` fills every field of the request class: arrays get
``elements`` entries, strings a short name, numbers 0, ids the zero UUID, records null;
tagged fields keep their defaults. What a broker answers to such a request does not
matter to the tests that use it; that it answers (instead of closing the connection) does.
"""

from __future__ import annotations

import datetime
import struct
import typing
import uuid
from dataclasses import MISSING, fields
from typing import Any

from gregor_broker.protocol import entities
from gregor_broker.protocol.wire import encode_unsigned_varint

_SCALARS: dict[str, Any] = {
    "bool": False,
    "int8": 0,
    "int16": 0,
    "uint16": 0,
    "int32": 0,
    "int64": 0,
    "float64": 0.0,
    "timedelta_i32": datetime.timedelta(0),
    "timedelta_i64": datetime.timedelta(0),
    "datetime_i64": datetime.datetime.fromtimestamp(0, tz=datetime.UTC),
    "uuid": uuid.UUID(int=0),
    "string": "sample",
    "bytes": b"",
    "records": None,
}


def sample_entity(cls: type, elements: int = 1) -> Any:
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for field in fields(cls):
        if field.metadata.get("tag") is not None and field.default is not MISSING:
            continue  # tagged fields keep their defaults: the tag section stays empty
        nested, sequence = entities.nested_entity_class(hints[field.name])
        kind = field.metadata.get("kafka_type")
        if nested is not None:
            item = sample_entity(nested, elements)
            values[field.name] = tuple(item for _ in range(elements)) if sequence else item
            continue
        value = _SCALARS.get(kind)
        if kind == "error_code":
            from kio.schema.errors import ErrorCode

            value = ErrorCode.none
        if value is None and type(None) not in typing.get_args(hints[field.name]):
            value = b""
        if sequence:
            values[field.name] = tuple(value for _ in range(elements))
        else:
            values[field.name] = value
    return cls(**values)


def sample_request(api_key: int, version: int, elements: int = 1) -> Any:
    return sample_entity(entities.payload_class(api_key, version, "request"), elements)


def request_frame(
    api_key: int,
    version: int,
    body: bytes,
    correlation_id: int = 7,
    *,
    client_id: bytes = b"sample",
    header_tags: bytes = b"\x00",
) -> bytes:
    """A size-prefixed frame: header v1, plus a tagged-field section (v2) when the
    version is flexible, then ``body``."""
    header = struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id
    if entities.is_flexible(api_key, version):
        header += header_tags
    return struct.pack(">i", len(header) + len(body)) + header + body


def with_unknown_tag(body: bytes, tag: int = 4242, value: bytes = b"future") -> bytes:
    """``body`` (an encoded flexible entity that ends with an empty tagged-field section)
    with one unknown tagged field added to that section."""
    assert body.endswith(b"\x00"), "the sample body must end with an empty tag section"
    return (
        body[:-1]
        + encode_unsigned_varint(1)
        + encode_unsigned_varint(tag)
        + encode_unsigned_varint(len(value))
        + value
    )
