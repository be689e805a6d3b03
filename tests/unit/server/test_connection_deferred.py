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

import pytest

from gregor_broker.deferred import Deferred
from gregor_broker.server.connection import INLINE_ANSWER_BYTES, Connection, SendfileCounter


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


@pytest.mark.parametrize(
    ("size", "sendfile"),
    [(14, False), (INLINE_ANSWER_BYTES + 1, True)],
    ids=["small: read in, one write", "large: sendfile"],
)
def test_file_regions_of_a_deferred_answer_are_sent_in_the_resolving_call(
    tmp_path: Path, size: int, sendfile: bool
) -> None:
    """A small answer's regions are read in and the answer leaves in one write (one TCP
    segment, one wake-up of its reader); a larger one's go with sendfile(2). Both in the
    call that resolves the answer."""
    records = (b"record batches" * (size // 14 + 1))[:size]
    segment = tmp_path / "00000000000000000000.log"
    segment.write_bytes(b"x" * 100 + records + b"y" * 100)

    async def scenario() -> tuple[bool, bytes, int]:
        parked = Deferred()
        server, client, counter = await _serve(lambda _connection, _frame: parked)
        client.sendall(_frame(0))
        await asyncio.sleep(0.2)
        fd = os.open(segment, os.O_RDONLY)
        try:
            header = struct.pack(">ii", 4 + size, 0)
            parked.resolve(([header, _Region(fd, 100, size)], len(header) + size))
            written_in_the_call = _readable_without_the_loop(client)
            answer = await _receive(client, len(header) + size)
        finally:
            os.close(fd)
        client.close()
        server.close()
        await server.wait_closed()
        return written_in_the_call, answer, counter.calls_total

    written_in_the_call, answer, sendfile_calls = asyncio.run(scenario())
    assert written_in_the_call
    assert answer == struct.pack(">ii", 4 + size, 0) + records
    if sendfile:
        assert sendfile_calls >= 1
    else:
        assert sendfile_calls == 0


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


def _produce_frame(number: int) -> bytes:
    """A Produce frame (API key 0), which may be taken while answers are owed."""
    return struct.pack(">ihi", 6, 0, number)


def _waiting_produces(
    waiting: dict[int, Deferred],
) -> Callable[[Connection, memoryview], object]:
    """A handler answering each Produce with a Deferred (kept in ``waiting`` by the
    request's number) while letting the next Produce be taken, as acks=all does."""

    def handler(connection: Connection, frame: memoryview) -> object:
        (_api_key, number) = struct.unpack_from(">hi", frame)
        waiting[number] = Deferred()
        connection.allow_next_produce()
        return waiting[number]

    return handler


def test_owed_answers_are_written_in_the_resolving_call_in_request_order() -> None:
    """acks=all produces the client pipelined are taken while their answers wait
    (``allow_next_produce``); each answer, a Deferred resolved by the follower fetch that
    moves the high watermark, is written in that call once every answer before it is,
    and never before one of them."""

    async def scenario() -> tuple[list[bool], bytes]:
        waiting: dict[int, Deferred] = {}
        server, client, _counter = await _serve(_waiting_produces(waiting))
        client.sendall(_produce_frame(0) + _produce_frame(1) + _produce_frame(2))
        await asyncio.sleep(0.2)
        seen = [sorted(waiting) == [0, 1, 2]]
        waiting[2].resolve(_frame(2))
        seen.append(not _readable_without_the_loop(client))  # 0 and 1 are still owed
        waiting[0].resolve(_frame(0))
        seen.append(_readable_without_the_loop(client))  # 0 at once; 2 still behind 1
        first = await _receive(client, 8)
        waiting[1].resolve(_frame(1))
        seen.append(_readable_without_the_loop(client))
        rest = await _receive(client, 16)
        client.close()
        server.close()
        await server.wait_closed()
        return seen, first + rest

    seen, answers = asyncio.run(scenario())
    taken, held_back, first_written, rest_written = seen
    assert taken, "the produces were not taken while their answers were owed"
    assert held_back, "an answer overtook the ones owed before it"
    assert first_written, "the first answer waited for a turn of the loop"
    assert rest_written, "the answers behind it waited for a turn of the loop"
    assert answers == _frame(0) + _frame(1) + _frame(2)


def test_an_owed_answer_the_socket_cannot_take_at_once_is_finished_before_the_ones_behind_it(
    tmp_path: Path,
) -> None:
    """An owed answer with a file region larger than the socket takes at once: the rest
    is sent by a task, and the owed answer behind it (resolved meanwhile) goes out only
    after it, whole and in order, as does the in-flight path's own."""
    size = 16 * 1024 * 1024
    segment = tmp_path / "00000000000000000000.log"
    segment.write_bytes(os.urandom(size))

    async def scenario() -> tuple[bytes, bytes]:
        waiting: dict[int, Deferred] = {}
        server, client, _counter = await _serve(_waiting_produces(waiting))
        client.sendall(_produce_frame(0) + _produce_frame(1))
        await asyncio.sleep(0.2)
        fd = os.open(segment, os.O_RDONLY)
        try:
            header = struct.pack(">ii", 4 + size, 0)
            waiting[0].resolve(([header, _Region(fd, 0, size)], len(header) + size))
            waiting[1].resolve(_frame(1))
            received = await _receive(client, len(header) + size + 8)
        finally:
            os.close(fd)
        client.close()
        server.close()
        await server.wait_closed()
        return received, header

    received, header = asyncio.run(scenario())
    assert received[: len(header)] == header
    assert received[len(header) : len(header) + size] == segment.read_bytes()
    assert received[len(header) + size :] == _frame(1)
