"""The broker zygote (``gregor_broker.cli.broker_zygote`` / ``devtools.launcher``): brokers
forked from it are genuine broker processes (own pid and session, serve clients, die of
kill -9 with status -9, exit 0 on SIGTERM) and restart without a new interpreter."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import confluent_kafka.admin

from gregor_broker.devtools.launcher import BrokerLauncher
from gregor_broker.devtools.local_cluster import BrokerProcess, pid_running

REGISTRATION_TIMEOUT = 90.0


def _status_field(pid: int, name: str) -> str:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{name}:"):
            return line.split(":", 1)[1].strip()
    raise AssertionError(f"no {name} in /proc/{pid}/status")


def test_brokers_forked_from_the_zygote_are_real_processes(zk_connect: str, tmp_path: Path) -> None:
    launcher = BrokerLauncher()
    broker = BrokerProcess(
        broker_id=1,
        directory=tmp_path / "broker-1",
        zookeeper_connect=zk_connect,
        launcher=launcher,
    )
    try:
        pids = []
        for _ in range(2):
            broker.start()
            broker.wait_registered(REGISTRATION_TIMEOUT)
            pid = broker.pid
            assert pid is not None and pid != launcher.process.pid and pid not in pids
            pids.append(pid)
            # Forked by the zygote, in a session of its own (a terminal's Ctrl-C and the
            # zygote's end leave it alone), as a spawned broker would be.
            assert int(_status_field(pid, "PPid")) == launcher.process.pid
            assert os.getsid(pid) == pid
            # Forked, not spawned: no new interpreter, so no imports to pay for again.
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            assert b"gregor_broker.cli.broker_zygote" in cmdline
            admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": broker.bootstrap})
            metadata = admin.list_topics(timeout=30)
            assert list(metadata.brokers) == [1]
            broker.kill()
            assert broker.process is not None
            assert broker.process.returncode == -signal.SIGKILL
            assert not pid_running(pid)
        # A clean stop: SIGTERM through the pidfd, the broker's own exit status.
        broker.start()
        broker.wait_registered(REGISTRATION_TIMEOUT)
        assert broker.stop() == 0
    finally:
        broker.stop(timeout=10)
        launcher.close()
    assert launcher.process.returncode == 0
