"""This machine's physical limits, measured in the same run as the brokers.

- ``tcp``: one process sends 1 MiB buffers over a loopback TCP connection to another,
  which receives them into a reusable buffer and throws them away: the best any
  produce or fetch path can do through the kernel's socket copy.
- ``sendfile``: a page-cached file sent with ``sendfile(2)`` to a loopback socket,
  received (and dropped) by another process: the ceiling of a zero-copy fetch path.
- ``disk``: sequential 1 MiB writes to a file in the data directory, once to the page
  cache only and once followed by ``fsync``: the storage ceiling of an append.

Each measurement runs in its own processes (``python -m bench.limits KIND``) and
prints one JSON line: ``{"bytes": ..., "seconds": ...}``.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
from pathlib import Path

CHUNK = 1024 * 1024


def _sink(listener: socket.socket) -> None:
    """Child side: accept one connection and drain it."""
    connection, _ = listener.accept()
    buffer = bytearray(CHUNK)
    view = memoryview(buffer)
    with connection:
        while connection.recv_into(view):
            pass


def _with_sink(send) -> dict[str, float]:
    """Fork a receiving process, run ``send(sock)`` against it, time it to the last byte."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    pid = os.fork()
    if pid == 0:  # the receiving process
        try:
            _sink(listener)
        finally:
            os._exit(0)
    listener.close()
    with socket.create_connection(("127.0.0.1", port)) as sock:
        started = time.perf_counter()
        sent = send(sock)
        sock.shutdown(socket.SHUT_WR)
        sock.recv(1)  # returns b"" once the receiver has drained everything and closed
        seconds = time.perf_counter() - started
    os.waitpid(pid, 0)
    return {"bytes": sent, "seconds": seconds}


def tcp_copy(seconds: float) -> dict[str, float]:
    payload = memoryview(os.urandom(CHUNK))

    def send(sock: socket.socket) -> int:
        sent = 0
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            for _ in range(16):
                sock.sendall(payload)
            sent += 16 * CHUNK
        return sent

    return _with_sink(send)


def sendfile(directory: Path, seconds: float, file_mib: int) -> dict[str, float]:
    path = directory / "bench-sendfile.bin"
    size = file_mib * CHUNK
    with open(path, "wb") as out:
        block = os.urandom(CHUNK)
        for _ in range(file_mib):
            out.write(block)
    try:
        with open(path, "rb") as source:
            while source.read(CHUNK):  # warm the page cache
                pass
            fd = source.fileno()

            def send(sock: socket.socket) -> int:
                sent = 0
                deadline = time.perf_counter() + seconds
                out = sock.fileno()
                while time.perf_counter() < deadline:
                    offset = 0
                    while offset < size:
                        count = os.sendfile(out, fd, offset, size - offset)
                        offset += count
                    sent += size
                return sent

            return _with_sink(send)
    finally:
        path.unlink(missing_ok=True)


def disk_write(directory: Path, file_mib: int, fsync: bool) -> dict[str, float]:
    path = directory / "bench-disk-write.bin"
    block = memoryview(os.urandom(CHUNK))
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            started = time.perf_counter()
            for _ in range(file_mib):
                os.write(fd, block)
            if fsync:
                os.fsync(fd)
            seconds = time.perf_counter() - started
        finally:
            os.close(fd)
    finally:
        path.unlink(missing_ok=True)
    return {"bytes": file_mib * CHUNK, "seconds": seconds}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Measure one physical limit; prints JSON.")
    parser.add_argument("kind", choices=["tcp", "sendfile", "disk", "disk-fsync"])
    parser.add_argument("--dir", type=Path, default=Path("."), help="data directory")
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--file-mib", type=int, default=256)
    args = parser.parse_args(argv)
    if args.kind == "tcp":
        result = tcp_copy(args.seconds)
    elif args.kind == "sendfile":
        result = sendfile(args.dir, args.seconds, args.file_mib)
    else:
        result = disk_write(args.dir, args.file_mib, fsync=args.kind == "disk-fsync")
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
