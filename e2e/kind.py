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
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from deploy.images import ROOT
from tests.chart.render import BIN, CHART, ensure_helm, render

from .load import Isrs, IsrWatcher, all_in_sync
from .values import BROKER_VALUES, merge_values

CLUSTER = "gregor-e2e"
# Kafka clients run in their own namespace, so the release's namespace holds only what
# the chart and the operator made (the uninstall scenario checks it empties).
CLIENTS_NAMESPACE = "gregor-e2e-clients"
CLIENT_POD = "kcat"
KCAT_IMAGE = os.environ.get("E2E_KCAT_IMAGE", "edenhill/kcat:1.7.1")
PLURALS = {
    "GregorCluster": "gregorclusters",
    "Topic": "topics",
    "Quota": "quotas",
    "GregorRebalance": "gregorrebalances",
    "User": "users.gregor.dev",
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
        # scripts/install-helm puts kubectl next to helm (the venv's bin/).
        self.kubectl_path = str(BIN / "kubectl") if (BIN / "kubectl").exists() else "kubectl"
        self.version = ""

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True, namespace: str = ""
    ) -> str:
        return _run(
            self.kubectl_path,
            "--kubeconfig",
            str(self.kubeconfig),
            "-n",
            namespace or self.namespace,
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
        # One long-lived kcat pod for metadata and consuming (kubectl exec into it).
        self.kubectl("create", "namespace", CLIENTS_NAMESPACE, check=False)
        self.kubectl(
            "run", CLIENT_POD, "--restart=Never", f"--image={KCAT_IMAGE}", "--command",
            "--", "sleep", "1000000", namespace=CLIENTS_NAMESPACE,
        )  # fmt: skip
        self.kubectl(
            "wait", f"pod/{CLIENT_POD}", "--for=condition=Ready", "--timeout=300s",
            namespace=CLIENTS_NAMESPACE,
        )  # fmt: skip

    def stop(self) -> None:
        if os.environ.get("E2E_KEEP_CLUSTER") != "1":  # kept for debugging when asked
            _run("kind", "delete", "cluster", "--name", CLUSTER, check=False)

    def values(self, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        """The brokers every mode installs (e2e/values.py), the images loaded into kind,
        and kind's default StorageClass (local-path volumes on the node), plus ``extra``."""
        storage = {"storageClassName": "standard", "size": "1Gi"}
        return merge_values(
            {
                "brokers": merge_values(
                    BROKER_VALUES, {"storage": storage, "image": {"tag": self.version}}
                ),
                "operator": {"image": {"tag": self.version}},
                "zookeeper": {"storage": storage},
            },
            extra or {},
        )

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
        # What helm applied: the same objects `helm template` renders with these values.
        return render(values, release=self.release, namespace=self.namespace)

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
        resource = PLURALS.get(obj["kind"], obj["kind"].lower())
        self.kubectl("delete", resource, obj["metadata"]["name"], "--wait=false", check=False)

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

    def pods(self) -> dict[str, SimpleNamespace]:
        """The broker pods (those of the GregorCluster's StatefulSet; the operator's and
        ZooKeeper's pods carry the release's labels too): name -> uid, restarts, ready,
        image, as in local mode."""
        items = json.loads(self.kubectl("get", "pods", "-o", "json"))["items"]
        pods = {}
        for p in items:
            owners = p["metadata"].get("ownerReferences") or []
            if not any(o["kind"] == "StatefulSet" and o["name"] == self.release for o in owners):
                continue
            status = p.get("status") or {}
            conditions = {c["type"]: c["status"] for c in status.get("conditions") or []}
            pods[p["metadata"]["name"]] = SimpleNamespace(
                uid=p["metadata"]["uid"],
                restarts=sum(
                    c.get("restartCount", 0) for c in status.get("containerStatuses") or []
                ),
                ready=conditions.get("Ready") == "True"
                and not p["metadata"].get("deletionTimestamp"),
                image=p["spec"]["containers"][0]["image"],
            )
        return pods

    def release_objects(self) -> list[str]:
        """Every object left labelled as this release's, in its namespace and cluster-wide.
        Not the brokers' and ZooKeeper's PersistentVolumeClaims: they are retained on
        purpose (docs/kubernetes.md, Uninstall) and go with the namespace."""
        selector = f"app.kubernetes.io/instance={self.release}"
        namespaced = (
            "all,configmaps,secrets,serviceaccounts,roles,rolebindings,"
            "poddisruptionbudgets,gregorclusters"
        )
        out = self.kubectl("get", namespaced, "-l", selector, "-o", "name")
        out += self.kubectl("get", "clusterroles,clusterrolebindings", "-l", selector, "-o", "name")
        return out.split()

    def delete_namespace(self, timeout: float = 120) -> None:
        """kubectl delete namespace, waiting for it to go (it hangs on a finalizer)."""
        _run(
            self.kubectl_path, "--kubeconfig", str(self.kubeconfig), "delete", "namespace",
            self.namespace, f"--timeout={int(timeout)}s",
        )  # fmt: skip

    def kill_pod(self, name: str) -> None:
        self.kubectl("delete", "pod", name, "--grace-period=0", "--force")

    # --- clients: kcat pods inside the cluster --------------------------------------------

    @property
    def bootstrap(self) -> str:
        return f"{self.release}.{self.namespace}.svc:9092"

    def kcat(self, *args: str) -> str:
        return self.kubectl(
            "exec", CLIENT_POD, "--", "kcat", "-b", self.bootstrap, *args,
            namespace=CLIENTS_NAMESPACE,
        )  # fmt: skip

    def producer(self, topic: str) -> KcatProducer:
        return KcatProducer(self, topic)

    def consume_all(self, topic: str, wanted: set[str], timeout: float = 120) -> set[str]:
        del wanted, timeout  # kcat -e reads to the end of every partition and exits
        out = self.kcat("-C", "-t", topic, "-o", "beginning", "-e", "-q")
        return {line for line in out.splitlines() if line}

    def isrs(self) -> Isrs:
        """Every partition's ISR from ``kcat -L -J`` (the Metadata API) in the client pod."""
        metadata = json.loads(self.kcat("-L", "-J"))
        return {
            t["topic"]: {p["partition"]: [r["id"] for r in p["isrs"]] for p in t["partitions"]}
            for t in metadata["topics"]
        }

    def all_in_sync(self, topics: list[str], replicas: int) -> bool:
        return all_in_sync(self.isrs(), topics, replicas)

    def isr_watcher(self, topics: list[str], min_isr: int) -> IsrWatcher:
        # Each sample is a kubectl exec: once a second is what it sustains.
        return IsrWatcher(self.isrs, topics, min_isr, interval=1.0)


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
        # The loop runs in the pipeline's subshell, so it reports its own count.
        condition = f"[ $i -lt {count} ]" if count else "[ ! -f /tmp/stop ]"
        pace = "" if count else "sleep 0.005; "
        return (
            f"{{ i=0; while {condition}; do echo {self.prefix}-$i; i=$((i+1)); {pace}done; "
            "echo SENT $i >&2; } "
            f"| kcat -P -b {self.platform.bootstrap} -t {self.topic} -X acks=all "
            "-X enable.idempotence=true -X message.timeout.ms=180000"
        )

    def start(self, count: int | None = None) -> None:
        self.platform.kubectl(
            "run", self.pod, "--restart=Never", f"--image={KCAT_IMAGE}", "--command",
            "--", "sh", "-c", self._script(count), namespace=CLIENTS_NAMESPACE,
        )  # fmt: skip

    def run_for(self, count: int) -> None:
        self.start(count)
        self._finish()

    def stop(self) -> None:
        self.platform.kubectl(
            "exec", self.pod, "--", "touch", "/tmp/stop", check=False, namespace=CLIENTS_NAMESPACE
        )
        self._finish()

    def _finish(self) -> None:
        def kubectl(*args: str, check: bool = True) -> str:
            return self.platform.kubectl(*args, check=check, namespace=CLIENTS_NAMESPACE)

        kubectl(
            "wait", f"pod/{self.pod}", "--for=jsonpath={.status.phase}=Succeeded", "--timeout=300s"
        )
        log = kubectl("logs", self.pod)
        kubectl("delete", "pod", self.pod, "--wait=false", check=False)
        sent = [int(line.split()[1]) for line in log.splitlines() if line.startswith("SENT ")]
        failed = [line for line in log.splitlines() if "Delivery failed" in line]
        if failed:
            raise AssertionError(f"kcat reported {len(failed)} failed deliveries: {failed[:3]}")
        # kcat exits after delivering (or failing, reported above) every message.
        self.sent = sent[-1] if sent else 0
        self.acknowledged = {f"{self.prefix}-{i}" for i in range(self.sent)}
