"""A connection takes one request at a time and stops reading when it could not take more.

Kafka reads one request from a connection and mutes the channel until that request is
answered. Gregor runs every connection on one event loop, so the connection must also
never let one read start unbounded work: pipelined frames are taken one per turn of
the loop, a client that never reads its responses is no longer read from once they
pass the write high-water mark, and a waiting request holds everything behind it in
the socket, not in the broker's memory.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import struct
import time
from collections.abc import Callable

from gregor_broker.server.connection import LARGE_FRAME_SIZE, Connection, SendfileCounter
from gregor_broker.stats import RateLimitedLog

FRAMES = 320


def _frame(number: int, payload: bytes = b"") -> bytes:
    return struct.pack(">ii", 4 + len(payload), number) + payload


def _work_and_echo(frame: memoryview) -> bytes:
    """A request's worth of work (0.2 ms), answered with the request's number."""
    (number,) = struct.unpack_from(">i", frame)
    spin_until = time.perf_counter() + 0.0002
    while time.perf_counter() < spin_until:
        pass
    return _frame(number)


async def _serve(
    handler: Callable[[Connection, memoryview], object], max_request_size: int = 1024
) -> tuple[asyncio.Server, int, list[Connection]]:
    connections: list[Connection] = []

    def make() -> Connection:
        connection = Connection(
            handler, max_request_size=max_request_size, sendfile_counter=SendfileCounter()
        )
        connections.append(connection)
        return connection

    server = await asyncio.get_running_loop().create_server(make, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1], connections


async def _after(release: asyncio.Future[None], response: bytes) -> bytes:
    await release
    return response


def test_a_waiting_request_mutes_the_connection_and_the_rest_follow_in_order() -> None:
    async def scenario() -> tuple[list[int], list[int], bool, bool]:
        release: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        handled: list[int] = []

        def handler(_connection: Connection, frame: memoryview):
            (number,) = struct.unpack_from(">i", frame)
            handled.append(number)
            if number == 0:  # the first request waits, like an acks=all produce
                return _after(release, _frame(number))
            return _frame(number)

        server, port, connections = await _serve(handler)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"".join(_frame(number) for number in range(FRAMES)))
        await writer.drain()
        await asyncio.sleep(0.5)
        (connection,) = connections
        paused = not connection.transport.is_reading()
        handled_while_waiting = list(handled)
        release.set_result(None)
        answers = [
            struct.unpack(">ii", await asyncio.wait_for(reader.readexactly(8), 10))[1]
            for _ in range(FRAMES)
        ]
        reading_again = connection.transport.is_reading()
        writer.close()
        server.close()
        await server.wait_closed()
        return answers, handled_while_waiting, paused, reading_again

    answers, handled_while_waiting, paused, reading_again = asyncio.run(scenario())
    assert paused, "the connection kept reading behind a waiting request"
    assert handled_while_waiting == [0], "requests were taken behind one still in flight"
    assert answers == list(range(FRAMES))
    assert reading_again


def test_a_waiting_request_mutes_the_connection_only_once_bytes_arrive_behind_it() -> None:
    """A long-polling fetch's client sends nothing until it is answered: muting at once
    cost two epoll_ctl calls per fetch for nothing. Bytes behind it still mute it, and
    nothing behind it is taken before it is answered."""

    async def scenario() -> tuple[bool, bool, list[int], list[int], bool]:
        release: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        handled: list[int] = []

        def handler(_connection: Connection, frame: memoryview):
            (number,) = struct.unpack_from(">i", frame)
            handled.append(number)
            if number == 0:
                return _after(release, _frame(number))
            return _frame(number)

        server, port, connections = await _serve(handler)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(_frame(0))
        await writer.drain()
        await asyncio.sleep(0.3)
        (connection,) = connections
        reading_while_alone = connection.transport.is_reading()
        writer.write(_frame(1) + _frame(2)[:5])  # one frame and part of another behind it
        await writer.drain()
        await asyncio.sleep(0.3)
        muted_behind = not connection.transport.is_reading()
        handled_while_waiting = list(handled)
        release.set_result(None)
        writer.write(_frame(2)[5:])
        answers = [
            struct.unpack(">ii", await asyncio.wait_for(reader.readexactly(8), 10))[1]
            for _ in range(3)
        ]
        reading_again = connection.transport.is_reading()
        writer.close()
        server.close()
        await server.wait_closed()
        return reading_while_alone, muted_behind, handled_while_waiting, answers, reading_again

    reading_while_alone, muted_behind, handled_while_waiting, answers, reading_again = asyncio.run(
        scenario()
    )
    assert reading_while_alone, "a lone waiting request muted the connection"
    assert muted_behind, "the connection kept reading behind a waiting request"
    assert handled_while_waiting == [0], "a request was taken behind one still in flight"
    assert answers == [0, 1, 2]
    assert reading_again


def test_frames_pipelined_in_one_write_are_taken_in_turns_with_other_connections() -> None:
    """A flood in one write must not keep another connection waiting for all of it."""
    flood = 2000

    async def scenario() -> tuple[int, int]:
        order: list[tuple[str, int]] = []

        def handler(connection: Connection, frame: memoryview):
            order.append((connection.peer, struct.unpack_from(">i", frame)[0]))
            return _work_and_echo(frame)

        server, port, _connections = await _serve(handler)
        flood_reader, flood_writer = await asyncio.open_connection("127.0.0.1", port)
        other_reader, other_writer = await asyncio.open_connection("127.0.0.1", port)
        await asyncio.sleep(0.05)
        other_peer = f"127.0.0.1:{other_writer.get_extra_info('sockname')[1]}"
        flood_writer.write(b"".join(_frame(number) for number in range(flood)))
        await flood_writer.drain()
        await asyncio.sleep(0.02)  # the flood is being worked through
        other_writer.write(_frame(-1))
        await other_writer.drain()
        await asyncio.wait_for(other_reader.readexactly(8), 10)
        position = order.index((other_peer, -1))
        for _ in range(flood):
            await asyncio.wait_for(flood_reader.readexactly(8), 10)
        for writer in (flood_writer, other_writer):
            writer.close()
        server.close()
        await server.wait_closed()
        return position, len(order)

    position, total = asyncio.run(scenario())
    assert total == flood + 1
    # The other client's request was taken while the flood was still being worked on.
    assert position < flood // 2, f"the other client waited behind {position} flood requests"


def test_a_client_that_never_reads_its_responses_is_no_longer_read_from() -> None:
    response_size = 64 * 1024
    sent = 1000

    async def scenario() -> tuple[int, bool, int]:
        handled: list[int] = []

        def handler(_connection: Connection, frame: memoryview):
            (number,) = struct.unpack_from(">i", frame)
            handled.append(number)
            return struct.pack(">i", response_size) + bytes(response_size)

        server, port, connections = await _serve(handler)
        client = socket.create_connection(("127.0.0.1", port))
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        client.setblocking(False)
        data = b"".join(_frame(number) for number in range(sent))
        loop = asyncio.get_running_loop()
        await loop.sock_sendall(client, data)
        await asyncio.sleep(1.0)
        (connection,) = connections
        buffered = connection.transport.get_write_buffer_size()
        paused = not connection.transport.is_reading()
        count = len(handled)
        client.close()
        server.close()
        await server.wait_closed()
        return count, paused, buffered

    count, paused, buffered = asyncio.run(scenario())
    assert paused, "the broker kept reading from a client that reads nothing"
    # The socket buffers take a few responses; after that nothing more is started.
    assert count < 100, f"{count} requests answered to a client that reads nothing"
    assert buffered < 4 * 1024 * 1024, f"{buffered} bytes of unsent responses held"


def test_a_large_frame_is_read_into_a_buffer_of_its_own_size_between_small_ones() -> None:
    big = bytes(range(256)) * (4 * LARGE_FRAME_SIZE // 256 + 7)

    async def scenario() -> tuple[list[tuple[int, int, str]], list[int]]:
        seen: list[tuple[int, int, str]] = []

        def handler(_connection: Connection, frame: memoryview):
            (number,) = struct.unpack_from(">i", frame)
            assert bytes(frame[4:]) == (big if number == 1 else b"")
            assert frame.readonly  # kio's decoder takes read-only buffers only
            seen.append((number, len(frame), type(frame.obj).__name__))
            return _frame(number)

        server, port, _connections = await _serve(handler, max_request_size=1 << 20)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        data = _frame(0) + _frame(1, big) + _frame(2)
        for start in range(0, len(data), 1000):  # trickled, so the big frame spans reads
            writer.write(data[start : start + 1000])
            await writer.drain()
            await asyncio.sleep(0)
        answers = [
            struct.unpack(">ii", await asyncio.wait_for(reader.readexactly(8), 10))[1]
            for _ in range(3)
        ]
        writer.close()
        server.close()
        await server.wait_closed()
        return seen, answers

    seen, answers = asyncio.run(scenario())
    assert answers == [0, 1, 2]
    assert seen[1] == (1, 4 + len(big), "bytearray")  # the socket filled it in place
    assert [number for number, _size, _kind in seen] == [0, 1, 2]


def test_a_client_that_half_closes_still_gets_its_answers() -> None:
    async def scenario() -> list[int]:
        server, port, _connections = await _serve(
            lambda _c, frame: _frame(struct.unpack_from(">i", frame)[0])
        )
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"".join(_frame(number) for number in range(5)))
        writer.write_eof()
        answers = [
            struct.unpack(">ii", await asyncio.wait_for(reader.readexactly(8), 10))[1]
            for _ in range(5)
        ]
        assert await asyncio.wait_for(reader.read(), 10) == b""  # then the broker closes
        writer.close()
        server.close()
        await server.wait_closed()
        return answers

    assert asyncio.run(scenario()) == [0, 1, 2, 3, 4]


def test_repeated_failures_log_one_traceback_per_kind_and_a_bounded_number_of_lines(
    caplog,
) -> None:
    now = [0.0]
    limited = RateLimitedLog(
        logging.getLogger("test.ratelimit"),
        interval=60,
        lines_per_interval=10,
        clock=lambda: now[0],
    )
    with caplog.at_level(logging.WARNING, logger="test.ratelimit"):
        for number in range(1000):
            limited.warning("bad request %d", number, error=ValueError("x"))
        now[0] = 61.0
        limited.warning("later", error=ValueError("y"))
    records = caplog.records
    assert len(records) == 10 + 2  # ten lines, the suppressed count, the next window's line
    assert sum(record.exc_info is not None for record in records) == 2  # once per window
    assert "990 similar lines suppressed" in records[10].getMessage()


def test_answers_of_one_read_leave_in_one_send_across_the_turns_that_take_them() -> None:
    """Pipelined frames of one read are taken over several turns (``TURN_SECONDS``), but
    their answers leave together once no complete frame waits: a send at every turn
    would wake the client once per few requests (0.16 sends per unbatched produce)."""
    count = 200

    async def scenario() -> tuple[list[int], list[int]]:
        sends: list[int] = []

        server, port, connections = await _serve(lambda _connection, frame: _work_and_echo(frame))
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        await asyncio.sleep(0.05)
        transport = connections[0].transport
        write = transport.write

        def counting_write(data: bytes) -> None:
            sends.append(len(data))
            write(data)

        transport.write = counting_write  # type: ignore[method-assign]
        writer.write(b"".join(_frame(number) for number in range(count)))  # one read
        await writer.drain()
        answers = []
        for _ in range(count):
            (number,) = struct.unpack(">i", (await asyncio.wait_for(reader.readexactly(8), 10))[4:])
            answers.append(number)
        writer.close()
        server.close()
        await server.wait_closed()
        return sends, answers

    sends, answers = asyncio.run(scenario())
    assert answers == list(range(count))
    # 200 requests of 0.2 ms are about 40 turns of 1 ms; their answers: one send (a
    # second if the frames came in two reads).
    assert len(sends) <= 2, f"{len(sends)} sends for one read of {count} frames"
