"""A minimal Fetch client: measures how fast a broker serves bytes, not how fast a client parses.

It speaks just enough of the Kafka protocol to read one partition from the beginning:
Fetch v4 (non-flexible, no sessions; Kafka 4 still serves it), one request in flight,
large ``max_bytes``. Each response is received into one reusable buffer; only the fetch
response header and the 12-byte record batch headers (base offset, batch length) are
looked at, to know the next offset. Record contents are never decoded, so the broker's
serving path, not the client, is what gets measured.

Run as a process of its own (``python -m bench.fetch_reader``); prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import socket
import struct
import sys

from bench.clients import Window

FETCH_KEY = 1
FETCH_VERSION = 4
_I32 = struct.Struct(">i")
_BATCH_HEAD = struct.Struct(">qi")  # base offset, batch length (bytes after this field)
_LAST_DELTA = struct.Struct(">i")  # at byte 23 of a batch: lastOffsetDelta
_PARTITION_HEAD = struct.Struct(">ihqq")  # index, error code, high watermark, last stable


def fetch_request(
    correlation_id: int, topic: str, partition: int, offset: int, max_bytes: int
) -> bytes:
    name = topic.encode()
    client = b"gregor-bench"
    body = b"".join(
        [
            struct.pack(">hhih", FETCH_KEY, FETCH_VERSION, correlation_id, len(client)),
            client,
            # replica_id, max_wait_ms, min_bytes, max_bytes, isolation_level
            struct.pack(">iiiib", -1, 500, 1, max_bytes, 0),
            struct.pack(">ih", 1, len(name)),
            name,
            struct.pack(">iiqi", 1, partition, offset, max_bytes),
        ]
    )
    return _I32.pack(len(body)) + body


def _recv_exactly(sock: socket.socket, view: memoryview) -> None:
    wanted = len(view)
    while view:
        try:
            received = sock.recv_into(view)
        except TimeoutError as error:
            raise RuntimeError(
                f"{wanted - len(view)} of {wanted} bytes arrived, then nothing for "
                f"{sock.gettimeout()} s"
            ) from error
        if not received:
            raise ConnectionError("broker closed the connection")
        view = view[received:]


def next_offset(response: memoryview, offset: int) -> tuple[int, int]:
    """(next fetch offset, high watermark) from one Fetch v4 response (after its size).

    Walks the batch headers of the single partition; a partial batch at the end (the
    broker may cut a response mid-batch) is left for the next request.
    """
    position = 4 + 4  # correlation id, throttle time
    (topics,) = _I32.unpack_from(response, position)
    position += 4
    if topics != 1:
        raise ValueError(f"expected one topic in the response, got {topics}")
    (name_length,) = struct.unpack_from(">h", response, position)
    position += 2 + name_length
    position += 4  # partition count (1)
    _index, error_code, high_watermark, _lso = _PARTITION_HEAD.unpack_from(response, position)
    position += _PARTITION_HEAD.size
    if error_code:
        raise RuntimeError(f"fetch error code {error_code}")
    (aborted,) = _I32.unpack_from(response, position)
    position += 4 + max(aborted, 0) * 16
    (records_size,) = _I32.unpack_from(response, position)
    position += 4
    end = position + max(records_size, 0)
    while end - position >= 61:  # a v2 batch header is 61 bytes
        base_offset, length = _BATCH_HEAD.unpack_from(response, position)
        if position + 12 + length > end:
            break
        (last_delta,) = _LAST_DELTA.unpack_from(response, position + 23)
        offset = base_offset + last_delta + 1
        position += 12 + length
    return offset, high_watermark


def read_partition(
    host: str,
    port: int,
    topic: str,
    partition: int,
    max_bytes: int,
    stop_offset: int,
    broker_pid: int | None = None,
) -> dict[str, float | None]:
    """Fetch from offset 0 until ``stop_offset``; returns bytes, requests and seconds."""
    buffer = bytearray(max_bytes + 1024 * 1024)
    size_view = memoryview(bytearray(4))
    offset = 0
    total_bytes = 0
    requests = 0
    correlation_id = 0
    with socket.create_connection((host, port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        # A response shorter than its size prefix would otherwise hang the run.
        sock.settimeout(30)
        window = Window([broker_pid] if broker_pid else [])
        while offset < stop_offset:
            correlation_id += 1
            sock.sendall(fetch_request(correlation_id, topic, partition, offset, max_bytes))
            _recv_exactly(sock, size_view)
            (size,) = _I32.unpack_from(size_view)
            if size > len(buffer):
                buffer = bytearray(size)
            view = memoryview(buffer)[:size]
            _recv_exactly(sock, view)
            requests += 1
            total_bytes += size + 4
            new_offset, _high_watermark = next_offset(view, offset)
            if new_offset == offset:
                raise RuntimeError(f"no progress at offset {offset} (topic shorter than asked?)")
            offset = new_offset
        measured = window.close()
    return {"bytes": total_bytes, "requests": requests, "offset": offset, **measured}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", required=True, help="host:port of the partition leader")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--partition", type=int, default=0)
    parser.add_argument("--max-bytes", type=int, default=4 * 1024 * 1024)
    parser.add_argument("--stop-offset", type=int, required=True, help="read up to here")
    parser.add_argument("--broker-pid", type=int, help="report this process's CPU use")
    args = parser.parse_args(argv)
    host, port = args.bootstrap.rsplit(":", 1)
    result = read_partition(
        host,
        int(port),
        args.topic,
        args.partition,
        args.max_bytes,
        args.stop_offset,
        args.broker_pid,
    )
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
