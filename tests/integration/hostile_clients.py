"""Hostile clients, run as their own process: ``python -m tests.integration.hostile_clients
SCENARIO BOOTSTRAP SECONDS``.

A separate process so that the test's own latency probe does not share a Python
interpreter (and its lock) with the flood it measures. Scenarios (the fault campaign's):

- ``describe-burst``: 5,000 DescribeConfigs frames in one write, then read the answers;
- ``api-versions-burst``: 100,000 pipelined ApiVersions in one write, then read them;
- ``never-reads``: DescribeConfigs frames sent without end, no answer ever read;
- ``flood``: 8 connections sending Metadata and DescribeConfigs as fast as answered;
- ``every-version``: every advertised API version once (a minimal request each), each
  on its own connection, all at once: each version's first use;
- ``huge-group-ids``: Heartbeats naming a new group id of a million characters each.

Prints one line of JSON: what was sent and answered.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import socket
import struct
import sys
import threading
import time
import typing
import uuid
from typing import Any

from gregor_broker.protocol import entities

from ..request_samples import request_frame
from .broker_helpers import host_port


def _describe_configs_frame() -> bytes:
    request = entities.build(
        entities.payload_class(32, 4, "request"),
        {
            "resources": [{"resource_type": 4, "resource_name": "", "configuration_keys": None}],
            "include_synonyms": True,
            "include_documentation": True,
        },
    )
    return request_frame(32, 4, entities.encode(request))


def _metadata_frame() -> bytes:
    request = entities.build(
        entities.payload_class(3, 9, "request"),
        {
            "topics": None,
            "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False,
        },
    )
    return request_frame(3, 9, entities.encode(request))


def _api_versions_frame() -> bytes:
    return request_frame(18, 0, b"")


def _read_answers(sock: socket.socket, count: int, deadline: float) -> int:
    """Read ``count`` size-prefixed responses (or until ``deadline``); how many arrived."""
    buffered = bytearray()
    answered = 0
    sock.settimeout(1.0)
    while answered < count and time.monotonic() < deadline:
        try:
            chunk = sock.recv(1 << 20)
        except TimeoutError:
            continue
        if not chunk:
            break
        buffered += chunk
        position = 0
        while len(buffered) - position >= 4:
            (size,) = struct.unpack_from(">i", buffered, position)
            if len(buffered) - position - 4 < size:
                break
            position += 4 + size
            answered += 1
        del buffered[:position]
    return answered


def _burst(bootstrap: str, frame: bytes, count: int, seconds: float) -> dict[str, int]:
    deadline = time.monotonic() + 10 * seconds  # the attacker reads every answer
    sock = socket.create_connection(host_port(bootstrap))
    sender = threading.Thread(target=sock.sendall, args=(frame * count,), daemon=True)
    sender.start()
    answered = _read_answers(sock, count, deadline)
    sock.close()
    return {"sent": count, "answered": answered}


def _never_reads(bootstrap: str, seconds: float) -> dict[str, int]:
    frame = _describe_configs_frame()
    sock = socket.create_connection(host_port(bootstrap))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(0.2)
    deadline = time.monotonic() + seconds
    sent = 0
    chunk = frame * 100
    while time.monotonic() < deadline:
        try:
            sent += sock.send(chunk)
        except TimeoutError:
            continue  # the broker stopped reading from us: as it should
    sock.close()
    return {"sent_frames": sent // len(frame)}


def _flood(bootstrap: str, seconds: float, clients: int = 8) -> dict[str, int]:
    frames = [_metadata_frame(), _describe_configs_frame()]
    deadline = time.monotonic() + seconds
    answered = [0] * clients

    def one(number: int) -> None:
        sock = socket.create_connection(host_port(bootstrap))
        window = b"".join(frames) * 5
        while time.monotonic() < deadline:
            sock.sendall(window)
            answered[number] += _read_answers(sock, 10, deadline + 5)
        sock.close()

    threads = [threading.Thread(target=one, args=(n,)) for n in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return {"answered": sum(answered)}


def _minimal(cls: type) -> Any:
    """The smallest request of ``cls``: empty arrays, null or empty strings, ones."""
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for field in dataclasses.fields(cls):
        if "tag" in field.metadata:
            continue
        nested, sequence = entities.nested_entity_class(hints[field.name])
        kind = field.metadata.get("kafka_type")
        if sequence:
            values[field.name] = ()
        elif nested is not None:
            values[field.name] = _minimal(nested)
        elif kind == "string":
            values[field.name] = ""
        elif kind in ("bytes", "records"):
            values[field.name] = None if type(None) in typing.get_args(hints[field.name]) else b""
        elif kind == "bool":
            values[field.name] = False
        elif kind == "uuid":
            values[field.name] = uuid.UUID(int=1)
        elif kind in ("timedelta_i32", "timedelta_i64"):
            values[field.name] = datetime.timedelta(milliseconds=1)
        elif kind == "datetime_i64":
            values[field.name] = datetime.datetime.fromtimestamp(1, tz=datetime.UTC)
        elif kind == "float64":
            values[field.name] = 1.0
        else:  # integers: 1 (acks=1 is answered; 0 is not)
            values[field.name] = 1
    return cls(**values)


def _every_version(bootstrap: str) -> dict[str, int]:
    """Every advertised (api, version) once, a minimal request each, each on its own
    connection and all sent at once: every version's first use (kio classes, checkers)
    arrives in the same turn of the broker's event loop."""
    with socket.create_connection(host_port(bootstrap), timeout=10) as sock:
        sock.sendall(request_frame(18, 0, b""))
        answer = _read_frame(sock)
    (count,) = struct.unpack_from(">i", answer, 6)
    pairs = []
    for n in range(count):
        api_key, low, high = struct.unpack_from(">hhh", answer, 10 + 6 * n)
        pairs += [(api_key, version) for version in range(low, high + 1)]
    frames = [
        request_frame(
            key, version, entities.encode(_minimal(entities.payload_class(key, version, "request")))
        )
        for key, version in pairs
    ]
    sockets = [socket.create_connection(host_port(bootstrap), timeout=30) for _ in frames]
    for sock, frame in zip(sockets, frames, strict=True):
        sock.sendall(frame)
    answered = 0
    for sock in sockets:
        try:
            _read_frame(sock)
            answered += 1
        except OSError:  # closed (a request it refuses so)
            pass
        sock.close()
    return {"sent": len(frames), "answered": answered}


def _read_frame(sock: socket.socket) -> bytes:
    head = _read_exactly(sock, 4)
    return _read_exactly(sock, struct.unpack(">i", head)[0])


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionResetError("closed")
        data += chunk
    return bytes(data)


def _huge_group_ids(bootstrap: str, seconds: float, units: int = 1_000_000) -> dict[str, int]:
    """Heartbeats (v4, flexible: a compact string of any length) naming a new group id
    of ``units`` characters each, one after another: each id's Java hashCode (which
    picks its __consumer_offsets partition) is computed once."""
    deadline = time.monotonic() + seconds
    sent = 0
    with socket.create_connection(host_port(bootstrap), timeout=60) as sock:
        while time.monotonic() < deadline:
            group_id = f"{sent}-" + "g" * units
            request = entities.build(
                entities.payload_class(12, 4, "request"),
                {"group_id": group_id, "generation_id": 1, "member_id": "m"},
            )
            sock.sendall(request_frame(12, 4, entities.encode(request)))
            _read_frame(sock)
            sent += 1
    return {"sent": sent}


def run(scenario: str, bootstrap: str, seconds: float) -> dict[str, int]:
    if scenario == "describe-burst":
        return _burst(bootstrap, _describe_configs_frame(), 5_000, seconds)
    if scenario == "api-versions-burst":
        return _burst(bootstrap, _api_versions_frame(), 100_000, seconds)
    if scenario == "never-reads":
        return _never_reads(bootstrap, seconds)
    if scenario == "flood":
        return _flood(bootstrap, seconds)
    if scenario == "every-version":
        return _every_version(bootstrap)
    if scenario == "huge-group-ids":
        return _huge_group_ids(bootstrap, seconds)
    raise SystemExit(f"unknown scenario {scenario!r}")


if __name__ == "__main__":
    os.nice(5)  # the attack must not win merely by taking the CPU from the probe
    print(json.dumps(run(sys.argv[1], sys.argv[2], float(sys.argv[3]))))
