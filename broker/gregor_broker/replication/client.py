"""A minimal asyncio Kafka client for broker-to-broker requests.

Followers use it to fetch from leaders and to ask OffsetForLeaderEpoch. One request
at a time per connection (Kafka's replica fetcher also has one in flight). Requests
are built and responses parsed with the same kio classes the server uses.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
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
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._correlation_id = 0

    async def connect(self) -> None:
        security = self.security
        context = security.ssl_context if security is not None else None
        try:
            self._reader, self._writer = await asyncio.wait_for(
                asyncio.open_connection(
                    self.host,
                    self.port,
                    limit=1 << 20,
                    ssl=context,
                    server_hostname=self.host if context is not None else None,
                ),
                self.timeout,
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
        if self._writer is not None:
            self._writer.close()
            with contextlib.suppress(OSError, ConnectionError):
                await self._writer.wait_closed()
        self._reader = self._writer = None

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

    async def exchange(self, request_frame: bytes) -> bytes:
        """Send one whole request frame (size prefix included) and return the response
        frame without its size prefix; the caller checks the correlation id. One
        deadline covers the round trip (two ``wait_for`` cost a task each)."""
        if self._writer is None:
            await self.connect()
        assert self._reader is not None and self._writer is not None
        try:
            async with asyncio.timeout(self.timeout):
                self._writer.write(request_frame)
                await self._writer.drain()
                size_bytes = await self._reader.readexactly(4)
                (size,) = _SIZE.unpack(size_bytes)
                return await self._reader.readexactly(size)
        except (OSError, asyncio.IncompleteReadError, TimeoutError) as error:
            await self.close()
            raise BrokerConnectionError(
                f"request to {self.host}:{self.port} failed: {error!r}"
            ) from error
