"""A connection takes the client's next Produce while an acks=all produce waits.

An acks=all produce has appended by the time its handler returns; only its answer waits
for the followers. The handler says so (``allow_next_produce``) and the connection may
take further Produce requests meanwhile, so one replication round trip carries every
request the client pipelined. What must not change: answers in request order, any other
request taken only once every owed answer is written, at most ``MAX_OWED_ANSWERS`` owed,
and no overlap for a handler that did not allow it.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
from collections.abc import Callable

from gregor_broker.server.connection import (
    MAX_OWED_ANSWERS,
    OVERLAP_MAX_FRAME_BYTES,
    Connection,
    SendfileCounter,
)

PRODUCE, METADATA = 0, 3


def _frame(api_key: int, number: int, payload: bytes = b"") -> bytes:
    return struct.pack(">ihi", 6 + len(payload), api_key, number) + payload


def _answer(number: int) -> bytes:
    return struct.pack(">ii", 4, number)


async def _connect(
    handler: Callable[[Connection, memoryview], object],
) -> tuple[asyncio.Server, asyncio.StreamReader, asyncio.StreamWriter]:
    """A server whose connections use ``handler``, and a client connected to it."""

    def make() -> Connection:
        return Connection(
            handler,
            max_request_size=4 * OVERLAP_MAX_FRAME_BYTES,
            sendfile_counter=SendfileCounter(),
        )

    server = await asyncio.get_running_loop().create_server(make, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    return server, reader, writer


class Handler:
    """Produce requests wait for their own release; those in ``overlapping`` allow the
    next Produce meanwhile (as an acks=all produce does once appended)."""

    def __init__(self, overlapping: Callable[[int], bool] = lambda _number: True) -> None:
        self.handled: list[int] = []
        self.releases: dict[int, asyncio.Future[None]] = {}
        self.overlapping = overlapping

    def __call__(self, connection: Connection, frame: memoryview) -> object:
        api_key, number = struct.unpack_from(">hi", frame)
        self.handled.append(number)
        if api_key != PRODUCE:
            return _answer(number)
        release = asyncio.get_running_loop().create_future()
        self.releases[number] = release
        if self.overlapping(number):
            connection.allow_next_produce()
        return self._after(release, number)

    def release(self, *numbers: int) -> None:
        """Let these produce requests' answers go (as the followers' fetches would)."""
        for number in numbers:
            self.releases[number].set_result(None)

    @staticmethod
    async def _after(release: asyncio.Future[None], number: int) -> bytes:
        await release
        return _answer(number)


async def _answers(reader: asyncio.StreamReader, count: int) -> list[int]:
    return [
        struct.unpack(">ii", await asyncio.wait_for(reader.readexactly(8), 10))[1]
        for _ in range(count)
    ]


def _run(scenario: Callable[[], object]) -> object:
    return asyncio.run(scenario())  # type: ignore[arg-type]


def test_produces_overlap_up_to_the_limit_and_are_answered_in_request_order() -> None:
    count = MAX_OWED_ANSWERS + 4

    async def scenario() -> tuple[list[int], bytes, list[int]]:
        handler = Handler()
        server, reader, writer = await _connect(handler)
        writer.write(b"".join(_frame(PRODUCE, n) for n in range(count)))
        await asyncio.sleep(0.3)
        taken_while_owed = list(handler.handled)
        # Every owed answer but the first is ready: none may overtake it.
        handler.release(*range(1, MAX_OWED_ANSWERS))
        overtaking = b""
        with contextlib.suppress(TimeoutError):
            overtaking = await asyncio.wait_for(reader.read(8), 0.3)
        handler.release(0)
        answers = await _answers(reader, MAX_OWED_ANSWERS)
        for number in range(MAX_OWED_ANSWERS, count):
            while number not in handler.releases:
                await asyncio.sleep(0.01)
            handler.release(number)
        answers += await _answers(reader, count - MAX_OWED_ANSWERS)
        writer.close()
        server.close()
        return taken_while_owed, overtaking, answers

    taken, overtaking, answers = _run(scenario)  # type: ignore[misc]
    assert taken == list(range(MAX_OWED_ANSWERS)), "at most MAX_OWED_ANSWERS owed"
    assert overtaking == b"", "a ready answer waited for the one owed before it"
    assert answers == list(range(count)), "answers keep request order"


def test_a_request_other_than_produce_waits_until_every_owed_answer_is_written() -> None:
    async def scenario() -> tuple[list[int], list[int], list[int]]:
        handler = Handler()
        server, reader, writer = await _connect(handler)
        writer.write(
            _frame(PRODUCE, 0) + _frame(PRODUCE, 1) + _frame(METADATA, 2) + _frame(PRODUCE, 3)
        )
        await asyncio.sleep(0.3)
        taken_while_owed = list(handler.handled)
        handler.release(0)
        first = await _answers(reader, 1)
        await asyncio.sleep(0.2)
        taken_with_one_owed = list(handler.handled)
        handler.release(1)
        rest = await _answers(reader, 1)
        await asyncio.sleep(0.2)
        handler.release(3)
        rest += await _answers(reader, 2)
        writer.close()
        server.close()
        return taken_while_owed, taken_with_one_owed, first + rest

    taken_while_owed, taken_with_one_owed, answers = _run(scenario)  # type: ignore[misc]
    assert taken_while_owed == [0, 1]
    assert taken_with_one_owed == [0, 1], "the metadata request waits for produce 1's answer"
    assert answers == [0, 1, 2, 3]


def test_a_request_that_did_not_allow_overlap_holds_the_connection() -> None:
    async def scenario() -> tuple[list[int], list[int], list[int]]:
        # Produce 1 does not allow overlap (a handler still working, or a throttle).
        handler = Handler(overlapping=lambda number: number != 1)
        server, reader, writer = await _connect(handler)
        writer.write(b"".join(_frame(PRODUCE, n) for n in range(4)))
        await asyncio.sleep(0.3)
        taken_first = list(handler.handled)
        handler.release(0, 1)
        answers = await _answers(reader, 2)
        await asyncio.sleep(0.2)
        taken_after = list(handler.handled)
        handler.release(2, 3)
        answers += await _answers(reader, 2)
        writer.close()
        server.close()
        return taken_first, taken_after, answers

    taken_first, taken_after, answers = _run(scenario)  # type: ignore[misc]
    assert taken_first == [0, 1], "nothing is taken behind a request that may still change"
    assert taken_after == [0, 1, 2, 3]
    assert answers == [0, 1, 2, 3]


def test_a_large_produce_is_not_taken_while_answers_are_owed() -> None:
    async def scenario() -> tuple[list[int], list[int], list[int]]:
        handler = Handler()
        server, reader, writer = await _connect(handler)
        large = _frame(PRODUCE, 1, bytes(OVERLAP_MAX_FRAME_BYTES))
        writer.write(_frame(PRODUCE, 0) + large)
        await writer.drain()
        await asyncio.sleep(0.5)
        taken_while_owed = list(handler.handled)
        handler.release(0)
        answers = await _answers(reader, 1)
        await asyncio.sleep(0.3)
        taken_after = list(handler.handled)
        handler.release(1)
        answers += await _answers(reader, 1)
        writer.close()
        server.close()
        return taken_while_owed, taken_after, answers

    taken_while_owed, taken_after, answers = _run(scenario)  # type: ignore[misc]
    assert taken_while_owed == [0]
    assert taken_after == [0, 1]
    assert answers == [0, 1]
