"""Raw Kafka requests over a plain socket, decoded with kio: for tests that send what no
client library would (unknown tags, nulls where clients never put them, duplicates)."""

from __future__ import annotations

import socket
import struct
from typing import Any

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
        response = read_response(self.sock)
        (answered,) = struct.unpack_from(">i", response)
        assert answered == correlation_id, (answered, correlation_id)
        position = 4
        if entities.is_flexible(api_key, version) and api_key != 18:
            position = skip_tagged_fields(response, position)
        decoded, _size = entities.response_reader(api_key, version)(response, position)
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
