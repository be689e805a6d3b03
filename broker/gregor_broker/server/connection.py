"""One client connection: framing, one request in flight, muting, and the sendfile path.

Kafka reads one request from a connection, mutes the channel until that request's
response is sent, and only then reads the next. Gregor does the same on its one event
loop, which makes it matter more: every request of every client runs on that loop.

- **One request in flight.** A frame is taken from the connection's receive buffer only
  when the previous request is answered. Handlers that can answer at once (produce with
  acks=1, metadata) run inline; a handler that must wait (a long-polling fetch, a topic
  creation) returns an awaitable and the connection takes nothing more until it is done.
- **Except produces waiting for replication.** An acks=all produce has appended before
  its handler returns; only its answer waits for the followers. Its handler says so
  (``allow_next_produce``), and the connection may then take the client's next
  Produce (at most ``MAX_OWED_ANSWERS`` answers owed, each further request at most
  ``OVERLAP_MAX_FRAME_BYTES``), which appends after it: appends keep the order the
  client sent them in and answers are written in that order (Redpanda pipelines produce
  requests the same way; Kafka mutes the channel instead, one replication round trip per
  request). Any other request waits until every owed answer is written, so it observes
  what it would have observed in Kafka. An owed answer that is a ``Deferred`` (an
  acks=all produce's) is written in the call that resolves it (the follower fetch moving
  the high watermark) once every answer before it is; no task per owed answer.
- **Bounded work per turn of the event loop.** Frames a client pipelined (librdkafka
  keeps up to five in flight; a hostile client sends thousands in one write) wait in the
  buffer and are taken one at a time, each answered before the next starts, for at most
  ``TURN_SECONDS`` of loop time; then the connection yields (``call_soon``) and every
  other connection gets its turn before it goes on. One read can never start unbounded
  work, and the yield costs nothing measurable on pipelined small requests. The answers
  gathered in a turn that yields with frames still waiting stay in the outbox for the
  next turn (``OUTBOX_BYTES``): a send per turn, which wakes the client each time, cost
  more than the yield itself.
- **Muting.** The connection stops reading from its socket (``pause_reading``) whenever
  it could not take what it reads: a request is in flight and bytes arrived behind it,
  a complete frame already waits, a quota throttle holds the client, or its unsent
  responses passed the transport's write high-water mark (a client that sends and never
  reads). The one switch, ``_update_reading``, looks at all of them. A request in
  flight mutes the connection only once more bytes arrive: a consumer or a follower
  sends its next fetch only after the answer, so muting at once cost two ``epoll_ctl``
  calls and their transport bookkeeping per long-polling fetch, for nothing (three
  fetches per acks=all message on an RF=3 leader); the receive buffer holds what
  arrives before the pause, as it holds a read's worth of pipelined frames.
- **Few copies.** The connection is a ``BufferedProtocol``: the socket is read straight
  into a fixed receive buffer, small frames are copied out once, and a large frame
  (a produce of many MiB) gets a buffer of its exact size that the socket fills
  directly and the handler reads in place.

A response is either ``bytes`` (a whole frame) or a ``(parts, size)`` pair from the
fetch encoder, where parts mix ``bytes`` with file regions that are sent with
``os.sendfile`` straight from the segment files (read in and written once when they come
to at most ``INLINE_ANSWER_BYTES``). Malformed input closes only this connection.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import struct
from collections import deque
from collections.abc import Awaitable, Callable
from functools import partial
from time import perf_counter
from typing import Any

from ..deferred import Deferred
from ..protocol.wire import MalformedRequest
from ..stats import RateLimitedLog

log = logging.getLogger(__name__)
_SIZE = struct.Struct(">i")
_API_KEY = struct.Struct(">h")
PRODUCE_API_KEY = 0

# A handler takes a request frame (without its size) and returns a response frame,
# a (parts, size) pair, None (no response: produce with acks=0), or an awaitable
# of one of those.
FrameHandler = Callable[["Connection", memoryview], Any]

# The receive buffer small frames are read into and copied out of. One read fills at
# most this much, so a read can hold only so many pipelined frames.
RECEIVE_BUFFER_SIZE = 64 * 1024
# Frames larger than this get a buffer of their own, filled by the socket directly: a
# 90 MiB produce is read once, into the memory the handler decodes it from.
LARGE_FRAME_SIZE = 16 * 1024
# Answers to pipelined requests are gathered and written with one send once no further
# complete frame waits, or once this many bytes are gathered: a system call per small
# response (an unbatched produce's ~60 bytes) would cost more than the request's handling.
# A turn that ends with frames still waiting (``TURN_SECONDS``) keeps its answers for the
# next turn: sent at every such turn, they cost a send and a client wake-up per ~10
# unbatched produces (broker CPU per message 117 -> 105 us, 100-byte records pipelined).
# The muted socket bounds the wait: at most one read's worth of frames is taken first.
OUTBOX_BYTES = 64 * 1024
# How long one connection may keep taking pipelined requests before it lets the event
# loop serve others. A turn of the loop per request would be fairest, but it costs about
# 15 us (a selector poll and a callback), as much as a small request's own handling; a
# slice of a millisecond keeps that cost under 2 % and still serves every other
# connection at least once per millisecond of each busy connection's work.
TURN_SECONDS = 0.001
# Answers a connection may owe at once while acks=all produces wait for replication.
# Idempotent producers keep at most five requests in flight; a plain librdkafka producer
# keeps up to a million, and more per round trip is cheaper per message (unbatched 1 KiB
# at RF=3 on one partition: about 3,400 msg/s with 5 owed, 4,000-4,400 with 16). The
# memory it holds is bounded with OVERLAP_MAX_FRAME_BYTES: 16 MiB per connection.
MAX_OWED_ANSWERS = 16
# A request larger than this is not taken while answers are owed: a pipeline of
# socket.request.max.bytes-sized produces would hold that much memory per request.
OVERLAP_MAX_FRAME_BYTES = 1024 * 1024
# An answer whose file regions come to at most this many bytes leaves in one write, the
# regions read in with pread (``read_in_small``). Sent as header, sendfile and tail, a
# small fetch answer took three system calls and three TCP segments, and woke its reader
# up to three times: a follower's on the acks=all critical path; a consumer tailing a
# partition, whose client thread then preempted the broker (4 involuntary context
# switches per message at 410 msg/s on one broker, 2 with one write). Larger answers go
# through sendfile, where not copying the bytes is worth the calls.
INLINE_ANSWER_BYTES = 64 * 1024
# A refused client's last answer goes out this long before the connection closes: a
# client that reads the answer and the end of the stream in one go may drop the answer
# (kafka-python 3 does), and would then retry instead of reporting the refusal.
LAST_ANSWER_LINGER_SECONDS = 0.5
# Below this much free space at its end, the receive buffer moves what it holds (at most
# one partial small frame) to its start before the next read.
_MIN_READ = 4 * 1024


def read_in_small(parts: list[Any]) -> tuple[bytes, int] | None:
    """``parts`` as one ``bytes`` with their file regions read in, and how many bytes were
    read, when the regions come to at most ``INLINE_ANSWER_BYTES`` (parts that are all
    ``bytes`` are simply joined: 0 read). None otherwise, and
    when a region cannot be read whole (a segment truncated meanwhile): the region path
    then reports it and closes the connection."""
    size = 0
    for part in parts:
        if not isinstance(part, bytes):
            size += part.size
    if size > INLINE_ANSWER_BYTES:
        return None
    chunks = []
    for part in parts:
        if isinstance(part, bytes):
            chunks.append(part)
            continue
        try:
            data = os.pread(part.fd, part.size, part.position)
        except OSError:
            return None
        if len(data) != part.size:
            return None
        chunks.append(data)
    return b"".join(chunks), size


def is_awaitable(value: Any) -> bool:
    """``inspect.isawaitable`` without its ABC check, which costs more than a whole
    small request's handling when the value is a plain response."""
    return hasattr(type(value), "__await__")


class SendfileCounter:
    """Bytes and calls that went from a file to a socket through ``sendfile(2)``."""

    def __init__(self) -> None:
        self.bytes_total = 0
        self.calls_total = 0


# Connection-level failures (malformed frames, handler errors that reached the connection).
connection_errors = RateLimitedLog(log)


class Connection(asyncio.BufferedProtocol):
    def __init__(
        self,
        handler: FrameHandler,
        *,
        max_request_size: int,
        sendfile_counter: SendfileCounter,
        on_close: Callable[[Connection], None] | None = None,
        listener: str = "PLAINTEXT",
    ) -> None:
        self.handler = handler
        # The listener this connection came in on (its endpoints answer Metadata), and
        # who the peer is once authenticated (Kafka's KafkaPrincipal; User:ANONYMOUS on
        # PLAINTEXT listeners).
        self.listener = listener
        self.principal = "User:ANONYMOUS"
        self.max_request_size = max_request_size
        self.sendfile_counter = sendfile_counter
        self.on_close = on_close
        self.transport: asyncio.Transport | None = None
        self.peer: str = "?"
        self.peer_host: str = ""
        # Received bytes not yet taken as frames: _receive[_start:_end].
        self._receive = bytearray(RECEIVE_BUFFER_SIZE)
        self._receive_view = memoryview(self._receive)
        self._start = 0
        self._end = 0
        # A large frame being received into its own buffer, and how much of it arrived.
        self._large: bytearray | None = None
        self._large_filled = 0
        self._in_flight = False  # a request was taken and is not answered yet
        self._scheduled = False  # a call to _pump is queued on the loop
        self._closed = False
        self._eof = False  # the client half-closed: answer what is buffered, then close
        self._drained: asyncio.Future[None] | None = None
        self._writing_paused = False  # unsent responses passed the high-water mark
        self._task: asyncio.Future[None] | None = None  # the request being finished
        self._muted_until = 0.0  # loop time until which a quota throttle mutes the client
        self._outbox: list[bytes] = []  # answers not yet handed to the transport
        self._outbox_size = 0
        # Set by the request being handled: all it changes is done, only its answer
        # waits (allow_next_produce). Reset before each request.
        self._answer_only = False
        # Answers owed while requests overlap, in request order: each is written once it
        # and every one before it are there (``_write_owed``).
        self._owed: deque[_Owed] = deque()
        # An owed answer whose request may still change something: take nothing more
        # until every owed answer is written.
        self._owed_barrier = False
        # The first owed answer's file regions are being sent by a task (the socket
        # filled): the answers behind it wait for it.
        self._owed_sending = False
        self._answering: set[asyncio.Future[None]] = set()  # tasks awaiting owed answers

    # asyncio.Protocol -------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        # The client's address as ACL hosts name it (Kafka's clientAddress.getHostAddress).
        self.peer_host = str(peer[0]) if peer else ""
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self._large = None
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)
        if self.on_close is not None:
            self.on_close(self)

    def pause_writing(self) -> None:
        self._writing_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._writing_paused = False
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)
        self._schedule()

    def get_buffer(self, sizehint: int) -> memoryview:
        large = self._large
        if large is not None:
            return memoryview(large)[self._large_filled :]
        if self._start == self._end:
            self._start = self._end = 0
        elif RECEIVE_BUFFER_SIZE - self._end < _MIN_READ:
            # At most one partial small frame is held here: move it to the start.
            held = bytes(self._receive_view[self._start : self._end])
            self._receive_view[: len(held)] = held
            self._start, self._end = 0, len(held)
        return self._receive_view[self._end :]

    def buffer_updated(self, nbytes: int) -> None:
        if self._large is not None:
            self._large_filled += nbytes
        else:
            self._end += nbytes
        if not self._in_flight:
            if not self._scheduled:
                self._pump()
        elif self.transport is not None and self.transport.is_reading():
            self._update_reading()  # bytes behind the request in flight: mute now

    def eof_received(self) -> bool:
        # A client that half-closes still gets the answers to what it sent: the
        # transport stays open for writing until the buffered requests are answered.
        self._eof = True
        self._schedule()
        return True

    # taking requests -----------------------------------------------------------------
    def _next_frame(self) -> memoryview | bytes | None:
        """The next complete frame (without its size), or None until one has arrived.

        A large frame's first bytes are moved to a buffer of the frame's size here, so
        that the rest of it is read straight into that buffer.
        """
        large = self._large
        if large is not None:
            if self._large_filled < len(large):
                return None
            self._large = None
            # Read-only: kio's decoder refuses a writable buffer, and nothing may
            # change a request's bytes while it is handled.
            return memoryview(large).toreadonly()
        start = self._start
        available = self._end - start
        if available < 4:
            return None
        (size,) = _SIZE.unpack_from(self._receive, start)
        if size < 0 or size > self.max_request_size:
            self.close_for(
                f"frame size {size} outside 0..socket.request.max.bytes={self.max_request_size}"
            )
            return None
        if available - 4 >= size:
            self._start = start + 4 + size
            return bytes(self._receive_view[start + 4 : start + 4 + size])
        if size > LARGE_FRAME_SIZE:
            large = bytearray(size)
            held = available - 4
            large[:held] = self._receive_view[start + 4 : self._end]
            self._large = large
            self._large_filled = held
            self._start = self._end = 0
        return None

    def _frame_waiting(self) -> bool:
        """Whether a complete frame is already buffered (reading more would only queue)."""
        large = self._large
        if large is not None:
            return self._large_filled >= len(large)
        available = self._end - self._start
        if available < 4:
            return False
        return available - 4 >= _SIZE.unpack_from(self._receive, self._start)[0]

    def _waiting_api_key_and_size(self) -> tuple[int, int] | None:
        """The API key and size of the complete frame waiting to be taken, if one is."""
        large = self._large
        if large is not None:
            if self._large_filled < len(large) or len(large) < 2:
                return None
            return _API_KEY.unpack_from(large, 0)[0], len(large)
        start = self._start
        available = self._end - start
        if available < 6:
            return None
        size = _SIZE.unpack_from(self._receive, start)[0]
        if available - 4 < size or size < 2:
            return None
        return _API_KEY.unpack_from(self._receive, start + 4)[0], size

    def _may_overlap(self) -> bool:
        """Whether the waiting frame may be taken while answers are owed: a Produce,
        small enough, and room for one more owed answer."""
        if self._owed_barrier or len(self._owed) >= MAX_OWED_ANSWERS:
            return False
        waiting = self._waiting_api_key_and_size()
        return (
            waiting is not None
            and waiting[0] == PRODUCE_API_KEY
            and waiting[1] <= OVERLAP_MAX_FRAME_BYTES
        )

    def allow_next_produce(self) -> None:
        """Called by the request being handled: it changed all it will change and only
        its answer waits (an acks=all produce waiting for replication), so the client's
        next Produce may be taken before that answer is written."""
        self._answer_only = True

    def _blocked(self) -> bool:
        """Whether the connection must not start a request now (besides one in flight)."""
        if self._writing_paused:
            return True
        return bool(self._muted_until) and (
            asyncio.get_running_loop().time() < self._muted_until - 0.001
        )

    def _schedule(self) -> None:
        if not self._scheduled and not self._closed:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._pump)

    def _pump(self) -> None:
        """Take buffered requests one at a time, for at most one turn's worth of time.

        A request that waits ends the turn (nothing more is taken until it is answered);
        so does the turn's time running out while frames still wait: the rest are
        taken on a later turn of the loop, after every other connection had its own.
        """
        self._scheduled = False
        if self._closed or self._in_flight:
            return
        deadline = perf_counter() + TURN_SECONDS
        while not self._blocked():
            if self._owed and not self._may_overlap():
                if not self._frame_waiting():
                    # Nothing complete waits, so nothing is taken: a large frame's first
                    # bytes move to a buffer of its size (or the receive buffer fills).
                    self._next_frame()
                break
            frame = self._next_frame()
            if frame is None:
                break
            self._handle(frame)
            if self._closed:
                return
            if self._in_flight:
                break
            if self._outbox_size >= OUTBOX_BYTES:
                self._flush_outbox()
            if perf_counter() >= deadline:
                if self._frame_waiting():
                    self._schedule()
                break
        if self._outbox and not self._scheduled:  # else the next turn gathers on
            self._flush_outbox()
        if self._eof:
            if (
                not self._in_flight
                and not self._owed
                and not self._scheduled
                and self.transport is not None
            ):
                self.transport.close()  # sends what is buffered first
            return
        self._update_reading()

    def _update_reading(self) -> None:
        """Read from the socket only when what arrives could be taken: nothing in
        flight with bytes behind it, no complete frame waiting, no quota throttle,
        responses being read."""
        transport = self.transport
        if transport is None or self._closed or self._eof:
            return
        if (
            (self._in_flight and (self._end > self._start or self._large is not None))
            or self._blocked()
            or self._frame_waiting()
            or self._owed_barrier
            or len(self._owed) >= MAX_OWED_ANSWERS
        ):
            if transport.is_reading():
                transport.pause_reading()
        elif not transport.is_reading():
            transport.resume_reading()

    # request handling --------------------------------------------------------------
    def _handle(self, frame: memoryview | bytes) -> None:
        self._answer_only = False
        try:
            result = self.handler(self, frame if type(frame) is memoryview else memoryview(frame))
        except Exception as error:
            self._failed(error)
            return
        if self._owed:
            if result is not None:
                self._owe(result, self._answer_only)
            return
        if type(result) is bytes:
            self._outbox.append(result)
            self._outbox_size += len(result)
            return
        if result is None:
            return
        # Whatever was answered before goes out first: responses keep request order.
        if self._outbox:
            self._flush_outbox()
        if self._answer_only:
            self._owe(result, True)
            return
        self._in_flight = True
        if type(result) is Deferred:
            # Written by whoever resolves it, in that call (a parked fetch's answer).
            result.then(self._answer_deferred)
            return
        if not is_awaitable(result):
            result = self._noop(result)
        self._task = asyncio.ensure_future(self._finish(result))

    def _failed(self, error: Exception) -> None:
        """A request that could not even be answered with an error: close the connection
        (the router answers what it can; what reaches here cannot be)."""
        if isinstance(error, MalformedRequest):
            self.close_for(f"malformed request: {error}")
            return
        connection_errors.warning(
            "request handler failed for %s (%r); closing the connection",
            self.peer,
            error,
            error=error,
        )
        self.close_for("internal error", quiet=True)

    def _answer_deferred(self, result: Any, error: BaseException | None) -> None:
        """Write the answer to the request in flight, resolved in some other call: the
        request that made a parked fetch answerable, or its timer. Nothing raised here
        reaches that caller; the next request is taken on a later turn, never inside it."""
        try:
            if error is not None:
                self._in_flight = False
                self._failed(error)  # type: ignore[arg-type]
                return
            if self._closed:
                self._in_flight = False
                return
            if is_awaitable(result):  # held by a quota throttle
                self._task = asyncio.ensure_future(self._finish(result))
                return
            parts = self._answer_now(result)
            if parts:  # the socket is full, or the transport still holds bytes
                self._task = asyncio.ensure_future(self._finish_parts(parts))
                return
            if self._outbox:
                self._flush_outbox()
            self._in_flight = False
            if self._end > self._start or self._large is not None or self._eof:
                self._schedule()
            else:
                self._update_reading()
        except Exception as failure:
            self._in_flight = False
            self._failed(failure)

    async def _finish_parts(self, parts: list[Any], *, owed: bool = False) -> None:
        """Send the rest of an answer the socket could not take at once (a failure closes
        the connection): the request in flight's, or (``owed``) the first owed answer's,
        after which the owed answers behind it go out."""
        try:
            await self._write_parts(parts)
        except Exception as error:
            self._failed(error)
        finally:
            if owed:
                self._owed_sending = False
            else:
                self._in_flight = False
        if owed:
            if self._owed:
                self._owed.popleft()
            self._write_owed(in_pump=False)
        self._pump()

    def _flush_outbox(self) -> None:
        outbox = self._outbox
        self._outbox = []
        self._outbox_size = 0
        if not self._closed:
            self.transport.write(outbox[0] if len(outbox) == 1 else b"".join(outbox))  # type: ignore[union-attr]

    @staticmethod
    async def _noop(value: Any) -> Any:
        return value

    async def _finish(self, awaitable: Awaitable[Any]) -> None:
        try:
            try:
                result = await awaitable
            except Exception as error:
                self._failed(error)
                return
            if self._closed:
                return
            await self._write_answer(result)
            if self._outbox:
                self._flush_outbox()
        finally:
            self._in_flight = False
        self._pump()

    async def _write_answer(self, result: Any) -> None:
        """``_answer_now``, then what the socket did not take."""
        parts = self._answer_now(result)
        if parts:
            await self._write_parts(parts)

    def _answer_now(self, result: Any) -> list[Any]:
        """Hand an answer to the transport in request order: a frame joins the outbox
        (the caller or the next pump flushes it: the answers one follower fetch completes
        then go out in one send), file regions go after what the outbox holds, as far as
        the socket takes them now. Returns the parts not sent yet."""
        if isinstance(result, bytes):
            self._outbox.append(result)
            self._outbox_size += len(result)
            return []
        if result is None:
            return []
        if self._outbox:
            self._flush_outbox()
        return self._send_now(result[0])

    def _owe(self, result: Any, answer_only: bool) -> None:
        """Write ``result`` (an answer, a ``Deferred`` or an awaitable of one) after every
        answer owed before it. ``answer_only``: its request changes nothing more, so
        further Produce requests may still be taken; otherwise nothing is until every
        answer is written. A ``Deferred`` (an acks=all produce's answer) is written in
        the call that resolves it, when nothing before it is still owed."""
        owed = _Owed()
        self._owed.append(owed)
        if not answer_only:
            self._owed_barrier = True
        if type(result) is Deferred:
            # Settled already (at RF=1 the append moved the high watermark): written as
            # the pump goes on, like an answer that was there at once.
            result.then(partial(self._owed_settled, owed, in_pump=result.settled))
        elif is_awaitable(result):
            self._await_owed(owed, result)
        else:
            owed.result = result
            owed.ready = True
            self._write_owed(in_pump=True)

    def _await_owed(self, owed: _Owed, awaitable: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(self._settle_owed_later(owed, awaitable))
        self._answering.add(task)
        task.add_done_callback(self._answering.discard)

    async def _settle_owed_later(self, owed: _Owed, awaitable: Awaitable[Any]) -> None:
        try:
            result = await awaitable
        except Exception as error:
            self._owed_settled(owed, None, error)
            return
        self._owed_settled(owed, result, None)

    def _owed_settled(
        self, owed: _Owed, result: Any, error: BaseException | None, *, in_pump: bool = False
    ) -> None:
        """An owed answer is there: write it and the ones behind it that are, in request
        order. Called by whatever resolved it (a follower fetch moving the high
        watermark, a timer, a task): nothing raised here reaches that caller."""
        try:
            if error is not None:
                self._failed(error)  # type: ignore[arg-type]
            elif is_awaitable(result):  # held by a quota throttle
                self._await_owed(owed, result)
                return
            else:
                owed.result = result
                owed.ready = True
            self._write_owed(in_pump=in_pump)
        except Exception as failure:
            self._failed(failure)
            self._write_owed(in_pump=in_pump)

    def _write_owed(self, *, in_pump: bool) -> None:
        """Write the owed answers that are there, in request order, up to the first that
        is not. ``in_pump``: called while the pump takes requests, which flushes what this
        leaves in the outbox and goes on taking them; otherwise flushed here, and the pump
        is scheduled to take what may now be taken. A closed connection writes nothing and
        owes nothing."""
        owed = self._owed
        if self._closed:
            owed.clear()
            self._owed_barrier = False
            return
        if self._owed_sending or not (owed and owed[0].ready):
            return
        while owed and owed[0].ready:
            rest = self._answer_now(owed[0].result)
            if rest:  # the socket is full: a task sends the rest, then goes on
                self._owed_sending = True
                task = asyncio.ensure_future(self._finish_parts(rest, owed=True))
                self._answering.add(task)
                task.add_done_callback(self._answering.discard)
                return
            owed.popleft()
            if self._closed:
                owed.clear()
                break
        if not owed:
            self._owed_barrier = False
        if not in_pump:
            if self._outbox:
                self._flush_outbox()
            self._schedule()

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
            loop.call_at(until, self._pump)

    def send_and_close(self, data: bytes, linger: float = LAST_ANSWER_LINGER_SECONDS) -> None:
        """Write a last answer (a refused login), read nothing more, and close ``linger``
        seconds later (the transport sends what it holds first)."""
        transport = self.transport
        if self._closed or transport is None:
            return
        if self._outbox:
            self._flush_outbox()
        if data:
            transport.write(data)
        self._closed = True
        self._large = None
        if transport.is_reading():
            transport.pause_reading()
        if linger > 0:
            asyncio.get_running_loop().call_later(linger, transport.close)
        else:
            transport.close()

    def close_for(self, reason: str, *, quiet: bool = False) -> None:
        if not self._closed:
            if not quiet:
                connection_errors.warning("closing connection from %s: %s", self.peer, reason)
            self._closed = True
            self._large = None
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
        loop = asyncio.get_running_loop()
        while parts and not self._closed:
            if transport.get_write_buffer_size():
                await self._wait_transport_empty()
                continue
            parts = self._send_now(parts)
            if parts:
                await self._writable(loop, transport.get_extra_info("socket").fileno())

    def _send_now(self, parts: list[Any]) -> list[Any]:
        """Send what the socket takes now; the parts not sent yet (a part cut where the
        socket filled), or all of them if the transport still holds bytes. Empty once
        sent, or once the connection closed on a failure."""
        transport = self.transport
        assert transport is not None
        small = read_in_small(parts)  # all bytes, or regions small enough to read in
        if small is not None:
            transport.write(small[0])
            return []
        if transport.get_write_buffer_size():
            return parts
        fileno = transport.get_extra_info("socket").fileno()
        counter = self.sendfile_counter
        for index, part in enumerate(parts):
            if self._closed:
                return []
            if isinstance(part, bytes):
                view = memoryview(part)
                while view:
                    try:
                        sent = os.write(fileno, view)
                    except BlockingIOError:
                        return [bytes(view), *parts[index + 1 :]]
                    except OSError as error:
                        self.close_for(f"write failed: {error}")
                        return []
                    view = view[sent:]
                continue
            offset = part.position
            remaining = part.size
            while remaining:
                try:
                    sent = os.sendfile(fileno, part.fd, offset, remaining)
                except BlockingIOError:
                    return [_RegionRest(part, offset, remaining), *parts[index + 1 :]]
                except OSError as error:
                    self.close_for(f"sendfile failed: {error}")
                    return []
                if sent == 0:
                    # The file shrank under us (truncation): the frame can no longer
                    # be completed, so the connection must go.
                    self.close_for("segment shrank during sendfile")
                    return []
                counter.bytes_total += sent
                counter.calls_total += 1
                offset += sent
                remaining -= sent
        return []

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


class _RegionRest:
    """What is left of a file region when the socket filled mid-way. It holds the region
    (a ``FileSlice``, whose pin keeps the segment's descriptor open) until it is sent."""

    __slots__ = ("fd", "position", "region", "size")

    def __init__(self, region: Any, position: int, size: int) -> None:
        self.fd = region.fd
        self.position = position
        self.size = size
        self.region = region


class _Owed:
    """One answer owed while requests overlap: there (``ready``) or not yet."""

    __slots__ = ("ready", "result")

    def __init__(self) -> None:
        self.ready = False
        self.result: Any = None
