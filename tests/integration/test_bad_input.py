"""Bad input closes only the offending connection; the broker and its logs live on."""

from __future__ import annotations

import socket
import struct

import confluent_kafka
import pytest

from .broker_helpers import (
    api_versions_request,
    closed_by_peer,
    host_port,
    read_response,
)

BAD_FRAMES = {
    "giant length prefix": struct.pack(">i", 0x7FFFFFF0) + b"\x00" * 16,
    "negative length prefix": struct.pack(">i", -5),
    "garbage with a plausible length": struct.pack(">i", 32) + bytes(range(200, 232)),
    "unknown api key": struct.pack(">i", 10) + struct.pack(">hhih", 999, 0, 1, -1),
    "unsupported produce version": struct.pack(">i", 10) + struct.pack(">hhih", 0, 99, 1, -1),
    "produce with a truncated body": struct.pack(">i", 16)
    + struct.pack(">hhih", 0, 9, 1, 0)
    + b"\x05\x00\x01\x00\x00\x00",
    "frame shorter than a header": struct.pack(">i", 3) + b"\x00\x12\x00",
}


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    errors = []
    for value in values:
        producer.produce(topic, value, on_delivery=lambda e, m: errors.append(e) if e else None)
    assert producer.flush(30) == 0
    assert errors == []


def _consume_all(bootstrap: str, topic: str, count: int) -> list[bytes]:
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "fetch.queue.backoff.ms": 1,
        }
    )
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    try:
        while len(values) < count:
            message = consumer.poll(10)
            assert message is not None, f"timed out after {len(values)} of {count} messages"
            assert message.error() is None, message.error()
            values.append(message.value())
    finally:
        consumer.close()
    return values


@pytest.mark.parametrize("name", list(BAD_FRAMES))
def test_a_bad_frame_closes_its_connection_and_nothing_else(broker, name: str) -> None:
    bootstrap = broker.bootstrap
    before = [f"before-{i}".encode() for i in range(50)]
    _produce(bootstrap, "survivor", before)

    bystander = socket.create_connection(host_port(bootstrap))
    bad = socket.create_connection(host_port(bootstrap))
    bad.sendall(BAD_FRAMES[name])
    assert closed_by_peer(bad), f"the broker kept the connection open after {name}"

    # Another connection, opened before the bad one, is still served.
    bystander.sendall(api_versions_request(correlation_id=42))
    response = read_response(bystander)
    assert struct.unpack(">ih", response[:6]) == (42, 0)
    bystander.close()

    after = [f"after-{i}".encode() for i in range(50)]
    _produce(bootstrap, "survivor", after)
    assert _consume_all(bootstrap, "survivor", 100) == before + after
    assert broker.is_running()


def test_a_frame_cut_off_mid_way_by_a_disconnect_damages_nothing(broker) -> None:
    bootstrap = broker.bootstrap
    _produce(bootstrap, "halfway", [b"one", b"two"])
    sock = socket.create_connection(host_port(bootstrap))
    sock.sendall(struct.pack(">i", 1000) + b"\x00\x00\x00\x09" + b"x" * 100)
    sock.close()
    _produce(bootstrap, "halfway", [b"three"])
    assert _consume_all(bootstrap, "halfway", 3) == [b"one", b"two", b"three"]


def test_an_unsupported_api_versions_version_gets_the_supported_list(broker) -> None:
    sock = socket.create_connection(host_port(broker.bootstrap))
    sock.sendall(api_versions_request(correlation_id=7, version=99))
    response = read_response(sock)
    correlation_id, error_code, count = struct.unpack(">ihi", response[:10])
    assert (correlation_id, error_code) == (7, 35)  # UNSUPPORTED_VERSION
    entries = [struct.unpack(">hhh", response[10 + 6 * i : 16 + 6 * i]) for i in range(count)]
    assert (18, 0, 4) in entries
    assert any(key == 0 for key, _, _ in entries)  # Produce is advertised
