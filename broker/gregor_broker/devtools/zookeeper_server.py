"""Run a real ZooKeeper server (Debian's ``zookeeper`` package) as a child process.

Used by ``gregor local up`` and by the test fixtures. It does not install ZooKeeper:
``make deps`` does (``apt-get install zookeeper``).
"""

from __future__ import annotations

import hashlib
import os
import random
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


def class_data_archive(java: str) -> tuple[Path, Path]:
    """Where the class-data-sharing archive of this java and ZooKeeper lives, and a fresh
    path for a JVM to write one to (``-XX:ArchiveClassesAtExit``).

    With the archive a ZooKeeper JVM starts in half the time (1.9-2.7 s instead of
    4.3-6.1 s at load average 29): the chaos campaign restarts ZooKeeper hundreds of
    times. The first ZooKeeper stopped cleanly writes it; later ones map it
    (``-XX:SharedArchiveFile``). Keyed by the java binary and the jars, so an upgrade
    makes a new one.
    """
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gregor"
    identity = [os.path.realpath(java)] + [
        f"{jar}:{jar.stat().st_mtime_ns}" for jar in (ZOOKEEPER_JAR, SLF4J_SIMPLE_JAR)
    ]
    key = hashlib.sha256("\n".join(identity).encode()).hexdigest()[:16]
    archive = cache / f"zookeeper-{key}.jsa"
    pending = cache / f"zookeeper-{key}.{os.getpid()}-{time.monotonic_ns()}.jsa.tmp"
    return archive, pending


# Ports handed out below the kernel's ephemeral range start here.
_LOWEST_FREE_PORT = 10000
# This process's next candidate: a walk upwards from a random start (set on first use,
# again after a fork, so that forked processes do not walk in step), in steps that leave
# room after each port handed out for callers that take the next few too (a base port
# for three brokers).
_next_port: tuple[int, int] | None = None  # (pid, offset from _LOWEST_FREE_PORT)
_STRIDE = 10


def free_port() -> int:
    """An unused TCP port on 127.0.0.1, below the kernel's ephemeral port range.

    The port is free now, but it is bound later, by another process (a broker, ZooKeeper),
    often more than once (restarts keep it). A port the kernel hands out with ``bind(0)``
    comes from the ephemeral range, where any outgoing connection may take it as its
    source port in the meantime: under the test suite's load a broker then failed with
    "address already in use" (CI). Below the range only another ``free_port`` caller can
    pick it. Each process walks the range upwards from a random start instead of picking
    at random: random picks by four test workers, thousands over a run, met the birthday
    problem (CI: two picked the same port before either bound it); walks from different
    starts cross only where one has long passed.
    """
    global _next_port
    ephemeral_low = _ephemeral_port_range()[0]
    span = ephemeral_low - _LOWEST_FREE_PORT
    if span >= 1000:
        pid = os.getpid()
        if _next_port is None or _next_port[0] != pid:
            _next_port = (pid, random.SystemRandom().randrange(span))
        offset = _next_port[1]
        for _ in range(200):
            port = _LOWEST_FREE_PORT + offset % span
            offset += _STRIDE
            with socket.socket() as sock:
                try:
                    sock.bind(("127.0.0.1", port))
                except OSError:
                    continue
            _next_port = (pid, offset)
            return port
    with socket.socket() as sock:  # no room below the range: the kernel picks
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _ephemeral_port_range() -> tuple[int, int]:
    """The kernel's range of source ports for outgoing connections (Linux's default
    when it cannot be read)."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


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
    # Written by this JVM when it exits cleanly, renamed to the shared archive by stop().
    _pending_archive: Path | None = field(default=None, init=False, repr=False)

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
                    # A development and test server: no fsync per transaction. A killed
                    # ZooKeeper (kill -9) loses nothing, its writes are in the page cache;
                    # only an OS crash could. With fsync, a busy disk stalled every session
                    # (a 21 s fsync during CI's image build expired brokers and operators).
                    # Production ensembles (the chart's, or an existing one) keep fsync.
                    "forceSync=no",
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
        archive_options = self._archive_options(java)
        log = open(self.data_dir / "zookeeper.log", "ab")  # noqa: SIM115 - child owns it
        self.process = subprocess.Popen(
            [
                *self.command_prefix,
                java,
                f"-Xmx{self.heap_mb}m",
                "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1",
                *archive_options,
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

    def _archive_options(self, java: str) -> list[str]:
        """Map the class-data archive, or write one at exit when there is none yet."""
        self._pending_archive = None
        try:
            archive, pending = class_data_archive(java)
            if archive.exists():
                return [f"-XX:SharedArchiveFile={archive}"]
            archive.parent.mkdir(parents=True, exist_ok=True)
        except OSError:  # no cache directory: start without
            return []
        self._pending_archive = pending
        return [f"-XX:ArchiveClassesAtExit={pending}"]

    @property
    def writes_class_data_archive(self) -> bool:
        """Whether this run writes the class-data archive when it stops cleanly (none
        existed when it started)."""
        return self._pending_archive is not None

    def _settle_archive(self, clean_exit: bool) -> None:
        pending, self._pending_archive = self._pending_archive, None
        if pending is None:
            return
        try:
            if clean_exit and pending.exists():
                archive = pending.parent / (pending.name.split(".", 1)[0] + ".jsa")
                os.replace(pending, archive)  # atomic: a racing ZooKeeper's is as good
            else:
                pending.unlink(missing_ok=True)
        except OSError:
            pass

    def stop(self) -> None:
        if self.process is None:
            return
        clean = False
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(20)  # writing the class-data archive takes a moment
                clean = True
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._settle_archive(clean)
        self.process = None

    def kill(self) -> None:
        """SIGKILL, for fault tests."""
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, 9)
            self.process.wait()
        self._settle_archive(False)
        self.process = None
