"""The Kubernetes objects a GregorCluster owns, rendered from its spec (pure).

ConfigMap (``server.properties`` with Kafka's names), headless Service (stable broker
addresses), client Service (bootstrap), PodDisruptionBudget (one broker down at a time) and
the broker StatefulSet. Broker id = pod ordinal, read from the pod label
``apps.kubernetes.io/pod-index`` through the downward API; the rack is the node's topology
label (``spec.rackTopologyKey``), which Kubernetes copies onto the pod (PodTopologyLabels
admission, 1.33+) and the downward API passes on as ``GREGOR_BROKER_RACK``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from gregor_operator.planners.topics import config_string

BROKER_PORT = 9092
METRICS_PORT = 9404
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"
DEFAULT_RACK_KEY = "topology.kubernetes.io/zone"
CONFIG_HASH_ANNOTATION = "gregor.dev/config-hash"


def labels(name: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": "gregor", "app.kubernetes.io/instance": name}


def label_selector(name: str) -> str:
    return ",".join(f"{k}={v}" for k, v in labels(name).items())


def headless_service_name(name: str) -> str:
    return f"{name}-brokers"


def server_properties(name: str, namespace: str, spec: Mapping[str, Any]) -> str:
    """The brokers' shared ``server.properties``; per-pod values come from the environment."""
    properties = {
        "zookeeper.connect": spec["zookeeper"]["connect"],
        "log.dirs": "/var/lib/gregor/data",
        "listeners": f"PLAINTEXT://0.0.0.0:{BROKER_PORT}",
        "metrics.port": str(METRICS_PORT),
    }
    properties.update({k: config_string(v) for k, v in (spec.get("config") or {}).items()})
    lines = [f"# Rendered by gregor-operator for GregorCluster {namespace}/{name}."]
    lines += [f"{key}={value}" for key, value in sorted(properties.items())]
    return "\n".join(lines) + "\n"


def config_hash(spec: Mapping[str, Any]) -> str:
    """Changes when a broker needs a restart (configs, image, resources)."""
    relevant = {k: spec.get(k) for k in ("config", "image", "resources", "zookeeper")}
    return hashlib.sha256(json.dumps(relevant, sort_keys=True).encode()).hexdigest()[:16]


def render(name: str, namespace: str, spec: Mapping[str, Any], replicas: int) -> list[dict]:
    """Every owned object; ``replicas`` is the StatefulSet's (the operator's decision, which
    lags ``spec.replicas`` while replicas move)."""
    selector = labels(name)
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
        {
            "name": "GREGOR_ADVERTISED_LISTENERS",
            "value": f"PLAINTEXT://$(POD_NAME).{headless}.{namespace}.svc:{BROKER_PORT}",
        },
    ]
    container = {
        "name": "broker",
        "image": spec.get("image") or "gregor-broker:latest",
        "command": ["gregor-broker", "--config", "/etc/gregor/server.properties"],
        "env": env,
        "ports": [
            {"name": "kafka", "containerPort": BROKER_PORT},
            {"name": "metrics", "containerPort": METRICS_PORT},
        ],
        "readinessProbe": {
            "httpGet": {"path": "/readyz", "port": "metrics"},
            "periodSeconds": 5,
            "timeoutSeconds": 5,
        },
        "livenessProbe": {
            "httpGet": {"path": "/healthz", "port": "metrics"},
            "periodSeconds": 10,
            "failureThreshold": 6,
        },
        "volumeMounts": [
            {"name": "config", "mountPath": "/etc/gregor"},
            {"name": "data", "mountPath": "/var/lib/gregor"},
        ],
    }
    if spec.get("resources"):
        container["resources"] = spec["resources"]
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"{name}-config", "namespace": namespace, "labels": selector},
        "data": {"server.properties": server_properties(name, namespace, spec)},
    }
    ports = [{"name": "kafka", "port": BROKER_PORT, "targetPort": "kafka"}]
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
        "spec": {"selector": selector, "ports": ports},
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
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {
                    "labels": selector,
                    "annotations": {CONFIG_HASH_ANNOTATION: config_hash(spec)},
                },
                "spec": {
                    "terminationGracePeriodSeconds": 60,
                    "topologySpreadConstraints": [
                        {
                            "maxSkew": 1,
                            "topologyKey": rack_key,
                            "whenUnsatisfiable": "ScheduleAnyway",
                            "labelSelector": {"matchLabels": selector},
                        }
                    ],
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
