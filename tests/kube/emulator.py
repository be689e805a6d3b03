"""A Kubernetes API for tests: kmock's emulator with what kopf and our tools need.

Owns the emulator's set-up, not what runs against it (the operator, the kubelet stand-in in
``tests/kube/kubelet.py``, the e2e suite). Two ways to run it:

- in-process: ``EmulatorThread`` serves the emulator from its own thread and event loop, so
  tests stay synchronous and talk to it over HTTP like any client (fixture ``kube`` in
  ``tests/kube/fixtures.py``);
- a separate process: ``python -m tests.kube.emulator --port N [--kubeconfig PATH]`` serves
  until SIGTERM, for an operator or kubelet running as their own processes.

kmock is deliberately simple; ``GregorEmulator`` adds the parts of a real API server that
kopf and the operator rely on (TOOLING.md): ``metadata.namespace`` copied from the URL,
``uid``, ``resourceVersion`` bumped on every write, ``generation`` bumped on spec changes,
``creationTimestamp``, ``generateName``. It does not validate schemas, apply label selectors, or run
controllers (a StatefulSet makes no pods: the kubelet stand-in does).

Resources declared: the built-in kinds Gregor uses (below) and every CRD in
``charts/gregor/crds`` (the one source of truth), with their subresources. Extend
``BUILTIN_RESOURCES`` (or pass ``extra_resources``) for more kinds.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import signal
import threading
import uuid
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import jsonpatch
import kmock
import yaml

REPO = Path(__file__).resolve().parents[2]
CRD_DIR = REPO / "charts" / "gregor" / "crds"

VERBS = ("get", "list", "watch", "create", "update", "patch", "delete")

# (group/version/plural, kind, namespaced, subresources)
BUILTIN_RESOURCES: list[tuple[str, str, bool, tuple[str, ...]]] = [
    ("v1/namespaces", "Namespace", False, ()),
    ("v1/nodes", "Node", False, ("status",)),
    ("v1/pods", "Pod", True, ("status",)),
    ("v1/configmaps", "ConfigMap", True, ()),
    ("v1/secrets", "Secret", True, ()),
    ("v1/services", "Service", True, ("status",)),
    ("v1/serviceaccounts", "ServiceAccount", True, ()),
    ("v1/persistentvolumeclaims", "PersistentVolumeClaim", True, ("status",)),
    ("v1/events", "Event", True, ()),
    ("events.k8s.io/v1/events", "Event", True, ()),
    ("apps/v1/statefulsets", "StatefulSet", True, ("status", "scale")),
    ("apps/v1/deployments", "Deployment", True, ("status", "scale")),
    ("policy/v1/poddisruptionbudgets", "PodDisruptionBudget", True, ("status",)),
    ("autoscaling/v2/horizontalpodautoscalers", "HorizontalPodAutoscaler", True, ("status",)),
    ("coordination.k8s.io/v1/leases", "Lease", True, ()),
    ("rbac.authorization.k8s.io/v1/roles", "Role", True, ()),
    ("rbac.authorization.k8s.io/v1/rolebindings", "RoleBinding", True, ()),
    ("rbac.authorization.k8s.io/v1/clusterroles", "ClusterRole", False, ()),
    ("rbac.authorization.k8s.io/v1/clusterrolebindings", "ClusterRoleBinding", False, ()),
    (
        "apiextensions.k8s.io/v1/customresourcedefinitions",
        "CustomResourceDefinition",
        False,
        ("status",),
    ),
]


def crd_documents(directory: Path = CRD_DIR) -> list[dict[str, Any]]:
    """Every CustomResourceDefinition in ``directory`` (``*.yaml``), parsed."""
    documents = []
    for path in sorted(directory.glob("*.yaml")):
        documents += [d for d in yaml.safe_load_all(path.read_text()) if d]
    return documents


def crd_resources(
    documents: Iterable[Mapping[str, Any]],
) -> list[tuple[str, str, bool, tuple[str, ...]]]:
    """The emulator's resource declarations for CRDs (every served version)."""
    resources = []
    for crd in documents:
        spec = crd["spec"]
        for version in spec["versions"]:
            subresources = tuple(version.get("subresources", {}))
            resources.append(
                (
                    f"{spec['group']}/{version['name']}/{spec['names']['plural']}",
                    spec["names"]["kind"],
                    spec["scope"] == "Namespaced",
                    subresources,
                )
            )
    return resources


def _now() -> str:
    return datetime.datetime.now(tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class GregorEmulator(kmock.KubernetesEmulator):
    """kmock's emulator plus the object metadata a real API server maintains."""

    _resource_version = 0

    def declare(self, resources: Iterable[tuple[str, str, bool, tuple[str, ...]]]) -> None:
        for key, kind, namespaced, subresources in resources:
            self.resources[key] = kmock.ResourceInfo(
                kind=kind,
                namespaced=namespaced,
                verbs=set(VERBS),
                subresources=set(subresources),
            )

    def _next_version(self) -> str:
        type(self)._resource_version += 1
        return str(type(self)._resource_version)

    async def _handle(self, request: kmock.Request) -> Any:
        data = request.data
        if request.resource is not None and isinstance(data, dict):
            if request.action == kmock.action.CREATE:
                metadata = data.setdefault("metadata", {})
                if not metadata.get("name") and metadata.get("generateName"):
                    metadata["name"] = metadata["generateName"] + uuid.uuid4().hex[:5]
                if request.namespace and not metadata.get("namespace"):
                    metadata["namespace"] = request.namespace
                metadata.setdefault("uid", str(uuid.uuid4()))
                metadata.setdefault("creationTimestamp", _now())
                metadata["generation"] = 1
                metadata["resourceVersion"] = self._next_version()
            elif request.action == kmock.action.UPDATE and request.name is not None:
                metadata = data.setdefault("metadata", {})
                metadata["resourceVersion"] = self._next_version()
                key = (request.resource, request.namespace, request.name)
                # ObjectsArray has no .get()
                current = self.objects[key] if key in self.objects else None  # noqa: SIM401
                if current is not None and not current.deleted:
                    generation = current.get("metadata", {}).get("generation", 1)
                    spec_changed = "spec" in data and request.subresource in (None, "scale")
                    if spec_changed and _changes(current.get("spec", {}), data["spec"]):
                        generation += 1
                    metadata["generation"] = generation
        try:
            response = await super()._handle(request)
        except jsonpatch.JsonPatchException as error:
            # A JSON patch that does not apply (kopf tests metadata.resourceVersion before it
            # removes a finalizer) is 422 Unprocessable Entity on a real API server: kopf
            # then retries on its next cycle. kmock's 500 made kopf back off for tens of
            # seconds instead, and a deleted resource's finalizer stayed that long.
            raise kmock.KubernetesError(status=422, reason="Invalid", message=str(error)) from error
        finally:
            self._forget(request)
        if request.action == kmock.action.CREATE and response.status == 200:
            # A real API server answers 201 Created; clients map response types by status.
            with contextlib.suppress(RuntimeError, AssertionError):
                response.set_status(201)
        return response

    def _forget(self, request: kmock.Request) -> None:
        """Drop a served request from kmock's history.

        kmock keeps every request it served, and routes each new one by asking every
        reaction whether its filter sees it (``request in view``), a walk through that
        whole history: its cost grows with every request served. The long operator
        scenarios make tens of thousands (kopf's and the kubelet's polling), and the
        emulator's thread alone then took more than a core of a 2-core CI machine
        (py-spy: 76 % of its time in ``View.__contains__``). Nothing here asserts on the
        history; a request is forgotten only once served, so a request still waiting
        for its route (behind the emulator's lock) is never dropped from under it."""
        for requests in (self._requests, *(payload._requests for payload in self._payloads)):
            for index in range(len(requests) - 1, -1, -1):
                if requests[index] is request:
                    del requests[index]
                    break


def _changes(current: Any, patch: Any) -> bool:
    """Whether a merge patch changes ``current``."""
    if isinstance(patch, dict) and isinstance(current, dict):
        return any(
            (key in current) if value is None else _changes(current.get(key), value)
            for key, value in patch.items()
        )
    return current != patch


def new_emulator(extra_resources: Iterable[tuple[str, str, bool, tuple[str, ...]]] = ()):
    emulator = GregorEmulator()
    emulator.declare(BUILTIN_RESOURCES)
    emulator.declare(crd_resources(crd_documents()))
    emulator.declare(extra_resources)
    return emulator


def kubeconfig(url: str) -> dict[str, Any]:
    """A kubeconfig for the emulator (no authentication)."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "emulator", "cluster": {"server": url}}],
        "users": [{"name": "emulator", "user": {}}],
        "contexts": [{"name": "emulator", "context": {"cluster": "emulator", "user": "emulator"}}],
        "current-context": "emulator",
    }


class EmulatorThread:
    """The emulator served from a background thread (its own event loop).

    ``url`` is the API server address; ``objects()`` a snapshot of the stored objects.
    """

    def __init__(
        self,
        port: int | None = None,
        extra_resources: Iterable[tuple[str, str, bool, tuple[str, ...]]] = (),
    ) -> None:
        self._port = port
        self._extra = list(extra_resources)
        self._loop = asyncio.new_event_loop()
        self._started: Future[str] = Future()
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, name="kube-emulator", daemon=True)
        self.emulator: GregorEmulator | None = None
        self.url = ""

    def start(self, timeout: float = 10.0) -> EmulatorThread:
        self._thread.start()
        self.url = self._started.result(timeout)
        return self

    def stop(self) -> None:
        if self._stop is not None and self._loop.is_running():
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

    def __enter__(self) -> EmulatorThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._serve())
        except BaseException as error:  # surface start-up failures to start()
            if not self._started.done():
                self._started.set_exception(error)
        finally:
            self._loop.close()

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        emulator = new_emulator(self._extra)
        server_kwargs = {"port": self._port} if self._port else {}
        async with emulator, kmock.Server(emulator, **server_kwargs) as server:
            self.emulator = emulator
            self._started.set_result(str(server.url).rstrip("/"))
            await self._stop.wait()

    def call(self, function, *args):  # run ``function(*args)`` on the emulator's loop
        async def run():
            return function(*args)

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(10)

    def objects(self, plural: str | None = None) -> list[dict[str, Any]]:
        """Current (not deleted) objects, optionally of one resource plural."""

        def snapshot() -> list[dict[str, Any]]:
            assert self.emulator is not None
            found = []
            for (resource, _namespace, _name), obj in self.emulator.objects.items():
                if obj.deleted or (plural is not None and resource.plural != plural):
                    continue
                found.append(obj.raw)
            return found

        return self.call(snapshot)


@contextlib.contextmanager
def running_emulator(**kwargs: Any) -> Iterator[EmulatorThread]:
    with EmulatorThread(**kwargs) as thread:
        yield thread


async def serve_forever(port: int, kubeconfig_path: Path | None) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    emulator = new_emulator()
    async with emulator, kmock.Server(emulator, port=port) as server:
        url = str(server.url).rstrip("/")
        if kubeconfig_path is not None:
            kubeconfig_path.write_text(yaml.safe_dump(kubeconfig(url)))
        print(f"Kubernetes emulator serving on {url}", flush=True)
        await stop.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.kube.emulator",
        description="Serve kmock's Kubernetes emulator (with Gregor's CRDs) until SIGTERM.",
        epilog="example: python -m tests.kube.emulator --port 18080 --kubeconfig /tmp/kubeconfig",
    )
    parser.add_argument("--port", type=int, required=True, help="TCP port on 127.0.0.1")
    parser.add_argument("--kubeconfig", type=Path, help="write a kubeconfig for it here")
    args = parser.parse_args(argv)
    asyncio.run(serve_forever(args.port, args.kubeconfig))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
