"""Run Gregor brokers as local processes: one ``BrokerProcess`` per broker, a ``LocalCluster``
of N brokers with their ZooKeeper.

Used by ``gregor local up`` and by the test fixtures (``tests/cluster_fixtures.py``). This
module owns process life cycles (properties file, spawn, registration wait, signals); it
does not own what a broker does once it runs (``gregor_broker.cli.broker``) nor how
ZooKeeper is run (``zookeeper_server``).

A broker counts as started once its ephemeral ``/brokers/ids/<id>`` znode exists, exactly
what Kafka's own tooling and the controller look at.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gregor_broker.devtools.launcher import BrokerLauncher, ForkedProcess
from gregor_broker.devtools.zookeeper_server import ZooKeeperServer, free_port

HOST = "127.0.0.1"
BROKER_MODULE = "gregor_broker.cli.broker"
# Substrings of /proc/<pid>/cmdline that identify our processes (together with the path of
# the process's config file), so that a stale pid in cluster.json never makes
# ``gregor local down`` signal an unrelated process.
BROKER_CMDLINE_MARKER = BROKER_MODULE
ZOOKEEPER_CMDLINE_MARKER = "org.apache.zookeeper.server.ZooKeeperServerMain"


class BrokerStartError(RuntimeError):
    """A broker exited or did not register in ZooKeeper in time."""


def log_tail(path: Path, lines: int = 40) -> str:
    """The last ``lines`` lines of a log file, or a note that it is missing."""
    try:
        with open(path, "rb") as log:
            log.seek(0, os.SEEK_END)
            size = log.tell()
            log.seek(max(0, size - 64 * 1024))
            text = log.read().decode(errors="replace")
    except OSError:
        return f"(no log at {path})"
    return "\n".join(text.splitlines()[-lines:])


def pid_running(pid: int) -> bool:
    """Whether ``pid`` is a live (non-zombie) process.

    Zombies count as gone: a detached broker is reparented to PID 1, which need not reap it.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    # Field 3, after the parenthesised command name (which may itself contain spaces).
    state = stat.rsplit(")", 1)[1].split()[0]
    return state not in ("Z", "X")


def pid_matches(pid: int, *markers: str) -> bool:
    """Whether ``pid`` is alive and its command line contains every one of ``markers``."""
    if not pid_running(pid):
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return False
    return all(marker in cmdline for marker in markers)


def terminate_pids(
    processes: Iterable[tuple[int, Sequence[str]]], timeout: float = 30.0
) -> list[int]:
    """SIGTERM every ``(pid, markers)`` whose command line still contains all its markers,
    wait up to ``timeout`` seconds for all of them, then SIGKILL the rest. Returns the pids
    that needed SIGKILL.

    For processes that are not our children (started by another ``gregor`` invocation);
    the markers (program and config file path) keep a reused pid from being signalled.
    """
    targets = [pid for pid, markers in processes if pid_matches(pid, *markers)]
    for pid in targets:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(pid_running(pid) for pid in targets):
        time.sleep(0.05)
    killed = []
    for pid in targets:
        if pid_running(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            killed.append(pid)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(pid_running(pid) for pid in killed):
        time.sleep(0.05)
    return killed


def zookeeper_client(connect: str, timeout: float = 10.0):  # -> kazoo.client.KazooClient
    """A started kazoo client; ``connect`` may carry a chroot (``host:port/chroot``)."""
    # kazoo is slow to import; only load it when needed (cluster.admin imports it too).
    from kazoo.client import KazooClient

    from gregor_broker.cluster.admin import ZOOKEEPER_CONNECTION_RETRY

    client = KazooClient(
        hosts=connect, timeout=timeout, connection_retry=ZOOKEEPER_CONNECTION_RETRY
    )
    with warnings.catch_warnings():
        # The broker creates its chroot when it first registers (as Kafka does); until then
        # lookups simply find nothing.
        warnings.filterwarnings("ignore", message="No chroot path exists")
        client.start(timeout=timeout)
    return client


def registered_brokers(client) -> dict[int, dict[str, Any]]:
    """``/brokers/ids/*`` as ``{id: registration JSON}`` ({} if the path does not exist)."""
    from kazoo.exceptions import NoNodeError

    try:
        children = client.get_children("/brokers/ids")
    except NoNodeError:
        return {}
    brokers = {}
    for child in children:
        try:
            data, _ = client.get(f"/brokers/ids/{child}")
        except NoNodeError:
            continue
        try:
            brokers[int(child)] = json.loads(data.decode() or "{}")
        except ValueError:
            brokers[int(child)] = {}
    return brokers


@dataclass
class BrokerProcess:
    """One broker (``python -m gregor_broker.cli.broker``) with its own directory.

    ``directory`` holds ``server.properties``, ``broker.log`` (the broker's stdout and
    stderr) and ``logs/`` (``log.dirs``). ``port=0`` picks a free port once, at
    construction, and keeps it across restarts. ``properties`` are extra Kafka-style broker
    properties; they override the ones derived from the other fields.
    """

    broker_id: int
    directory: Path
    zookeeper_connect: str
    port: int = 0
    rack: str | None = None
    # metrics.port: None leaves the broker's default (off); 0 picks a free port once.
    metrics_port: int | None = None
    properties: Mapping[str, str] = field(default_factory=dict)
    env: Mapping[str, str] | None = None
    host: str = HOST
    # Put before the python command line, e.g. ``ip netns exec NAME`` (network namespaces).
    command_prefix: Sequence[str] = ()
    # Fork the broker from this pre-imported zygote instead of spawning a new interpreter
    # (milliseconds instead of seconds; devtools/launcher.py). Its own command prefix
    # then applies, not ``command_prefix``.
    launcher: BrokerLauncher | None = field(default=None, repr=False)
    process: subprocess.Popen[bytes] | ForkedProcess | None = field(
        default=None, init=False, repr=False
    )
    _started_at: float = field(default=0.0, init=False, repr=False)

    def __post_init__(self) -> None:
        self.directory = Path(self.directory)
        if self.port == 0:
            self.port = free_port()
        if self.metrics_port == 0:
            self.metrics_port = free_port()

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def config_path(self) -> Path:
        return self.directory / "server.properties"

    @property
    def log_path(self) -> Path:
        return self.directory / "broker.log"

    @property
    def log_dir(self) -> Path:
        return self.directory / "logs"

    @property
    def started_at(self) -> float:
        """``time.time()`` of the last start: a registration znode older than it is stale."""
        return self._started_at

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def server_properties(self) -> dict[str, str]:
        listener = f"PLAINTEXT://{self.host}:{self.port}"
        properties = {
            "broker.id": str(self.broker_id),
            "listeners": listener,
            "advertised.listeners": listener,
            "log.dirs": str(self.log_dir),
            "zookeeper.connect": self.zookeeper_connect,
        }
        if self.rack is not None:
            properties["broker.rack"] = self.rack
        if self.metrics_port is not None:
            properties["metrics.port"] = str(self.metrics_port)
        properties.update({key: str(value) for key, value in self.properties.items()})
        return properties

    def write_config(self) -> Path:
        self.directory.mkdir(parents=True, exist_ok=True)
        lines = ["# Written by gregor_broker.devtools.local_cluster; rewritten on every start."]
        lines += [f"{key}={value}" for key, value in self.server_properties().items()]
        self.config_path.write_text("\n".join(lines) + "\n")
        return self.config_path

    def is_running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self) -> None:
        """Spawn the broker; returns at once (see ``wait_registered``)."""
        if self.is_running():
            raise RuntimeError(f"broker {self.broker_id} is already running (pid {self.pid})")
        config = self.write_config()
        env = dict(os.environ if self.env is None else self.env)
        env.setdefault("PYTHONUNBUFFERED", "1")
        # Milliseconds, like ZooKeeper's ctime, to tell this run's znode from a stale one.
        self._started_at = time.time()
        with open(self.log_path, "ab") as log:
            log.write(f"--- starting broker {self.broker_id} at {time.ctime()} ---\n".encode())
            log.flush()
            if self.launcher is not None:
                self.process = self.launcher.launch(
                    ["--config", str(config)], self.log_path, self.directory, env
                )
                return
            self.process = subprocess.Popen(
                [*self.command_prefix, sys.executable, "-m", BROKER_MODULE, "--config", config],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                cwd=self.directory,
                # Own session: Ctrl-C in the terminal reaches only the supervisor, which
                # stops brokers in order; detached brokers outlive it.
                start_new_session=True,
            )

    def failure(self, problem: str) -> BrokerStartError:
        return BrokerStartError(
            f"broker {self.broker_id} ({self.bootstrap}) {problem}; "
            f"last lines of {self.log_path}:\n{log_tail(self.log_path)}"
        )

    def wait_registered(self, timeout: float = 30.0, client=None) -> dict[str, Any]:
        """Wait until ``/brokers/ids/<id>`` exists for this run of the broker; returns its JSON.

        A znode older than this start (left by a killed broker whose session has not expired
        yet) does not count. Raises ``BrokerStartError`` with the log's tail if the broker
        exits or does not register within ``timeout`` seconds.
        """
        if self.process is None:
            raise RuntimeError(f"broker {self.broker_id} was never started")
        deadline = time.monotonic() + timeout
        own_client = client is None
        try:
            if own_client:
                try:
                    client = zookeeper_client(self.zookeeper_connect, timeout=min(timeout, 10))
                except Exception as error:
                    raise self.failure(
                        f"cannot be checked: ZooKeeper {self.zookeeper_connect} unreachable "
                        f"({error})"
                    ) from error
            from kazoo.exceptions import ConnectionLoss, SessionExpiredError

            path = f"/brokers/ids/{self.broker_id}"
            started_ms = int(self._started_at * 1000)
            while True:
                if self.process.poll() is not None:
                    raise self.failure(f"exited with code {self.process.returncode}")
                try:
                    stat = client.exists(path)
                    if stat is not None and stat.ctime >= started_ms:
                        data, _ = client.get(path)
                        return json.loads(data.decode() or "{}")
                except (ConnectionLoss, SessionExpiredError):
                    pass  # a loaded ZooKeeper dropped us; kazoo reconnects, ask again
                if time.monotonic() > deadline:
                    raise self.failure(f"did not register {path} within {timeout:.0f} s")
                time.sleep(0.05)
        finally:
            if own_client and client is not None:
                client.stop()
                client.close()

    def signal(self, signum: int) -> None:
        if self.is_running():
            assert self.process is not None
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(signum)

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM (the broker flushes its logs and exits), then SIGKILL after ``timeout``.

        Returns the exit code, or None if the broker was not started.
        """
        if self.process is None:
            return None
        if self.process.poll() is None:
            # A paused broker cannot handle SIGTERM until it runs again.
            self.signal(signal.SIGCONT)
            self.signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode

    def kill(self) -> None:
        """SIGKILL, for fault tests: no flush, the znode lingers until the session expires."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def pause(self) -> None:
        """SIGSTOP: the process keeps its sockets but answers nothing (a hung broker)."""
        self.signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.signal(signal.SIGCONT)

    def restart(self, timeout: float = 30.0, wait: bool = True) -> None:
        """Stop (SIGTERM) and start again on the same port and log dirs."""
        self.stop(timeout)
        self.start()
        if wait:
            self.wait_registered(timeout)


def parse_racks(racks: str | Iterable[str] | None) -> list[str]:
    if racks is None:
        return []
    if isinstance(racks, str):
        racks = racks.split(",")
    return [rack.strip() for rack in racks if rack.strip()]


class LocalCluster:
    """ZooKeeper plus N brokers on 127.0.0.1, all under ``data_dir``.

    Layout: ``data_dir/zookeeper/`` and ``data_dir/broker-<id>/``. Brokers get ids
    ``first_broker_id..`` and ports ``base_port + i`` (``base_port=0``: free ports). Broker
    ``i`` gets rack ``racks[i % len(racks)]``. With ``zookeeper_connect`` (an existing
    ensemble, chroot allowed) no ZooKeeper is started. ``metrics_base_port`` turns on each
    broker's /metrics and probes (``metrics.port``) on ``metrics_base_port + i`` (0: free
    ports; None: off). With ``launcher`` the brokers are forked from that zygote
    (``devtools/launcher.py``) instead of spawned: the same processes, without paying for
    the broker's imports at every start.
    """

    def __init__(
        self,
        data_dir: Path,
        brokers: int = 1,
        *,
        racks: str | Iterable[str] | None = None,
        base_port: int = 0,
        zookeeper_port: int = 0,
        zookeeper_connect: str | None = None,
        properties: Mapping[str, str] | None = None,
        first_broker_id: int = 1,
        metrics_base_port: int | None = None,
        launcher: BrokerLauncher | None = None,
    ) -> None:
        if brokers < 1:
            raise ValueError(f"a cluster needs at least one broker, not {brokers}")
        self.data_dir = Path(data_dir)
        self.racks = parse_racks(racks)
        self.zookeeper: ZooKeeperServer | None = None
        if zookeeper_connect is None:
            self.zookeeper = ZooKeeperServer(self.data_dir / "zookeeper", port=zookeeper_port)
        self._zookeeper_connect = zookeeper_connect
        self.brokers = [
            BrokerProcess(
                broker_id=first_broker_id + index,
                directory=self.data_dir / f"broker-{first_broker_id + index}",
                zookeeper_connect="",  # set in start(), once ZooKeeper has its port
                port=base_port + index if base_port else 0,
                rack=self.racks[index % len(self.racks)] if self.racks else None,
                metrics_port=(
                    metrics_base_port + index if metrics_base_port else metrics_base_port
                ),
                properties=dict(properties or {}),
                launcher=launcher,
            )
            for index in range(brokers)
        ]

    @property
    def zookeeper_connect(self) -> str:
        if self._zookeeper_connect is not None:
            return self._zookeeper_connect
        assert self.zookeeper is not None
        return self.zookeeper.connect_string

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(broker.bootstrap for broker in self.brokers)

    def broker(self, broker_id: int) -> BrokerProcess:
        for broker in self.brokers:
            if broker.broker_id == broker_id:
                return broker
        raise KeyError(f"no broker {broker_id} in this cluster")

    def start(self, timeout: float = 60.0) -> None:
        """Start ZooKeeper (if ours) and every broker; return once all are registered.

        On failure everything started so far is stopped again and the error re-raised.
        """
        try:
            if self.zookeeper is not None:
                self.zookeeper.start()
            for broker in self.brokers:
                broker.zookeeper_connect = self.zookeeper_connect
                broker.start()
            client = zookeeper_client(self.zookeeper_connect)
            try:
                for broker in self.brokers:
                    broker.wait_registered(timeout, client=client)
            finally:
                client.stop()
                client.close()
        except BaseException:
            self.stop()
            raise

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM every broker at once, wait, then stop ZooKeeper."""
        for broker in self.brokers:
            broker.signal(signal.SIGCONT)
            broker.signal(signal.SIGTERM)
        for broker in self.brokers:
            broker.stop(timeout)
        if self.zookeeper is not None:
            self.zookeeper.stop()

    def state(self) -> dict[str, Any]:
        """What ``gregor local status``/``down`` need from another process (cluster.json)."""
        zookeeper: dict[str, Any] = {"connect": self.zookeeper_connect, "pid": None}
        if self.zookeeper is not None:
            zookeeper["pid"] = self.zookeeper.process.pid if self.zookeeper.process else None
            zookeeper["port"] = self.zookeeper.port
            zookeeper["config"] = str(self.zookeeper.data_dir / "zoo.cfg")
            zookeeper["log"] = str(self.zookeeper.data_dir / "zookeeper.log")
        return {
            "version": 1,
            "data_dir": str(self.data_dir),
            "zookeeper": zookeeper,
            "bootstrap_servers": self.bootstrap_servers,
            "brokers": [
                {
                    "id": broker.broker_id,
                    "host": broker.host,
                    "port": broker.port,
                    "rack": broker.rack,
                    "metrics_port": broker.metrics_port,
                    "pid": broker.pid,
                    "directory": str(broker.directory),
                    "config": str(broker.config_path),
                    "log": str(broker.log_path),
                }
                for broker in self.brokers
            ],
        }
