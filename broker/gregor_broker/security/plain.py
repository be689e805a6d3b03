"""SASL/PLAIN (RFC 4616) as Kafka's ``PlainSaslServer`` checks it.

The client sends ``[authzid] NUL authcid NUL passwd`` once; the users and their
passwords come from the listener's JAAS config (``user_<name>="<password>"``). An
authorization id, when given, must equal the user name. Unknown users and wrong
passwords get the same answer.
"""

from __future__ import annotations

import hmac

from .scram import AuthenticationFailed

MAX_TOKEN_BYTES = 4096
INVALID_CREDENTIALS = "Authentication failed: Invalid username or password"


class PlainServer:
    mechanism = "PLAIN"

    def __init__(self, users: dict[str, str]) -> None:
        self._users = users
        self.user: str | None = None
        self.complete = False

    def step(self, data: bytes) -> bytes:
        if self.complete:
            raise AuthenticationFailed("PLAIN exchange already finished")
        if len(data) > MAX_TOKEN_BYTES:
            raise AuthenticationFailed("PLAIN token too long")
        parts = data.split(b"\x00")
        if len(parts) != 3:
            raise AuthenticationFailed("Invalid SASL/PLAIN response: expected 3 tokens")
        try:
            authzid, user, password = (part.decode("utf-8") for part in parts)
        except UnicodeDecodeError:
            raise AuthenticationFailed("Invalid SASL/PLAIN response: not UTF-8") from None
        if not user:
            raise AuthenticationFailed("Authentication failed: username not specified")
        if not password:
            raise AuthenticationFailed("Authentication failed: password not specified")
        expected = self._users.get(user)
        # Compared even for an unknown user, so the time taken does not tell them apart.
        matches = hmac.compare_digest(
            (expected if expected is not None else "\x00" + password).encode(), password.encode()
        )
        if expected is None or not matches:
            raise AuthenticationFailed(INVALID_CREDENTIALS)
        if authzid and authzid != user:
            raise AuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is "
                "different from username"
            )
        self.user = user
        self.complete = True
        return b""


def plain_token(user: str, password: str) -> bytes:
    """The client's PLAIN message (no authorization id)."""
    return b"\x00" + user.encode() + b"\x00" + password.encode()
