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
from dataclasses import MISSING, fields, replace
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


# Nulls anywhere ------------------------------------------------------------------------

_LENGTH_PREFIXED = ("string", "bytes", "records")
# A placeholder of 40 characters: its length prefix is 0x29 (compact), 00 28 (string)
# or 00 00 00 28 (bytes), which ``encode_with_nulls`` overwrites with a null.
_MARK_LENGTH = 40


def nullable_fields(cls: type, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], bool]]:
    """Every string, bytes and array field of ``cls`` and of the structs inside it (not
    the tagged ones): (path of field names, whether the schema lets it be null)."""
    hints = typing.get_type_hints(cls)
    found = []
    for field in fields(cls):
        if field.metadata.get("tag") is not None:
            continue
        annotation = hints[field.name]
        nested, sequence = entities.nested_entity_class(annotation)
        path = (*prefix, field.name)
        if sequence or field.metadata.get("kafka_type") in _LENGTH_PREFIXED:
            found.append((path, type(None) in typing.get_args(annotation)))
        if nested is not None:
            found += nullable_fields(nested, path)
    return found


def _replace_at(entity: Any, path: tuple[str, ...], value: Any) -> Any:
    """``entity`` with the field at ``path`` set to ``value``; a path through an array
    goes through its first element."""
    name, rest = path[0], path[1:]
    if not rest:
        return replace(entity, **{name: value})
    inner = getattr(entity, name)
    if isinstance(inner, tuple):
        inner = (_replace_at(inner[0], rest, value), *inner[1:])
    else:
        inner = _replace_at(inner, rest, value)
    return replace(entity, **{name: inner})


def null_mark(kafka_type: str) -> str | bytes:
    """A placeholder value for a string or bytes field that ``splice_nulls`` later turns
    into a null on the wire (kio refuses to write a null the schema does not allow)."""
    mark = ("\x7fnull:" + uuid.uuid4().hex).ljust(_MARK_LENGTH, "~")
    return mark if kafka_type == "string" else mark.encode()


def splice_nulls(encoded: bytes, marks: list[str | bytes], flexible: bool) -> bytes:
    """``encoded`` with every ``null_mark`` in it (length prefix and all) replaced by a
    null of its kind; marks not found (inside an array left empty) are ignored."""
    for mark in marks:
        raw = mark.encode() if isinstance(mark, str) else mark
        at = encoded.find(raw)
        if at < 0:
            continue
        if flexible:
            prefix, null = 1, b"\x00"
        elif isinstance(mark, str):
            prefix, null = 2, b"\xff\xff"
        else:
            prefix, null = 4, b"\xff\xff\xff\xff"
        encoded = encoded[: at - prefix] + null + encoded[at + len(raw) :]
    return encoded


def encode_with_nulls(entity: Any, nulls: list[tuple[tuple[str, ...], str | None]]) -> bytes:
    """``entity`` encoded with a null at each path of ``nulls``, whether or not the schema
    allows one there. Each path comes with the field's kafka type (None for an array:
    kio writes a null array as asked)."""
    marks: list[str | bytes] = []
    for path, kafka_type in nulls:
        value: Any = None
        if kafka_type is not None:
            value = null_mark(kafka_type)
            marks.append(value)
        entity = _replace_at(entity, path, value)
    return splice_nulls(entities.encode(entity), marks, bool(type(entity).__flexible__))


def field_type(cls: type, path: tuple[str, ...]) -> str | None:
    """The kafka type of the field at ``path`` (None for an array or a struct)."""
    for name in path[:-1]:
        nested, _ = entities.nested_entity_class(typing.get_type_hints(cls)[name])
        assert nested is not None
        cls = nested
    annotation = typing.get_type_hints(cls)[path[-1]]
    _, sequence = entities.nested_entity_class(annotation)
    if sequence:
        return None
    found = next(f for f in fields(cls) if f.name == path[-1])
    return found.metadata.get("kafka_type")
