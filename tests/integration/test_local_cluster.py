"""``gregor local up --detach`` / ``status`` / ``down`` as a user runs them: the real CLI,
the real broker and ZooKeeper, in a temporary data dir on free, non-default ports."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gregor_broker.devtools.local_cluster import pid_running
from gregor_broker.devtools.zookeeper_server import free_port


def gregor(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gregor_broker.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def port_is_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def consecutive_free_ports(count: int) -> int:
    """A base port such that base .. base+count-1 are all free right now."""
    for _ in range(100):
        base = free_port()
        if base + count <= 65535 and all(port_is_free(base + i) for i in range(count)):
            return base
    raise RuntimeError(f"found no {count} consecutive free ports")


@pytest.fixture
def local_dir(tmp_path: Path):
    data_dir = tmp_path / "local"
    yield data_dir
    # Never leave processes behind, even when an assertion failed half-way.
    if (data_dir / "cluster.json").exists():
        gregor("local", "down", "--data-dir", str(data_dir), "--timeout", "10")


def test_local_up_status_down_runs_a_cluster_from_separate_commands(local_dir: Path) -> None:
    base_port = consecutive_free_ports(2)
    zookeeper_port = free_port()
    data_dir = str(local_dir)

    up = gregor(
        "local",
        "up",
        "--brokers",
        "2",
        "--racks",
        "east,west",
        "--port",
        str(base_port),
        "--zookeeper-port",
        str(zookeeper_port),
        "--data-dir",
        data_dir,
        "--metrics-port",
        "-1",
        "--config",
        "num.partitions=2",
        "--detach",
    )
    assert up.returncode == 0, up.stdout + up.stderr
    assert "metrics:" not in up.stdout
    bootstrap = f"127.0.0.1:{base_port},127.0.0.1:{base_port + 1}"
    assert f"bootstrap servers: {bootstrap}" in up.stdout
    assert f"kcat -b 127.0.0.1:{base_port} -L" in up.stdout

    state = json.loads((local_dir / "cluster.json").read_text())
    pids = [state["zookeeper"]["pid"], *(broker["pid"] for broker in state["brokers"])]
    assert all(pid_running(pid) for pid in pids)
    properties = (local_dir / "broker-2" / "server.properties").read_text()
    assert "broker.rack=west" in properties
    assert "num.partitions=2" in properties

    status = gregor("local", "status", "--data-dir", data_dir)
    assert status.returncode == 0, status.stdout + status.stderr
    assert re.search(
        rf"ZooKeeper\s+127\.0\.0\.1:{zookeeper_port}\s+pid \d+\s+serving", status.stdout
    )
    for broker_id, rack in ((1, "east"), (2, "west")):
        port = base_port + broker_id - 1
        assert re.search(
            rf"broker {broker_id}\s+127\.0\.0\.1:{port}\s+rack {rack}\s+pid \d+\s+"
            r"running, registered",
            status.stdout,
        ), status.stdout
    assert f"Bootstrap servers: {bootstrap}" in status.stdout

    # A second 'up --detach' finds the running cluster and leaves it alone.
    again = gregor("local", "up", "--data-dir", data_dir, "--detach")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "already running" in again.stdout

    down = gregor("local", "down", "--data-dir", data_dir)
    assert down.returncode == 0, down.stdout + down.stderr
    assert "broker 1" in down.stdout and "ZooKeeper" in down.stdout
    assert not any(pid_running(pid) for pid in pids)
    assert not (local_dir / "cluster.json").exists()
    # The brokers flushed and kept their logs.
    assert (local_dir / "broker-1" / "logs").is_dir()

    after = gregor("local", "status", "--data-dir", data_dir)
    assert after.returncode == 1
    assert "No local cluster" in after.stdout


def test_local_up_reports_a_busy_port_and_starts_nothing(local_dir: Path) -> None:
    # A port below the ephemeral range (free_port): the brokers take the ports after it
    # too, and one the kernel picked could have an outgoing connection's port next to it
    # (CI: "port 57537, 57538 already in use").
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", free_port()))
        busy.listen()
        port = busy.getsockname()[1]
        up = gregor(
            "local",
            "up",
            "--port",
            str(port),
            "--zookeeper-port",
            "0",
            "--metrics-port",
            "0",
            "--data-dir",
            str(local_dir),
            "--detach",
        )
    assert up.returncode == 1
    busy_ports = re.search(r"ports? ([\d, ]+) already in use", up.stderr)
    assert busy_ports is not None and str(port) in busy_ports[1].split(", "), up.stderr
    assert not (local_dir / "cluster.json").exists()


def test_local_down_without_a_cluster_is_a_no_op(local_dir: Path) -> None:
    down = gregor("local", "down", "--data-dir", str(local_dir))
    assert down.returncode == 0
    assert "No local cluster running" in down.stdout


def test_local_up_defaults_to_three_brokers_on_racks_a_b_c_with_metrics(local_dir: Path) -> None:
    """The shape users deploy: no --brokers/--racks gives three brokers, one per rack,
    each serving /metrics (and its probes), and the output lists every endpoint."""
    import urllib.request

    base_port = consecutive_free_ports(3)
    metrics_port = consecutive_free_ports(3)
    started = time.monotonic()
    up = gregor(
        "local",
        "up",
        "--port",
        str(base_port),
        "--metrics-port",
        str(metrics_port),
        "--zookeeper-port",
        "0",
        "--data-dir",
        str(local_dir),
        "--detach",
    )
    up_seconds = time.monotonic() - started
    assert up.returncode == 0, up.stdout + up.stderr
    assert "3 brokers" in up.stdout
    # Issue 12: `make run` (this command) is up in under 30 s once installed: ZooKeeper
    # and three brokers registered and answering, with the whole test suite beside it.
    assert up_seconds < 30, f"gregor local up took {up_seconds:.1f} s"
    # A broker never imports hypothesis (installed with the test extras): building its
    # Unicode tables in each new broker directory was half of every broker's start.
    assert not list(local_dir.glob("*/.hypothesis")), "a broker imported hypothesis"
    expected = [f"http://127.0.0.1:{metrics_port + i}/metrics" for i in range(3)]
    assert f"metrics:           {' '.join(expected)}" in up.stdout
    state = json.loads((local_dir / "cluster.json").read_text())
    assert [(b["id"], b["rack"]) for b in state["brokers"]] == [(1, "a"), (2, "b"), (3, "c")]
    for broker_id, url in enumerate(expected, start=1):
        with urllib.request.urlopen(url, timeout=5) as response:
            assert b"gregor_messages_in_total" in response.read()
        ready = url.replace("/metrics", "/readyz")
        with urllib.request.urlopen(ready, timeout=5) as response:
            assert response.status == 200
        properties = (local_dir / f"broker-{broker_id}" / "server.properties").read_text()
        assert f"metrics.port={metrics_port + broker_id - 1}" in properties
    # gregor topics describe finds the brokers' /metrics in cluster.json: a compacted
    # topic shows its leader's dirty ratio (nothing written, nothing dirty), a deleting one
    # shows none.
    bootstrap = state["bootstrap_servers"]
    for name, policy in (("changelog", "compact"), ("events", "delete")):
        created = gregor(
            "topics", "create", "-b", bootstrap, "--topic", name, "--partitions", "1",
            "--replication-factor", "3", "--config", f"cleanup.policy={policy}",
        )  # fmt: skip
        assert created.returncode == 0, created.stdout + created.stderr

    def described(topic: str) -> str:
        shown = gregor("topics", "describe", "--data-dir", str(local_dir), "--topic", topic)
        assert shown.returncode == 0, shown.stdout + shown.stderr
        return shown.stdout

    deadline = time.monotonic() + 60
    while "DirtyRatio: 0.00" not in (text := described("changelog")):
        assert time.monotonic() < deadline, text  # the leader opens the log first
        time.sleep(1)
    assert "DirtyRatio" not in described("events")
