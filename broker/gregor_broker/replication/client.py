"""A minimal asyncio Kafka client for broker-to-broker requests.

Followers use it to fetch from leaders and to ask OffsetForLeaderEpoch. One request
at a time per connection (Kafka's replica fetcher also has one in flight). Requests
are built and responses parsed with the same kio classes the server uses, except the
follower's Fetch (``protocol/replica_fetch.py``).

The connection is a plain ``asyncio.Protocol`` that cuts the byte stream into frames.
``exchange`` sends one request and waits for its response. ``pipeline`` is the
replication round trip without the event loop in between: each response is handed to a
callback inside the protocol's ``data_received``, and whatever request the callback
returns goes out at once, so a follower answers its leader in the same turn of its loop
that brought the data. With ``exchange`` each round trip also woke the fetcher's task in
another turn (a future, a task step, a stream reader and a deadline timer per round
trip); the pipeline has one watchdog timer for as long as it runs.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from ..protocol import entities
from ..protocol.wire import encode_unsigned_varint
from ..security.client import ClientSecurity
from ..security.scram import AuthenticationFailed

SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
_HEADER = struct.Struct(">hhi")
_SIZE = struct.Struct(">i")


class BrokerConnectionError(ConnectionError):
    pass


# A pipeline's callback: a response frame (without its size) in, the next request frame
# (with its size) out, or None to end the pipeline.
ResponseHandler = Callable[[memoryview], bytes | None]


class _FrameProtocol(asyncio.Protocol):
    """Cuts the stream into response frames and hands each to a waiter or a pipeline."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self._buffer = bytearray()
        self._waiter: asyncio.Future[Any] | None = None
        self._handler: ResponseHandler | None = None
        self.closed = False
        self.last_response = 0.0  # loop time of the pipeline's last response

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._fail(BrokerConnectionError(f"connection lost: {exc!r}"))

    def _fail(self, error: BaseException) -> None:
        waiter = self._waiter
        self._waiter = None
        self._handler = None
        if waiter is not None and not waiter.done():
            waiter.set_exception(error)

    def data_received(self, data: bytes) -> None:
        buffer = self._buffer
        buffer += data
        while len(buffer) >= 4:
            (size,) = _SIZE.unpack_from(buffer, 0)
            if size < 0:
                self._fail(BrokerConnectionError(f"response frame size {size}"))
                self.abort()
                return
            end = 4 + size
            if len(buffer) < end:
                return
            if len(buffer) == end:  # the usual case: hand over the buffer, no copy
                frame = memoryview(buffer).toreadonly()[4:]
                buffer = self._buffer = bytearray()
            else:
                frame = memoryview(bytes(buffer[4:end]))
                del buffer[:end]
            self._deliver(frame)

    def _deliver(self, frame: memoryview) -> None:
        waiter = self._waiter
        if waiter is None or waiter.done():
            return  # nobody waits any more (cancelled): the owner closes the connection
        handler = self._handler
        if handler is None:
            self._waiter = None
            waiter.set_result(frame)
            return
        try:
            following = handler(frame)
        except BaseException as error:
            self._fail(error)
            return
        if following is None:
            self._waiter = None
            self._handler = None
            waiter.set_result(None)
            return
        assert self.transport is not None
        self.last_response = asyncio.get_running_loop().time()
        self.transport.write(following)

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()


class BrokerClient:
    def __init__(
        self,
        host: str,
        port: int,
        client_id: str,
        *,
        timeout: float = 30.0,
        security: ClientSecurity | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.security = security
        self.client_id = client_id.encode()
        self.timeout = timeout
        self._protocol: _FrameProtocol | None = None
        self._correlation_id = 0

    async def connect(self) -> None:
        security = self.security
        context = security.ssl_context if security is not None else None
        loop = asyncio.get_running_loop()
        try:
            # Not ``asyncio.wait_for``: on Python 3.11 it returns the connection when the
            # task is cancelled just as the connection completes, and the cancellation is
            # lost. A stopping broker's fetcher then ran on, and ``Broker.stop`` waited for
            # it for good.
            async with asyncio.timeout(self.timeout):
                _transport, self._protocol = await loop.create_connection(
                    _FrameProtocol,
                    self.host,
                    self.port,
                    ssl=context,
                    server_hostname=self.host if context is not None else None,
                )
        except (OSError, TimeoutError) as error:
            raise BrokerConnectionError(f"cannot reach {self.host}:{self.port}: {error}") from error
        if security is not None and security.mechanism:
            try:
                await self._sasl_login(security)
            except BaseException:
                await self.close()
                raise

    async def _sasl_login(self, security: ClientSecurity) -> None:
        """SaslHandshake v1, then SaslAuthenticate until the mechanism is done."""
        handshake = await self.request(SASL_HANDSHAKE, 1, {"mechanism": security.mechanism})
        if handshake.error_code != ErrorCode.none:
            raise BrokerConnectionError(
                f"{self.host}:{self.port} refused SASL mechanism {security.mechanism} "
                f"({handshake.error_code.name}; it offers {list(handshake.mechanisms)})"
            )
        exchange = security.sasl_messages()
        message: bytes | None = exchange.first()
        while message is not None:
            response = await self.request(SASL_AUTHENTICATE, 2, {"auth_bytes": message})
            if response.error_code != ErrorCode.none:
                raise BrokerConnectionError(
                    f"SASL login to {self.host}:{self.port} as {security.username} failed: "
                    f"{response.error_code.name}: {response.error_message}"
                )
            if exchange.done:
                break
            try:
                message = exchange.next(bytes(response.auth_bytes))
            except AuthenticationFailed as error:
                raise BrokerConnectionError(
                    f"SASL login to {self.host}:{self.port}: {error}"
                ) from None

    async def close(self) -> None:
        protocol = self._protocol
        self._protocol = None
        if protocol is not None and protocol.transport is not None:
            protocol.transport.close()
            protocol._fail(BrokerConnectionError("connection closed"))

    def abort(self) -> None:
        """Drop the connection at once (from a callback, where ``close`` cannot be awaited)."""
        protocol = self._protocol
        self._protocol = None
        if protocol is not None:
            # The waiter, if any, fails with the caller's error or on connection_lost.
            protocol.abort()

    def next_correlation_id(self) -> int:
        self._correlation_id = (self._correlation_id + 1) & 0x7FFFFFFF
        return self._correlation_id

    async def request(self, api_key: int, version: int, data: dict[str, Any]) -> Any:
        """Send one request built with kio and return the decoded kio response."""
        correlation_id = self.next_correlation_id()
        flexible = entities.is_flexible(api_key, version)
        request = entities.build(entities.payload_class(api_key, version, "request"), data)
        header = _HEADER.pack(api_key, version, correlation_id)
        header += struct.pack(">h", len(self.client_id)) + self.client_id
        if flexible:
            header += encode_unsigned_varint(0)
        body = header + entities.encode(request)
        frame = await self.exchange(_SIZE.pack(len(body)) + body)
        (received,) = _SIZE.unpack_from(frame, 0)
        if received != correlation_id:
            await self.close()
            raise BrokerConnectionError("response correlation id does not match the request")
        offset = 4
        if flexible and api_key != 18:
            offset += 1  # empty tagged fields of response header v1
        reader = entities.response_reader(api_key, version)
        response, _ = reader(frame, offset)
        return response

    async def _ready(self) -> _FrameProtocol:
        if self._protocol is None or self._protocol.closed:
            await self.connect()
        assert self._protocol is not None
        return self._protocol

    async def exchange(self, request_frame: bytes) -> memoryview:
        """Send one whole request frame (size prefix included) and return the response
        frame without its size prefix; the caller checks the correlation id."""
        protocol = await self._ready()
        assert protocol.transport is not None
        waiter = protocol._waiter = asyncio.get_running_loop().create_future()
        try:
            async with asyncio.timeout(self.timeout):
                protocol.transport.write(request_frame)
                return await waiter
        except (OSError, TimeoutError, BrokerConnectionError) as error:
            await self.close()
            raise BrokerConnectionError(
                f"request to {self.host}:{self.port} failed: {error!r}"
            ) from error
        except BaseException:
            self.abort()  # cancelled with a request in flight: its answer must not be read
            raise

    async def pipeline(self, request_frame: bytes, handler: ResponseHandler) -> None:
        """Send ``request_frame``, then hand every response to ``handler`` as it arrives
        and send what it returns, until it returns None. An exception from ``handler``
        ends the pipeline and is raised here. No response within ``timeout`` seconds of
        the last request: BrokerConnectionError (one watchdog timer, not one per trip)."""
        protocol = await self._ready()
        assert protocol.transport is not None
        loop = asyncio.get_running_loop()
        waiter = protocol._waiter = loop.create_future()
        protocol._handler = handler
        protocol.last_response = loop.time()
        timeout = self.timeout

        def watch() -> None:
            nonlocal watchdog
            if waiter.done():
                return
            idle = loop.time() - protocol.last_response
            if idle >= timeout:
                protocol._fail(TimeoutError(f"no response for {idle:.1f} s"))
                return
            watchdog = loop.call_later(timeout - idle, watch)

        watchdog = loop.call_later(timeout, watch)
        try:
            protocol.transport.write(request_frame)
            await waiter
        except (OSError, TimeoutError, BrokerConnectionError) as error:
            await self.close()
            raise BrokerConnectionError(
                f"request to {self.host}:{self.port} failed: {error!r}"
            ) from error
        except BaseException:
            if not waiter.done() or protocol._handler is not None:
                self.abort()  # a request may be in flight: its answer must not be read
            raise
        finally:
            watchdog.cancel()
