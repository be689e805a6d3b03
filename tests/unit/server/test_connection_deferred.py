"""A request answered by a Deferred is written in the call that resolves it.

A parked fetch is completed by another request (the append that gives a follower its
records, the follower fetch that moves the high watermark) or by its timer. Its answer
goes to the socket in that call, before the waking request goes on; what the client
sent behind it is taken afterwards, in order, on a later turn of the loop.
"""

from __future__ import annotations

import asyncio
import os
import select
import socket
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gregor_broker.server.connection import Connection, SendfileCounter
from gregor_broker.server.deferred import Deferred


def _frame(number: int, payload: bytes = b"") -> bytes:
    return struct.pack(">ii", 4 + len(payload), number) + payload


@dataclass
class _Region:
    fd: int
    position: int
    size: int


async def _serve(
    handler: Callable[[Connection, memoryview], object],
) -> tuple[asyncio.Server, socket.socket, SendfileCounter]:
    counter = SendfileCounter()

    def make() -> Connection:
        return Connection(handler, max_request_size=1 << 20, sendfile_counter=counter)

    server = await asyncio.get_running_loop().create_server(make, "127.0.0.1", 0)
    client = socket.create_connection(("127.0.0.1", server.sockets[0].getsockname()[1]))
    client.setblocking(False)
    return server, client, counter


def _readable_without_the_loop(client: socket.socket) -> bool:
    """Whether bytes are there although the event loop has not run since: written in
    the call just made (a loopback send lands in the peer's queue at once)."""
    return bool(select.select([client], [], [], 0.2)[0])


async def _receive(client: socket.socket, size: int) -> bytes:
    data = b""
    loop = asyncio.get_running_loop()
    while len(data) < size:
        chunk = await asyncio.wait_for(loop.sock_recv(client, size - len(data)), 10)
        if not chunk:
            break
        data += chunk
    return data


def test_the_answer_is_written_in_the_resolving_call_and_what_follows_is_taken_after() -> None:
    async def scenario() -> tuple[bool, bool, bytes, int]:
        parked: list[Deferred] = []
        taken: list[int] = []

        def handler(_connection: Connection, frame: memoryview) -> object:
            (number,) = struct.unpack_from(">i", frame)
            taken.append(number)
            if number == 0:  # a fetch that waits
                parked.append(Deferred())
                return parked[0]
            return _frame(number)

        server, client, _counter = await _serve(handler)
        client.sendall(_frame(0) + _frame(1) + _frame(2))
        await asyncio.sleep(0.2)
        nothing_before = not _readable_without_the_loop(client) and taken == [0]
        parked[0].resolve(_frame(0, b"records"))
        written_in_the_call = _readable_without_the_loop(client) and taken == [0]
        answers = await _receive(client, 8 + len(b"records") + 8 + 8)
        client.close()
        server.close()
        await server.wait_closed()
        return nothing_before, written_in_the_call, answers, len(taken)

    nothing_before, written_in_the_call, answers, taken = asyncio.run(scenario())
    assert nothing_before, "the parked request's answer or the frames behind it came early"
    assert written_in_the_call, "the answer waited for a turn of the loop"
    assert answers == _frame(0, b"records") + _frame(1) + _frame(2)
    assert taken == 3


def test_file_regions_of_a_deferred_answer_are_sent_in_the_resolving_call(
    tmp_path: Path,
) -> None:
    segment = tmp_path / "00000000000000000000.log"
    segment.write_bytes(b"x" * 100 + b"record batches" + b"y" * 100)

    async def scenario() -> tuple[bool, bytes, int]:
        parked = Deferred()
        server, client, counter = await _serve(lambda _connection, _frame: parked)
        client.sendall(_frame(0))
        await asyncio.sleep(0.2)
        fd = os.open(segment, os.O_RDONLY)
        try:
            header = struct.pack(">ii", 4 + 14, 0)
            parked.resolve(([header, _Region(fd, 100, 14)], len(header) + 14))
            written_in_the_call = _readable_without_the_loop(client)
            answer = await _receive(client, len(header) + 14)
        finally:
            os.close(fd)
        client.close()
        server.close()
        await server.wait_closed()
        return written_in_the_call, answer, counter.calls_total

    written_in_the_call, answer, sendfile_calls = asyncio.run(scenario())
    assert written_in_the_call
    assert answer == struct.pack(">ii", 18, 0) + b"record batches"
    assert sendfile_calls >= 1


def test_a_deferred_answer_that_fails_closes_the_connection() -> None:
    async def scenario() -> bytes:
        parked = Deferred()
        server, client, _counter = await _serve(lambda _connection, _frame: parked)
        client.sendall(_frame(0))
        await asyncio.sleep(0.2)
        parked.fail(RuntimeError("the read failed"))
        rest = await _receive(client, 1)
        client.close()
        server.close()
        await server.wait_closed()
        return rest

    assert asyncio.run(scenario()) == b"", "the connection stayed open"
