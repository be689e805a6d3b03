"""Bad input on a SASL listener: each case closes its own connection, answers nothing
that tells users apart, and the broker keeps serving everyone else.

Requests are built with the same kio classes the broker decodes, over raw sockets, so
that every byte is under the test's control.
"""

from __future__ import annotations

import random
import socket
import struct
import time

import pytest

from gregor_broker.devtools.zookeeper_server import free_port
from gregor_broker.protocol import entities
from gregor_broker.security.scram import ScramClient

from .clients import Security
from .test_sasl_plaintext import PASSWORD, _can_log_in, gregor, sasl_properties, wait_for_login

SASL_HANDSHAKE, SASL_AUTHENTICATE, METADATA = 17, 36, 3
IDLE_MS = 4000
FUZZ_CASES = 200


@pytest.fixture(scope="module")
def bad_input_broker(tmp_path_factory, zookeeper, broker_launcher):
    """One broker for the module (the cases only open connections)."""
    from gregor_broker.devtools.local_cluster import BrokerProcess

    plain_port, sasl_port = free_port(), free_port()
    chroot = f"{zookeeper.connect_string}/bad-input-{random.randrange(1 << 30)}"
    broker = BrokerProcess(
        broker_id=1,
        directory=tmp_path_factory.mktemp("bad-input-broker"),
        zookeeper_connect=chroot,
        port=plain_port,
        properties={
            **sasl_properties(sasl_port, plain_port),
            "connections.max.idle.ms": str(IDLE_MS),
        },
        launcher=broker_launcher,
    )
    broker.start()
    try:
        broker.wait_registered(120)
        result = gregor("users", "scram", "set", "alice", "--password", PASSWORD,
                        "--zookeeper", chroot)  # fmt: skip
        assert result.returncode == 0, result.stderr
        bootstrap = f"127.0.0.1:{sasl_port}"
        wait_for_login(bootstrap, Security("SASL_PLAINTEXT", "SCRAM-SHA-256", "alice", PASSWORD))
        yield broker, sasl_port
    finally:
        broker.stop()


def _request(api_key: int, version: int, data: dict, correlation_id: int = 1) -> bytes:
    assert not entities.is_flexible(api_key, version)
    body = entities.encode(
        entities.build(entities.payload_class(api_key, version, "request"), data)
    )
    header = struct.pack(">hhih", api_key, version, correlation_id, 4) + b"test"
    return struct.pack(">i", len(header) + len(body)) + header + body


def _response(sock: socket.socket, api_key: int, version: int):
    size = struct.unpack(">i", _read(sock, 4))[0]
    frame = _read(sock, size)
    response, _ = entities.response_reader(api_key, version)(frame, 4)
    return response


def _read(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def _closed(sock: socket.socket, timeout: float = 30.0) -> bool:
    """Whether the broker closes the connection (reading whatever it still sends)."""
    sock.settimeout(timeout)
    try:
        while sock.recv(4096):
            pass
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False
    return True


def _connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=30)


def _handshake(sock: socket.socket, mechanism: str):
    sock.sendall(_request(SASL_HANDSHAKE, 1, {"mechanism": mechanism}))
    return _response(sock, SASL_HANDSHAKE, 1)


def _authenticate(sock: socket.socket, auth_bytes: bytes):
    sock.sendall(_request(SASL_AUTHENTICATE, 1, {"auth_bytes": auth_bytes}))
    return _response(sock, SASL_AUTHENTICATE, 1)


def _serves(port: int) -> bool:
    return _can_log_in(
        f"127.0.0.1:{port}", Security("SASL_PLAINTEXT", "SCRAM-SHA-512", "alice", PASSWORD)
    )


def test_requests_before_the_login_close_the_connection(bad_input_broker):
    _, port = bad_input_broker
    with _connect(port) as sock:
        sock.sendall(_request(METADATA, 1, {"topics": None}))
        assert _closed(sock)
    with _connect(port) as sock:  # SaslAuthenticate without a handshake
        sock.sendall(_request(SASL_AUTHENTICATE, 1, {"auth_bytes": b"x"}))
        assert _closed(sock)
    with _connect(port) as sock:
        response = _handshake(sock, "GSSAPI")
        assert response.error_code == 33  # UNSUPPORTED_SASL_MECHANISM
        assert list(response.mechanisms) == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
        assert _closed(sock)
    assert _serves(port)


@pytest.mark.parametrize("user", ["alice", "nobody"])
@pytest.mark.parametrize("tamper", ["nonce", "proof", "garbage"])
def test_wrong_scram_messages_fail_the_same_way_for_every_user(bad_input_broker, user, tamper):
    _, port = bad_input_broker
    with _connect(port) as sock:
        assert _handshake(sock, "SCRAM-SHA-256").error_code == 0
        client = ScramClient("SCRAM-SHA-256", user, PASSWORD)
        first = _authenticate(sock, client.first_message())
        assert first.error_code == 0
        server_first = bytes(first.auth_bytes).decode()
        assert server_first.startswith("r=") and ",s=" in server_first and ",i=4096" in server_first
        final = client.final_message(bytes(first.auth_bytes)).decode()
        if tamper == "nonce":
            nonce = final.split(",")[1]
            final = final.replace(nonce, nonce[:-4] + "AAAA")
        elif tamper == "proof":
            head, proof = final.rsplit(",p=", 1)
            final = f"{head},p={'A' * len(proof[:-1])}="
        else:
            final = "\x00\xff,,==garbage"
        answer = _authenticate(sock, final.encode("utf-8", "surrogateescape"))
        assert answer.error_code == 58  # SASL_AUTHENTICATION_FAILED
        assert answer.error_message == (
            "Authentication failed during authentication due to invalid credentials with "
            "SASL mechanism SCRAM-SHA-256"
        )
        assert _closed(sock)
    assert _serves(port)


def test_a_never_finished_login_is_closed_after_the_idle_timeout(bad_input_broker):
    _, port = bad_input_broker
    with _connect(port) as quiet, _connect(port) as half:
        assert _handshake(half, "SCRAM-SHA-512").error_code == 0
        started = time.monotonic()
        assert _closed(quiet, timeout=IDLE_MS / 1000 * 10)
        assert _closed(half, timeout=IDLE_MS / 1000 * 10)
        assert time.monotonic() - started >= IDLE_MS / 1000 * 0.5
    assert _serves(port)


def test_fuzzed_sasl_frames_close_only_their_connection(bad_input_broker):
    """Random and mutated frames at each stage of the login; counts are printed."""
    _, port = bad_input_broker
    rng = random.Random(17)
    closed = answered = 0
    valid_first = ScramClient("SCRAM-SHA-256", "alice", PASSWORD).first_message()
    for case in range(FUZZ_CASES):
        with _connect(port) as sock:
            stage = case % 4
            if stage >= 1:
                assert _handshake(sock, "SCRAM-SHA-256").error_code == 0
            if stage == 0:
                payload = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 64)))
                sock.sendall(struct.pack(">i", len(payload)) + payload)
            elif stage == 1:  # a SaslAuthenticate frame with random bytes after the header
                frame = bytearray(_request(SASL_AUTHENTICATE, 1, {"auth_bytes": valid_first}))
                for _ in range(rng.randrange(1, 6)):
                    position = rng.randrange(14, len(frame))
                    frame[position] = rng.randrange(256)
                sock.sendall(bytes(frame))
            elif stage == 2:  # random SCRAM client-first messages
                token = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 80)))
                sock.sendall(_request(SASL_AUTHENTICATE, 1, {"auth_bytes": token}))
            else:  # a frame size beyond socket.request.max.bytes, or negative
                sock.sendall(struct.pack(">i", rng.choice([-1, 1 << 30])) + b"\x00" * 8)
            sock.settimeout(30)
            try:
                data = sock.recv(4096)
            except ConnectionResetError:
                data = b""
            if data:
                answered += 1
            assert _closed(sock), f"case {case} left the connection open"
            closed += 1
    print(f"fuzz: {FUZZ_CASES} cases, {closed} closed, {answered} answered before closing")
    assert closed == FUZZ_CASES
    assert _serves(port)
