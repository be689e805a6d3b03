"""Structure-aware requests: values for any Kafka request, built by walking kio's classes.

kio generates one frozen dataclass per message version from Kafka's JSON specs; every
field carries its Kafka type in ``metadata["kafka_type"]`` (nested structs and arrays are
dataclasses and tuples). ``RequestBuilder`` walks a class and fills each field from the
type's interesting values: extreme integers, nulls where the field is nullable (and, more
rarely, where it is not: Kafka refuses such a request), empty, short or long arrays, long
and odd strings, zero and random UUIDs. ``plausible`` mode
leans towards ordinary values (topics that exist, small counts) so that requests get past
the first checks and reach the handlers.

``frame`` wraps a body in a request header (v1, or v2 with tagged fields for flexible
versions) and a size prefix; ``add_unknown_tag`` appends a tagged field no schema knows
(KIP-482 says a receiver skips it).
"""

from __future__ import annotations

import dataclasses
import datetime
import random
import struct
import typing
import uuid
from functools import cache
from typing import Any

from gregor_broker.protocol.entities import encode, nested_entity_class, payload_class
from gregor_broker.protocol.wire import encode_unsigned_varint

from ..request_samples import null_mark, splice_nulls

INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint16": (0, 2**16 - 1),
}
EPOCH = datetime.datetime.fromtimestamp(0, tz=datetime.UTC)


@cache
def _fields(cls: type) -> list[tuple[dataclasses.Field, Any]]:
    hints = typing.get_type_hints(cls)
    return [(field, hints[field.name]) for field in dataclasses.fields(cls)]


def _nullable(annotation: Any) -> bool:
    return type(None) in typing.get_args(annotation)


class RequestBuilder:
    """Random values for kio request classes; ``names`` are the strings it prefers."""

    def __init__(self, rng: random.Random, names: list[str], *, plausible: bool) -> None:
        self.rng = rng
        self.names = names
        self.plausible = plausible
        self.budget = 0  # array items left for this request (keeps requests bounded)
        # Placeholders of strings and bytes to send as null where the schema allows none.
        self.null_marks: list[str | bytes] = []
        self.forced_nulls = 0  # nulls where the schema allows none, arrays included

    def request(self, api_key: int, version: int, *, default_tags: bool = False) -> Any:
        self.budget = 2000
        self.null_marks = []
        self.forced_nulls = 0
        return self.entity(payload_class(api_key, version, "request"), default_tags)

    def encode(self, entity: Any) -> bytes:
        """The request's bytes, with the nulls the schema does not allow in place."""
        return splice_nulls(encode(entity), self.null_marks, bool(type(entity).__flexible__))

    def entity(self, cls: type, default_tags: bool = False) -> Any:
        values = {}
        for field, annotation in _fields(cls):
            if "tag" in field.metadata and (default_tags or self.rng.random() < 0.5):
                continue  # tagged fields are optional: leave the default out of the wire
            values[field.name] = self.value(field, annotation, default_tags)
        return cls(**values)

    def value(self, field: dataclasses.Field, annotation: Any, default_tags: bool) -> Any:
        rng = self.rng
        nullable = _nullable(annotation)
        if nullable and rng.random() < (0.05 if self.plausible else 0.2):
            return None
        nested, sequence = nested_entity_class(annotation)
        kafka_type = field.metadata.get("kafka_type")
        if (
            not nullable
            and "tag" not in field.metadata
            and (sequence or kafka_type in ("string", "bytes"))
            and rng.random() < (0.005 if self.plausible else 0.03)
        ):
            self.forced_nulls += 1
            if sequence:
                return None  # kio writes a null array whatever the schema says
            mark = null_mark(kafka_type)
            self.null_marks.append(mark)
            return mark
        if sequence:
            count = self.array_length()
            if nested is not None:
                return tuple(self.entity(nested, default_tags) for _ in range(count))
            return tuple(self.scalar(kafka_type) for _ in range(count))
        if nested is not None:
            return self.entity(nested, default_tags)
        return self.scalar(kafka_type)

    def array_length(self) -> int:
        rng = self.rng
        roll = rng.random()
        if self.plausible:
            count = 0 if roll < 0.1 else rng.randint(1, 3)
        elif roll < 0.3:
            count = 0
        elif roll < 0.9:
            count = rng.randint(1, 4)
        else:
            count = rng.choice([100, 1000, 5000])
        count = min(count, self.budget)
        self.budget -= count
        return count

    def integer(self, kafka_type: str) -> int:
        low, high = INT_RANGES[kafka_type]
        rng = self.rng
        if self.plausible and rng.random() < 0.8:
            value = rng.choice([0, 1, 2, -1, 3, 100, 1000])
        else:
            value = rng.choice([low, high, low + 1, high - 1, 0, -1, 1, rng.randint(low, high)])
        return max(low, min(high, value))

    def scalar(self, kafka_type: str | None) -> Any:
        rng = self.rng
        if kafka_type in INT_RANGES:
            return self.integer(kafka_type)
        if kafka_type == "bool":
            return rng.random() < 0.5
        if kafka_type == "float64":
            return rng.choice([0.0, -1.0, 1e308, float("inf"), float("nan"), rng.random()])
        if kafka_type == "string":
            return self.string()
        if kafka_type in ("bytes", "records"):
            return self.blob()
        if kafka_type == "uuid":
            return rng.choice([uuid.UUID(int=0), uuid.uuid4(), uuid.UUID(int=rng.getrandbits(128))])
        if kafka_type == "timedelta_i32":
            return datetime.timedelta(milliseconds=self.integer("int32"))
        if kafka_type == "timedelta_i64":
            # kio converts through float seconds: stay within what timedelta holds.
            return datetime.timedelta(milliseconds=rng.choice([0, -1, 1, 2**31, 10**15]))
        if kafka_type == "datetime_i64":
            return EPOCH + datetime.timedelta(milliseconds=rng.choice([0, 1, 10**12, 10**14]))
        if kafka_type == "error_code":
            from kio.schema.errors import ErrorCode

            return rng.choice(list(ErrorCode))
        raise LookupError(f"no generator for kafka type {kafka_type!r}")

    def string(self) -> str:
        rng = self.rng
        roll = rng.random()
        if (self.plausible and roll < 0.8) or roll < 0.4:
            return rng.choice(self.names)
        return rng.choice(
            [
                "",
                ".",
                "..",
                "a" * 249,
                "a" * 250,
                "b" * rng.choice([1000, 32767]),
                "\u00e9\u4e2d\U0001f600",
                "with space",
                "slash/name",
                "nul\x00byte",
                "-" * rng.randint(1, 20),
                str(rng.randint(-5, 5)),
            ]
        )

    def blob(self) -> bytes:
        rng = self.rng
        return rng.choice([b"", b"\x00", rng.randbytes(rng.randint(1, 200)), b"\xff" * 61])


def header(
    api_key: int, version: int, correlation_id: int, flexible: bool, client_id: str
) -> bytes:
    """Request header v1 (v2 for flexible requests: an empty tag buffer after it)."""
    encoded = client_id.encode()
    out = struct.pack(">hhih", api_key, version, correlation_id, len(encoded)) + encoded
    return out + b"\x00" if flexible else out


def frame(head: bytes, body: bytes) -> bytes:
    return struct.pack(">i", len(head) + len(body)) + head + body


def add_unknown_tag(encoded: bytes, rng: random.Random) -> bytes:
    """Replace a trailing empty tag buffer (``0x00``) with one unknown tagged field."""
    assert encoded.endswith(b"\x00")
    tag = rng.choice([100, 1000, 2**20, 2**31 - 1])
    payload = rng.randbytes(rng.choice([0, 1, 16, 300]))
    tagged = encode_unsigned_varint(tag) + encode_unsigned_varint(len(payload)) + payload
    return encoded[:-1] + encode_unsigned_varint(1) + tagged
