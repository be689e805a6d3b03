"""One Kafka request to one broker, for the few APIs confluent-kafka's AdminClient lacks
(OffsetDelete, DescribeLogDirs), which Kafka's own tools send through their Java admin client.

It frames a request with kio's generated classes (through ``protocol.entities``), sends it
on a fresh connection and decodes the response: no pooling, no retries, as a command runs
once. Failures to connect become a :class:`ToolError` with exit code 2. With
``--command-config`` the connection is wrapped in TLS and logged in with SASL
(SaslHandshake v1, SaslAuthenticate v2) before the request, as any Kafka client does.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Mapping
from typing import Any

from ..protocol import entities
from ..security.client import ClientSecurity
from ..security.scram import AuthenticationFailed
from .kafka_api import TIMEOUT_S, ToolError, security

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36

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
    host, port = split_address(address)
    client = security().client_security()
    try:
        with socket.create_connection((host, port), timeout=TIMEOUT_S) as raw:
            sock = raw
            if client is not None and client.ssl_context is not None:
                sock = client.ssl_context.wrap_socket(raw, server_hostname=host)
            if client is not None and client.mechanism:
                _sasl_login(sock, address, client)
            frame = _exchange(sock, api_key, version, body)
    except OSError as error:
        raise ToolError(
            f"broker {address}: {error} (is the cluster up? check --bootstrap-server and "
            "--command-config)",
            exit_code=2,
        ) from error
    # Response header: correlation id, then (flexible responses) an empty tagged-field section.
    return frame, 4 + (1 if flexible else 0)


def _exchange(sock: socket.socket, api_key: int, version: int, body: Mapping[str, Any]):
    flexible = entities.is_flexible(api_key, version)
    payload = entities.build(entities.payload_class(api_key, version, "request"), body)
    header = (
        struct.pack(">hhih", api_key, version, 1, len(CLIENT_ID))
        + CLIENT_ID
        + (b"\x00" if flexible else b"")
    )
    message = header + entities.encode(payload)
    sock.sendall(_INT32.pack(len(message)) + message)
    (size,) = _INT32.unpack(_read(sock, 4))
    return memoryview(_read(sock, size))


def _call(sock: socket.socket, api_key: int, version: int, body: Mapping[str, Any]) -> Any:
    frame = _exchange(sock, api_key, version, body)
    offset = 4 + (1 if entities.is_flexible(api_key, version) else 0)
    return entities.response_reader(api_key, version)(frame, offset)[0]


def _sasl_login(sock: socket.socket, address: str, client: ClientSecurity) -> None:
    """SaslHandshake v1, then SaslAuthenticate v2 until the mechanism is done (the same
    exchange a follower runs towards a leader, ``replication/client.py``)."""
    handshake = _call(sock, SASL_HANDSHAKE, 1, {"mechanism": client.mechanism})
    if handshake.error_code.value != 0:
        raise ToolError(
            f"broker {address} refused SASL mechanism {client.mechanism} "
            f"({handshake.error_code.name}; it offers {list(handshake.mechanisms)})",
            exit_code=2,
        )
    exchange = client.sasl_messages()
    message: bytes | None = exchange.first()
    while message is not None:
        response = _call(sock, SASL_AUTHENTICATE, 2, {"auth_bytes": message})
        if response.error_code.value != 0:
            raise ToolError(
                f"broker {address}: SASL login as {client.username} failed: "
                f"{response.error_code.name}: {response.error_message}",
                exit_code=2,
            )
        if exchange.done:
            return
        try:
            message = exchange.next(bytes(response.auth_bytes))
        except AuthenticationFailed as error:
            raise ToolError(f"broker {address}: SASL login: {error}", exit_code=2) from None


def _read(sock: socket.socket, size: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(size - len(chunks))
        if not chunk:
            raise ConnectionError("connection closed by the broker")
        chunks += chunk
    return bytes(chunks)
