"""Check a request body's lengths before kio's native decoder sees it.

kio's decoder (Rust) allocates an array's storage from the length the client sent,
before reading any element: a 20-byte frame claiming 10^10 elements makes it request
hundreds of gigabytes, and the allocation failure aborts the whole broker process. This
walker follows the same schema (kio's dataclasses) over the raw bytes and rejects any
array, string or byte length larger than the bytes left, so a hostile or broken frame
becomes MalformedRequest (the connection closes) instead of a crash.

It also makes unknown tagged fields harmless (KIP-482: a receiver skips the tags it
does not know, so that a newer client can add one). kio's decoder refuses them, so when
the walk meets one, the body is copied without its unknown tags (``_copy_entity``, a
second walk that only runs then) and kio decodes the copy. The same copy clamps an
int64 duration kio cannot represent (OffsetCommit's retention time).

It reads only lengths and skips over values, so it costs little: a produce request is a
handful of length checks, and record bytes are skipped, never touched. Each request class
gets its own checker, generated once from the schema as straight-line Python (the
generic walker, ``_check_entity``, pays a function call, a tuple and a dict lookup per
field: about 3x the cost on a produce request, 5x on a fetch; ``bench/decode_cost.py``
measures it).
"""

from __future__ import annotations

import struct
import typing
from collections.abc import Callable
from dataclasses import fields
from functools import cache
from typing import Any, NamedTuple

from .entities import nested_entity_class
from .wire import MalformedRequest, encode_unsigned_varint, read_unsigned_varint

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


class _Step(NamedTuple):
    """One field of a schema, as the walkers need it."""

    kind: Any  # a kafka type name, or the nested entity class
    sequence: bool  # an array
    tag: int | None
    nullable: bool  # a string, bytes or array field that may be sent as null
    name: str


@cache
def _steps(cls: type) -> tuple[list[_Step], dict[int, _Step], bool]:
    hints = typing.get_type_hints(cls)
    ordered: list[_Step] = []
    tagged: dict[int, _Step] = {}
    for field in fields(cls):
        nested, sequence = nested_entity_class(hints[field.name])
        kind: Any = nested if nested is not None else field.metadata.get("kafka_type")
        tag = field.metadata.get("tag")
        nullable = type(None) in typing.get_args(hints[field.name])
        step = _Step(kind, sequence, tag, nullable, field.name)
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


def _check_value(
    buffer: memoryview, position: int, end: int, kind: Any, flexible: bool, nullable: bool = True
) -> int:
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
        elif length == -1 and not nullable:
            raise MalformedRequest(f"a non-nullable {kind} was serialized as null")
    else:
        raise MalformedRequest(f"unknown field type {kind!r}")
    if position > end:
        raise MalformedRequest(f"{kind} runs past the end of the request")
    return position


def _check_step(buffer: memoryview, position: int, end: int, step: _Step, flexible: bool) -> int:
    kind, sequence = step.kind, step.sequence
    if not sequence:
        return _check_value(buffer, position, end, kind, flexible, step.nullable)
    count, position = _array_count(buffer, position, end, flexible)
    if count == -1 and not step.nullable:
        raise _non_nullable(step)
    for _ in range(count):
        position = _check_value(buffer, position, end, kind, flexible, nullable=False)
    return position


def _array_count(buffer: memoryview, position: int, end: int, flexible: bool) -> tuple[int, int]:
    """An array's element count (-1: null) and the position after it, checked."""
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
    return count, position


def _non_nullable(step: _Step) -> MalformedRequest:
    """Kafka's generated readers refuse a null where the schema has no
    ``nullableVersions`` ("non-nullable field X was serialized as null"), and the
    request then fails to parse: the connection closes. kio would decode it as None and
    hand a handler a request no Kafka broker accepts."""
    return MalformedRequest(f"non-nullable field {step.name} was serialized as null")


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


# Unknown tagged fields ---------------------------------------------------------------


class _NeedsCopy(Exception):
    """Raised by a generated checker at the first unknown tag or out-of-range duration:
    the body must be copied (``_copy_entity``) before kio can decode it."""


# kio turns an int64 duration into a timedelta of microseconds, and refuses (ValueError)
# one beyond +-2**63 microseconds. OffsetCommit v2-v4's retention time is the only such
# field: a larger value means "keep for ever" (clamped to the largest kio takes), and a
# more negative one "the broker's default" (-1, Kafka's DEFAULT_RETENTION_TIME).
DURATION_I64_MAX_MS = (2**63 - 1) // 1000


def _clamped_duration(value: int) -> int:
    if value > DURATION_I64_MAX_MS:
        return DURATION_I64_MAX_MS
    if value < -DURATION_I64_MAX_MS:
        return -1
    return value


def _copy_value(
    buffer: memoryview,
    position: int,
    end: int,
    kind: Any,
    flexible: bool,
    out: bytearray,
    nullable: bool = True,
) -> int:
    if isinstance(kind, type):
        return _copy_entity(buffer, position, end, kind, out)
    after = _check_value(buffer, position, end, kind, flexible, nullable)
    if kind == "timedelta_i64":
        value = int.from_bytes(buffer[position:after], "big", signed=True)
        out += _clamped_duration(value).to_bytes(8, "big", signed=True)
    else:
        out += buffer[position:after]
    return after


def _copy_step(
    buffer: memoryview, position: int, end: int, step: _Step, flexible: bool, out: bytearray
) -> int:
    kind, sequence = step.kind, step.sequence
    if not sequence:
        return _copy_value(buffer, position, end, kind, flexible, out, step.nullable)
    start = position
    count, position = _array_count(buffer, position, end, flexible)
    if count == -1 and not step.nullable:
        raise _non_nullable(step)
    out += buffer[start:position]
    for _ in range(count):
        position = _copy_value(buffer, position, end, kind, flexible, out, nullable=False)
    return position


def _copy_entity(buffer: memoryview, position: int, end: int, cls: type, out: bytearray) -> int:
    """Copy one entity to ``out`` without the tagged fields its schema does not know,
    checking every length as ``_check_entity`` does."""
    ordered, tagged, flexible = _steps(cls)
    for step in ordered:
        position = _copy_step(buffer, position, end, step, flexible, out)
    if not flexible:
        return position
    count, position = _varint(buffer, position, end)
    if count > end - position:
        raise MalformedRequest(f"{count} tagged fields in {end - position} bytes")
    kept: list[bytes] = []
    for _ in range(count):
        tag, position = _varint(buffer, position, end)
        size, position = _varint(buffer, position, end)
        field_end = position + size
        if field_end > end:
            raise MalformedRequest("tagged field runs past the end of the request")
        step = tagged.get(tag)
        null = position < field_end and buffer[position] == 0
        if null and (step is None or step.sequence or step.kind in _LENGTH_PREFIXED):
            if step is not None and tag not in _null_by_default(cls):
                raise MalformedRequest(f"null in tagged field {tag}, which cannot be null")
            step = None  # null is the field's default: as if the tag were not sent
        if step is not None:
            value = bytearray()
            _copy_step(buffer, position, field_end, step, flexible, value)
            kept.append(encode_unsigned_varint(tag) + encode_unsigned_varint(len(value)) + value)
        position = field_end
    out += encode_unsigned_varint(len(kept))
    for field in kept:
        out += field
    return position


@cache
def _null_by_default(cls: type) -> frozenset[int]:
    """Tags of ``cls`` whose field defaults to null: a null sent for one is the same as
    leaving the tag out."""
    return frozenset(
        field.metadata["tag"]
        for field in fields(cls)
        if field.metadata.get("tag") is not None and field.default is None
    )


def _check_known_tag(buffer: memoryview, position: int, end: int, step: _Step) -> None:
    """Check a known tagged field's value; a struct in it may hold unknown tags of its
    own, which its generated checker reports. A null string or array in a tag (Fetch
    v12+'s cluster id) is valid, but kio refuses it: the copy leaves such a tag out."""
    kind, sequence = step.kind, step.sequence
    if position < end and buffer[position] == 0 and (sequence or kind in _LENGTH_PREFIXED):
        raise _NeedsCopy
    if not isinstance(kind, type):
        _check_step(buffer, position, end, step, True)
    elif sequence:
        raise _NeedsCopy  # no request has one today: the copying walk handles it
    else:
        _compiled(kind)(buffer, position, end)


# Generated checkers: the walk above, unrolled per class --------------------------------

Checker = Callable[[memoryview, int, int], int]
_PREFIX_SIZES = {"string": 2, "bytes": 4, "records": 4}


def _read_varint_lines(target: str, indent: str) -> list[str]:
    """Lines reading an unsigned varint at ``position`` into ``target``: one byte inline,
    longer ones through ``_varint``."""
    return [
        f"{indent}if position >= end:",
        f"{indent}    raise _Malformed('request ends inside a length field')",
        f"{indent}{target} = buffer[position]",
        f"{indent}if {target} < 0x80:",
        f"{indent}    position += 1",
        f"{indent}else:",
        f"{indent}    {target}, position = _varint(buffer, position, end)",
    ]


def _length_lines(kind: str, flexible: bool, target: str, indent: str) -> list[str]:
    if flexible:
        return [*_read_varint_lines(target, indent), f"{indent}{target} -= 1"]
    size = _PREFIX_SIZES.get(kind, 4)
    reader = "_int16" if size == 2 else "_int32"
    return [
        f"{indent}if position + {size} > end:",
        f"{indent}    raise _Malformed('request ends inside a length field')",
        f"{indent}{target} = {reader}(buffer, position)[0]",
        f"{indent}position += {size}",
    ]


def _value_lines(
    kind: Any, flexible: bool, indent: str, names: dict[str, Any], null: str | None = None
) -> list[str]:
    """Lines checking one value of ``kind`` at ``position`` (advancing it); ``null`` is
    the error for a null, None where the field may be null."""
    if isinstance(kind, type):
        name = f"_entity_{len(names)}"
        names[name] = _compiled(kind)
        return [f"{indent}position = {name}(buffer, position, end)"]
    size = _FIXED.get(kind)
    if size is not None:
        return [
            f"{indent}position += {size}",
            f"{indent}if position > end:",
            f"{indent}    raise _Malformed('{kind} runs past the end of the request')",
        ]
    if kind in _LENGTH_PREFIXED:
        return [
            *_length_lines(kind, flexible, "length", indent),
            f"{indent}if length > 0:",
            f"{indent}    position += length",
            f"{indent}elif length < -1:",
            f"{indent}    raise _Malformed(f'negative {kind} length {{length}}')",
            *(
                [f"{indent}elif length == -1:", f"{indent}    raise _Malformed({null!r})"]
                if null is not None
                else []
            ),
            f"{indent}if position > end:",
            f"{indent}    raise _Malformed('{kind} runs past the end of the request')",
        ]
    return [f"{indent}raise _Malformed('unknown field type {kind!r}')"]


def _step_lines(step: _Step, flexible: bool, names: dict[str, Any]) -> list[str]:
    kind, sequence = step.kind, step.sequence
    indent = "    "
    null = None if step.nullable else str(_non_nullable(step))
    if not sequence:
        return _value_lines(kind, flexible, indent, names, null)
    lines = [
        *_length_lines("array", flexible, "count", indent),
        f"{indent}if count < -1:",
        f"{indent}    raise _Malformed(f'negative array length {{count}}')",
        *(
            [f"{indent}if count == -1:", f"{indent}    raise _Malformed({null!r})"]
            if null is not None
            else []
        ),
        # Every element takes at least one byte, so a count above the bytes left is a lie.
        f"{indent}if count > end - position:",
        f"{indent}    raise _Malformed(f'array of {{count}} elements in {{end - position}} bytes')",
    ]
    size = _FIXED.get(kind) if not isinstance(kind, type) else None
    if size is not None:
        return [
            *lines,
            f"{indent}if count > 0:",
            f"{indent}    position += count * {size}",
            f"{indent}    if position > end:",
            f"{indent}        raise _Malformed('{kind} array runs past the end of the request')",
        ]
    return [
        *lines,
        f"{indent}for _ in range(count):",
        *_value_lines(kind, flexible, indent + "    ", names, f"{step.name}: a null element"),
    ]


def _skip_lines(size: int) -> list[str]:
    if not size:
        return []
    return [
        f"    position += {size}",
        "    if position > end:",
        "        raise _Malformed('request ends inside a fixed-size field')",
    ]


@cache
def _code(source: str) -> Any:
    """Compiling is most of a checker's first-use cost, and most request versions share
    their checkers' shapes (372 entity classes, 102 distinct sources): compile each
    source once. The names it refers to (nested checkers, known tags) come with ``exec``."""
    return compile(source, "<frame_guard>", "exec")


@cache
def _compiled(cls: type) -> Checker:
    """A checker for ``cls`` that does what ``_check_entity`` does, as generated code."""
    ordered, tagged, flexible = _steps(cls)
    names: dict[str, Any] = {
        "_Malformed": MalformedRequest,
        "_varint": _varint,
        "_int16": struct.Struct(">h").unpack_from,
        "_int32": struct.Struct(">i").unpack_from,
        "_int64": struct.Struct(">q").unpack_from,
        "_check_step": _check_step,
        "_tagged": tagged,
        "_NeedsCopy": _NeedsCopy,
        "_check_known_tag": _check_known_tag,
    }
    lines = ["def check(buffer, position, end):"]
    fixed = 0  # bytes of consecutive fixed-size fields, skipped with one add and one check
    for step in ordered:
        kind, sequence = step.kind, step.sequence
        if kind == "timedelta_i64" and not sequence:
            lines += _skip_lines(fixed)
            fixed = 0
            lines += [
                "    if position + 8 > end:",
                "        raise _Malformed('timedelta_i64 runs past the end of the request')",
                "    value = _int64(buffer, position)[0]",
                f"    if value > {DURATION_I64_MAX_MS} or value < -{DURATION_I64_MAX_MS}:",
                "        raise _NeedsCopy",
                "    position += 8",
            ]
            continue
        if not sequence and not isinstance(kind, type) and kind in _FIXED:
            fixed += _FIXED[kind]
            continue
        lines += _skip_lines(fixed)
        fixed = 0
        lines += _step_lines(step, flexible, names)
    lines += _skip_lines(fixed)
    if flexible:
        # Tagged fields are rare: known ones go through the generic walker.
        lines += [
            *_read_varint_lines("count", "    "),
            "    if count > end - position:",
            "        raise _Malformed(f'{count} tagged fields in {end - position} bytes')",
            "    for _ in range(count):",
            "        tag, position = _varint(buffer, position, end)",
            "        size, position = _varint(buffer, position, end)",
            "        field_end = position + size",
            "        if field_end > end:",
            "            raise _Malformed('tagged field runs past the end of the request')",
            "        step = _tagged.get(tag)",
            "        if step is None:",
            "            raise _NeedsCopy",
            "        _check_known_tag(buffer, position, field_end, step)",
            "        position = field_end",
        ]
    lines.append("    return position")
    source = "\n".join(lines) + "\n"
    exec(_code(source), names)
    check: Checker = names["check"]
    check.__doc__ = source  # the generated code, for whoever debugs it
    return check


def prepare_checker(cls: type) -> None:
    """Generate ``cls``'s checker now (its first request would otherwise)."""
    _compiled(cls)


def checker_classes(cls: type) -> list[type]:
    """The entity classes whose generated checkers ``cls``'s checker calls, nested ones
    first and ``cls`` last: preparing them in this order, one ``prepare_checker`` each,
    generates and compiles one checker per call (about a millisecond) instead of a whole
    request's tree in one call (up to 4 ms for Fetch)."""
    ordered: list[type] = []
    seen: set[type] = set()

    def visit(current: type) -> None:
        seen.add(current)
        for step in _steps(current)[0]:
            if isinstance(step.kind, type) and step.kind not in seen:
                visit(step.kind)
        ordered.append(current)

    visit(cls)
    return ordered


def check_request(cls: type, buffer: memoryview | bytes, position: int) -> memoryview | bytes:
    """Raise MalformedRequest unless every length in the body (from ``position``) fits
    in the frame; return the frame kio may decode: ``buffer`` itself, or, when the
    body has tagged fields its schema does not know, a copy without them."""
    view = buffer if isinstance(buffer, memoryview) else memoryview(buffer)
    try:
        _compiled(cls)(view, position, len(view))
    except _NeedsCopy:
        out = bytearray(view[:position])
        _copy_entity(view, position, len(view), cls, out)
        return bytes(out)
    return buffer


def check_request_generic(cls: type, buffer: memoryview | bytes, position: int) -> None:
    """The reference walk the generated checkers are made from (kept for tests)."""
    view = buffer if isinstance(buffer, memoryview) else memoryview(buffer)
    _check_entity(view, position, len(view), cls)
