"""A connection stops reading while too many frames wait behind an unfinished request.

Kafka reads nothing more from a connection until its current request is answered. A
client pipelining thousands of small acks=all requests must be held back by TCP, not
have every frame copied into the broker's memory; once the waiting request finishes,
the queued frames are answered in order and reading resumes.
"""

from __future__ import annotations

import asyncio
import struct

from gregor_broker.server.connection import MAX_QUEUED_FRAMES, Connection, SendfileCounter

FRAMES = 5 * MAX_QUEUED_FRAMES


def _frame(number: int) -> bytes:
    return struct.pack(">ii", 4, number)


def test_reading_pauses_behind_a_waiting_request_and_resumes_in_order() -> None:
    async def scenario() -> tuple[list[int], int, list[int]]:
        loop = asyncio.get_running_loop()
        release: asyncio.Future[None] = loop.create_future()
        connections: list[Connection] = []
        handled: list[int] = []

        def handler(_connection: Connection, frame: memoryview):
            (number,) = struct.unpack_from(">i", frame)
            handled.append(number)
            response = _frame(number)
            if number == 0:  # the first request waits, like an acks=all produce
                return _after(release, response)
            return response

        def make() -> Connection:
            connection = Connection(
                handler, max_request_size=1024, sendfile_counter=SendfileCounter()
            )
            connections.append(connection)
            return connection

        server = await loop.create_server(make, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        for number in range(FRAMES):
            writer.write(_frame(number))
        await writer.drain()
        await asyncio.sleep(0.5)
        (connection,) = connections
        queued_while_waiting = len(connection._pending)
        paused = not connection.transport.is_reading()
        handled_while_waiting = list(handled)
        assert paused, "the connection kept reading behind a waiting request"

        release.set_result(None)
        answers = [
            struct.unpack(">ii", await asyncio.wait_for(reader.readexactly(8), 10))[1]
            for _ in range(FRAMES)
        ]
        assert connection.transport.is_reading()
        writer.close()
        server.close()
        await server.wait_closed()
        return answers, queued_while_waiting, handled_while_waiting

    answers, queued, handled_while_waiting = asyncio.run(scenario())
    assert answers == list(range(FRAMES))
    # Only the waiting request was handled; at most one read's worth queued behind it.
    assert handled_while_waiting == [0]
    assert MAX_QUEUED_FRAMES <= queued < FRAMES


async def _after(release: asyncio.Future[None], response: bytes) -> bytes:
    await release
    return response
