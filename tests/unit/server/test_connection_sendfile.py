"""The sendfile path of a connection must survive a full socket buffer.

A fetch response larger than the socket's send buffer (a follower catching up, a slow
link) makes ``sendfile`` return EAGAIN; the connection must wait until the socket is
writable and finish the frame, not give up halfway and leave the reader hanging.
"""

from __future__ import annotations

import asyncio
import os
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
