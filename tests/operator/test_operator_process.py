"""The emulator and the operator as separate processes (how e2e's local mode runs them):
``python -m tests.kube.emulator`` and ``gregor-operator run --kube-server``; a Topic made
through the API becomes a topic in ZooKeeper, and /healthz and /metrics answer."""

from __future__ import annotations

import subprocess
import sys
import urllib.request

from gregor_broker.cluster.admin import ZkAdmin
from gregor_broker.devtools.local_cluster import zookeeper_client
from gregor_broker.devtools.zookeeper_server import free_port
from tests.kube.client import KubeClient

REPO = __file__.rsplit("/tests/", 1)[0]


def test_operator_process_against_emulator_process(broker, zk_connect, tmp_path):
    port, http_port = free_port(), free_port()
    emulator = subprocess.Popen(
        [sys.executable, "-m", "tests.kube.emulator", "--port", str(port)],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    operator = None
    zk = zookeeper_client(zk_connect)
    try:
        assert b"serving" in emulator.stdout.readline()
        url = f"http://127.0.0.1:{port}"
        log = open(tmp_path / "operator.log", "wb")  # noqa: SIM115 - closed by the process end
        operator = subprocess.Popen(
            [sys.executable, "-m", "gregor_operator.cli", "run", "--kube-server", url,
             "--zookeeper-connect", zk_connect, "--http-port", str(http_port),
             "--status-interval", "1"],
            stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        client = KubeClient(url)
        client.create(
            {"apiVersion": "gregor.dev/v1alpha1", "kind": "Topic",
             "metadata": {"name": "from-process", "namespace": "default"},
             "spec": {"partitions": 2, "replicas": 1}},
            "topics",
        )  # fmt: skip
        admin = ZkAdmin(zk)
        topic = client.wait_for("the topic", lambda: admin.get_topic("from-process"), 60)
        assert sorted(topic.partitions) == [0, 1]

        def http(path: str) -> str:
            with urllib.request.urlopen(f"http://127.0.0.1:{http_port}{path}", timeout=5) as r:
                return r.read().decode()

        assert client.wait_for("/healthz", lambda: http("/healthz"), 30) == "ok\n"
        metrics = http("/metrics")
        assert 'gregor_operator_plans_total{kind="Topic",outcome="applied"}' in metrics
    finally:
        zk.stop()
        zk.close()
        for process in (operator, emulator):
            if process is not None:
                process.terminate()
                try:
                    process.wait(20)
                except subprocess.TimeoutExpired:
                    process.kill()
    assert operator.returncode is not None
