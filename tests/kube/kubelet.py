"""A kubelet stand-in: runs the pods of every StatefulSet in the emulator as real processes.

The emulator stores a StatefulSet and nothing runs it; this does what the StatefulSet
controller, the scheduler and the kubelet would, closely enough for scaling and rolling
restarts against real brokers:

- for ordinals ``0..replicas-1`` it creates a Pod object (name ``<sts>-<ordinal>``, the
  template's labels and annotations, ``apps.kubernetes.io/pod-index``, and the node's
  topology labels copied onto the pod as Kubernetes' PodTopologyLabels admission does) on a
  zone-labelled fake Node (ordinal ``i`` on the ``i % n``-th of the ``n`` nodes the pod
  fits: the scheduler's filters for its ``nodeSelector``, required node affinity and the
  nodes' ``NoSchedule``/``NoExecute`` taints against its tolerations; a pod no node fits
  stays ``Pending``, unscheduled, as it would), and starts its
  container from the rendered spec: command and args, env (values with ``$(VAR)``
  expansion, ``fieldRef`` of name/namespace/labels/annotations, ``configMapKeyRef``,
  ``secretKeyRef`` read from the emulator's Secret), ConfigMap and Secret volumes written
  to files (a Secret's ``data`` base64-decoded), volume claims as directories kept across
  restarts and scale-downs (like a retained PersistentVolumeClaim); a missing Secret or
  key (not ``optional``) keeps the container from starting, as the kubelet's
  CreateContainerConfigError does, until the Secret appears;
- pods above ``replicas`` are stopped (SIGTERM, the broker shuts down cleanly) and deleted;
- a Pod object deleted by someone else (the operator's rolling restart) is stopped and
  recreated from the current template; a process that exits is restarted (restartPolicy
  Always);
- readiness comes from the container's real readinessProbe (HTTP GET or TCP), written to
  the Pod's status and the StatefulSet's ``status.readyReplicas``.

How a container runs is ``ProcessRuntime``'s business: every pod shares 127.0.0.1 here, so
it gives each named container port a free host port and tells the broker with
``--override`` (listeners, advertised.listeners, metrics.port): every listener the pod
advertises (``GREGOR_ADVERTISED_LISTENERS``, e.g. ``CLIENT`` and ``INTERNAL`` of a
secured cluster) keeps its name and protocol and moves to ``127.0.0.1:<host port>`` of the
container port it named. Subclass ``ProcessRuntime``
(``start``/``stop``/``address``) to run pods as podman containers or in network
namespaces instead; ``Kubelet(runtime=...)`` takes the replacement.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gregor_broker.devtools.zookeeper_server import free_port
from tests.kube.client import ApiError, KubeClient

POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"
TOPOLOGY_LABELS = ("topology.kubernetes.io/zone", "topology.kubernetes.io/region")
DEFAULT_NODES = {
    "node-a": {"topology.kubernetes.io/zone": "a"},
    "node-b": {"topology.kubernetes.io/zone": "b"},
    "node-c": {"topology.kubernetes.io/zone": "c"},
}
# Commands the stand-in knows how to run from this checkout (a container would have them).
COMMANDS = {"gregor-broker": [sys.executable, "-m", "gregor_broker.cli.broker"]}
_VAR = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")
_LABEL_REF = re.compile(r"metadata\.(labels|annotations)\['([^']+)'\]")


def _matches(expression: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """One node selector requirement (``matchExpressions`` entry) against node labels."""
    key, operator = expression["key"], expression["operator"]
    values = list(expression.get("values") or ())
    if operator == "In":
        return labels.get(key) in values
    if operator == "NotIn":
        return labels.get(key) not in values
    if operator == "Exists":
        return key in labels
    if operator == "DoesNotExist":
        return key not in labels
    if operator in ("Gt", "Lt"):
        if key not in labels or not labels[key].lstrip("-").isdigit():
            return False
        value, bound = int(labels[key]), int(values[0])
        return value > bound if operator == "Gt" else value < bound
    raise ValueError(f"node selector operator {operator} is not emulated")


def _tolerated(taint: Mapping[str, Any], tolerations: list[Mapping[str, Any]]) -> bool:
    for toleration in tolerations:
        if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
            continue
        operator = toleration.get("operator", "Equal")
        if not toleration.get("key"):
            if operator == "Exists":
                return True
            continue
        if toleration["key"] != taint["key"]:
            continue
        if operator == "Exists" or toleration.get("value", "") == taint.get("value", ""):
            return True
    return False


def fits(
    spec: Mapping[str, Any], name: str, labels: Mapping[str, str], taints: list[Mapping[str, Any]]
) -> bool:
    """Whether the scheduler would place a pod of ``spec`` on the node ``name``: its
    ``nodeSelector``, the required terms of its node affinity (any term, every expression
    of it; ``matchFields`` on ``metadata.name``), and every ``NoSchedule``/``NoExecute``
    taint of the node tolerated. Preferences, pod (anti-)affinity and spread constraints
    rank nodes and are not emulated."""
    if any(labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
        return False
    node_affinity = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is not None:
        fields = {"metadata.name": name}
        if not any(
            all(_matches(e, labels) for e in term.get("matchExpressions") or ())
            and all(_matches(e, fields) for e in term.get("matchFields") or ())
            and (term.get("matchExpressions") or term.get("matchFields"))
            for term in required.get("nodeSelectorTerms") or ()
        ):
            return False
    tolerations = list(spec.get("tolerations") or ())
    return all(
        _tolerated(taint, tolerations)
        for taint in taints
        if taint.get("effect") in ("NoSchedule", "NoExecute")
    )


@dataclass
class RunningPod:
    namespace: str
    name: str
    ordinal: int
    uid: str
    directory: Path
    process: subprocess.Popen[bytes] | None = None
    ports: dict[str, int] = field(default_factory=dict)  # container port name -> host port
    readiness: dict[str, Any] | None = None
    ready: bool = False
    restarts: int = 0
    container: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    command: list[str] = field(default_factory=list)

    @property
    def log_path(self) -> Path:
        return self.directory / "container.log"


class SecretMissing(RuntimeError):
    """A Secret (or a key of it) the container needs does not exist (yet)."""


def secret_value(secret: Mapping[str, Any] | None, key: str) -> str | None:
    """One key of a Secret as the container sees it: ``data`` is base64 (as the API
    serves it), ``stringData`` is plain (the emulator stores what it was given). None when
    the key is absent."""
    secret = secret or {}
    if key in (secret.get("data") or {}):
        return base64.b64decode(secret["data"][key]).decode()
    if key in (secret.get("stringData") or {}):
        return str(secret["stringData"][key])
    return None


def secrets_of(client: KubeClient, namespace: str, spec: Mapping[str, Any]) -> dict[str, Any]:
    """Every Secret the pod's first container references (``secretKeyRef`` env, secret
    volumes), by name; an absent one is left out (``resolve_env`` decides)."""
    names = {v["secret"]["secretName"] for v in spec.get("volumes") or () if "secret" in v}
    for entry in spec["containers"][0].get("env") or ():
        ref = (entry.get("valueFrom") or {}).get("secretKeyRef")
        if ref:
            names.add(ref["name"])
    found = {name: client.find("v1", "secrets", namespace, name) for name in sorted(names)}
    return {name: secret for name, secret in found.items() if secret is not None}


def write_secret_volume(
    volume: Mapping[str, Any], secrets: Mapping[str, Any], target: Path
) -> None:
    """A ``secret`` volume's files: every key of the Secret (or the ``items`` listed, at
    their ``path``), mode 0600 as ``defaultMode`` would set."""
    source = volume["secret"]
    secret = secrets.get(source["secretName"])
    if secret is None:
        if source.get("optional"):
            return
        raise SecretMissing(f"secret volume {volume['name']}: Secret {source['secretName']}")
    keys = {**(secret.get("stringData") or {}), **(secret.get("data") or {})}
    items = source.get("items") or [{"key": k, "path": k} for k in keys]
    for item in items:
        value = secret_value(secret, item["key"])
        if value is None:
            raise SecretMissing(f"Secret {source['secretName']} has no key {item['key']}")
        path = target / item["path"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(value)
        path.chmod(0o600)


def resolve_env(
    container: Mapping[str, Any],
    pod: Mapping[str, Any],
    config_maps: Mapping[str, Any],
    secrets: Mapping[str, Any] | None = None,
) -> dict[str, str]:
    """A container's environment as the kubelet computes it. ``secrets``: the Secrets
    ``secretKeyRef`` entries name (``secrets_of``); a missing one raises SecretMissing
    unless the reference is ``optional``."""
    env: dict[str, str] = {}
    metadata = pod["metadata"]
    for entry in container.get("env") or ():
        if "value" in entry:
            value = _VAR.sub(lambda m: env.get(m.group(1), m.group(0)), str(entry["value"]))
        else:
            source = entry.get("valueFrom") or {}
            if "fieldRef" in source:
                path = source["fieldRef"]["fieldPath"]
                match = _LABEL_REF.fullmatch(path)
                if match:
                    value = (metadata.get(match.group(1)) or {}).get(match.group(2), "")
                elif path == "metadata.name":
                    value = metadata["name"]
                elif path == "metadata.namespace":
                    value = metadata["namespace"]
                elif path in ("status.podIP", "status.hostIP"):
                    value = "127.0.0.1"
                elif path == "spec.nodeName":
                    value = pod["spec"].get("nodeName", "")
                else:
                    raise ValueError(f"fieldRef {path} is not emulated")
            elif "configMapKeyRef" in source:
                ref = source["configMapKeyRef"]
                value = (config_maps.get(ref["name"]) or {}).get("data", {}).get(ref["key"], "")
            elif "secretKeyRef" in source:
                ref = source["secretKeyRef"]
                found = secret_value((secrets or {}).get(ref["name"]), ref["key"])
                if found is None:
                    if ref.get("optional"):
                        continue  # an optional reference to nothing sets no variable
                    raise SecretMissing(
                        f"env {entry['name']}: Secret {ref['name']} key {ref['key']} not found"
                    )
                value = found
            else:
                raise ValueError(f"env {entry['name']}: {source} is not emulated")
        env[entry["name"]] = value
    return env


class ProcessRuntime:
    """Runs a pod's first container as a local process (see the module docstring)."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client

    def start(self, pod: RunningPod, spec: Mapping[str, Any], obj: Mapping[str, Any]) -> None:
        container = spec["containers"][0]
        namespace = pod.namespace
        mounts: dict[str, Path] = {}
        config_maps: dict[str, Any] = {}
        secrets = secrets_of(self.client, namespace, spec)
        claims = {
            t["metadata"]["name"] for t in obj.get("_volumeClaimTemplates", ())
        }  # names of per-pod persistent volumes
        for volume in spec.get("volumes") or ():
            target = pod.directory / "volumes" / volume["name"]
            if "configMap" in volume:
                name = volume["configMap"]["name"]
                config_map = self.client.find("v1", "configmaps", namespace, name) or {}
                config_maps[name] = config_map
                shutil.rmtree(target, ignore_errors=True)
                target.mkdir(parents=True)
                for key, text in (config_map.get("data") or {}).items():
                    (target / key).write_text(text)
            elif "secret" in volume:
                shutil.rmtree(target, ignore_errors=True)
                target.mkdir(parents=True)
                write_secret_volume(volume, secrets, target)
            else:
                target.mkdir(parents=True, exist_ok=True)
            mounts[volume["name"]] = target
        for claim in claims:
            target = pod.directory / "claims" / claim
            target.mkdir(parents=True, exist_ok=True)
            mounts[claim] = target
        paths = {m["mountPath"]: mounts[m["name"]] for m in container.get("volumeMounts") or ()}
        env = resolve_env(container, obj, config_maps, secrets)
        env = {k: self.map_paths(v, paths) for k, v in env.items()}
        # Files from ConfigMaps name paths inside the container too (log.dirs, ...).
        for mount_path, directory in paths.items():
            del mount_path
            for file in directory.glob("*"):
                if file.is_file() and file.stat().st_size < 1_000_000:
                    file.write_text(self.map_paths(file.read_text(), paths))
        command = [*(container.get("command") or ()), *(container.get("args") or ())]
        command = [self.map_paths(part, paths) for part in command]
        command = [*COMMANDS.get(command[0], [command[0]]), *command[1:]]
        pod.ports = {
            p.get("name", str(p["containerPort"])): free_port() for p in container.get("ports", ())
        }
        pod.container, pod.env = dict(container), env
        command += self.port_overrides(pod)
        pod.command = command
        pod.readiness = container.get("readinessProbe")
        process_env = {**os.environ, **env, "PYTHONUNBUFFERED": "1"}
        with open(pod.log_path, "ab") as log:
            log.write(f"--- starting {pod.name} at {time.ctime()}: {command}\n".encode())
            log.flush()
            pod.process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=process_env, cwd=pod.directory, start_new_session=True,
            )  # fmt: skip

    @staticmethod
    def map_paths(text: str, paths: Mapping[str, Path]) -> str:
        for mount_path in sorted(paths, key=len, reverse=True):
            text = text.replace(mount_path, str(paths[mount_path]))
        return text

    def port_overrides(self, pod: RunningPod) -> list[str]:
        """Gregor brokers: listen and advertise on the pod's host ports. Each listener the
        pod advertises keeps its name and moves to the host port of the container port
        with its port number; without advertised listeners, PLAINTEXT on ``kafka``."""
        overrides = []
        by_number = {
            int(p["containerPort"]): pod.ports[p.get("name", str(p["containerPort"]))]
            for p in pod.container.get("ports", ())
        }
        listeners = []
        for entry in filter(None, pod.env.get("GREGOR_ADVERTISED_LISTENERS", "").split(",")):
            name, _, address = entry.partition("://")
            port = int(address.rsplit(":", 1)[1])
            if port in by_number:
                listeners.append(f"{name}://127.0.0.1:{by_number[port]}")
        if not listeners and "kafka" in pod.ports:
            listeners = [f"PLAINTEXT://127.0.0.1:{pod.ports['kafka']}"]
        if listeners:
            overrides += ["--override", f"listeners={','.join(listeners)}"]
            overrides += ["--override", f"advertised.listeners={','.join(listeners)}"]
        if "metrics" in pod.ports:
            overrides += ["--override", f"metrics.port={pod.ports['metrics']}"]
        return overrides

    def address(self, pod: RunningPod, port: str | int) -> tuple[str, int]:
        if isinstance(port, str):
            return "127.0.0.1", pod.ports[port]
        return "127.0.0.1", port

    def stop(self, pod: RunningPod, timeout: float = 30.0) -> None:
        process = pod.process
        if process is None or process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def kill(self, pod: RunningPod) -> None:
        if pod.process is not None and pod.process.poll() is None:
            pod.process.kill()
            pod.process.wait()

    def ready(self, pod: RunningPod) -> bool:
        probe = pod.readiness
        if pod.process is None or pod.process.poll() is not None:
            return False
        if not probe:
            return True
        if "tcpSocket" in probe:
            host, port = self.address(pod, probe["tcpSocket"].get("port", 80))
            try:
                with socket.create_connection((host, port), timeout=2):
                    return True
            except OSError:
                return False
        http = probe.get("httpGet") or {}
        host, port = self.address(pod, http.get("port", 80))
        try:
            with urllib.request.urlopen(
                f"http://{host}:{port}{http.get('path', '/')}", timeout=2
            ) as response:
                return 200 <= response.status < 400
        except (OSError, ValueError):
            return False


class Kubelet:
    """Watches StatefulSets in the emulator (polling) and runs their pods."""

    def __init__(
        self,
        url: str,
        directory: Path,
        nodes: Mapping[str, Mapping[str, str]] = DEFAULT_NODES,
        runtime: ProcessRuntime | None = None,
        interval: float = 0.2,
        taints: Mapping[str, list[Mapping[str, Any]]] | None = None,
    ) -> None:
        """``nodes``: name -> labels of the fake nodes; ``taints``: name -> their taints."""
        self.client = KubeClient(url)
        self.directory = Path(directory)
        self.nodes = dict(nodes)
        self.taints = {name: list((taints or {}).get(name, ())) for name in self.nodes}
        self.runtime = runtime or ProcessRuntime(self.client)
        self.interval = interval
        self.pods: dict[tuple[str, str], RunningPod] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="kubelet", daemon=True)
        self._lock = threading.RLock()
        self.errors: list[str] = []

    def start(self) -> Kubelet:
        for name, node_labels in self.nodes.items():
            with contextlib.suppress(ApiError):
                self.client.create(
                    {"apiVersion": "v1", "kind": "Node",
                     "metadata": {"name": name, "labels": dict(node_labels)},
                     "spec": {"taints": self.taints[name]} if self.taints[name] else {}},
                    "nodes",
                )  # fmt: skip
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        with self._lock:
            pods = list(self.pods.values())
        for pod in pods:
            with contextlib.suppress(ProcessLookupError):
                if pod.process is not None and pod.process.poll() is None:
                    pod.process.send_signal(signal.SIGTERM)
        for pod in pods:
            self.runtime.stop(pod)

    def __enter__(self) -> Kubelet:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def pod(self, namespace: str, name: str) -> RunningPod | None:
        with self._lock:
            return self.pods.get((namespace, name))

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                for statefulset in self.client.list("apps/v1", "statefulsets"):
                    self.sync(statefulset)
            except TimeoutError:
                pass  # a loaded emulator answered late: the next round catches up
            except Exception as error:  # keep running; the test sees errors in .errors
                self.errors.append(repr(error))
            self._stop.wait(self.interval)

    def node_for(
        self, ordinal: int, spec: Mapping[str, Any] | None = None
    ) -> tuple[str, Mapping[str, str]] | None:
        """The node of ordinal ``ordinal``: round robin over the nodes a pod of ``spec``
        fits (``fits``), None when it fits none."""
        names = [
            name for name in sorted(self.nodes)
            if fits(spec or {}, name, self.nodes[name], self.taints[name])
        ]  # fmt: skip
        if not names:
            return None
        name = names[ordinal % len(names)]
        return name, self.nodes[name]

    def render_pod(self, statefulset: Mapping[str, Any], ordinal: int) -> dict[str, Any]:
        """The Pod of ``ordinal``, bound to a node it fits; unbound and Pending (with the
        scheduler's PodScheduled=False condition) when none fits."""
        metadata = statefulset["metadata"]
        template = copy.deepcopy(statefulset["spec"]["template"])
        spec = template["spec"]
        placed = self.node_for(ordinal, spec)
        node, node_labels = placed if placed is not None else ("", {})
        name = f"{metadata['name']}-{ordinal}"
        labels = dict(template.get("metadata", {}).get("labels") or {})
        labels[POD_INDEX_LABEL] = str(ordinal)
        labels["statefulset.kubernetes.io/pod-name"] = name
        labels.update({k: v for k, v in node_labels.items() if k in TOPOLOGY_LABELS})
        if node:
            spec["nodeName"] = node
        spec["hostname"] = name
        spec["subdomain"] = statefulset["spec"].get("serviceName", "")
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": metadata["namespace"],
                "labels": labels,
                "annotations": dict(template.get("metadata", {}).get("annotations") or {}),
                "ownerReferences": [
                    {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": metadata["name"],
                     "uid": metadata.get("uid", ""), "controller": True}
                ],
            },
            "spec": spec,
            "status": {"phase": "Pending"} if node else {
                "phase": "Pending",
                "conditions": [{"type": "PodScheduled", "status": "False",
                                "reason": "Unschedulable",
                                "message": f"0/{len(self.nodes)} nodes are available"}],
            },
        }  # fmt: skip

    def sync(self, statefulset: Mapping[str, Any]) -> None:
        metadata = statefulset["metadata"]
        namespace, sts_name = metadata["namespace"], metadata["name"]
        replicas = int(statefulset["spec"].get("replicas", 1))
        existing = {
            p["metadata"]["name"]: p
            for p in self.client.list("v1", "pods", namespace)
            if p["metadata"]["name"].rsplit("-", 1)[0] == sts_name
        }
        with self._lock:
            mine = {
                name: pod for (ns, name), pod in self.pods.items()
                if ns == namespace and name.rsplit("-", 1)[0] == sts_name
            }  # fmt: skip
        # Scale down: highest ordinals first.
        for name, pod in sorted(mine.items(), key=lambda item: -item[1].ordinal):
            if pod.ordinal >= replicas:
                self.runtime.stop(pod)
                with contextlib.suppress(ApiError):
                    self.client.delete("v1", "pods", namespace, name)
                with self._lock:
                    del self.pods[(namespace, name)]
        for name in existing.keys() - mine.keys():  # Pending ones run nothing to stop
            index = name.rsplit("-", 1)[1]
            if index.isdigit() and int(index) >= replicas:
                with contextlib.suppress(ApiError):
                    self.client.delete("v1", "pods", namespace, name)
        ready = 0
        for ordinal in range(replicas):
            name = f"{sts_name}-{ordinal}"
            pod = mine.get(name)
            obj = existing.get(name)
            if pod is not None and (obj is None or obj["metadata"].get("uid") != pod.uid):
                # Deleted (rolling restart): stop the old container, start a new pod.
                self.runtime.stop(pod)
                with self._lock:
                    del self.pods[(namespace, name)]
                pod = None
                if obj is not None:
                    obj = None
            if pod is None:
                if obj is not None and not obj["spec"].get("nodeName"):
                    # Unscheduled: placed again once a node fits (a new Pod object here).
                    if self.node_for(ordinal, obj["spec"]) is None:
                        continue
                    self.client.delete("v1", "pods", namespace, name)
                    obj = None
                if obj is None:
                    obj = self.client.create(self.render_pod(statefulset, ordinal), "pods")
                    if not obj["spec"].get("nodeName"):
                        continue  # Pending: no node fits
                obj = dict(obj)
                obj["_volumeClaimTemplates"] = statefulset["spec"].get("volumeClaimTemplates", [])
                pod = RunningPod(
                    namespace, name, ordinal, obj["metadata"].get("uid", ""),
                    self.directory / namespace / name,
                )  # fmt: skip
                pod.directory.mkdir(parents=True, exist_ok=True)
                self.runtime.start(pod, obj["spec"], obj)
                with self._lock:
                    self.pods[(namespace, name)] = pod
            elif pod.process is not None and pod.process.poll() is not None:
                pod.restarts += 1  # restartPolicy: Always
                claims = statefulset["spec"].get("volumeClaimTemplates", [])
                self.runtime.start(pod, obj["spec"], {**obj, "_volumeClaimTemplates": claims})
            is_ready = self.runtime.ready(pod)
            if is_ready != pod.ready or (obj or {}).get("status", {}).get("phase") != "Running":
                pod.ready = is_ready
                with contextlib.suppress(ApiError):
                    self.client.patch("v1", "pods", namespace, name, {"status": {
                        "phase": "Running",
                        "podIP": "127.0.0.1",
                        "conditions": [{"type": "Ready", "status": str(is_ready)}],
                    }}, subresource="status")  # fmt: skip
            ready += is_ready
        status = statefulset.get("status") or {}
        wanted = {
            "replicas": replicas,
            "readyReplicas": ready,
            "availableReplicas": ready,
            "currentReplicas": replicas,
            "observedGeneration": metadata.get("generation", 1),
        }
        if any(status.get(k) != v for k, v in wanted.items()):
            with contextlib.suppress(ApiError):
                self.client.patch(
                    "apps/v1", "statefulsets", namespace, sts_name, {"status": wanted},
                    subresource="status",
                )  # fmt: skip
