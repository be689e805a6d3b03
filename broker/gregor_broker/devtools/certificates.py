"""Throw-away certificates made with the openssl command, for tests and the bench: a CA, a
broker certificate for 127.0.0.1/localhost (plus any names given: a Kubernetes test's pod
and Service names, wildcards allowed), and a client certificate
(CN=alice,OU=eng,O=example) for mTLS. Valid two days; never for real use."""

from __future__ import annotations

import ipaddress
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

KEY_PASSWORD = "key-password"
CLIENT_DN = "/O=example/OU=eng/CN=alice"


@dataclass(frozen=True)
class Certificates:
    ca: Path  # the CA certificate (trust store)
    broker_keystore: Path  # the broker's key (encrypted with KEY_PASSWORD) and chain
    broker_cert: Path
    broker_key: Path  # unencrypted, for the inline properties
    client_cert: Path
    client_key: Path


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _key(name: str, cwd: Path) -> None:
    _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
             "-out", f"{name}.key", cwd=cwd)  # fmt: skip


def _san(name: str) -> str:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return f"DNS:{name}"
    return f"IP:{name}"


def make_certificates(directory: Path, names: Sequence[str] = ()) -> Certificates:
    """``names``: more subject alternative names of the broker certificate (host names,
    ``*.``-wildcards or IP addresses) besides 127.0.0.1 and localhost."""
    directory.mkdir(parents=True, exist_ok=True)
    _key("ca", directory)
    _openssl("req", "-x509", "-new", "-key", "ca.key", "-out", "ca.pem", "-days", "2",
             "-subj", "/CN=Gregor Test CA", cwd=directory)  # fmt: skip
    sans = ["IP:127.0.0.1", "DNS:localhost", *(_san(n) for n in names)]
    (directory / "san.cnf").write_text(f"subjectAltName={','.join(sans)}\n")
    for name, subject, extensions in (
        ("broker", "/O=example/CN=localhost", ["-extfile", "san.cnf"]),
        ("client", CLIENT_DN, []),
    ):
        _key(name, directory)
        _openssl("req", "-new", "-key", f"{name}.key", "-out", f"{name}.csr", "-subj", subject,
                 cwd=directory)  # fmt: skip
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                 "-CAcreateserial", "-out", f"{name}.pem", "-days", "2", *extensions,
                 cwd=directory)  # fmt: skip
    _openssl("pkcs8", "-topk8", "-in", "broker.key", "-out", "broker-encrypted.key",
             "-passout", f"pass:{KEY_PASSWORD}", "-v2", "aes-256-cbc", cwd=directory)  # fmt: skip
    keystore = directory / "broker-keystore.pem"
    keystore.write_text(
        (directory / "broker-encrypted.key").read_text() + (directory / "broker.pem").read_text()
    )
    return Certificates(
        ca=directory / "ca.pem",
        broker_keystore=keystore,
        broker_cert=directory / "broker.pem",
        broker_key=directory / "broker.key",
        client_cert=directory / "client.pem",
        client_key=directory / "client.key",
    )
