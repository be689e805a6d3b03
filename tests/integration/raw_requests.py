"""Raw Kafka requests over a plain socket, decoded with kio: for tests that send what no
client library would (unknown tags, nulls where clients never put them, duplicates)."""

from __future__ import annotations

import dataclasses
import socket
import struct
from typing import Any

from kio.schema.errors import ErrorCode

from gregor_broker.protocol import entities
from gregor_broker.protocol.wire import skip_tagged_fields

from ..request_samples import request_frame
from .broker_helpers import host_port, read_response


class RawClient:
    """One connection; ``call`` sends one request and returns the decoded response."""

    def __init__(self, bootstrap: str, timeout: float = 30.0) -> None:
        self.sock = socket.create_connection(host_port(bootstrap), timeout=timeout)
        self.correlation_id = 0

    def send(self, api_key: int, version: int, body: bytes, **frame_options: Any) -> int:
        self.correlation_id += 1
        frame = request_frame(api_key, version, body, self.correlation_id, **frame_options)
        self.sock.sendall(frame)
        return self.correlation_id

    def receive(self, api_key: int, version: int, correlation_id: int) -> Any:
        answered, decoded = decode_response(api_key, version, read_response(self.sock))
        assert answered == correlation_id, (answered, correlation_id)
        return decoded

    def call(self, api_key: int, version: int, body: bytes | Any, **frame_options: Any) -> Any:
        if not isinstance(body, bytes | bytearray):
            body = entities.encode(body)
        correlation_id = self.send(api_key, version, bytes(body), **frame_options)
        return self.receive(api_key, version, correlation_id)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def request(api_key: int, version: int, **fields: Any) -> Any:
    """A kio request of ``api_key`` / ``version`` built from Kafka's field names."""
    return entities.build(entities.payload_class(api_key, version, "request"), fields)


def decode_response(api_key: int, version: int, response: bytes) -> tuple[int, Any]:
    """(correlation id, kio response) of a response frame without its size prefix."""
    (correlation_id,) = struct.unpack_from(">i", response)
    position = 4
    if entities.is_flexible(api_key, version) and api_key != 18:
        position = skip_tagged_fields(response, position)  # response header v1
    decoded, _size = entities.response_reader(api_key, version)(response, position)
    return correlation_id, decoded


def server_errors(value: Any, path: str = "") -> list[str]:
    """Where a decoded response says UNKNOWN_SERVER_ERROR: Kafka's answer when a
    handler failed (``getErrorResponse``), never the right answer to a bad request."""
    if isinstance(value, ErrorCode):
        return [path or "."] if value == ErrorCode.unknown_server_error else []
    if isinstance(value, tuple):
        return [found for item in value for found in server_errors(item, path)]
    if dataclasses.is_dataclass(value):
        return [
            found
            for field in dataclasses.fields(value)
            for found in server_errors(getattr(value, field.name), f"{path}.{field.name}")
        ]
    return []
