"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka speaks them.

Credentials are what Kafka keeps in ZooKeeper under ``/config/users/<user>``, one key per
mechanism: ``salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>``
(``ScramCredentialUtils.credentialToString``). The password itself is never stored.

``ScramServer`` is the broker's side of one exchange, ``ScramClient`` a follower's. Both
are pure: bytes in, bytes out, ``AuthenticationFailed`` when the peer is wrong. An
unknown user is not told apart from a wrong password: the server answers the first
message with a salt derived from the user name (stable across attempts) and fails only
at the proof, as RFC 5802 section 9 suggests, so nothing reveals which users exist.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass

MECHANISMS: dict[str, str] = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
# Kafka's ScramMechanism bounds for iterations (AlterUserScramCredentials refuses others).
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
DEFAULT_ITERATIONS = 4096
SALT_BYTES = 32
# Characters of the random part of a nonce (about 190 bits).
NONCE_BYTES = 32
# Longest SCRAM message a broker reads: user names and nonces are short.
MAX_MESSAGE_BYTES = 4096


class AuthenticationFailed(Exception):
    """The peer did not authenticate; the message is what the client may be told."""


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_zk(self) -> str:
        """Kafka's ``ScramCredentialUtils.credentialToString`` format."""
        return (
            f"salt={_b64(self.salt)},stored_key={_b64(self.stored_key)},"
            f"server_key={_b64(self.server_key)},iterations={self.iterations}"
        )

    @classmethod
    def from_zk(cls, text: str) -> ScramCredential:
        """Parse ``to_zk``'s format; ValueError when it is not one."""
        fields = dict(item.split("=", 1) for item in text.split(",") if "=" in item)
        try:
            return cls(
                salt=base64.b64decode(fields["salt"], validate=True),
                stored_key=base64.b64decode(fields["stored_key"], validate=True),
                server_key=base64.b64decode(fields["server_key"], validate=True),
                iterations=int(fields["iterations"]),
            )
        except (KeyError, ValueError) as error:
            raise ValueError(f"not a SCRAM credential: {error}") from None


_NONCE_ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


def random_nonce() -> str:
    """Letters and digits only, as Kafka's ``ScramFormatter.secureRandomString``: some
    clients (librdkafka 2.0) mangle nonces holding ``-`` or ``_``."""
    return "".join(secrets.choice(_NONCE_ALPHABET) for _ in range(NONCE_BYTES))


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _hash_name(mechanism: str) -> str:
    try:
        return MECHANISMS[mechanism]
    except KeyError:
        raise ValueError(f"unknown SCRAM mechanism {mechanism!r}") from None


def _hmac(name: str, key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, name).digest()


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi(Normalize(password), salt, i): PBKDF2 with the mechanism's HMAC."""
    return hashlib.pbkdf2_hmac(_hash_name(mechanism), password.encode("utf-8"), salt, iterations)


def credential_from_salted_password(
    mechanism: str, salted: bytes, salt: bytes, iterations: int
) -> ScramCredential:
    """What AlterUserScramCredentials sends (salt and salted password) as a credential."""
    name = _hash_name(mechanism)
    client_key = _hmac(name, salted, b"Client Key")
    return ScramCredential(
        salt=salt,
        stored_key=hashlib.new(name, client_key).digest(),
        server_key=_hmac(name, salted, b"Server Key"),
        iterations=iterations,
    )


def credential_from_password(
    mechanism: str,
    password: str,
    *,
    iterations: int = DEFAULT_ITERATIONS,
    salt: bytes | None = None,
) -> ScramCredential:
    salt = salt if salt is not None else os.urandom(SALT_BYTES)
    salted = salted_password(mechanism, password, salt, iterations)
    return credential_from_salted_password(mechanism, salted, salt, iterations)


def _saslname_decode(name: str) -> str:
    """RFC 5802 saslname: ``=2C`` is ``,`` and ``=3D`` is ``=``; any other ``=`` is invalid."""
    out = []
    index = 0
    while index < len(name):
        char = name[index]
        if char == "=":
            code = name[index + 1 : index + 3]
            if code == "2C":
                out.append(",")
            elif code == "3D":
                out.append("=")
            else:
                raise AuthenticationFailed("invalid user name encoding")
            index += 3
            continue
        out.append(char)
        index += 1
    return "".join(out)


def saslname_encode(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def _attributes(message: str, what: str) -> list[tuple[str, str]]:
    """``a=b,c=d`` as ordered pairs; AuthenticationFailed if it is not that."""
    pairs = []
    for item in message.split(","):
        if len(item) < 2 or item[1] != "=" or not item[0].isalpha():
            raise AuthenticationFailed(f"malformed SCRAM {what}")
        pairs.append((item[0], item[2:]))
    return pairs


def _decode_message(data: bytes, what: str) -> str:
    if len(data) > MAX_MESSAGE_BYTES:
        raise AuthenticationFailed(f"SCRAM {what} too long")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise AuthenticationFailed(f"SCRAM {what} is not UTF-8") from None


CredentialLookup = Callable[[str, str], ScramCredential | None]
"""``(user, mechanism)`` → the stored credential, or None."""


class ScramServer:
    """The broker's side of one SCRAM exchange: ``step`` twice, then ``complete``."""

    def __init__(self, mechanism: str, lookup: CredentialLookup, decoy_key: bytes) -> None:
        self.mechanism = mechanism
        self._name = _hash_name(mechanism)
        self._lookup = lookup
        self._decoy_key = decoy_key  # per broker process: keys the made-up salts
        self._state = "first"
        self.user: str | None = None
        self._credential: ScramCredential | None = None
        self._known = False
        self._nonce = ""
        self._gs2_header = ""
        self._client_first_bare = ""
        self._server_first = ""
        self.complete = False

    def step(self, data: bytes) -> bytes:
        if self._state == "first":
            return self._first(data)
        if self._state == "final":
            return self._final(data)
        raise AuthenticationFailed("SCRAM exchange already finished")

    def _first(self, data: bytes) -> bytes:
        message = _decode_message(data, "client-first-message")
        parts = message.split(",", 2)
        if len(parts) != 3:
            raise AuthenticationFailed("malformed SCRAM client-first-message")
        cbind, authzid, bare = parts
        if cbind not in ("n", "y"):
            # "p=...": channel binding, which Kafka does not support either.
            raise AuthenticationFailed("SCRAM channel binding is not supported")
        if authzid and not authzid.startswith("a="):
            raise AuthenticationFailed("malformed SCRAM authorization id")
        items = bare.split(",")
        attributes = _attributes(",".join(items[:2]), "client-first-message")
        if len(attributes) < 2 or attributes[0][0] != "n" or attributes[1][0] != "r":
            raise AuthenticationFailed("malformed SCRAM client-first-message")
        user = _saslname_decode(attributes[0][1])
        client_nonce = attributes[1][1]
        if not user or not client_nonce or " " in client_nonce:
            raise AuthenticationFailed("malformed SCRAM client-first-message")
        # Kafka's extensions (key=value after the nonce); tokenauth asks for a
        # delegation token login, which Gregor does not have.
        extensions = [item.partition("=") for item in items[2:]]
        if any(not key.isalpha() or not sep for key, sep, _ in extensions):
            raise AuthenticationFailed("malformed SCRAM client-first-message")
        if any(key == "tokenauth" and value.lower() == "true" for key, _, value in extensions):
            raise AuthenticationFailed("delegation token authentication is not supported")
        if authzid and _saslname_decode(authzid[2:]) != user:
            raise AuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is "
                "different from username"
            )
        credential = self._lookup(user, self.mechanism)
        self._known = credential is not None
        if credential is None:
            # A made-up credential, the same every time for this user on this broker.
            salt = _hmac(self._name, self._decoy_key, user.encode("utf-8"))[:SALT_BYTES]
            credential = ScramCredential(salt, b"", b"", DEFAULT_ITERATIONS)
        self.user = user
        self._credential = credential
        self._gs2_header = f"{cbind},{authzid},"
        self._client_first_bare = bare
        self._nonce = client_nonce + random_nonce()
        self._server_first = f"r={self._nonce},s={_b64(credential.salt)},i={credential.iterations}"
        self._state = "final"
        return self._server_first.encode("ascii")

    def _final(self, data: bytes) -> bytes:
        self._state = "done"
        message = _decode_message(data, "client-final-message")
        attributes = _attributes(message, "client-final-message")
        if len(attributes) < 3 or attributes[0][0] != "c" or attributes[1][0] != "r":
            raise AuthenticationFailed("malformed SCRAM client-final-message")
        if attributes[-1][0] != "p":
            raise AuthenticationFailed("malformed SCRAM client-final-message")
        channel_binding, nonce, proof_b64 = attributes[0][1], attributes[1][1], attributes[-1][1]
        try:
            binding = base64.b64decode(channel_binding, validate=True).decode("utf-8")
            proof = base64.b64decode(proof_b64, validate=True)
        except (ValueError, UnicodeDecodeError):
            raise AuthenticationFailed("malformed SCRAM client-final-message") from None
        if binding != self._gs2_header:
            raise AuthenticationFailed("SCRAM channel binding does not match")
        # Kafka's check (ScramSaslServer): the nonce must END with the server's, which
        # lets librdkafka 2.0, which sends the client nonce twice, log in.
        if not nonce.endswith(self._nonce):
            raise AuthenticationFailed("Invalid client nonce in the final client message")
        without_proof = message[: message.rindex(",p=")]
        auth_message = ",".join((self._client_first_bare, self._server_first, without_proof))
        credential = self._credential
        assert credential is not None
        signature = _hmac(self._name, credential.stored_key, auth_message.encode("utf-8"))
        if len(proof) != len(signature):
            raise AuthenticationFailed("Invalid client credentials")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        computed = hashlib.new(self._name, client_key).digest()
        if not (hmac.compare_digest(computed, credential.stored_key) and self._known):
            raise AuthenticationFailed("Invalid client credentials")
        server_signature = _hmac(self._name, credential.server_key, auth_message.encode())
        self.complete = True
        return f"v={_b64(server_signature)}".encode("ascii")


class ScramClient:
    """A client's side of one SCRAM exchange (followers logging in to leaders)."""

    def __init__(self, mechanism: str, user: str, password: str) -> None:
        self.mechanism = mechanism
        self._name = _hash_name(mechanism)
        self._password = password
        self._nonce = random_nonce()
        self._client_first_bare = f"n={saslname_encode(user)},r={self._nonce}"
        self._auth_message = b""
        self._salted = b""

    def first_message(self) -> bytes:
        return f"n,,{self._client_first_bare}".encode()

    def final_message(self, server_first: bytes) -> bytes:
        message = _decode_message(server_first, "server-first-message")
        attributes = dict(_attributes(message, "server-first-message"))
        nonce, salt, iterations = attributes.get("r", ""), attributes.get("s"), attributes.get("i")
        if not nonce.startswith(self._nonce) or salt is None or iterations is None:
            raise AuthenticationFailed("invalid SCRAM server-first-message")
        try:
            salt_bytes = base64.b64decode(salt, validate=True)
            count = int(iterations)
        except ValueError:
            raise AuthenticationFailed("invalid SCRAM server-first-message") from None
        if not MIN_ITERATIONS <= count <= 10 * MAX_ITERATIONS:
            raise AuthenticationFailed(f"SCRAM iterations {count} out of range")
        self._salted = salted_password(self.mechanism, self._password, salt_bytes, count)
        without_proof = f"c={_b64(b'n,,')},r={nonce}"
        self._auth_message = f"{self._client_first_bare},{message},{without_proof}".encode()
        client_key = _hmac(self._name, self._salted, b"Client Key")
        stored_key = hashlib.new(self._name, client_key).digest()
        signature = _hmac(self._name, stored_key, self._auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        return f"{without_proof},p={_b64(proof)}".encode()

    def verify_server_final(self, server_final: bytes) -> None:
        message = _decode_message(server_final, "server-final-message")
        attributes = dict(_attributes(message, "server-final-message"))
        if "e" in attributes:
            raise AuthenticationFailed(f"SCRAM server error: {attributes['e']}")
        server_key = _hmac(self._name, self._salted, b"Server Key")
        expected = _b64(_hmac(self._name, server_key, self._auth_message))
        if not hmac.compare_digest(attributes.get("v", ""), expected):
            raise AuthenticationFailed("the server's SCRAM signature is wrong")
