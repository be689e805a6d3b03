"""The Kubernetes emulator of tests/kube, serving as its own process and recording every
request as an RBAC triple (api group, resource[/subresource], verb) with the client's
User-Agent, one JSON line per request.

The local e2e mode runs the operator against it, so after a run the record holds every
Kubernetes API call the operator made (kopf's aiohttp client and the ``kubernetes``
client, told apart from the test harness's urllib client by their User-Agents), and the
suite compares them with the chart's RBAC.

    python -m e2e.recording_emulator --port 18080 --kubeconfig kubeconfig --record calls.jsonl
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
from pathlib import Path
from typing import Any

import kmock
import yaml
from tests.kube.emulator import (
    BUILTIN_RESOURCES,
    GregorEmulator,
    crd_documents,
    crd_resources,
    kubeconfig,
)

# The operator's two clients: kopf's aiohttp session and the ``kubernetes`` client. The
# test harness (urllib), a person's curl while debugging, anything else: not the operator.
OPERATOR_AGENTS = ("kopf/", "OpenAPI-Generator/")


def rbac_verb(method: str, named: bool, watch: bool) -> str:
    """Kubernetes' request verb for an HTTP request (the apiserver's RequestInfo rules)."""
    if method == "GET":
        return "watch" if watch else ("get" if named else "list")
    if method == "DELETE":
        return "delete" if named else "deletecollection"
    return {"POST": "create", "PATCH": "patch", "PUT": "update"}.get(method, method.lower())


class RecordingEmulator(GregorEmulator):
    def __init__(self, record: Path) -> None:
        super().__init__()
        self.record = record.open("a", buffering=1)

    async def _handle(self, request: kmock.Request) -> Any:
        resource = request.resource
        if resource is not None and resource.plural:  # not discovery (/api/v1, /apis/...)
            plural = resource.plural + (f"/{request.subresource}" if request.subresource else "")
            watch = str((request.params or {}).get("watch", "")).lower() in ("true", "1")
            line = {
                "group": resource.group or "",
                "resource": plural,
                "verb": rbac_verb(_method(request), request.name is not None, watch),
                "namespace": request.namespace,
                "agent": (request.headers or {}).get("User-Agent", ""),
            }
            self.record.write(json.dumps(line) + "\n")
        return await super()._handle(request)


def _method(request: kmock.Request) -> str:
    method = request.method
    return str(getattr(method, "value", method) or "GET").upper()


def recorded_grants(
    record: Path, agents: tuple[str, ...] = OPERATOR_AGENTS
) -> set[tuple[str, str, str]]:
    """(group, resource, verb) of every request the operator's clients made."""
    grants = set()
    for line in record.read_text().splitlines():
        call = json.loads(line)
        if call["agent"].startswith(agents):
            grants.add((call["group"], call["resource"], call["verb"]))
    return grants


async def serve(port: int, kubeconfig_path: Path, record: Path) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    emulator = RecordingEmulator(record)
    emulator.declare(BUILTIN_RESOURCES)
    emulator.declare(crd_resources(crd_documents()))
    async with emulator, kmock.Server(emulator, port=port) as server:
        kubeconfig_path.write_text(yaml.safe_dump(kubeconfig(str(server.url).rstrip("/"))))
        await stop.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.recording_emulator")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--kubeconfig", type=Path, required=True)
    parser.add_argument("--record", type=Path, required=True, help="JSON lines, appended")
    args = parser.parse_args(argv)
    asyncio.run(serve(args.port, args.kubeconfig, args.record))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
