"""The e2e suite's local mode: the chart installed into kmock's Kubernetes emulator on this
machine, with nothing hand-written that the chart or the operator should produce.

- ``helm template`` renders the chart (real helm); every rendered object is created in
  the emulator, which runs as its own process (``python -m tests.kube.emulator``);
- the operator runs as its own process from the rendered Deployment: the image's
  entrypoint (``gregor-operator``) with the Deployment's args, pointed at the emulator;
- the kubelet stand-in (tests/kube/kubelet.py) runs the StatefulSet the operator makes:
  as podman containers of the real broker image where podman works
  (tests/kube/podman_runtime.py), as processes otherwise; racks come from zone-labelled
  fake nodes; readiness from the pod's real readiness probe;
- ZooKeeper is a real one outside the emulator, given to the chart as an external
  ensemble (``zookeeper.enabled=false``): the chart's ZooKeeper StatefulSet runs the
  upstream ZooKeeper image, which cannot be pulled here;
- uninstall deletes what helm would, and the garbage collector's part (objects owned by
  a deleted object, then their pods) is done here, as the API server would.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import yaml
from deploy.images import PODMAN, ROOT, image_digest, source_digest
from tests.chart.render import render
from tests.kube.client import ApiError, KubeClient
from tests.kube.emulator import BUILTIN_RESOURCES, crd_documents
from tests.kube.kubelet import Kubelet, ProcessRuntime
from tests.kube.podman_runtime import PodmanRuntime, podman_usable

from gregor_broker.devtools.zookeeper_server import ZooKeeperServer, free_port

from .load import AcksAllProducer, IsrWatcher, all_in_sync, consume_all, metadata_isrs
from .values import BROKER_VALUES, NODE_POOL, POOL_TAINT, merge_values

API = "gregor.dev/v1alpha1"
# Helm's UninstallOrder (pkg/releaseutil/kind_sorter.go); kinds not listed go last.
HELM_UNINSTALL_ORDER = (
    "APIService", "Ingress", "IngressClass", "Service", "CronJob", "Job", "StatefulSet",
    "HorizontalPodAutoscaler", "Deployment", "ReplicaSet", "ReplicationController", "Pod",
    "DaemonSet", "RoleBindingList", "RoleBinding", "RoleList", "Role",
    "ClusterRoleBindingList", "ClusterRoleBinding", "ClusterRoleList", "ClusterRole",
    "CustomResourceDefinition", "PersistentVolumeClaim", "PersistentVolume", "StorageClass",
    "ConfigMap", "SecretList", "Secret", "ServiceAccount", "PodDisruptionBudget",
    "PodSecurityPolicy", "LimitRange", "ResourceQuota", "NetworkPolicy", "Namespace",
    "PriorityClass",
)  # fmt: skip
BROKER_IMAGE = "gregor/gregor-broker"
# The fake nodes: the brokers' pool, one node per zone, tainted for them alone; and a node
# outside the pool, untainted, where a broker pod lands only if the chart or the operator
# drops its nodeSelector (without the tolerations, no node fits and the brokers stay Pending).
ZONE = "topology.kubernetes.io/zone"
NODES = {
    **{f"node-{zone}": {ZONE: zone, **NODE_POOL} for zone in "abc"},
    "node-other": {ZONE: "a"},
}
TAINTS = {f"node-{zone}": [POOL_TAINT] for zone in "abc"}


def _plurals() -> dict[tuple[str, str], tuple[str, bool]]:
    """(apiVersion, kind) -> (plural, namespaced), for every kind the emulator serves."""
    table = {}
    for path, kind, namespaced, _subresources in BUILTIN_RESOURCES:
        api_version, plural = path.rsplit("/", 1)
        table[(api_version, kind)] = (plural, namespaced)
    for crd in crd_documents():
        group, names = crd["spec"]["group"], crd["spec"]["names"]
        for version in crd["spec"]["versions"]:
            key = (f"{group}/{version['name']}", names["kind"])
            table[key] = (names["plural"], crd["spec"]["scope"] == "Namespaced")
    return table


class LocalPlatform:
    """The chart on the emulator (see the module docstring). ``runtime`` is "podman" or
    "process"; ``runtime_reason`` says why podman was not used."""

    name = "local"

    def __init__(
        self,
        directory: Path,
        namespace: str = "gregor",
        release: str = "gregor",
        runtime: str | None = None,
    ):
        """``runtime="process"`` runs the broker pods as processes even where podman
        works (a short test that needs no image build); None picks podman when usable."""
        self.directory = directory
        self.namespace = namespace
        self.release = release
        self.plurals = _plurals()
        self.zookeeper = ZooKeeperServer(directory / "zookeeper")
        self.emulator: subprocess.Popen[bytes] | None = None
        self.operator: subprocess.Popen[bytes] | None = None
        self.kubelet: Kubelet | None = None
        self.client: KubeClient | None = None
        self.url = ""
        self.installed: list[dict[str, Any]] = []
        reason = "asked for processes" if runtime == "process" else podman_usable()
        self.runtime = "process" if reason else "podman"
        self.runtime_reason = reason or ""
        self.image_tag = ""
        # Every API request, for the RBAC check (e2e/recording_emulator.py).
        self.api_calls = directory / "api-calls.jsonl"

    # --- machinery ----------------------------------------------------------------------

    def start(self) -> None:
        if (
            self.runtime == "process"
            and self.runtime_reason != "asked for processes"
            and shutil.which("podman") is None
            and os.geteuid() == 0
        ):
            # As `make e2e-local` does: podman, runc and debootstrap from Debian's packages.
            subprocess.run(["bash", "scripts/install-image-tools"], cwd=ROOT, check=False)
            reason = podman_usable()
            self.runtime = "process" if reason else "podman"
            self.runtime_reason = reason or ""
        self.zookeeper.start()
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        log = open(self.directory / "emulator.log", "wb")  # noqa: SIM115 - lives with the process
        self.emulator = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "e2e.recording_emulator",
                "--record",
                str(self.api_calls),
                "--port",
                str(port),
                "--kubeconfig",
                str(self.directory / "kubeconfig"),
            ],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.client = KubeClient(self.url)
        self.client.wait_for("the emulator", lambda: self._answers(), timeout=30)
        if self.runtime == "podman":
            self._ensure_broker_image()
            runtime: ProcessRuntime = PodmanRuntime(self.client)
        else:
            runtime = ProcessRuntime(self.client)
        self.kubelet = Kubelet(
            self.url, self.directory / "kubelet", nodes=NODES, taints=TAINTS, runtime=runtime
        ).start()

    def _answers(self) -> bool:
        assert self.client is not None
        try:
            self.client.list("v1", "configmaps", self.namespace)
        except (OSError, ApiError):
            return False
        return True

    def _ensure_broker_image(self) -> None:
        """The broker image of these sources (built when missing or stale), tagged for the
        chart: the version's tag and an ``e2e-upgrade`` tag the upgrade scenario moves to."""
        version = yaml.safe_load((ROOT / "charts/gregor/Chart.yaml").read_text())["appVersion"]
        image = f"{BROKER_IMAGE}:{version}"
        if image_digest(image) != source_digest():
            subprocess.run(
                ["bash", "scripts/build-images", "broker"],
                cwd=ROOT,
                check=True,
                env={**os.environ, "CONTAINER_ENGINE": "podman"},
            )
        subprocess.run(
            [*PODMAN, "tag", image, f"{BROKER_IMAGE}:e2e-upgrade"], check=True, capture_output=True
        )
        self.image_tag = version

    def stop(self) -> None:
        self._stop_operator()
        if self.kubelet is not None:
            self.kubelet.stop()
        if self.emulator is not None:
            self.emulator.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.emulator.wait(10)
            if self.emulator.poll() is None:
                self.emulator.kill()
        self.zookeeper.stop()

    # --- what a user does -----------------------------------------------------------------

    def values(self, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        """The install's values: the brokers every mode installs, an external ZooKeeper
        (ours), plus ``extra``."""
        return merge_values(
            {
                "zookeeper": {
                    "enabled": False,
                    "external": {"connect": f"{self.zookeeper.connect_string}/e2e"},
                },
                "brokers": BROKER_VALUES,
            },
            extra or {},
        )

    def install(self, values: dict[str, Any]) -> list[dict[str, Any]]:
        """helm template, then create every object in the emulator; run the operator."""
        objects = render(values, release=self.release, namespace=self.namespace)
        for obj in objects:
            self.apply(obj)
        self.installed = objects
        self._start_operator(objects)
        return objects

    def upgrade(self, values: dict[str, Any]) -> list[dict[str, Any]]:
        """What helm upgrade does to objects that exist: a merge patch with the new render."""
        objects = render(values, release=self.release, namespace=self.namespace)
        for obj in objects:
            self.apply(obj)
        self.installed = objects
        return objects

    def apply(self, obj: dict[str, Any]) -> dict[str, Any]:
        assert self.client is not None
        plural, namespaced = self.plurals[(obj["apiVersion"], obj["kind"])]
        namespace = self.namespace if namespaced else None
        if namespaced:
            obj = {**obj, "metadata": {**obj["metadata"], "namespace": self.namespace}}
        existing = self.client.find(obj["apiVersion"], plural, namespace, obj["metadata"]["name"])
        if existing is None:
            return self.client.create(obj, plural, namespace)
        return self.client.patch(
            obj["apiVersion"],
            plural,
            namespace,
            obj["metadata"]["name"],
            {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "status")},
        )

    def delete(self, obj: dict[str, Any]) -> None:
        assert self.client is not None
        plural, namespaced = self.plurals[(obj["apiVersion"], obj["kind"])]
        with contextlib.suppress(ApiError):
            self.client.delete(
                obj["apiVersion"],
                plural,
                self.namespace if namespaced else None,
                obj["metadata"]["name"],
            )

    def get(self, api_version: str, kind: str, name: str) -> dict[str, Any] | None:
        assert self.client is not None
        plural, namespaced = self.plurals[(api_version, kind)]
        return self.client.find(api_version, plural, self.namespace if namespaced else None, name)

    def list(self, api_version: str, kind: str) -> list[dict[str, Any]]:
        assert self.client is not None
        plural, namespaced = self.plurals[(api_version, kind)]
        return self.client.list(api_version, plural, self.namespace if namespaced else None)

    def scale(self, cluster: str, replicas: int) -> None:
        """What an HPA does: write the GregorCluster's scale subresource."""
        assert self.client is not None
        self.client.patch(
            API,
            "gregorclusters",
            self.namespace,
            cluster,
            {"spec": {"replicas": replicas}},
            subresource="scale",
        )

    def bootstrap(self) -> str:
        """Addresses of the running broker pods, as the pods advertise them."""
        assert self.kubelet is not None
        with self.kubelet._lock:
            pods = list(self.kubelet.pods.values())
        return ",".join(
            "{}:{}".format(*self.kubelet.runtime.address(p, "kafka")) for p in pods if p.ready
        )

    # Clients on this machine reach the pods at the addresses they advertise.
    def producer(self, topic: str) -> AcksAllProducer:
        return AcksAllProducer(self.bootstrap(), topic)

    def consume_all(self, topic: str, wanted: set[str], timeout: float = 120) -> set[str]:
        return consume_all(self.bootstrap(), topic, wanted, timeout)

    def isr_watcher(self, topics: list[str], min_isr: int) -> IsrWatcher:
        return IsrWatcher(metadata_isrs(self.bootstrap()), topics, min_isr)

    def all_in_sync(self, topics: list[str], replicas: int) -> bool:
        return all_in_sync(metadata_isrs(self.bootstrap())(), topics, replicas)

    def pods(self) -> dict[str, SimpleNamespace]:
        """The broker pods the kubelet stand-in runs: name -> uid, restarts, ready, image."""
        assert self.kubelet is not None
        with self.kubelet._lock:
            pods = [(name, pod) for (_ns, name), pod in self.kubelet.pods.items()]
        return {
            name: SimpleNamespace(
                uid=pod.uid,
                restarts=pod.restarts,
                ready=pod.ready,
                image=pod.container.get("image", ""),
            )
            for name, pod in pods
        }

    def kill_pod(self, name: str) -> None:
        """A broker pod dies (kill -9 of its container); the kubelet restarts it."""
        assert self.kubelet is not None
        pod = self.kubelet.pod(self.namespace, name)
        assert pod is not None, f"no pod {name}"
        self.kubelet.runtime.kill(pod)

    def uninstall(self) -> None:
        """helm uninstall: delete the release's objects in Helm's uninstall order (known
        kinds first, custom resources like the GregorCluster last); the operator stops
        when its Deployment goes, as its pod would. Then the garbage collector's part."""
        assert self.client is not None
        order = {kind: index for index, kind in enumerate(HELM_UNINSTALL_ORDER)}
        ordered = sorted(self.installed, key=lambda o: order.get(o["kind"], len(order)))
        for obj in ordered:
            self.delete(obj)
            if obj["kind"] == "Deployment":
                self._stop_operator()
        deleted = {o["metadata"].get("uid") for o in self.installed}
        self._collect_garbage(deleted)

    def release_objects(self) -> list[str]:
        """``kind/name`` of every object left that is labelled as this release's (the
        chart's and the operator's objects carry ``app.kubernetes.io/instance``)."""
        assert self.client is not None
        left = []
        for (api_version, kind), (plural, namespaced) in self.plurals.items():
            if kind in ("Namespace", "Node", "CustomResourceDefinition"):
                continue  # not the release's (and kmock cannot list namespaces)
            namespace = self.namespace if namespaced else None
            for obj in self.client.list(api_version, plural, namespace):
                labels = obj["metadata"].get("labels") or {}
                if labels.get("app.kubernetes.io/instance") == self.release:
                    left.append(f"{kind}/{obj['metadata']['name']}")
        return left

    def delete_namespace(self, timeout: float = 120) -> None:
        """``kubectl delete namespace``: the namespace controller deletes every object in
        it, and the namespace goes once no object is held by a finalizer. The emulator has
        no namespace controller; what decides whether the deletion finishes is checked
        here: fail (the deletion would hang) when an object still holds a finalizer. The
        objects left (the operator's Events) would go with the namespace; deleting them
        one by one from the emulator only costs time."""
        del timeout
        assert self.client is not None
        held = []
        for (api_version, kind), (plural, namespaced) in self.plurals.items():
            if not namespaced:
                continue
            for obj in self.client.list(api_version, plural, self.namespace):
                finalizers = obj["metadata"].get("finalizers") or []
                if finalizers:
                    held.append(f"{kind}/{obj['metadata']['name']}: {finalizers}")
        assert not held, f"namespace {self.namespace} would never finish deleting: {held}"

    def _collect_garbage(self, deleted_uids: set[str | None]) -> None:
        assert self.client is not None and self.kubelet is not None
        changed = True
        kinds = [
            ("v1", "ConfigMap"),
            ("v1", "Service"),
            ("policy/v1", "PodDisruptionBudget"),
            ("apps/v1", "StatefulSet"),
            ("v1", "Pod"),
        ]
        live = {o["metadata"]["name"]: o for o in self.list(API, "GregorCluster")}
        deleted_uids = set(deleted_uids)
        while changed:
            changed = False
            for api_version, kind in kinds:
                for obj in self.list(api_version, kind):
                    owners = obj["metadata"].get("ownerReferences") or []
                    gone = [
                        o
                        for o in owners
                        if o.get("uid") in deleted_uids
                        or (o["kind"] == "GregorCluster" and o["name"] not in live)
                        or (
                            o["kind"] == "StatefulSet"
                            and self.get("apps/v1", "StatefulSet", o["name"]) is None
                        )
                    ]
                    if owners and len(gone) == len(owners):
                        if kind == "Pod":
                            pod = self.kubelet.pod(self.namespace, obj["metadata"]["name"])
                            if pod is not None:
                                self.kubelet.runtime.stop(pod)
                                with self.kubelet._lock:
                                    self.kubelet.pods.pop((self.namespace, pod.name), None)
                        self.delete(obj)
                        deleted_uids.add(obj["metadata"].get("uid"))
                        changed = True

    # --- the operator, from the rendered Deployment ---------------------------------------

    def _start_operator(self, objects: list[dict[str, Any]]) -> None:
        deployment = next(o for o in objects if o["kind"] == "Deployment")
        container = deployment["spec"]["template"]["spec"]["containers"][0]
        # The image's ENTRYPOINT is gregor-operator (Dockerfile.operator); the rendered
        # args follow, and the emulator's address instead of the in-cluster login.
        command = [
            str(Path(sys.executable).parent / "gregor-operator"),
            *container["args"],
            "--kube-server",
            self.url,
        ]
        http_port = next(
            int(a.split("=", 1)[1]) for a in container["args"] if a.startswith("--http-port=")
        )
        if _port_busy(http_port):
            command = [a for a in command if not a.startswith("--http-port=")]
            http_port = free_port()
            command.append(f"--http-port={http_port}")
        self.operator_port = http_port
        log = open(self.directory / "operator.log", "ab")  # noqa: SIM115
        self.operator = subprocess.Popen(
            command,
            cwd=self.directory,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        assert self.client is not None
        self.client.wait_for("the operator's /healthz", self._operator_healthy, timeout=60)

    def _operator_healthy(self) -> bool:
        import urllib.request

        assert self.operator is not None
        if self.operator.poll() is not None:
            raise AssertionError(f"the operator exited: {self.log_tail('operator.log')}")
        try:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{self.operator_port}/healthz", timeout=2
            ) as response:
                return response.status == 200
        except OSError:
            return False

    def _stop_operator(self) -> None:
        if self.operator is not None and self.operator.poll() is None:
            self.operator.send_signal(signal.SIGTERM)
            try:
                self.operator.wait(30)
            except subprocess.TimeoutExpired:
                self.operator.kill()
                self.operator.wait()
        self.operator = None

    def log_tail(self, name: str, lines: int = 40) -> str:
        path = self.directory / name
        if not path.exists():
            return ""
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def _port_busy(port: int) -> bool:
    import socket

    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False
