"""Idempotent producers: a batch retried after a lost response is written once.

A small TCP proxy sits between the producer and the broker (the broker advertises the
proxy's address, so every connection goes through it). For some Produce requests the
proxy lets the request reach the broker, waits for the broker's response and then cuts
both connections instead of delivering it: the broker has written the batch, the client
does not know. The client reconnects and sends the batch again.

With ``enable.idempotence=true`` the broker recognises the retry by producer id, epoch
and sequence and answers with the original offsets: the log holds every message
exactly once. The same run with idempotence off writes duplicates, which shows the
proxy really caused retries.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections import Counter

import confluent_kafka
import pytest

from gregor_broker.devtools.zookeeper_server import free_port

from .group_helpers import create_topic

PRODUCE_API_KEY = 0


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def _read_frame(sock: socket.socket) -> bytes:
    (size,) = struct.unpack(">i", _recv_exactly(sock, 4))
    return struct.pack(">i", size) + _recv_exactly(sock, size)


class ResponseDroppingProxy:
    """Forwards Kafka frames; drops the response to every ``every``-th Produce request
    (up to ``limit`` times) by closing both connections once the broker answered."""

    def __init__(self, port: int, target_port: int, every: int, limit: int) -> None:
        self.port, self.target_port = port, target_port
        self.every, self.limit = every, limit
        self.produce_requests = 0
        self.dropped = 0
        self.lock = threading.Lock()
        self.listener = socket.create_server(("127.0.0.1", port))
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            pending: list[tuple[int, bool]] = []  # (correlation id, drop its response)
            condition = threading.Condition()
            threading.Thread(
                target=self._requests, args=(client, upstream, pending, condition), daemon=True
            ).start()
            threading.Thread(
                target=self._responses, args=(client, upstream, pending, condition), daemon=True
            ).start()

    def _requests(self, client, upstream, pending, condition) -> None:
        try:
            while True:
                frame = _read_frame(client)
                api_key, _version, correlation_id = struct.unpack_from(">hhi", frame, 4)
                drop = False
                if api_key == PRODUCE_API_KEY:
                    with self.lock:
                        self.produce_requests += 1
                        if self.produce_requests % self.every == 0 and self.dropped < self.limit:
                            self.dropped += 1
                            drop = True
                with condition:
                    pending.append((correlation_id, drop))
                upstream.sendall(frame)
        except OSError:
            pass
        finally:
            _close(client, upstream)

    def _responses(self, client, upstream, pending, condition) -> None:
        try:
            while True:
                frame = _read_frame(upstream)
                (correlation_id,) = struct.unpack_from(">i", frame, 4)
                with condition:
                    drop = any(c == correlation_id and d for c, d in pending)
                    pending[:] = [(c, d) for c, d in pending if c != correlation_id]
                if drop:
                    break  # the broker wrote the batch; the client never hears of it
                client.sendall(frame)
        except OSError:
            pass
        finally:
            _close(client, upstream)

    def close(self) -> None:
        self.listener.close()


def _close(*sockets: socket.socket) -> None:
    for sock in sockets:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        sock.close()


def _values_in_log(bootstrap: str, topic: str, expected: int) -> Counter[str]:
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False}
    )
    end = consumer.get_watermark_offsets(confluent_kafka.TopicPartition(topic, 0), 10)[1]
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
    seen: Counter[str] = Counter()
    read = 0
    try:
        while read < end:
            for message in consumer.consume(1000, 1.0):
                if message.error() is None:
                    seen[message.value().decode()] += 1
                    read += 1
    finally:
        consumer.close()
    assert read >= expected
    return seen


@pytest.mark.parametrize("idempotent", [True, False])
def test_a_retried_batch_is_written_once_by_an_idempotent_producer(
    broker_factory, idempotent
) -> None:
    proxy_port = free_port()
    broker = broker_factory(**{"advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy_port}"})
    broker_port = int(broker.bootstrap.rsplit(":", 1)[1])
    proxy = ResponseDroppingProxy(proxy_port, broker_port, every=4, limit=6)
    bootstrap = f"127.0.0.1:{proxy_port}"
    topic = f"transfers-{'idempotent' if idempotent else 'plain'}"
    try:
        create_topic(bootstrap, topic, 1)
        producer = confluent_kafka.Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": idempotent,
                "acks": "all",
                "linger.ms": 2,
                "batch.num.messages": 20,
                "retries": 1000,
                "retry.backoff.ms": 50,
                "message.timeout.ms": 60000,
                "socket.timeout.ms": 3000,
            }
        )
        failed: list[object] = []
        values = [f"transfer-{i:05d}" for i in range(2000)]
        for i, value in enumerate(values):
            producer.produce(
                topic,
                value.encode(),
                partition=0,
                on_delivery=lambda error, _m: error is not None and failed.append(error),
            )
            if i % 100 == 99:
                producer.flush(30)
        assert producer.flush(60) == 0
        assert failed == []
        assert proxy.dropped > 0, "the proxy never cut a connection"

        seen = _values_in_log(bootstrap, topic, len(values))
        assert set(seen) == set(values)
        duplicates = {v: n for v, n in seen.items() if n > 1}
        print(
            f"idempotence={idempotent}: {proxy.dropped} responses dropped of "
            f"{proxy.produce_requests} produce requests, {len(duplicates)} duplicated messages"
        )
        if idempotent:
            assert duplicates == {}
        else:
            assert duplicates, "without idempotence the retries should have duplicated"
    finally:
        proxy.close()
