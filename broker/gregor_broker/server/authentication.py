"""SASL authentication of a connection on a SASL_PLAINTEXT or SASL_SSL listener.

Kafka's ``SaslServerAuthenticator``: before anything else a client may ask ApiVersions,
then SaslHandshake names a mechanism, then SaslAuthenticate requests carry the
mechanism's messages (after a v0 handshake: bare size-prefixed tokens instead, the
pre-KIP-152 framing old clients use). Any other request before the login succeeds closes
the connection; so does a malformed frame. A failed login is answered
SASL_AUTHENTICATION_FAILED after ``connection.failed.authentication.delay.ms`` and the
connection is closed; a connection that does not finish within
``connections.max.idle.ms`` is closed too.

The authenticator is the connection's frame handler only until the login succeeds; then
the connection hands frames straight to the request router, so an authenticated
connection costs nothing more per request than a PLAINTEXT one. With
``connections.max.reauth.ms`` (KIP-368) a thin gate stays in front of the router: it
closes the connection once the session expired and lets the client log in again.
"""

from __future__ import annotations

import asyncio
import logging
import os
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from ..config import BrokerConfig, ConfigError
from ..protocol import entities
from ..protocol.wire import API_VERSIONS_KEY, MalformedRequest, frame, response_header
from ..security.jaas import parse_jaas_config
from ..security.plain import PlainServer
from ..security.scram import MECHANISMS, AuthenticationFailed, CredentialLookup, ScramServer
from ..stats import AuthenticationMetrics
from .connection import Connection
from .request_router import RequestRouter

log = logging.getLogger(__name__)

SASL_HANDSHAKE_KEY = 17
SASL_AUTHENTICATE_KEY = 36
SUPPORTED_MECHANISMS = ("PLAIN", *MECHANISMS)
_KEY_AND_VERSION = struct.Struct(">hh")
_SIZE = struct.Struct(">i")


@dataclass(frozen=True)
class SaslListenerSettings:
    """What a SASL listener accepts, read once from the broker config at start-up."""

    listener: str
    mechanisms: tuple[str, ...]
    plain_users: dict[str, str] = field(repr=False)
    failed_delay_s: float
    unauthenticated_timeout_s: float
    reauth_ms: int

    @classmethod
    def from_config(cls, config: BrokerConfig, listener: str) -> SaslListenerSettings:
        enabled = tuple(m.upper() for m in config.for_listener(listener, "sasl.enabled.mechanisms"))
        mechanisms = tuple(m for m in enabled if m in SUPPORTED_MECHANISMS)
        if not mechanisms:
            raise ConfigError(
                f"Listener {listener} uses SASL but sasl.enabled.mechanisms "
                f"({', '.join(enabled) or 'empty'}) names none Gregor supports: "
                f"set it to some of {', '.join(SUPPORTED_MECHANISMS)}"
            )
        plain_users: dict[str, str] = {}
        if "PLAIN" in mechanisms:
            key = "plain.sasl.jaas.config"
            jaas = config.for_listener(listener, key)
            if not jaas:
                raise ConfigError(
                    f"Listener {listener} enables PLAIN but has no users: set "
                    f'listener.name.{listener.lower()}.{key} with user_<name>="<password>"'
                )
            plain_users = parse_jaas_config(jaas, key=key).plain_users
        return cls(
            listener=listener,
            mechanisms=mechanisms,
            plain_users=plain_users,
            failed_delay_s=config.connection_failed_authentication_delay_ms / 1000,
            unauthenticated_timeout_s=config.connections_max_idle_ms / 1000,
            reauth_ms=int(config.for_listener(listener, "connections.max.reauth.ms")),
        )


# One secret per broker process: the salts SCRAM makes up for unknown users.
_DECOY_KEY = os.urandom(32)


class SaslAuthenticator:
    """One connection's login; the connection's frame handler until it succeeds."""

    def __init__(
        self,
        connection: Connection,
        router: RequestRouter,
        settings: SaslListenerSettings,
        scram_credentials: CredentialLookup,
        metrics: AuthenticationMetrics,
    ) -> None:
        self.connection = connection
        self.router = router
        self.settings = settings
        self.scram_credentials = scram_credentials
        self.metrics = metrics
        self._state = "handshake"  # then "authenticate" (or "raw" after a v0 handshake)
        self._server: PlainServer | ScramServer | None = None
        self._mechanism = ""
        self._reauthenticating = False
        self._timer: asyncio.TimerHandle | None = None

    def start(self) -> None:
        """Close the connection if it has not logged in within the idle timeout."""
        self._timer = asyncio.get_running_loop().call_later(
            self.settings.unauthenticated_timeout_s, self._expired
        )

    def _expired(self) -> None:
        if self.connection.handler is self:
            self.connection.close_for("SASL authentication did not complete in time")

    # the frame handler ---------------------------------------------------------------------
    def __call__(self, connection: Connection, frame_bytes: memoryview) -> Any:
        if self._state == "raw":
            return self._raw_token(bytes(frame_bytes))
        if len(frame_bytes) < 8:
            raise MalformedRequest(f"frame of {len(frame_bytes)} bytes has no request header")
        api_key, _version = _KEY_AND_VERSION.unpack_from(frame_bytes, 0)
        if self._state == "handshake":
            if api_key == API_VERSIONS_KEY and not self._reauthenticating:
                return self.router(connection, frame_bytes)
            if api_key == SASL_HANDSHAKE_KEY:
                return self._handshake(frame_bytes)
        elif self._state == "authenticate" and api_key == SASL_AUTHENTICATE_KEY:
            return self._authenticate(frame_bytes)
        raise MalformedRequest(f"unexpected request (api key {api_key}) during SASL authentication")

    def _handshake(self, frame_bytes: memoryview) -> Any:
        _spec, header, request = self.router.decode(frame_bytes)
        mechanism = str(request.mechanism)
        settings = self.settings
        if mechanism not in settings.mechanisms or (
            self._reauthenticating and mechanism != self._mechanism
        ):
            response = self._encode(
                header,
                {
                    "error_code": ErrorCode.unsupported_sasl_mechanism,
                    "mechanisms": list(settings.mechanisms),
                },
            )
            self.connection.send_and_close(response)
            return None
        self._mechanism = mechanism
        if mechanism == "PLAIN":
            self._server = PlainServer(settings.plain_users)
        else:
            self._server = ScramServer(mechanism, self.scram_credentials, _DECOY_KEY)
        self._state = "authenticate" if header.api_version >= 1 else "raw"
        return self._encode(
            header, {"error_code": ErrorCode.none, "mechanisms": list(settings.mechanisms)}
        )

    def _authenticate(self, frame_bytes: memoryview) -> Any:
        _spec, header, request = self.router.decode(frame_bytes)
        server = self._server
        assert server is not None
        try:
            token = server.step(bytes(request.auth_bytes))
        except AuthenticationFailed as error:
            message = (
                str(error)
                if self._mechanism == "PLAIN"
                else "Authentication failed during authentication due to invalid credentials "
                f"with SASL mechanism {self._mechanism}"
            )
            response = self._encode(
                header,
                {
                    "error_code": ErrorCode.sasl_authentication_failed,
                    "error_message": message,
                    "auth_bytes": b"",
                    "session_lifetime": 0,
                },
            )
            return self._failed(str(error), response)
        lifetime = 0
        if server.complete:
            lifetime = self._succeeded(server.user)
        return self._encode(
            header,
            {
                "error_code": ErrorCode.none,
                "error_message": None,
                "auth_bytes": token,
                "session_lifetime": lifetime,
            },
        )

    def _raw_token(self, token: bytes) -> Any:
        """After a v0 handshake: bare tokens in, bare size-prefixed tokens out."""
        server = self._server
        assert server is not None
        try:
            reply = server.step(token)
        except AuthenticationFailed as error:
            return self._failed(str(error), None)
        if server.complete:
            self._succeeded(server.user)
        return _SIZE.pack(len(reply)) + reply

    # outcomes ------------------------------------------------------------------------------
    def _succeeded(self, user: str | None) -> int:
        """Install the principal and hand the connection to the router; returns the
        session lifetime to announce (KIP-368), 0 without one."""
        principal = f"User:{user}"
        connection = self.connection
        if self._reauthenticating and principal != connection.principal:
            # Kafka: "Cannot change principals during re-authentication".
            connection.close_for("re-authentication changed the principal")
            return 0
        self.metrics.record(
            self.settings.listener, self._mechanism, True, renewal=self._reauthenticating
        )
        connection.principal = principal
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        reauth_ms = self.settings.reauth_ms
        if reauth_ms > 0:
            connection.handler = ReauthenticationGate(self, reauth_ms)
        else:
            connection.handler = self.router
        return reauth_ms

    def _failed(self, reason: str, response: bytes | None) -> Any:
        """Kafka's delayed close: the answer (if any) goes out after the delay, then the
        connection closes; nothing more is read from it meanwhile."""
        self.metrics.record(self.settings.listener, self._mechanism, False)
        log.info(
            "failed SASL %s login on %s from %s: %s",
            self._mechanism,
            self.settings.listener,
            self.connection.peer,
            reason,
        )
        self._state = "failed"
        return self._close_later(response)

    async def _close_later(self, response: bytes | None) -> None:
        await asyncio.sleep(self.settings.failed_delay_s)
        self.connection.send_and_close(response or b"")

    def reauthenticate(self) -> None:
        """KIP-368: the client starts a new login on its authenticated connection."""
        self._state = "handshake"
        self._reauthenticating = True
        self._server = None
        self.connection.handler = self

    @staticmethod
    def _encode(header: Any, data: dict[str, Any]) -> bytes:
        flexible = entities.is_flexible(header.api_key, header.api_version)
        body = entities.encode_response(header.api_key, header.api_version, data)
        return frame(response_header(header.correlation_id, flexible), body)


class ReauthenticationGate:
    """In front of the router while a session has a lifetime (``connections.max.reauth.ms``):
    a SaslHandshake starts a new login; any other request after expiry closes the
    connection, as Kafka's broker does."""

    def __init__(self, authenticator: SaslAuthenticator, lifetime_ms: int) -> None:
        self.authenticator = authenticator
        self.router: Callable[[Connection, memoryview], Any] = authenticator.router
        self.expires_at = asyncio.get_running_loop().time() + lifetime_ms / 1000

    def __call__(self, connection: Connection, frame_bytes: memoryview) -> Any:
        if len(frame_bytes) >= 2 and _KEY_AND_VERSION.unpack_from(frame_bytes, 0)[0] == (
            SASL_HANDSHAKE_KEY
        ):
            self.authenticator.reauthenticate()
            return self.authenticator(connection, frame_bytes)
        if asyncio.get_running_loop().time() > self.expires_at:
            connection.close_for("SASL session expired without re-authentication", quiet=True)
            return None
        return self.router(connection, frame_bytes)
