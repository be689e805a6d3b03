"""Run a real ZooKeeper server (Debian's ``zookeeper`` package) as a child process.

Used by ``gregor local up`` and by the test fixtures. It does not install ZooKeeper:
``make deps`` does (``apt-get install zookeeper``).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
SLF4J_SIMPLE_JAR = Path("/usr/share/java/slf4j-simple.jar")


class ZooKeeperNotInstalled(RuntimeError):
    pass


def free_port() -> int:
    """An unused TCP port on 127.0.0.1 (the kernel picks it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def four_letter_word(port: int, word: str, timeout: float = 1.0, host: str = "127.0.0.1") -> str:
    """Send a ZooKeeper four-letter command (``srvr``, ``ruok``, ``mntr``) and return the reply."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(word.encode())
        chunks = []
        while chunk := sock.recv(4096):
            chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


@dataclass
class ZooKeeperServer:
    """A standalone ZooKeeper bound to ``host`` (127.0.0.1), with its data in ``data_dir``.

    ``command_prefix`` is put before the java command line, e.g. ``ip netns exec NAME`` to
    run it inside a network namespace (where ``host`` is that namespace's address).
    """

    data_dir: Path
    port: int = 0
    heap_mb: int = 128
    process: subprocess.Popen[bytes] | None = field(default=None, init=False)
    host: str = "127.0.0.1"
    command_prefix: Sequence[str] = ()

    @property
    def connect_string(self) -> str:
        return f"{self.host}:{self.port}"

    def write_config(self) -> Path:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        config = self.data_dir / "zoo.cfg"
        config.write_text(
            "\n".join(
                [
                    "tickTime=500",
                    f"dataDir={self.data_dir / 'data'}",
                    f"clientPort={self.port}",
                    f"clientPortAddress={self.host}",
                    "admin.enableServer=false",
                    "4lw.commands.whitelist=ruok,srvr,mntr",
                    "maxClientCnxns=0",
                    # Sessions as short as 1 s so tests can expire a broker's session quickly.
                    "minSessionTimeout=1000",
                    "maxSessionTimeout=60000",
                    "",
                ]
            )
        )
        return config

    def start(self, timeout: float = 30.0) -> None:
        if not ZOOKEEPER_JAR.exists():
            raise ZooKeeperNotInstalled(
                f"{ZOOKEEPER_JAR} not found: install ZooKeeper with 'make deps' "
                "(apt-get install zookeeper)"
            )
        java = shutil.which("java")
        if java is None:
            raise ZooKeeperNotInstalled("java not found: 'make deps' installs a Java runtime")
        if self.port == 0:
            self.port = free_port()
        config = self.write_config()
        classpath = f"{ZOOKEEPER_JAR}:{SLF4J_SIMPLE_JAR}"
        log = open(self.data_dir / "zookeeper.log", "ab")  # noqa: SIM115 - child owns it
        self.process = subprocess.Popen(
            [
                *self.command_prefix,
                java,
                f"-Xmx{self.heap_mb}m",
                "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1",
                "-cp",
                classpath,
                "org.apache.zookeeper.server.ZooKeeperServerMain",
                str(config),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        log.close()
        self.wait_ready(timeout)

    def is_serving(self) -> bool:
        try:
            return "Mode:" in four_letter_word(self.port, "srvr", host=self.host)
        except OSError:
            return False

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(
                    f"ZooKeeper exited with {self.process.returncode}; "
                    f"see {self.data_dir / 'zookeeper.log'}"
                )
            if self.is_serving():
                return
            time.sleep(0.1)
        raise TimeoutError(f"ZooKeeper on port {self.port} not serving after {timeout} s")

    def stop(self) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def kill(self) -> None:
        """SIGKILL, for fault tests."""
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, 9)
            self.process.wait()
        self.process = None
