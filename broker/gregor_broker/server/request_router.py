"""Decode request frames, dispatch them to handlers, encode what the handlers return.

``API_TABLE`` (in ``handlers/__init__.py``) is the single list of what Gregor
implements; ApiVersions advertises exactly it. Unknown API keys and versions outside
the table close the connection, as Kafka's broker does, except ApiVersions, which
answers UNSUPPORTED_VERSION with the supported list so the client can pick again.
"""

from __future__ import annotations

import inspect
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..protocol import entities
from ..protocol.frame_guard import check_request
from ..protocol.wire import (
    API_VERSIONS_KEY,
    MalformedRequest,
    RequestHeader,
    frame,
    parse_request_header,
    response_header,
)

if TYPE_CHECKING:
    from .broker import Broker
    from .connection import Connection

_KEY_AND_VERSION = struct.Struct(">hh")


class UnsupportedApiVersions(Exception):
    """An ApiVersions version we do not know: answered in v0 with the supported list."""

    def __init__(self, header: RequestHeader) -> None:
        super().__init__(f"ApiVersions v{header.api_version}")
        self.header = header


@dataclass(frozen=True, slots=True)
class ApiSpec:
    key: int
    name: str
    min_version: int
    max_version: int
    handler: Callable[[Broker, RequestContext, Any], Any]


@dataclass(frozen=True, slots=True)
class RequestContext:
    header: RequestHeader
    connection: Connection
    flexible: bool

    @property
    def version(self) -> int:
        return self.header.api_version


@dataclass(frozen=True, slots=True)
class RawResponse:
    """A response already framed by its handler (fetch: bytes and file regions)."""

    parts: list[Any]
    size: int


class RequestRouter:
    def __init__(self, broker: Broker, apis: dict[int, ApiSpec]) -> None:
        self.broker = broker
        self.apis = apis
        self.requests_total: dict[int, int] = {}

    def decode(self, frame_bytes: memoryview | bytes) -> tuple[ApiSpec, RequestHeader, Any]:
        """Parse a frame into (api, header, kio request); MalformedRequest if it cannot be."""
        if len(frame_bytes) < 8:
            raise MalformedRequest(f"frame of {len(frame_bytes)} bytes has no request header")
        api_key, version = _KEY_AND_VERSION.unpack_from(frame_bytes, 0)
        spec = self.apis.get(api_key)
        if spec is None:
            raise MalformedRequest(f"unknown api key {api_key}")
        if not spec.min_version <= version <= spec.max_version:
            if api_key == API_VERSIONS_KEY:
                raise UnsupportedApiVersions(parse_request_header(frame_bytes, False))
            raise MalformedRequest(
                f"{spec.name} v{version} is not supported "
                f"(v{spec.min_version}..v{spec.max_version})"
            )
        flexible = entities.is_flexible(api_key, version)
        header = parse_request_header(frame_bytes, flexible)
        check_request(
            entities.payload_class(api_key, version, "request"), frame_bytes, header.body_offset
        )
        try:
            request, _size = entities.request_reader(api_key, version)(
                frame_bytes, header.body_offset
            )
        except Exception as error:  # kio raises various errors on bad bytes
            raise MalformedRequest(f"cannot decode {spec.name} v{version}: {error}") from error
        return spec, header, request

    def __call__(self, connection: Connection, frame_bytes: memoryview) -> Any:
        try:
            spec, header, request = self.decode(frame_bytes)
        except UnsupportedApiVersions as unsupported:
            return self._unsupported_api_versions(unsupported.header)
        self.requests_total[spec.key] = self.requests_total.get(spec.key, 0) + 1
        context = RequestContext(
            header, connection, entities.is_flexible(spec.key, header.api_version)
        )
        result = spec.handler(self.broker, context, request)
        if inspect.isawaitable(result):
            return self._finish_async(context, result)
        return self._encode(context, result)

    async def _finish_async(self, context: RequestContext, awaitable: Any) -> Any:
        return self._encode(context, await awaitable)

    def _encode(self, context: RequestContext, result: Any) -> Any:
        if result is None:
            return None
        if isinstance(result, RawResponse):
            return result.parts, result.size
        header = context.header
        # ApiVersions answers with header v0 whatever its version (KIP-511).
        flexible = context.flexible and header.api_key != API_VERSIONS_KEY
        body = entities.encode_response(header.api_key, header.api_version, result)
        return frame(response_header(header.correlation_id, flexible), body)

    def _unsupported_api_versions(self, header: RequestHeader) -> bytes:
        from kio.schema.errors import ErrorCode

        body = entities.encode_response(
            API_VERSIONS_KEY,
            0,
            {"error_code": ErrorCode.unsupported_version, "api_keys": self.advertised()},
        )
        return frame(response_header(header.correlation_id, False), body)

    def advertised(self) -> list[dict[str, int]]:
        return [
            {"api_key": spec.key, "min_version": spec.min_version, "max_version": spec.max_version}
            for spec in sorted(self.apis.values(), key=lambda s: s.key)
        ]
