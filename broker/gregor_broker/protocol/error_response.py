"""Build the error response to any request, the way Kafka's ``getErrorResponse`` does.

When a handler fails in a way nobody foresaw, Kafka does not drop the connection: every
request class has ``getErrorResponse(throttle, error)``, which answers the request with
the error on everything it named (each topic, each partition, each group, each
resource) and on the top-level error code where the response has one. The client gets
an ordinary response with UNKNOWN_SERVER_ERROR and carries on.

Gregor has no hand-written class per request, so this module derives that response
from the schemas: it walks the response class of the API and version (kio), and fills
it from the decoded request. Arrays are mirrored from the request array that names the
same things (same field name, or elements that share a key such as a topic name or a
partition index); key fields (names, ids, partition indexes) are copied; every
``error_code`` gets the error; offsets, epochs and leader ids are -1, other numbers 0.
Pure: no I/O.
"""

from __future__ import annotations

import typing
import uuid
from dataclasses import fields, is_dataclass
from functools import cache
from typing import Any

from kio.schema.errors import ErrorCode

from .entities import nested_entity_class, payload_class
from .response import BodyResponse

# Fields that name the same thing in a request and in its response under other names.
_ALIASES = [
    {"name", "topic", "topic_name"},
    {"partition_index", "partition", "index", "partition_id"},
    {"group_id", "group_name"},
]
_KEY_WORDS = ("name", "topic", "partition", "index", "group", "resource", "key", "member_id")
_MINUS_ONE_WORDS = (
    "offset",
    "epoch",
    "leader_id",
    "high_watermark",
    "timestamp",
    "append_time",
    "controller_id",
    "node_id",
)
_ZERO_UUID = uuid.UUID(int=0)


class RequestFailed(Exception):
    """A handler's verdict on a whole request, answered with ``error_code`` everywhere
    (Kafka's handlers throw e.g. ``InvalidRequestException`` for this)."""

    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


@cache
def _fields(cls: type) -> list[tuple[str, Any, bool, str | None, bool]]:
    """(name, nested class, is an array, kafka type, nullable) for each field."""
    hints = typing.get_type_hints(cls)
    result = []
    for field in fields(cls):
        nested, sequence = nested_entity_class(hints[field.name])
        nullable = type(None) in typing.get_args(hints[field.name])
        result.append((field.name, nested, sequence, field.metadata.get("kafka_type"), nullable))
    return result


def _aliases(name: str) -> set[str]:
    for group in _ALIASES:
        if name in group:
            return group
    return {name}


def _request_value(request: Any, name: str) -> Any:
    """The request's value for a response field of ``name`` (or an alias), or None."""
    if request is None or not is_dataclass(request):
        return None
    for alias in (name, *sorted(_aliases(name) - {name})):
        if hasattr(request, alias):
            value = getattr(request, alias)
            if not isinstance(value, tuple):
                return value
    return None


def _keys(cls: type | None) -> set[str]:
    if cls is None:
        return set()
    keys: set[str] = set()
    for name, nested, _sequence, _kind, _nullable in _fields(cls):
        if nested is None and any(word in name for word in _KEY_WORDS):
            keys |= _aliases(name)
    return keys


def _request_items(request: Any, name: str, element: type | None) -> tuple[Any, ...]:
    """The request array a response array of ``element`` answers, or ()."""
    if request is None or not is_dataclass(request):
        return ()
    arrays = [
        (field_name, getattr(request, field_name))
        for field_name, _nested, sequence, _kind, _nullable in _fields(type(request))
        if sequence and getattr(request, field_name) is not None
    ]
    for field_name, items in arrays:
        if field_name == name:
            return items
    wanted = _keys(element)
    for _field_name, items in arrays:
        if not items:
            continue
        first = items[0]
        if is_dataclass(first):
            if wanted & _keys(type(first)):
                return items
        elif isinstance(first, str) and wanted & {"name", "group_id", "topic"}:
            return items  # an array of names (DeleteTopics v1-v5, DescribeGroups)
    return ()


def _scalar_default(name: str, kind: str | None, nullable: bool) -> Any:
    if kind in ("int8", "int16", "int32", "int64", "uint16"):
        return -1 if any(word in name for word in _MINUS_ONE_WORDS) else 0
    if kind == "datetime_i64":
        return -1 if any(word in name for word in _MINUS_ONE_WORDS) else 0
    if kind in ("timedelta_i32", "timedelta_i64"):
        return 0
    if kind == "float64":
        return 0.0
    if kind == "bool":
        return False
    if kind == "uuid":
        return None if nullable else _ZERO_UUID
    if kind == "string":
        return None if nullable else ""
    if kind == "bytes":
        return None if nullable else b""
    return None


def _mirror(cls: type, request: Any, error: ErrorCode) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for name, nested, sequence, kind, nullable in _fields(cls):
        if kind == "error_code":
            data[name] = error
        elif nested is not None and sequence:
            items = _request_items(request, name, nested)
            data[name] = [_mirror(nested, item, error) for item in items]
        elif nested is not None:
            data[name] = _mirror(nested, None, error)
        elif sequence:
            data[name] = ()
        elif isinstance(request, str) and kind == "string" and name in {"name", "group_id"}:
            data[name] = request
        else:
            value = _request_value(request, name)
            data[name] = value if value is not None else _scalar_default(name, kind, nullable)
    return data


def error_response(api_key: int, version: int, request: Any, error: ErrorCode) -> BodyResponse:
    """``request``'s response with ``error`` everywhere it can be said."""
    return BodyResponse(
        api_key, _mirror(payload_class(api_key, version, "response"), request, error)
    )
