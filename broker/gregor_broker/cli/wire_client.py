"""One Kafka request to one broker, for the few APIs confluent-kafka's AdminClient lacks
(OffsetDelete, DescribeLogDirs), which Kafka's own tools send through their Java admin client.

It frames a request with kio's generated classes (through ``protocol.entities``), sends it
on a fresh connection and decodes the response: no pooling, no retries, as a command runs
once. Failures to connect become a :class:`ToolError` with exit code 2.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Mapping
from typing import Any

from ..protocol import entities
from .kafka_api import TIMEOUT_S, ToolError

_INT32 = struct.Struct(">i")
CLIENT_ID = b"gregor-cli"


def split_address(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ToolError(f"broker address {address!r}: expected HOST:PORT", exit_code=2)
    return host.strip("[]"), int(port)


def request(address: str, api_key: int, version: int, body: Mapping[str, Any]) -> Any:
    """Send ``body`` (a dict with Kafka's field names) as ``api_key`` v``version`` to the
    broker at ``address``; return kio's decoded response."""
    frame, position = request_raw(address, api_key, version, body)
    response, _ = entities.response_reader(api_key, version)(frame, position)
    return response


def request_raw(
    address: str, api_key: int, version: int, body: Mapping[str, Any]
) -> tuple[memoryview, int]:
    """Like ``request``, but the response frame undecoded, with the position where its
    body starts (for the few fields kio cannot read, such as a -1 timestamp)."""
    flexible = entities.is_flexible(api_key, version)
    payload = entities.build(entities.payload_class(api_key, version, "request"), body)
    header = (
        struct.pack(">hhih", api_key, version, 1, len(CLIENT_ID))
        + CLIENT_ID
        + (b"\x00" if flexible else b"")
    )
    message = header + entities.encode(payload)
    try:
        with socket.create_connection(split_address(address), timeout=TIMEOUT_S) as sock:
            sock.sendall(_INT32.pack(len(message)) + message)
            (size,) = _INT32.unpack(_read(sock, 4))
            frame = memoryview(_read(sock, size))
    except OSError as error:
        raise ToolError(
            f"broker {address}: {error} (is the cluster up? check --bootstrap-server)",
            exit_code=2,
        ) from error
    # Response header: correlation id, then (flexible responses) an empty tagged-field section.
    return frame, 4 + (1 if flexible else 0)


def _read(sock: socket.socket, size: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(size - len(chunks))
        if not chunk:
            raise ConnectionError("connection closed by the broker")
        chunks += chunk
    return bytes(chunks)
