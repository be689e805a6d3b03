"""The cluster under test: one ZooKeeper and three broker processes, and the raw faults.

With network namespaces (root, iproute2) every broker and ZooKeeper run in their own
namespace of one ``netns.Network``, so a host can be cut off; without them everything
runs on 127.0.0.1 and ``network`` is None (the nemesis then skips partition faults and
says why). This module owns processes and files; it does not decide which fault comes
next (``nemesis``) nor what counts as a violation (``checker``).
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kazoo.exceptions import NoNodeError

from gregor_broker.cluster import zk_paths
from gregor_broker.cluster.admin import ZkAdmin
from gregor_broker.cluster.models import PartitionState
from gregor_broker.devtools.launcher import BrokerLauncher
from gregor_broker.devtools.local_cluster import (
    BrokerProcess,
    log_tail,
    zookeeper_client,
)
from gregor_broker.devtools.zookeeper_server import ZooKeeperServer

from ..integration import netns

CHROOT = "/gregor"
NETNS_BROKER_PORT = 9092  # each broker has its own address, so they share the port
# Short, so the faults that must outlast a session (a zombie leader, ZooKeeper away) and the
# restart of a killed broker (its old registration lives until its session expires) are
# short too: forty faults of every kind fit in ten minutes (docs/testing.md).
SESSION_TIMEOUT_MS = 2500
BROKER_PROPERTIES = {
    "replica.lag.time.max.ms": "5000",
    "min.insync.replicas": "2",
    "default.replication.factor": "3",
    "unclean.leader.election.enable": "false",
    "auto.create.topics.enable": "false",
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.replication.factor": "3",
    # Several segments per partition, so a torn tail hits an active segment with history.
    "log.segment.bytes": str(512 * 1024),
}


@dataclass
class ChaosCluster:
    """ZooKeeper plus brokers 1..N under ``directory``; ``network`` when namespaced."""

    directory: Path
    brokers: dict[int, BrokerProcess] = field(default_factory=dict)
    zookeeper: ZooKeeperServer | None = None
    network: netns.Network | None = None
    network_unavailable: str | None = None
    _zk: Any = None
    startup_exits: list[str] = field(default_factory=list)
    # One broker zygote per broker host (devtools/launcher.py): a restart forks a fresh
    # broker process in well under a second instead of importing it again for seconds.
    launchers: list[BrokerLauncher] = field(default_factory=list)
    session_timeout_ms: int = SESSION_TIMEOUT_MS  # the brokers' ZooKeeper session
    _admin_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def session_s(self) -> float:
        return self.session_timeout_ms / 1000

    # life cycle ------------------------------------------------------------------------
    @classmethod
    def start(
        cls,
        directory: Path,
        *,
        brokers: int = 3,
        use_netns: bool = True,
        use_zygote: bool = True,
        session_timeout_ms: int = SESSION_TIMEOUT_MS,
    ) -> ChaosCluster:
        cluster = cls(Path(directory), session_timeout_ms=session_timeout_ms)
        reason = netns.unavailable_reason() if use_netns else "disabled (--no-netns)"
        cluster.network_unavailable = reason
        try:
            if reason is None:
                cluster.network = netns.Network()
            cluster._start_processes(brokers, use_zygote)
        except BaseException:
            cluster.stop()
            raise
        return cluster

    def _start_processes(self, count: int, use_zygote: bool) -> None:
        racks = "abc"
        if self.network is not None:
            zk_host = self.network.add_host("zookeeper")
            self.zookeeper = ZooKeeperServer(
                self.directory / "zookeeper",
                host=zk_host.address,
                command_prefix=self.network.command_prefix(zk_host),
            )
        else:
            self.zookeeper = ZooKeeperServer(self.directory / "zookeeper")
        self.zookeeper.start()
        if self.zookeeper.writes_class_data_archive:
            # A clean stop writes the archive that halves every later restart's JVM start
            # (the faults kill ZooKeeper with -9, which writes nothing).
            self.zookeeper.stop()
            self.zookeeper.start()
        for broker_id in range(1, count + 1):
            extra: dict[str, Any] = {}
            if self.network is not None:
                host = self.network.add_host(self.host_of(broker_id))
                extra = {
                    "host": host.address,
                    "port": NETNS_BROKER_PORT,
                    "command_prefix": self.network.command_prefix(host),
                }
            if use_zygote:
                # Started under the host's prefix: its forks live in the broker's namespace.
                launcher = BrokerLauncher(extra.get("command_prefix", ()))
                self.launchers.append(launcher)
                extra["launcher"] = launcher
            self.brokers[broker_id] = BrokerProcess(
                broker_id=broker_id,
                directory=self.directory / f"broker-{broker_id}",
                zookeeper_connect=self.zookeeper_connect,
                rack=racks[(broker_id - 1) % len(racks)],
                properties={
                    **BROKER_PROPERTIES,
                    "zookeeper.session.timeout.ms": str(self.session_timeout_ms),
                },
                **extra,
            )
        for broker in self.brokers.values():
            broker.start()
        for broker in self.brokers.values():
            broker.wait_registered(60)

    def stop(self) -> None:
        """Heal, SIGTERM every broker at once (SIGKILL after 30 s), stop ZooKeeper."""
        if self.network is not None:
            for name in list(self.network.hosts):
                with contextlib.suppress(Exception):
                    self.network.heal(name)
        if self.zookeeper is not None and self.zookeeper.process is not None:
            with contextlib.suppress(ProcessLookupError):
                self.zookeeper.process.send_signal(signal.SIGCONT)
        for broker in self.brokers.values():
            broker.signal(signal.SIGCONT)
            broker.signal(signal.SIGTERM)
        for broker in self.brokers.values():
            broker.stop()
        for launcher in self.launchers:
            launcher.close()
        self.close_admin()
        if self.zookeeper is not None:
            self.zookeeper.stop()
        if self.network is not None:
            self.network.close()

    # addresses -------------------------------------------------------------------------
    @staticmethod
    def host_of(broker_id: int) -> str:
        return f"broker{broker_id}"

    @property
    def zookeeper_connect(self) -> str:
        assert self.zookeeper is not None
        return f"{self.zookeeper.connect_string}{CHROOT}"

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(broker.bootstrap for broker in self.brokers.values())

    # ZooKeeper reads (the nemesis's view of leaders and the controller) ---------------
    def admin(self) -> ZkAdmin:
        with self._admin_lock:  # nemesis workers share one client
            if self._zk is None:
                self._zk = zookeeper_client(self.zookeeper_connect, timeout=15)
            return ZkAdmin(self._zk)

    def close_admin(self) -> None:
        if self._zk is not None:
            with contextlib.suppress(Exception):
                self._zk.stop()
                self._zk.close()
            self._zk = None

    def controller(self) -> int | None:
        registration = self.admin().get_controller()
        return registration.broker_id if registration is not None else None

    def partition_state(self, topic: str, partition: int):  # -> PartitionState | None
        current = self.admin().get_partition_state(topic, partition)
        return current[0] if current is not None else None

    def registered(self) -> set[int]:
        return set(self.admin().list_brokers())

    def in_sync_in_current_runs(self, topic: str, partition: int):
        """(state, members): the partition's state (None if it has none) and the members
        of its ISR registered before that state was written, so in sync in the run they
        are in now. A member registered since restarted after the state was written, and
        no controller has handled that yet."""
        client = self.admin().client
        try:
            data, stat = client.get(zk_paths.partition_state_path(topic, partition))
        except NoNodeError:
            return None, set()
        state = PartitionState.from_json(data)
        members = set()
        for broker_id in state.isr:
            registration = client.exists(zk_paths.broker_path(broker_id))
            if registration is not None and registration.czxid < stat.mzxid:
                members.add(broker_id)
        return state, members

    # broker faults ---------------------------------------------------------------------
    def kill(self, broker_id: int) -> None:
        self.brokers[broker_id].kill()

    def restart(self, broker_id: int, timeout: float = 90) -> None:
        broker = self.brokers[broker_id]
        if broker.is_running():
            broker.kill()
        broker.start()
        self.wait_registered(broker_id, timeout)

    def wait_registered(self, broker_ids: int | list[int], timeout: float = 90) -> None:
        """Until this run of each broker has registered (its ``/brokers/ids`` znode is
        newer than its start); ZooKeeper being down meanwhile (another fault) only delays it.

        A broker that exits while starting (ZooKeeper dropped it mid-start-up) is started
        again at once, as a supervisor would, and counted in ``startup_exits`` with its
        last log line. Several brokers are watched together, so one slow start does not
        leave another exited broker down."""
        waiting = [broker_ids] if isinstance(broker_ids, int) else list(broker_ids)
        deadline = time.monotonic() + timeout
        while waiting and time.monotonic() < deadline:
            for broker_id in list(waiting):
                broker = self.brokers[broker_id]
                if not broker.is_running():
                    self.startup_exits.append(f"broker {broker_id}: {log_tail(broker.log_path, 1)}")
                    broker.start()
                started_ms = int(broker.started_at * 1000)
                try:
                    # Bounded: while ZooKeeper is away a plain exists() blocks until it is
                    # back, and a broker that exited meanwhile (it gives up reaching
                    # ZooKeeper after zookeeper.connection.timeout.ms) was not restarted
                    # until then: 20 s and more of a broker down for nothing.
                    stat = (
                        self.admin()
                        .client.exists_async(f"/brokers/ids/{broker_id}")
                        .get(timeout=1.0)
                    )
                except Exception:  # ZooKeeper unreachable for now
                    continue
                if stat is not None and stat.ctime >= started_ms:
                    waiting.remove(broker_id)
            if waiting:
                time.sleep(0.1)
        if waiting:
            raise self.brokers[waiting[0]].failure(
                f"did not register /brokers/ids/{waiting[0]} within {timeout:.0f} s"
            )

    def pause(self, broker_id: int) -> None:
        self.brokers[broker_id].pause()

    def resume(self, broker_id: int) -> None:
        self.brokers[broker_id].resume()

    def tear_tail(
        self,
        broker_id: int,
        rng: random.Random,
        topic: str,
        partition: int | None = None,
        max_cut: int = 300,
    ) -> str:
        """Cut the last 1 to ``max_cut`` bytes of a (stopped) broker's active segment of
        ``partition`` of ``topic`` (a random one when None); what a crash mid-write
        leaves. Returns what was done."""
        broker = self.brokers[broker_id]
        assert not broker.is_running(), "tear a tail only while the broker is down"
        if partition is None:
            directories = sorted(
                d for d in broker.log_dir.glob(f"{topic}-*") if d.name.rsplit("-", 1)[1].isdigit()
            )
            candidates = [d for d in directories if any(d.glob("*.log"))]
            if not candidates:
                return "no segment to tear"
            directory = rng.choice(candidates)
        else:
            directory = broker.log_dir / f"{topic}-{partition}"
        segments = list(directory.glob("*.log"))
        if not segments:
            return f"no segment to tear in {directory.name}"
        active = max(segments)
        size = active.stat().st_size
        if size == 0:
            return f"{active.name} of {directory.name} is empty"
        cut = rng.randint(1, min(size, max_cut))
        os.truncate(active, size - cut)
        return f"cut {cut} of {size} bytes from {directory.name}/{active.name}"

    # ZooKeeper faults ------------------------------------------------------------------
    def kill_zookeeper(self) -> None:
        assert self.zookeeper is not None
        self.zookeeper.kill()

    def start_zookeeper(self) -> None:
        assert self.zookeeper is not None
        if self.zookeeper.process is None:
            self.zookeeper.start()

    def signal_zookeeper(self, signum: int) -> None:
        assert self.zookeeper is not None
        if self.zookeeper.process is not None:
            with contextlib.suppress(ProcessLookupError):
                self.zookeeper.process.send_signal(signum)

    # network faults --------------------------------------------------------------------
    def cut_off(self, broker_id: int, *, inbound_only: bool) -> None:
        assert self.network is not None
        if inbound_only:
            self.network.isolate_inbound(self.host_of(broker_id))
        else:
            self.network.partition(self.host_of(broker_id))

    def heal(self, broker_id: int) -> None:
        assert self.network is not None
        self.network.heal(self.host_of(broker_id))

    # diagnostics -----------------------------------------------------------------------
    def logs(self, lines: int = 40) -> str:
        return "\n".join(
            f"--- broker {broker_id} ---\n{log_tail(broker.log_path, lines)}"
            for broker_id, broker in self.brokers.items()
        )

    def wait(self, predicate, timeout: float, interval: float = 0.2) -> bool:
        """Poll ``predicate`` (ZooKeeper reads may fail while it is down) until it holds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if predicate():
                    return True
            except Exception:
                pass
            time.sleep(interval)
        return False
