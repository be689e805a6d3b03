"""The e2e suite's kind mode: a real Kubernetes cluster from kind (e2e/kind-config.yaml:
a control plane and three workers labelled with zones a, b and c), the images built by
``make images`` with docker and loaded into it, ``helm install`` of the chart, and Kafka
clients as kcat pods inside the cluster (the brokers advertise in-cluster names).

Needs docker (an engine that answers) and kind; ``kind_unavailable()`` says what is
missing, and the suite skips with that reason. Same interface as ``LocalPlatform``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from deploy.images import ROOT
from tests.chart.render import CHART, ensure_helm

CLUSTER = "gregor-e2e"
KCAT_IMAGE = os.environ.get("E2E_KCAT_IMAGE", "edenhill/kcat:1.7.1")
PLURALS = {
    "GregorCluster": "gregorclusters",
    "Topic": "topics",
    "Quota": "quotas",
    "GregorRebalance": "gregorrebalances",
}


def kind_unavailable() -> str | None:
    if shutil.which("docker") is None:
        return "the docker command is not installed"
    if subprocess.run(["docker", "info"], capture_output=True, check=False).returncode != 0:
        return "no Docker engine answers (docker info fails)"
    if shutil.which("kind") is None:
        return "the kind command is not installed"
    return None


def _run(*command: str, input: str | None = None, check: bool = True) -> str:
    result = subprocess.run(
        command, capture_output=True, text=True, input=input, check=False, cwd=ROOT
    )
    if check and result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)}: {result.stderr.strip()[-2000:]}")
    return result.stdout


class KindPlatform:
    name = "kind"
    runtime = "kind"

    def __init__(self, directory: Path, namespace: str = "gregor", release: str = "gregor"):
        self.directory = directory
        self.namespace = namespace
        self.release = release
        self.kubeconfig = directory / "kubeconfig"
        self.helm = str(ensure_helm())
        self.version = ""

    def kubectl(self, *args: str, input: str | None = None, check: bool = True) -> str:
        return _run(
            "kubectl",
            "--kubeconfig",
            str(self.kubeconfig),
            "-n",
            self.namespace,
            *args,
            input=input,
            check=check,
        )

    def start(self) -> None:
        _run(
            "kind",
            "create",
            "cluster",
            "--name",
            CLUSTER,
            "--config",
            str(ROOT / "e2e" / "kind-config.yaml"),
            "--kubeconfig",
            str(self.kubeconfig),
            "--wait",
            "120s",
        )
        _run("bash", "scripts/build-images")
        import yaml

        self.version = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]
        _run(
            "docker",
            "tag",
            f"gregor/gregor-broker:{self.version}",
            "gregor/gregor-broker:e2e-upgrade",
        )
        for image in (
            f"gregor/gregor-broker:{self.version}",
            "gregor/gregor-broker:e2e-upgrade",
            f"gregor/gregor-operator:{self.version}",
        ):
            _run("kind", "load", "docker-image", image, "--name", CLUSTER)
        self.kubectl("create", "namespace", self.namespace, check=False)

    def stop(self) -> None:
        _run("kind", "delete", "cluster", "--name", CLUSTER, check=False)

    def values(self, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        values: dict[str, Any] = {
            "brokers": {
                "replicas": 3,
                "zones": ["a", "b", "c"],
                # kind's default StorageClass: local-path volumes on the node.
                "storage": {"storageClassName": "standard", "size": "1Gi"},
                "image": {"tag": self.version},
                "config": {"min.insync.replicas": 2, "default.replication.factor": 3},
            },
            "zookeeper": {"storage": {"storageClassName": "standard", "size": "1Gi"}},
        }
        for key, value in (extra or {}).items():
            merged = dict(values.get(key) or {})
            for inner, inner_value in value.items():
                if isinstance(inner_value, dict) and isinstance(merged.get(inner), dict):
                    merged[inner] = {**merged[inner], **inner_value}
                else:
                    merged[inner] = inner_value
            values[key] = merged
        return values

    def _helm(self, command: str, values: dict[str, Any]) -> list[dict[str, Any]]:
        args = [
            self.helm,
            "--kubeconfig",
            str(self.kubeconfig),
            command,
            self.release,
            str(CHART),
            "--namespace",
            self.namespace,
            "--wait",
            "--timeout",
            "10m",
        ]
        for key, value in values.items():
            args += ["--set-json", f"{key}={json.dumps(value)}"]
        _run(*args)
        return []

    def install(self, values: dict[str, Any]) -> list[dict[str, Any]]:
        return self._helm("install", values)

    def upgrade(self, values: dict[str, Any]) -> list[dict[str, Any]]:
        return self._helm("upgrade", values)

    def uninstall(self) -> None:
        _run(
            self.helm,
            "--kubeconfig",
            str(self.kubeconfig),
            "uninstall",
            self.release,
            "--namespace",
            self.namespace,
            "--wait",
        )

    def apply(self, obj: dict[str, Any]) -> None:
        self.kubectl("apply", "-f", "-", input=json.dumps(obj))

    def delete(self, obj: dict[str, Any]) -> None:
        self.kubectl(
            "delete", obj["kind"].lower(), obj["metadata"]["name"], "--wait=false", check=False
        )

    def get(self, api_version: str, kind: str, name: str) -> dict[str, Any] | None:
        resource = PLURALS.get(kind, kind.lower())
        out = self.kubectl("get", resource, name, "-o", "json", check=False)
        return json.loads(out) if out.strip() else None

    def list(self, api_version: str, kind: str) -> list[dict[str, Any]]:
        resource = PLURALS.get(kind, kind.lower())
        return json.loads(self.kubectl("get", resource, "-o", "json"))["items"]

    def scale(self, cluster: str, replicas: int) -> None:
        # kubectl scale writes the scale subresource, exactly as an HPA does.
        self.kubectl("scale", "gregorcluster", cluster, f"--replicas={replicas}")

    def pods(self) -> dict[str, Any]:
        items = json.loads(
            self.kubectl(
                "get",
                "pods",
                "-l",
                f"app.kubernetes.io/name=gregor,app.kubernetes.io/instance={self.release}",
                "-o",
                "json",
            )
        )["items"]
        return {
            p["metadata"]["name"]: SimpleNamespace(
                uid=p["metadata"]["uid"],
                restarts=sum(
                    c.get("restartCount", 0) for c in p["status"].get("containerStatuses") or []
                ),
            )
            for p in items
        }

    def kill_pod(self, name: str) -> None:
        self.kubectl("delete", "pod", name, "--grace-period=0", "--force")

    # --- clients: kcat pods inside the cluster --------------------------------------------

    @property
    def bootstrap(self) -> str:
        return f"{self.release}.{self.namespace}.svc:9092"

    def kcat(self, *args: str, timeout: float = 180) -> str:
        name = f"kcat-{uuid.uuid4().hex[:6]}"
        return self.kubectl(
            "run",
            name,
            "--rm",
            "-i",
            "--restart=Never",
            "--quiet",
            f"--image={KCAT_IMAGE}",
            f"--pod-running-timeout={int(timeout)}s",
            "--",
            "-b",
            self.bootstrap,
            *args,
        )

    def producer(self, topic: str) -> KcatProducer:
        return KcatProducer(self, topic)

    def consume_all(self, topic: str, expected: int, timeout: float = 120) -> set[str]:
        out = self.kcat("-C", "-t", topic, "-o", "beginning", "-e", "-q", timeout=timeout)
        return {line for line in out.splitlines() if line}

    def metadata(self) -> dict[str, Any]:
        return json.loads(self.kcat("-L", "-J"))

    def all_in_sync(self, topics: list[str], replicas: int) -> bool:
        metadata = self.metadata()
        found = {t["topic"]: t for t in metadata["topics"]}
        return all(
            name in found and all(len(p["isrs"]) >= replicas for p in found[name]["partitions"])
            for name in topics
        )

    def isr_watcher(self, topics: list[str], min_isr: int) -> KindIsrWatcher:
        return KindIsrWatcher(self, topics, min_isr)


class KcatProducer:
    """A kcat pod producing ``<prefix>-<n>`` with acks=all until told to stop; it prints
    how many it sent, and kcat reports every failed delivery on stderr."""

    def __init__(self, platform: KindPlatform, topic: str) -> None:
        self.platform = platform
        self.topic = topic
        self.prefix = uuid.uuid4().hex[:6]
        self.pod = f"producer-{self.prefix}"
        self.sent = 0
        self.acknowledged: set[str] = set()

    def _script(self, count: int | None) -> str:
        condition = f"[ $i -lt {count} ]" if count else "[ ! -f /tmp/stop ]"
        return (
            f"i=0; while {condition}; do echo {self.prefix}-$i; i=$((i+1)); done "
            f"| kcat -P -b {self.platform.bootstrap} -t {self.topic} -X acks=all "
            "-X enable.idempotence=true -X message.timeout.ms=180000; "
            f"echo SENT $(( i )) >&2"
        )

    def start(self, count: int | None = None) -> None:
        self.platform.kubectl(
            "run",
            self.pod,
            "--restart=Never",
            f"--image={KCAT_IMAGE}",
            "--command",
            "--",
            "sh",
            "-c",
            self._script(count),
        )

    def run_for(self, count: int) -> None:
        self.start(count)
        self._finish()

    def stop(self) -> None:
        self.platform.kubectl("exec", self.pod, "--", "touch", "/tmp/stop", check=False)
        self._finish()

    def _finish(self) -> None:
        self.platform.kubectl(
            "wait", f"pod/{self.pod}", "--for=jsonpath={.status.phase}=Succeeded", "--timeout=300s"
        )
        log = self.platform.kubectl("logs", self.pod)
        self.platform.kubectl("delete", "pod", self.pod, "--wait=false", check=False)
        sent = [int(line.split()[1]) for line in log.splitlines() if line.startswith("SENT ")]
        failed = [line for line in log.splitlines() if "Delivery failed" in line]
        if failed:
            raise AssertionError(f"kcat reported {len(failed)} failed deliveries: {failed[:3]}")
        self.sent = sent[-1] if sent else 0
        self.acknowledged = {f"{self.prefix}-{i}" for i in range(self.sent)}


class KindIsrWatcher(threading.Thread):
    """Samples every partition's ISR with ``kcat -L -J`` from a pod, once a second."""

    def __init__(self, platform: KindPlatform, topics: list[str], min_isr: int) -> None:
        super().__init__(daemon=True)
        self.platform, self.topics, self.min_isr = platform, topics, min_isr
        self.samples = 0
        self.below_min_isr: list[tuple[str, int, list[int]]] = []
        self.smallest_isr: int | None = None
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            try:
                metadata = self.platform.metadata()
            except Exception:
                time.sleep(1)
                continue
            for topic in metadata["topics"]:
                if topic["topic"] not in self.topics:
                    continue
                for partition in topic["partitions"]:
                    isr = [r["id"] for r in partition["isrs"]]
                    if self.smallest_isr is None or len(isr) < self.smallest_isr:
                        self.smallest_isr = len(isr)
                    if len(isr) < self.min_isr:
                        self.below_min_isr.append((topic["topic"], partition["partition"], isr))
            self.samples += 1
            time.sleep(1)

    def stop(self) -> None:
        self.stopping.set()
        self.join(60)
