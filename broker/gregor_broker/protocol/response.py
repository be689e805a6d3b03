"""What every request handler returns: a ``Response``, which frames itself.

A handler returns a ``Response`` (or an awaitable of one when it waits); the router sets
``throttle_time`` when a client quota throttles the client and encodes it in one place,
``encode_frame(version, correlation_id)``. The hot APIs have hand-written encoders
(``ProduceResponse``, ``MetadataResponse``, the fetch handler's response, which frames
file regions for ``sendfile``); every other API answers a ``BodyResponse``: the body's
fields under kio's names, encoded with kio (Kafka's ``AbstractResponse``, one class for
all).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from . import entities
from .wire import API_VERSIONS_KEY, frame, response_header

# A response frame (size prefix and header included): one buffer; or (parts, size),
# parts being bytes and the records' file regions (written with sendfile); or None,
# nothing to send (a Produce with acks=0).
Frame = bytes | tuple[list[Any], int] | None


class Response(Protocol):
    """A handler's answer; the router sets ``throttle_time`` and calls ``encode_frame``."""

    throttle_time: int

    def encode_frame(self, version: int, correlation_id: int) -> Frame: ...


class FetchResult(Response, Protocol):
    """What the fetch handler returns: its size counts against the client's fetch byte
    rate, and a throttled client gets ``throttled(ms)`` instead, with no records (Kafka's
    ``FetchContext.getThrottledResponse``)."""

    @property
    def size(self) -> int: ...

    def throttled(self, throttle_ms: int) -> Response: ...


@dataclass(slots=True)  # not frozen: a frozen __init__ costs ~10x (hot path)
class BodyResponse:
    """A response given by its body's fields (kio's names), encoded with kio."""

    api_key: int
    body: dict[str, Any]
    throttle_time: int = 0

    def encode_frame(self, version: int, correlation_id: int) -> bytes:
        api_key = self.api_key
        body = self.body
        if self.throttle_time:
            body["throttle_time"] = self.throttle_time
        # ApiVersions answers with header v0 whatever its version (KIP-511).
        flexible = api_key != API_VERSIONS_KEY and entities.is_flexible(api_key, version)
        return frame(
            response_header(correlation_id, flexible),
            entities.encode_response(api_key, version, body),
        )


@dataclass(slots=True)
class NoResponse:
    """Nothing goes back: a Produce with acks=0 (Kafka sends no response to it)."""

    throttle_time: int = 0

    def encode_frame(self, version: int, correlation_id: int) -> None:
        return None
