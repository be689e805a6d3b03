"""Small helpers the broker integration tests share: metrics scraping, raw sockets."""

from __future__ import annotations

import re
import socket
import struct
import urllib.request


def scrape(port: int) -> dict[str, float]:
    """Read a broker's /metrics into {sample name with labels: value}."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    samples = {}
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        name, value = line.rsplit(" ", 1)
        samples[name] = float(value)
    return samples


def api_versions_request(correlation_id: int = 1, version: int = 0) -> bytes:
    body = struct.pack(">hhih", 18, version, correlation_id, 4) + b"test"
    return struct.pack(">i", len(body)) + body


def recv_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("closed by the broker")
        data += chunk
    return data


def read_response(sock: socket.socket) -> bytes:
    (size,) = struct.unpack(">i", recv_exactly(sock, 4))
    return recv_exactly(sock, size)


def closed_by_peer(sock: socket.socket, timeout: float = 5.0) -> bool:
    """True when the broker closed (or reset) this connection within ``timeout``."""
    sock.settimeout(timeout)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def host_port(bootstrap: str) -> tuple[str, int]:
    match = re.fullmatch(r"(.+):(\d+)", bootstrap)
    assert match is not None
    return match.group(1), int(match.group(2))
