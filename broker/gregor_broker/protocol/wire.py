"""Kafka framing: size-prefixed frames, request headers, response headers.

Pure byte work, no sockets. A request frame is ``int32 size`` + header + body; the
header is v1 (``api_key``, ``api_version``, ``correlation_id``, ``client_id``) for
non-flexible versions and v2 (v1 + tagged fields) for flexible ones. Responses carry
header v0 (correlation id) or v1 (+ tagged fields); ApiVersions always answers with
header v0 so that a client can parse it before it knows any versions (KIP-511).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

_HEADER_PREFIX = struct.Struct(">hhih")
_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")
API_VERSIONS_KEY = 18


class MalformedRequest(ValueError):
    """The bytes cannot be a Kafka request: the connection must be closed."""


@dataclass(slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body_offset: int


def read_unsigned_varint(buffer: bytes | memoryview, position: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        if position >= len(buffer):
            raise MalformedRequest("unsigned varint runs past the end of the frame")
        byte = buffer[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, position
        shift += 7
        if shift > 28:
            raise MalformedRequest("unsigned varint longer than 5 bytes")


def encode_unsigned_varint(value: int) -> bytes:
    out = bytearray()
    while value & ~0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_string(value: str, flexible: bool) -> bytes:
    """A STRING: compact (uvarint length + 1) in flexible versions, else int16 length."""
    raw = value.encode()
    if flexible:
        return encode_unsigned_varint(len(raw) + 1) + raw
    return _INT16.pack(len(raw)) + raw


def encode_nullable_string(value: str | None, flexible: bool) -> bytes:
    if value is None:
        return b"\x00" if flexible else b"\xff\xff"
    return encode_string(value, flexible)


def encode_array_length(length: int, flexible: bool) -> bytes:
    """An ARRAY's length: compact (uvarint length + 1) in flexible versions, else int32."""
    return encode_unsigned_varint(length + 1) if flexible else _INT32.pack(length)


def skip_tagged_fields(buffer: bytes | memoryview, position: int) -> int:
    count, position = read_unsigned_varint(buffer, position)
    for _ in range(count):
        _tag, position = read_unsigned_varint(buffer, position)
        size, position = read_unsigned_varint(buffer, position)
        position += size
        if position > len(buffer):
            raise MalformedRequest("tagged field runs past the end of the frame")
    return position


def parse_request_header(frame: bytes | memoryview, flexible: bool | None) -> RequestHeader:
    """Parse the header of a frame (without its size prefix).

    ``flexible`` says whether this api/version uses header v2; pass ``None`` when the
    api/version is unknown: only the fixed prefix is then parsed.
    """
    if len(frame) < _HEADER_PREFIX.size:
        raise MalformedRequest(f"frame of {len(frame)} bytes is shorter than a request header")
    api_key, api_version, correlation_id, client_id_length = _HEADER_PREFIX.unpack_from(frame, 0)
    position = _HEADER_PREFIX.size
    client_id: str | None = None
    if client_id_length >= 0:
        end = position + client_id_length
        if end > len(frame):
            raise MalformedRequest("client id runs past the end of the frame")
        client_id = bytes(frame[position:end]).decode("utf-8", "replace")
        position = end
    elif client_id_length != -1:
        raise MalformedRequest(f"invalid client id length {client_id_length}")
    if flexible:
        position = skip_tagged_fields(frame, position)
    return RequestHeader(api_key, api_version, correlation_id, client_id, position)


def response_header(correlation_id: int, flexible: bool) -> bytes:
    """Header v1 (with an empty tagged-field section) for flexible responses, else v0."""
    if flexible:
        return _INT32.pack(correlation_id) + b"\x00"
    return _INT32.pack(correlation_id)


def frame(header: bytes, body: bytes) -> bytes:
    return _INT32.pack(len(header) + len(body)) + header + body


def size_prefix(size: int) -> bytes:
    return _INT32.pack(size)
