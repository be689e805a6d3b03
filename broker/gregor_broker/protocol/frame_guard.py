"""Check a request body's lengths before kio's native decoder sees it.

kio's decoder (Rust) allocates an array's storage from the length the client sent,
before reading any element: a 20-byte frame claiming 10^10 elements makes it request
hundreds of gigabytes, and the allocation failure aborts the whole broker process. This
walker follows the same schema (kio's dataclasses) over the raw bytes and rejects any
array, string or byte length larger than the bytes left, so a hostile or broken frame
becomes MalformedRequest (the connection closes) instead of a crash.

It reads only lengths and skips over values, so it costs little: a produce request is a
handful of length checks, and record bytes are skipped, never touched.
"""

from __future__ import annotations

import typing
from dataclasses import fields, is_dataclass
from functools import cache
from typing import Any

from .wire import MalformedRequest, read_unsigned_varint

_FIXED = {
    "bool": 1,
    "int8": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "float64": 8,
    "uuid": 16,
}
_LENGTH_PREFIXED = {"string", "bytes", "records"}

# A field step: (kafka type or nested class, is an array, tag or None)
_Step = tuple[Any, bool, int | None]


def _nested_class(annotation: Any) -> tuple[type | None, bool]:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if is_dataclass(annotation):
        return annotation, False  # type: ignore[return-value]
    if origin is tuple:
        inner = args[0]
        return (inner if is_dataclass(inner) else None), True
    for arg in args:
        if arg is type(None):
            continue
        found, sequence = _nested_class(arg)
        if found is not None or sequence:
            return found, sequence
    return None, False


@cache
def _steps(cls: type) -> tuple[list[_Step], dict[int, _Step], bool]:
    hints = typing.get_type_hints(cls)
    ordered: list[_Step] = []
    tagged: dict[int, _Step] = {}
    for field in fields(cls):
        nested, sequence = _nested_class(hints[field.name])
        kind: Any = nested if nested is not None else field.metadata.get("kafka_type")
        tag = field.metadata.get("tag")
        step = (kind, sequence, tag)
        if tag is None:
            ordered.append(step)
        else:
            tagged[tag] = step
    return ordered, tagged, bool(getattr(cls, "__flexible__", False))


def _read_int(buffer: memoryview, position: int, size: int, end: int) -> tuple[int, int]:
    if position + size > end:
        raise MalformedRequest("request ends inside a length field")
    return int.from_bytes(buffer[position : position + size], "big", signed=True), position + size


def _varint(buffer: memoryview, position: int, end: int) -> tuple[int, int]:
    value, position = read_unsigned_varint(buffer, position)
    if position > end:
        raise MalformedRequest("request ends inside a length field")
    return value, position


def _check_value(buffer: memoryview, position: int, end: int, kind: Any, flexible: bool) -> int:
    if isinstance(kind, type):
        return _check_entity(buffer, position, end, kind)
    size = _FIXED.get(kind)
    if size is not None:
        position += size
    elif kind in _LENGTH_PREFIXED:
        if flexible:
            length, position = _varint(buffer, position, end)
            length -= 1
        else:
            length, position = _read_int(buffer, position, 2 if kind == "string" else 4, end)
        if length > 0:
            position += length
        elif length < -1:
            raise MalformedRequest(f"negative {kind} length {length}")
    else:
        raise MalformedRequest(f"unknown field type {kind!r}")
    if position > end:
        raise MalformedRequest(f"{kind} runs past the end of the request")
    return position


def _check_step(buffer: memoryview, position: int, end: int, step: _Step, flexible: bool) -> int:
    kind, sequence, _tag = step
    if not sequence:
        return _check_value(buffer, position, end, kind, flexible)
    if flexible:
        count, position = _varint(buffer, position, end)
        count -= 1
    else:
        count, position = _read_int(buffer, position, 4, end)
    if count < -1:
        raise MalformedRequest(f"negative array length {count}")
    # Every element takes at least one byte, so a count above the bytes left is a lie.
    if count > end - position:
        raise MalformedRequest(f"array of {count} elements in {end - position} bytes")
    for _ in range(count):
        position = _check_value(buffer, position, end, kind, flexible)
    return position


def _check_entity(buffer: memoryview, position: int, end: int, cls: type) -> int:
    ordered, tagged, flexible = _steps(cls)
    for step in ordered:
        position = _check_step(buffer, position, end, step, flexible)
    if flexible:
        count, position = _varint(buffer, position, end)
        if count > end - position:
            raise MalformedRequest(f"{count} tagged fields in {end - position} bytes")
        for _ in range(count):
            tag, position = _varint(buffer, position, end)
            size, position = _varint(buffer, position, end)
            field_end = position + size
            if field_end > end:
                raise MalformedRequest("tagged field runs past the end of the request")
            step = tagged.get(tag)
            if step is not None:
                _check_step(buffer, position, field_end, step, flexible)
            position = field_end
    return position


def check_request(cls: type, buffer: memoryview | bytes, position: int) -> None:
    """Raise MalformedRequest unless every length in the body fits in the frame."""
    view = buffer if isinstance(buffer, memoryview) else memoryview(buffer)
    _check_entity(view, position, len(view), cls)
