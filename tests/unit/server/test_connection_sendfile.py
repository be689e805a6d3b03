"""The sendfile path of a connection must survive a full socket buffer.

A fetch response larger than the socket's send buffer (a follower catching up, a slow
link) makes ``sendfile`` return EAGAIN; the connection must wait until the socket is
writable and finish the frame, not give up halfway and leave the reader hanging.
"""

from __future__ import annotations

import asyncio
import os
import socket
import struct
from dataclasses import dataclass
from pathlib import Path

from gregor_broker.server.connection import Connection, SendfileCounter

PAYLOAD_SIZE = 16 * 1024 * 1024  # well beyond any default socket buffer


@dataclass
class Region:
    fd: int
    position: int
    size: int


def test_a_file_region_larger_than_the_socket_buffer_is_sent_whole(tmp_path: Path) -> None:
    payload = os.urandom(PAYLOAD_SIZE)
    segment = tmp_path / "segment.log"
    segment.write_bytes(payload)

    async def scenario() -> bytes:
        fd = os.open(segment, os.O_RDONLY)
        try:

            def handler(_connection: Connection, _frame: memoryview):
                header = struct.pack(">i", PAYLOAD_SIZE)
                return [header, Region(fd, 0, PAYLOAD_SIZE)], 4 + PAYLOAD_SIZE

            server = await asyncio.get_running_loop().create_server(
                lambda: Connection(
                    handler, max_request_size=1024, sendfile_counter=SendfileCounter()
                ),
                "127.0.0.1",
                0,
            )
            port = server.sockets[0].getsockname()[1]
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(struct.pack(">i", 4) + b"ping")
            await writer.drain()
            await asyncio.sleep(0.3)  # not reading yet: the broker's send buffer fills up
            (size,) = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 10))
            body = await asyncio.wait_for(reader.readexactly(size), 10)
            writer.close()
            server.close()
            await server.wait_closed()
            return body
        finally:
            os.close(fd)

    assert asyncio.run(scenario()) == payload


def test_the_socket_is_corked_while_a_response_with_a_file_region_goes_out(
    tmp_path: Path,
) -> None:
    """The header and the records leave as full segments (``TCP_CORK`` while the parts
    are written; the connection runs with ``TCP_NODELAY``), and the cork is removed once
    the frame is complete, so that its tail is pushed and the next answer is not held."""
    payload = os.urandom(PAYLOAD_SIZE)
    segment = tmp_path / "segment.log"
    segment.write_bytes(payload)
    connections: list[Connection] = []

    def cork_of(connection: Connection) -> int:
        assert connection.transport is not None
        sock = connection.transport.get_extra_info("socket")
        return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_CORK)

    async def scenario() -> tuple[int, int, bytes]:
        fd = os.open(segment, os.O_RDONLY)
        try:

            def handler(_connection: Connection, _frame: memoryview):
                header = struct.pack(">i", PAYLOAD_SIZE)
                return [header, Region(fd, 0, PAYLOAD_SIZE)], 4 + PAYLOAD_SIZE

            def connection() -> Connection:
                connections.append(
                    Connection(handler, max_request_size=1024, sendfile_counter=SendfileCounter())
                )
                return connections[-1]

            server = await asyncio.get_running_loop().create_server(connection, "127.0.0.1", 0)
            port = server.sockets[0].getsockname()[1]
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(struct.pack(">i", 4) + b"ping")
            await writer.drain()
            await asyncio.sleep(0.3)  # not reading: the send buffer is full mid-sendfile
            while_sending = cork_of(connections[0])
            (size,) = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 10))
            body = await asyncio.wait_for(reader.readexactly(size), 10)
            await asyncio.sleep(0.05)  # the writer's last step after the last bytes
            after = cork_of(connections[0])
            writer.close()
            server.close()
            await server.wait_closed()
            return while_sending, after, body
        finally:
            os.close(fd)

    while_sending, after, body = asyncio.run(scenario())
    assert body == payload
    assert while_sending == 1
    assert after == 0
