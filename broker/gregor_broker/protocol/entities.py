"""Bridge to kio's generated message classes: readers, writers and a dict builder.

kio models every Kafka message version as its own frozen dataclass. Handlers build
responses as plain dicts with Kafka's field names; ``build`` turns one into the right
class for the negotiated version, dropping fields that version lacks and filling the
defaults it has. Times stay plain ints (milliseconds) in handlers; conversion to
kio's timedelta/datetime types happens here.
"""

from __future__ import annotations

import datetime
import io
import typing
import uuid
from collections.abc import Callable, Mapping
from dataclasses import MISSING, fields, is_dataclass
from functools import cache
from typing import Any

from kio.index import load_payload_module
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.serial.errors import OutOfBoundValue
from kio.static.constants import EntityType

_REQUIRED = object()
_EPOCH = datetime.datetime.fromtimestamp(0, tz=datetime.UTC)


@cache
def payload_class(api_key: int, version: int, kind: str) -> type:
    """The kio class of a request or response (``kind`` is "request" or "response")."""
    module = load_payload_module(api_key, version, EntityType[kind])
    suffix = kind.capitalize()
    for name in dir(module):
        value = getattr(module, name)
        if (
            name.endswith(suffix)
            and isinstance(value, type)
            and is_dataclass(value)
            and getattr(value, "__type__", None) == EntityType[kind]
        ):
            return value
    raise LookupError(f"no {kind} class for api {api_key} v{version}")


@cache
def request_reader(api_key: int, version: int) -> Callable[[Any, int], tuple[Any, int]]:
    return entity_reader(payload_class(api_key, version, "request"))


@cache
def response_reader(api_key: int, version: int) -> Callable[[Any, int], tuple[Any, int]]:
    return entity_reader(payload_class(api_key, version, "response"))


@cache
def is_flexible(api_key: int, version: int) -> bool:
    return bool(payload_class(api_key, version, "request").__flexible__)


@cache
def _writer(cls: type) -> Callable[[Any, Any], None]:
    return entity_writer(cls)


def encode(entity: Any) -> bytes:
    buffer = io.BytesIO()
    _writer(type(entity))(buffer, entity)
    return buffer.getvalue()


def _convert_scalar(kafka_type: str | None) -> Callable[[Any], Any] | None:
    if kafka_type in ("timedelta_i32", "timedelta_i64"):
        return lambda v: (
            v if isinstance(v, datetime.timedelta) else datetime.timedelta(milliseconds=v)
        )
    if kafka_type == "datetime_i64":
        return lambda v: (
            None
            if v is None or v == -1
            else v
            if isinstance(v, datetime.datetime)
            else _EPOCH + datetime.timedelta(milliseconds=v)
        )
    if kafka_type == "error_code":
        return ErrorCode
    if kafka_type == "uuid":
        return lambda v: v if v is None or isinstance(v, uuid.UUID) else uuid.UUID(str(v))
    return None


def nested_entity_class(annotation: Any) -> tuple[type | None, bool]:
    """(nested entity class or None, whether the field is a sequence)."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if is_dataclass(annotation):
        return annotation, False  # type: ignore[return-value]
    if origin is tuple:
        inner = args[0]
        return (inner if is_dataclass(inner) else None), True
    if args:  # Optional[...] / unions
        for arg in args:
            if arg is type(None):
                continue
            found, sequence = nested_entity_class(arg)
            if found is not None or sequence:
                return found, sequence
    return None, False


@cache
def _plan(cls: type) -> list[tuple[str, Callable[[Any], Any] | None, Any]]:
    hints = typing.get_type_hints(cls)
    plan = []
    for field in fields(cls):
        nested, sequence = nested_entity_class(hints[field.name])
        converter: Callable[[Any], Any] | None
        if nested is not None:
            if sequence:
                converter = (
                    lambda c: (
                        lambda v: (
                            None
                            if v is None
                            else tuple(
                                item if isinstance(item, c) else build(c, item) for item in v
                            )
                        )
                    )
                )(nested)
            else:
                converter = (lambda c: lambda v: v if isinstance(v, c) else build(c, v))(nested)
        else:
            scalar = _convert_scalar(field.metadata.get("kafka_type"))
            if sequence:
                converter = (
                    lambda s: (
                        lambda v: (
                            None if v is None else tuple(s(item) for item in v) if s else tuple(v)
                        )
                    )
                )(scalar)
            else:
                converter = scalar
        # A field without a default may still be left out by a handler when an
        # empty array or a null is the obvious value (record_errors, error_message).
        if field.default is not MISSING:
            fallback = field.default
        elif sequence:
            fallback = ()
        elif type(None) in typing.get_args(hints[field.name]):
            fallback = None
        elif field.metadata.get("kafka_type") == "error_code":
            fallback = ErrorCode.none
        else:
            fallback = _REQUIRED
        plan.append((field.name, converter, fallback))
    return plan


def prepare_builder(cls: type) -> None:
    """Make ``build`` and ``encode`` ready for ``cls`` and the entities it nests (their
    first use would otherwise pay for type hints and kio's writer)."""
    _writer(cls)
    pending, seen = [cls], {cls}
    while pending:
        current = pending.pop()
        _plan(current)
        hints = typing.get_type_hints(current)
        for field in fields(current):
            nested, _sequence = nested_entity_class(hints[field.name])
            if nested is not None and nested not in seen:
                seen.add(nested)
                pending.append(nested)


def build(cls: type, data: Mapping[str, Any]) -> Any:
    """Instantiate kio class ``cls`` from a dict, ignoring keys the class does not have."""
    kwargs = {}
    for name, converter, fallback in _plan(cls):
        if name in data:
            value = data[name]
            kwargs[name] = (
                converter(value) if converter is not None and value is not None else value
            )
        elif fallback is _REQUIRED:
            raise KeyError(f"{cls.__qualname__} needs field {name!r}")
        elif fallback is not MISSING:
            kwargs[name] = fallback
    return cls(**kwargs)


def encode_response(api_key: int, version: int, data: Mapping[str, Any]) -> bytes:
    return encode_answer(payload_class(api_key, version, "response"), data)


def encode_answer(cls: type, data: Mapping[str, Any]) -> bytes:
    """``data`` built as ``cls`` (a response, or an entity of one) and encoded, its error
    messages shortened if they do not fit.

    A non-flexible version's string holds at most 32,767 bytes. An error message that
    quotes a request's string (DescribeClientQuotas v0 naming an unknown entity type of
    32,767 bytes, DescribeConfigs v1 an unknown topic) would not fit, and the client would
    get UNKNOWN_SERVER_ERROR instead of the error code: the message is shortened."""
    try:
        return encode(build(cls, data))
    except OutOfBoundValue:
        shortened = _shorten_messages(data)
        if shortened == data:
            raise
        return encode(build(cls, shortened))


LEGACY_STRING_MAX_BYTES = 32767
_ELLIPSIS = "..."


def _shorten_messages(data: Any) -> Any:
    """``data`` with every over-long ``*error_message`` string cut to fit a legacy
    (int16-length) string, at a UTF-8 character boundary."""
    if isinstance(data, Mapping):
        return {
            key: _shorten(value)
            if key.endswith("error_message") and isinstance(value, str)
            else _shorten_messages(value)
            for key, value in data.items()
        }
    if isinstance(data, list | tuple):
        return [_shorten_messages(item) for item in data]
    return data


def _shorten(message: str) -> str:
    encoded = message.encode("utf-8")
    if len(encoded) <= LEGACY_STRING_MAX_BYTES:
        return message
    cut = encoded[: LEGACY_STRING_MAX_BYTES - len(_ELLIPSIS)]
    return cut.decode("utf-8", errors="ignore") + _ELLIPSIS
