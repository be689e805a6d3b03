"""One client connection: framing, in-order request handling, and the sendfile path.

Kafka answers the requests of a connection in the order they arrived. Handlers that
can answer at once (produce with acks=1, metadata) are run inline from
``data_received``; a handler that must wait (a long-polling fetch, a topic creation)
returns an awaitable, and the connection queues the frames behind it until it is done.

A response is either ``bytes`` (a whole frame) or a ``(parts, size)`` pair from the
fetch encoder, where parts mix ``bytes`` with file regions that are sent with
``os.sendfile`` straight from the segment files. Malformed input closes only this
connection.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import socket
import struct
from collections.abc import Awaitable, Callable
from typing import Any

from ..protocol.wire import MalformedRequest

log = logging.getLogger(__name__)
_SIZE = struct.Struct(">i")

# A handler takes a request frame (without its size) and returns a response frame,
# a (parts, size) pair, None (no response: produce with acks=0), or an awaitable
# of one of those.
FrameHandler = Callable[["Connection", memoryview], Any]

# Frames read and queued behind a request that is still waiting (an acks=all produce, a
# long-polling fetch) before the connection stops reading. Kafka reads nothing more from
# a connection until its current request is answered; a client pipelining thousands of
# small requests would otherwise have all of them copied into memory here.
MAX_QUEUED_FRAMES = 64


def is_awaitable(value: Any) -> bool:
    """``inspect.isawaitable`` without its ABC check, which costs more than a whole
    small request's handling when the value is a plain response."""
    return hasattr(type(value), "__await__")


class SendfileCounter:
    """Bytes and calls that went from a file to a socket through ``sendfile(2)``."""

    def __init__(self) -> None:
        self.bytes_total = 0
        self.calls_total = 0


class Connection(asyncio.Protocol):
    def __init__(
        self,
        handler: FrameHandler,
        *,
        max_request_size: int,
        sendfile_counter: SendfileCounter,
        on_close: Callable[[Connection], None] | None = None,
    ) -> None:
        self.handler = handler
        self.max_request_size = max_request_size
        self.sendfile_counter = sendfile_counter
        self.on_close = on_close
        self.transport: asyncio.Transport | None = None
        self.peer: str = "?"
        self._buffer = bytearray()
        self._pending: collections.deque[bytes] = collections.deque()
        self._busy = False
        self._closed = False
        self._drained: asyncio.Future[None] | None = None
        self._writing_paused = False
        self._task: asyncio.Future[None] | None = None  # the request being finished
        self._muted_until = 0.0  # loop time until which a quota throttle mutes reading
        # Responses answered inline while a batch of frames is handled, written with one
        # send at its end: pipelined small requests (unbatched produce) would otherwise
        # cost a system call each.
        self._outbox: list[bytes] | None = None

    # asyncio.Protocol -------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)
        if self.on_close is not None:
            self.on_close(self)

    def pause_writing(self) -> None:
        self._writing_paused = True

    def resume_writing(self) -> None:
        self._writing_paused = False
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)

    def data_received(self, data: bytes) -> None:
        self._outbox = []
        try:
            self._split_frames(data)
        finally:
            self._flush_outbox()
        if len(self._pending) >= MAX_QUEUED_FRAMES:
            self._update_reading()

    def _split_frames(self, data: bytes) -> None:
        buffer = self._buffer
        buffer += data
        position = 0
        end = len(buffer)
        while end - position >= 4:
            (size,) = _SIZE.unpack_from(buffer, position)
            if size < 0 or size > self.max_request_size:
                self.close_for(
                    f"frame size {size} outside 0..socket.request.max.bytes={self.max_request_size}"
                )
                return
            if end - position - 4 < size:
                break
            frame = bytes(buffer[position + 4 : position + 4 + size])
            position += 4 + size
            if self._busy:
                self._pending.append(frame)
            else:
                self._handle(frame)
                if self._closed:
                    return
        if position:
            del buffer[:position]

    def _flush_outbox(self) -> None:
        outbox, self._outbox = self._outbox, None
        if outbox and not self._closed:
            self.transport.write(outbox[0] if len(outbox) == 1 else b"".join(outbox))  # type: ignore[union-attr]

    def _write(self, response: bytes) -> None:
        if self._outbox is not None:
            self._outbox.append(response)
        else:
            self.transport.write(response)  # type: ignore[union-attr]

    # request handling --------------------------------------------------------------
    def _handle(self, frame: bytes) -> None:
        try:
            result = self.handler(self, memoryview(frame))
        except MalformedRequest as error:
            self.close_for(f"malformed request: {error}")
            return
        except Exception:
            log.exception("request handler failed for %s; closing the connection", self.peer)
            self.close_for("internal error")
            return
        if type(result) is bytes:
            self._write(result)
        elif is_awaitable(result):
            self._busy = True
            self._task = asyncio.ensure_future(self._finish(result))
        elif result is not None:
            self._busy = True
            self._task = asyncio.ensure_future(self._finish(self._noop(result)))

    @staticmethod
    async def _noop(value: Any) -> Any:
        return value

    async def _finish(self, awaitable: Awaitable[Any]) -> None:
        try:
            try:
                result = await awaitable
            except MalformedRequest as error:
                self.close_for(f"malformed request: {error}")
                return
            except Exception:
                log.exception("request handler failed for %s; closing the connection", self.peer)
                self.close_for("internal error")
                return
            if self._closed:
                return
            if isinstance(result, bytes):
                self.transport.write(result)  # type: ignore[union-attr]
            elif result is not None:
                parts, _size = result
                await self._write_parts(parts)
        finally:
            self._busy = False
        # Run what arrived meanwhile, in order, until another request has to wait.
        self._outbox = []
        try:
            while self._pending and not self._busy and not self._closed:
                self._handle(self._pending.popleft())
        finally:
            self._flush_outbox()
        self._update_reading()

    # quota throttling ----------------------------------------------------------------
    def throttle(self, response: Any, seconds: float) -> Awaitable[Any]:
        """Hold ``response`` for ``seconds`` with the channel muted (Kafka's quota throttle:
        nothing more is read from a client over its quota until the throttle ends)."""
        self.mute_for(seconds)
        return self._delayed(response, seconds)

    @staticmethod
    async def _delayed(response: Any, seconds: float) -> Any:
        await asyncio.sleep(seconds)
        return response

    def mute_for(self, seconds: float) -> None:
        transport = self.transport
        if transport is None or self._closed:
            return
        loop = asyncio.get_running_loop()
        until = loop.time() + seconds
        if until > self._muted_until:
            self._muted_until = until
            self._update_reading()
            loop.call_at(until, self._update_reading)

    def _update_reading(self) -> None:
        """Read from the socket unless a quota throttle mutes the connection or too many
        frames wait behind an unfinished request."""
        transport = self.transport
        if transport is None or self._closed:
            return
        muted = asyncio.get_running_loop().time() < self._muted_until - 0.001
        if muted or len(self._pending) >= MAX_QUEUED_FRAMES:
            if transport.is_reading():
                transport.pause_reading()
        elif not transport.is_reading():
            transport.resume_reading()

    def close_for(self, reason: str) -> None:
        if not self._closed:
            log.warning("closing connection from %s: %s", self.peer, reason)
            self._closed = True
            if self.transport is not None:
                self.transport.abort()

    # the sendfile path -------------------------------------------------------------
    async def _wait_transport_empty(self) -> None:
        """Wait until the transport has handed everything it buffered to the socket.

        With both limits at 0, asyncio pauses the protocol as soon as anything is
        buffered and resumes it once the buffer is empty again.
        """
        transport = self.transport
        assert transport is not None
        loop = asyncio.get_running_loop()
        while transport.get_write_buffer_size() and not self._closed:
            self._drained = loop.create_future()
            transport.set_write_buffer_limits(high=0, low=0)
            try:
                if self._writing_paused:
                    await self._drained
            finally:
                transport.set_write_buffer_limits()

    async def _write_parts(self, parts: list[Any]) -> None:
        """Write bytes parts and send file regions with sendfile, in order.

        The transport's buffer must be empty before bytes go to the socket directly,
        or they would overtake what the transport still holds.
        """
        transport = self.transport
        assert transport is not None
        if all(isinstance(part, bytes) for part in parts):
            transport.write(b"".join(parts))
            return
        await self._wait_transport_empty()
        sock = transport.get_extra_info("socket")
        fileno = sock.fileno()
        loop = asyncio.get_running_loop()
        counter = self.sendfile_counter
        for part in parts:
            if self._closed:
                return
            if isinstance(part, bytes):
                view = memoryview(part)
                while view:
                    try:
                        sent = os.write(fileno, view)
                    except BlockingIOError:
                        await self._writable(loop, fileno)
                        continue
                    except OSError as error:
                        self.close_for(f"write failed: {error}")
                        return
                    view = view[sent:]
                continue
            offset = part.position
            remaining = part.size
            while remaining:
                try:
                    sent = os.sendfile(fileno, part.fd, offset, remaining)
                except BlockingIOError:
                    await self._writable(loop, fileno)
                    continue
                except OSError as error:
                    self.close_for(f"sendfile failed: {error}")
                    return
                if sent == 0:
                    # The file shrank under us (truncation): the frame can no longer
                    # be completed, so the connection must go.
                    self.close_for("segment shrank during sendfile")
                    return
                counter.bytes_total += sent
                counter.calls_total += 1
                offset += sent
                remaining -= sent

    async def _writable(self, loop: asyncio.AbstractEventLoop, fileno: int) -> None:
        future: asyncio.Future[None] = loop.create_future()

        def ready() -> None:
            if not future.done():
                future.set_result(None)

        # asyncio refuses add_writer on a descriptor its transport owns ("File descriptor
        # N is used by transport"); a duplicate is another descriptor for the same socket.
        # The transport's buffer is empty here, so nothing else waits to write on it.
        waiter = os.dup(fileno)
        try:
            loop.add_writer(waiter, ready)
            try:
                await future
            finally:
                loop.remove_writer(waiter)
        finally:
            os.close(waiter)
