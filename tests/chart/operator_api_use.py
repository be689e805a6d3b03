"""Which Kubernetes API verbs gregor-operator's code uses, read from its source.

Three sources of API calls, each mapped to RBAC (api group, resource, verb) triples:

- kopf handlers on a resource (``@kopf.on.create/update/resume/delete/field``,
  ``@kopf.timer``, ``@kopf.daemon``): kopf lists and watches the resource, and patches it
  (finalizer, progress and diff-base annotations); a handler that writes ``patch.status``
  or returns a value patches the ``status`` subresource when the CRD declares one.
  ``@kopf.index`` and ``@kopf.on.event`` only list and watch;
- kopf's event posting (``kopf.info/warn/event/exception``): ``create`` on core events;
- direct ``kubernetes`` client calls, by the client's method names
  (``create_namespaced_stateful_set``, ``read_node``, ...).

The chart's RBAC (charts/gregor/files/operator-rbac.yaml) must grant exactly this set.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import yaml

from .render import CRDS, ROOT

OPERATOR = ROOT / "operator" / "gregor_operator"

Grant = tuple[str, str, str]  # (api group, resource[/subresource], verb)

WATCHING = {"create", "update", "resume", "delete", "field", "timer", "daemon"}
LIST_ONLY = {"index", "event"}
EVENT_POSTING = {"info", "warn", "event", "exception"}
# kubernetes client verbs -> RBAC verbs.
CLIENT_VERBS = {
    "create": "create",
    "patch": "patch",
    "replace": "update",
    "delete": "delete",
    "read": "get",
    "list": "list",
}
# snake_case names in the client's method names -> (api group, plural).
CLIENT_RESOURCES = {
    "stateful_set": ("apps", "statefulsets"),
    "stateful_set_scale": ("apps", "statefulsets/scale"),
    "stateful_set_status": ("apps", "statefulsets/status"),
    "deployment": ("apps", "deployments"),
    "config_map": ("", "configmaps"),
    "service": ("", "services"),
    "pod": ("", "pods"),
    "pod_status": ("", "pods/status"),
    "persistent_volume_claim": ("", "persistentvolumeclaims"),
    "event": ("", "events"),
    "pod_disruption_budget": ("policy", "poddisruptionbudgets"),
    "node": ("", "nodes"),
    "namespace": ("", "namespaces"),
    "secret": ("", "secrets"),
    "lease": ("coordination.k8s.io", "leases"),
}
CLUSTER_SCOPED = {"nodes", "namespaces"}
CLIENT_CALL = re.compile(
    r"\b(create|patch|replace|delete|read|list)_(namespaced_)?([a-z_]+?)(_for_all_namespaces)?\("
)


def _crd_status_subresources() -> set[str]:
    plurals = set()
    for path in CRDS.glob("*.yaml"):
        crd = yaml.safe_load(path.read_text())
        for version in crd["spec"]["versions"]:
            if "status" in (version.get("subresources") or {}):
                plurals.add(crd["spec"]["names"]["plural"])
    return plurals


def _constants(tree: ast.Module) -> dict[str, str]:
    return {
        target.id: node.value.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
        for target in node.targets
        if isinstance(target, ast.Name) and isinstance(node.value.value, str)
    }


def _kopf_attribute(func: ast.expr) -> str | None:
    """``kopf.on.create`` -> "create", ``kopf.index`` -> "index"; None for others."""
    if isinstance(func, ast.Attribute):
        owner = func.value
        if isinstance(owner, ast.Name) and owner.id == "kopf":
            return func.attr
        if (
            isinstance(owner, ast.Attribute)
            and owner.attr == "on"
            and isinstance(owner.value, ast.Name)
            and owner.value.id == "kopf"
        ):
            return func.attr
    return None


def _writes_status(function: ast.AST) -> bool:
    for node in ast.walk(function):
        if (
            isinstance(node, ast.Attribute)
            and node.attr == "status"
            and isinstance(node.value, ast.Name)
            and node.value.id == "patch"
        ):
            return True
        if isinstance(node, ast.Return) and node.value is not None:
            return True
    return False


def derive_grants(source_dir: Path = OPERATOR) -> set[Grant]:
    files = sorted(source_dir.rglob("*.py"))
    trees = {path: ast.parse(path.read_text(), str(path)) for path in files}
    constants: dict[str, str] = {}
    for tree in trees.values():
        constants.update(_constants(tree))
    with_status = _crd_status_subresources()
    grants: set[Grant] = set()
    for path, tree in trees.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                name = _kopf_attribute(node.func)
                if name in EVENT_POSTING:
                    grants.add(("", "events", "create"))
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for decorator in node.decorator_list:
                if not isinstance(decorator, ast.Call):
                    continue
                kind = _kopf_attribute(decorator.func)
                if kind not in WATCHING | LIST_ONLY:
                    continue
                words = [
                    constants.get(a.id) if isinstance(a, ast.Name) else getattr(a, "value", None)
                    for a in decorator.args
                ]
                if len(words) < 3:
                    continue  # a handler without a resource (login, startup, ...)
                group, _version, plural = words[0], words[1], words[-1]
                assert isinstance(group, str) and isinstance(plural, str), (path, words)
                grants |= {(group, plural, "list"), (group, plural, "watch")}
                if kind in WATCHING:
                    grants.add((group, plural, "patch"))
                    # The handler, or a helper in its module, writes patch.status.
                    if plural in with_status and (_writes_status(node) or _writes_status(tree)):
                        grants.add((group, f"{plural}/status", "patch"))
        text = path.read_text()
        for match in CLIENT_CALL.finditer(text):
            verb, _namespaced, resource, _all = match.groups()
            if resource not in CLIENT_RESOURCES:
                continue
            group, plural = CLIENT_RESOURCES[resource]
            grants.add((group, plural, CLIENT_VERBS[verb]))
        if re.search(r"\bwatch\.Watch\(\)", text):
            for match in re.finditer(r"stream\(\s*[\w.]*\.list_(namespaced_)?([a-z_]+)", text):
                group, plural = CLIENT_RESOURCES[match.group(2)]
                grants.add((group, plural, "watch"))
    return grants


def granted(objects: list[dict]) -> tuple[set[Grant], set[Grant]]:
    """(namespaced grants from Roles, cluster grants from ClusterRoles) of rendered RBAC."""
    namespaced: set[Grant] = set()
    cluster: set[Grant] = set()
    for obj in objects:
        if obj["kind"] not in ("Role", "ClusterRole"):
            continue
        target = namespaced if obj["kind"] == "Role" else cluster
        for rule in obj.get("rules") or []:
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    for verb in rule["verbs"]:
                        target.add((group, resource, verb))
    return namespaced, cluster
