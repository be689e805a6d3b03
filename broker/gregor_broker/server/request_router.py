"""Decode request frames, dispatch them to handlers, encode what the handlers return.

``API_TABLE`` (in ``handlers/__init__.py``) is the single list of what Gregor
implements; ApiVersions advertises exactly it. Unknown API keys and versions outside
the table close the connection, as Kafka's broker does, except ApiVersions, which
answers UNSUPPORTED_VERSION with the supported list so the client can pick again.

A handler that fails unexpectedly does not cost the client its connection: as Kafka's
``KafkaApis.handleError`` does with ``request.getErrorResponse``, the request is
answered with UNKNOWN_SERVER_ERROR on everything it named (``protocol.error_response``),
and the failure is logged in one line (a traceback at most once a minute per kind).
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from time import perf_counter
from typing import Any

from kio.schema.errors import ErrorCode

from ..deferred import Deferred
from ..protocol import entities, replica_fetch
from ..protocol.error_response import RequestFailed, error_response
from ..protocol.frame_guard import check_request
from ..protocol.preparation import Preparer
from ..protocol.response import BodyResponse, Frame, Response
from ..protocol.wire import (
    API_VERSIONS_KEY,
    MalformedRequest,
    RequestHeader,
    parse_request_header,
)
from ..stats import LatencyHistogram, RateLimitedLog
from .connection import Connection, is_awaitable
from .services import BrokerServices

log = logging.getLogger(__name__)
# Handler failures: one line each, a traceback at most once a minute per kind of error.
handler_errors = RateLimitedLog(log)


_KEY_AND_VERSION = struct.Struct(">hh")


class UnsupportedApiVersions(Exception):
    """An ApiVersions version we do not know: answered in v0 with the supported list."""

    def __init__(self, header: RequestHeader) -> None:
        super().__init__(f"ApiVersions v{header.api_version}")
        self.header = header


# What every handler returns: a response, or when it waits a Deferred one (answered in
# the call that completes it: ``deferred.py``) or an awaitable of one.
HandlerResult = Response | Deferred | Awaitable[Response]


@dataclass(frozen=True, slots=True)
class ApiSpec:
    key: int
    name: str
    min_version: int
    max_version: int
    handler: Callable[[BrokerServices, RequestContext, Any], HandlerResult]


@dataclass(slots=True)
class RequestContext:
    header: RequestHeader
    connection: Connection
    api_name: str = ""  # Kafka's name of the API (the audit log names it)

    @property
    def version(self) -> int:
        return self.header.api_version

    @property
    def listener(self) -> str | None:
        """The listener the request arrived on (None without a connection: unit tests)."""
        return self.connection.listener if self.connection is not None else None

    def allow_next_produce(self) -> None:
        """This request changed all it will change and only its answer waits (an acks=all
        produce waiting for replication): its connection may take the client's next
        Produce meanwhile (``Connection.allow_next_produce``)."""
        if self.connection is not None:
            self.connection.allow_next_produce()

    def respond(self, body: dict[str, Any]) -> BodyResponse:
        """This request's response, given by its body's fields (encoded with kio)."""
        return BodyResponse(self.header.api_key, body)

    @property
    def principal(self) -> str:
        """Who sent the request (Kafka's ``KafkaPrincipal``; User:ANONYMOUS unauthenticated)."""
        return self.connection.principal if self.connection is not None else "User:ANONYMOUS"

    @property
    def host(self) -> str:
        """The client's IP address, as ACL hosts name it."""
        return self.connection.peer_host if self.connection is not None else ""

    @property
    def api_key(self) -> int:
        return self.header.api_key


class RequestRouter:
    def __init__(self, broker: BrokerServices, apis: dict[int, ApiSpec]) -> None:
        self.broker = broker
        self.apis = apis
        self.requests_total: dict[int, int] = {}
        # Request latency per API, from decoding to the encoded response (long polls and
        # acks=all waits included, quota delays not).
        self.latency: dict[int, LatencyHistogram] = {key: LatencyHistogram() for key in apis}
        self._supported: tuple[tuple[int, int, int], ...] | None = None
        # First use of a version (kio classes, generated checker) off the event loop.
        self.preparer = Preparer()

    def versions(self) -> list[tuple[int, int]]:
        """Every (api key, version) served, newest first (what clients use most)."""
        return [
            (spec.key, version)
            for spec in self.apis.values()
            for version in range(spec.max_version, spec.min_version - 1, -1)
        ]

    def _served(self, api_key: int, version: int) -> bool:
        spec = self.apis.get(api_key)
        return spec is not None and spec.min_version <= version <= spec.max_version

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
        if api_key == replica_fetch.FETCH_API_KEY and version == replica_fetch.VERSION:
            # A follower's fetch, once per replication round trip: read directly.
            replica_request = replica_fetch.decode_request(frame_bytes, header.body_offset)
            if replica_request is not None:
                return spec, header, replica_request
        frame_bytes = check_request(
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
        if len(frame_bytes) >= 4:
            api_key, version = _KEY_AND_VERSION.unpack_from(frame_bytes, 0)
            if not self.preparer.ready(api_key, version) and self._served(api_key, version):
                # The connection's buffer moves on: keep this frame for later.
                return self._prepare_then_handle(connection, bytes(frame_bytes), api_key, version)
        return self._handle(connection, frame_bytes)

    async def _prepare_then_handle(
        self, connection: Connection, frame_bytes: bytes, api_key: int, version: int
    ) -> Any:
        try:
            await self.preparer.prepare(api_key, version)
        except Exception:  # decoding below answers as it would have without preparing
            log.debug("preparing api %d v%d failed", api_key, version, exc_info=True)
            self.preparer.mark_ready(api_key, version)
        result = self._handle(connection, memoryview(frame_bytes))
        if is_awaitable(result):
            result = await result
        return result

    def _handle(self, connection: Connection, frame_bytes: memoryview) -> Any:
        started = perf_counter()
        try:
            spec, header, request = self.decode(frame_bytes)
        except UnsupportedApiVersions as unsupported:
            return self._unsupported_api_versions(unsupported.header)
        self.requests_total[spec.key] = self.requests_total.get(spec.key, 0) + 1
        context = RequestContext(header, connection, spec.name)
        try:
            result = spec.handler(self.broker, context, request)
            if type(result) is Deferred:
                busy = perf_counter() - started
                return self._finish_deferred(
                    context, request, len(frame_bytes), result, started, busy
                )
            if is_awaitable(result):
                busy = perf_counter() - started
                return self._finish_async(context, request, len(frame_bytes), result, started, busy)
            return self._respond(context, request, len(frame_bytes), result, started, 0.0)
        except MalformedRequest:
            raise
        except RequestFailed as failed:
            return self._refused(context, request, failed)
        except Exception as error:
            return self._failed(spec, context, request, error)

    async def _finish_async(
        self,
        context: RequestContext,
        request: Any,
        size: int,
        awaitable: Any,
        started: float,
        busy: float,
    ) -> Any:
        try:
            response = self._respond(context, request, size, await awaitable, started, busy)
        except MalformedRequest:
            raise
        except RequestFailed as failed:
            return self._refused(context, request, failed)
        except Exception as error:
            return self._failed(self.apis[context.header.api_key], context, request, error)
        if is_awaitable(response):
            response = await response
        return response

    def _finish_deferred(
        self,
        context: RequestContext,
        request: Any,
        size: int,
        deferred: Deferred,
        started: float,
        busy: float,
    ) -> Deferred:
        """``_finish_async`` for a Deferred response: encoded in the call that resolves
        it, and handed on (a Deferred frame, or an awaitable one when a quota delays it)."""
        frame = Deferred()

        def encode(response: Any, error: BaseException | None) -> None:
            try:
                if error is not None:
                    raise error
                result: Any = self._respond(context, request, size, response, started, busy)
            except MalformedRequest as malformed:
                frame.fail(malformed)
                return
            except RequestFailed as failed:
                result = self._refused(context, request, failed)
            except Exception as failure:
                try:
                    result = self._failed(
                        self.apis[context.header.api_key], context, request, failure
                    )
                except Exception as unanswerable:
                    frame.fail(unanswerable)
                    return
            frame.resolve(result)

        deferred.then(encode)
        return frame

    @staticmethod
    def _refused(context: RequestContext, request: Any, failed: RequestFailed) -> Frame:
        """A handler refused the whole request (``RequestFailed``): Kafka's error
        response to it, nothing logged beyond debug."""
        header = context.header
        log.debug("%s refused for %s: %s", header.api_key, context.connection.peer, failed)
        response = error_response(header.api_key, header.api_version, request, failed.error_code)
        return _encode(context, response)

    def _failed(
        self, spec: ApiSpec, context: RequestContext, request: Any, error: Exception
    ) -> Frame:
        """Answer a request whose handling failed with UNKNOWN_SERVER_ERROR everywhere
        (Kafka's ``getErrorResponse``); if even that cannot be built, the error goes on
        to the connection, which closes."""
        header = context.header
        handler_errors.warning(
            "%s v%d from %s (client %r) failed: %r; answering UNKNOWN_SERVER_ERROR",
            spec.name,
            header.api_version,
            context.connection.peer,
            header.client_id,
            error,
            error=error,
        )
        if header.api_key == 0 and getattr(request, "acks", None) == 0:
            raise error  # acks=0 expects no answer: Kafka closes the connection instead
        try:
            response = error_response(
                header.api_key, header.api_version, request, ErrorCode.unknown_server_error
            )
            return _encode(context, response)
        except Exception:
            raise error from None

    def _respond(
        self,
        context: RequestContext,
        request: Any,
        size: int,
        result: Response,
        started: float,
        busy: float,
    ) -> Frame | Awaitable[Frame]:
        """Encode, apply client quotas, record latency. ``busy``: the handler's own time
        for an asynchronous handler (its waiting is not work); 0 means "until now"."""
        quotas = self.broker.quotas
        throttle_ms = 0
        if quotas.active:
            result, throttle_ms = quotas.enforce(
                context.header.api_key,
                context.header.client_id,
                request,
                size + 4,
                result,
                busy or perf_counter() - started,
            )
        response = _encode(context, result)
        self.latency[context.header.api_key].observe(perf_counter() - started)
        if throttle_ms:
            # Matches Kafka: the client is slowed down, not refused. Its response waits
            # out the throttle time and its channel is muted meanwhile.
            return context.connection.throttle(response, throttle_ms / 1000)
        return response

    def _unsupported_api_versions(self, header: RequestHeader) -> Frame:
        response = BodyResponse(
            API_VERSIONS_KEY,
            {"error_code": ErrorCode.unsupported_version, "api_keys": self.advertised()},
        )
        return response.encode_frame(0, header.correlation_id)

    def supported_versions(self) -> tuple[tuple[int, int, int], ...]:
        """(api key, min version, max version) per API, by key: what ApiVersions says."""
        if self._supported is None:
            self._supported = tuple(
                (spec.key, spec.min_version, spec.max_version)
                for spec in sorted(self.apis.values(), key=lambda s: s.key)
            )
        return self._supported

    def advertised(self) -> list[dict[str, int]]:
        return [
            {"api_key": spec.key, "min_version": spec.min_version, "max_version": spec.max_version}
            for spec in sorted(self.apis.values(), key=lambda s: s.key)
        ]


def _encode(context: RequestContext, response: Response) -> Frame:
    """The one place a response becomes its frame (every handler's, and the router's own
    error answers): each response type frames itself."""
    header = context.header
    return response.encode_frame(header.api_version, header.correlation_id)
