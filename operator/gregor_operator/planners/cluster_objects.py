"""The Kubernetes objects a GregorCluster owns, rendered from its spec (pure).

ConfigMap (``server.properties`` with Kafka's names), headless Service (stable broker
addresses), client Service (bootstrap), PodDisruptionBudget (one broker down at a time) and
the broker StatefulSet. Broker id = pod ordinal, read from the pod label
``apps.kubernetes.io/pod-index`` through the downward API; the rack is the node's topology
label (``spec.rackTopologyKey``), which Kubernetes copies onto the pod (PodTopologyLabels
admission, 1.33+) and the downward API passes on as ``GREGOR_BROKER_RACK``.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from gregor_operator.planners.cluster_security import ClusterSecurity, plan_security
from gregor_operator.planners.topics import config_string

BROKER_PORT = 9092
METRICS_PORT = 9404
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"
DEFAULT_RACK_KEY = "topology.kubernetes.io/zone"
CONFIG_HASH_ANNOTATION = "gregor.dev/config-hash"


def labels(name: str) -> dict[str, str]:
    """The broker pods' labels and every selector of them. ``component`` keeps them apart
    from the release's ZooKeeper and operator pods, which share name and instance."""
    return {
        "app.kubernetes.io/name": "gregor",
        "app.kubernetes.io/instance": name,
        "app.kubernetes.io/component": "broker",
    }


def label_selector(name: str) -> str:
    return ",".join(f"{k}={v}" for k, v in labels(name).items())


def headless_service_name(name: str) -> str:
    return f"{name}-brokers"


def metrics_port(spec: Mapping[str, Any]) -> int | None:
    """The brokers' ``metrics.port`` (/metrics, /healthz, /readyz), None with metrics off.

    ``spec.metrics.port`` (default 9404), or a ``metrics.port`` in ``spec.config`` (what
    the chart sets), which wins so that the container port and probes follow it."""
    metrics = spec.get("metrics") or {}
    if not metrics.get("enabled", True):
        return None
    configured = (spec.get("config") or {}).get("metrics.port")
    return int(configured if configured is not None else metrics.get("port", METRICS_PORT))


def pod_address(name: str, namespace: str) -> str:
    """A broker pod's DNS name through the headless Service (``$(POD_NAME)`` expanded by
    Kubernetes in the pod's environment)."""
    return f"$(POD_NAME).{headless_service_name(name)}.{namespace}.svc"


def server_properties(
    name: str, namespace: str, spec: Mapping[str, Any], security: ClusterSecurity | None = None
) -> str:
    """The brokers' shared ``server.properties``; per-pod values come from the environment,
    and so do secrets (``cluster_security``)."""
    security = security or plan_security(spec, pod_address(name, namespace))
    properties = {
        "zookeeper.connect": spec["zookeeper"]["connect"],
        "log.dirs": "/var/lib/gregor/data",
        "listeners": f"PLAINTEXT://0.0.0.0:{BROKER_PORT}",
        **security.properties,
    }
    config = {k: config_string(v) for k, v in (spec.get("config") or {}).items()}
    port = metrics_port(spec)
    if port is None:
        config.pop("metrics.port", None)
    else:
        properties["metrics.port"] = str(port)
    properties.update(config)
    lines = [f"# Rendered by gregor-operator for GregorCluster {namespace}/{name}."]
    lines += [f"{key}={value}" for key, value in sorted(properties.items())]
    return "\n".join(lines) + "\n"


# What a running broker's pod is made of: a change rolls the brokers. The first four are
# always hashed (as the first operator version did); the others only once set, so an
# operator upgrade alone restarts nothing.
RESTART_KEYS = ("config", "image", "resources", "zookeeper")
RESTART_KEYS_WHEN_SET = (
    "metrics", "zones", "affinity", "tolerations", "nodeSelector", "security",
)  # fmt: skip


def config_hash(spec: Mapping[str, Any]) -> str:
    """Changes when a broker needs a restart (configs, image, resources, placement)."""
    relevant = {k: spec.get(k) for k in RESTART_KEYS}
    relevant.update({k: spec[k] for k in RESTART_KEYS_WHEN_SET if spec.get(k) is not None})
    return hashlib.sha256(json.dumps(relevant, sort_keys=True).encode()).hexdigest()[:16]


def placement(spec: Mapping[str, Any], rack_key: str, selector: Mapping[str, str]) -> dict:
    """Pod spec fields that place brokers: spread over ``rack_key`` values, ``spec.zones``
    as a required node affinity on that key (added to every node selector term of
    ``spec.affinity``), and ``spec.affinity``, ``spec.tolerations``, ``spec.nodeSelector``
    passed through, like Strimzi's rack.topologyKey and pod template."""
    zones = list(spec.get("zones") or ())
    fields: dict[str, Any] = {
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": rack_key,
                # Zones named: spread over them for sure (a rack per zone is the point).
                "whenUnsatisfiable": "DoNotSchedule" if len(zones) > 1 else "ScheduleAnyway",
                "labelSelector": {"matchLabels": dict(selector)},
            }
        ]
    }
    affinity = copy.deepcopy(dict(spec.get("affinity") or {}))
    if zones:
        expression = {"key": rack_key, "operator": "In", "values": zones}
        node = affinity.setdefault("nodeAffinity", {})
        required = node.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
        terms = required.setdefault("nodeSelectorTerms", [])
        if not terms:
            terms.append({})
        for term in terms:
            term.setdefault("matchExpressions", []).append(expression)
    if affinity:
        fields["affinity"] = affinity
    if spec.get("tolerations"):
        fields["tolerations"] = copy.deepcopy(list(spec["tolerations"]))
    if spec.get("nodeSelector"):
        fields["nodeSelector"] = dict(spec["nodeSelector"])
    return fields


def render(
    name: str,
    namespace: str,
    spec: Mapping[str, Any],
    replicas: int,
    statefulset_selector: Mapping[str, str] | None = None,
) -> list[dict]:
    """Every owned object; ``replicas`` is the StatefulSet's (the operator's decision, which
    lags ``spec.replicas`` while replicas move). ``statefulset_selector``: an existing
    StatefulSet's selector, kept (it is immutable; an earlier version's lacked
    ``component``, and the pods' labels still include it). SecurityRefused when
    ``spec.security`` cannot work."""
    selector = labels(name)
    security = plan_security(spec, pod_address(name, namespace))
    headless = headless_service_name(name)
    rack_key = spec.get("rackTopologyKey") or DEFAULT_RACK_KEY
    storage = spec.get("storage") or {}
    claim_spec: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": storage.get("size", "10Gi")}},
    }
    if storage.get("storageClassName"):
        claim_spec["storageClassName"] = storage["storageClassName"]
    env = [
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {
            "name": "GREGOR_BROKER_ID",
            "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{POD_INDEX_LABEL}']"}},
        },
        {
            "name": "GREGOR_BROKER_RACK",
            "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{rack_key}']"}},
        },
        {"name": "GREGOR_ADVERTISED_LISTENERS", "value": security.advertised},
        *security.env,
    ]
    port = metrics_port(spec)
    if port is None:
        ready_check = live_check = {"tcpSocket": {"port": "kafka"}}
    else:
        ready_check = {"httpGet": {"path": "/readyz", "port": "metrics"}}
        live_check = {"httpGet": {"path": "/healthz", "port": "metrics"}}
    container = {
        "name": "broker",
        "image": spec.get("image") or "gregor-broker:latest",
        "command": ["gregor-broker", "--config", "/etc/gregor/server.properties"],
        "env": env,
        "ports": [{"name": n, "containerPort": p} for n, p in security.ports],
        # With metrics on, the broker's own /readyz (registered, ZooKeeper reachable) and
        # /healthz (event loop answers); with metrics off, the Kafka port accepting.
        "readinessProbe": {**ready_check, "periodSeconds": 5, "timeoutSeconds": 5},
        "livenessProbe": {**live_check, "periodSeconds": 10, "failureThreshold": 6},
        "volumeMounts": [
            {"name": "config", "mountPath": "/etc/gregor"},
            {"name": "data", "mountPath": "/var/lib/gregor"},
        ],
    }
    if port is not None:
        container["ports"].append({"name": "metrics", "containerPort": port})
    if spec.get("resources"):
        container["resources"] = spec["resources"]
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"{name}-config", "namespace": namespace, "labels": selector},
        "data": {"server.properties": server_properties(name, namespace, spec, security)},
    }
    ports = [{"name": n, "port": p, "targetPort": n} for n, p in security.ports]
    headless_service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": headless, "namespace": namespace, "labels": selector},
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": selector,
            "ports": ports,
        },
    }
    client_service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace, "labels": selector},
        "spec": {"selector": selector, "ports": ports[:1]},  # clients: the CLIENT listener
    }
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": namespace, "labels": selector},
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": selector}},
    }
    statefulset = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name, "namespace": namespace, "labels": selector},
        "spec": {
            "serviceName": headless,
            "replicas": replicas,
            "podManagementPolicy": "Parallel",
            # The operator restarts brokers itself, one at a time and min-ISR gated.
            "updateStrategy": {"type": "OnDelete"},
            "selector": {"matchLabels": dict(statefulset_selector or selector)},
            "template": {
                "metadata": {
                    "labels": selector,
                    "annotations": {CONFIG_HASH_ANNOTATION: config_hash(spec)},
                },
                "spec": {
                    "terminationGracePeriodSeconds": 60,
                    **placement(spec, rack_key, selector),
                    "containers": [container],
                    "volumes": [{"name": "config", "configMap": {"name": f"{name}-config"}}],
                },
            },
            "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": claim_spec}],
            "persistentVolumeClaimRetentionPolicy": {
                "whenDeleted": "Retain",
                "whenScaled": "Retain",
            },
        },
    }
    return [config_map, headless_service, client_service, pdb, statefulset]
