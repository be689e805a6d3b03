"""What every handler shares: the operator's settings, its ZooKeeper sessions, per-object
locks, the GregorCluster index and how a resource finds its cluster's ZooKeeper."""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import kopf

from gregor_operator.kube import Kube
from gregor_operator.zookeeper import Sessions

GROUP = "gregor.dev"
VERSION = "v1alpha1"
FINALIZER = "gregor.dev/finalizer"
APPROVE_ANNOTATION = "gregor.dev/approve"


@dataclass
class OperatorConfig:
    """Settings of one operator (``gregor-operator run --help`` documents each)."""

    # ZooKeeper of resources that name no GregorCluster (spec.cluster unset).
    zookeeper_connect: str | None = None
    # API server URL without authentication (the test emulator); None: kubeconfig/in-cluster.
    kube_server: str | None = None
    # Seconds between status refreshes (leaders, ISR, drift) and retries of waiting steps.
    status_interval: float = 10.0
    zookeeper_timeout: float = 5.0
    # A finalizer is released after this many failed attempts to reach ZooKeeper.
    finalizer_retries: int = 3
    finalizer_retry_delay: float = 2.0
    # Replication throttle (bytes/s) for moves of resources without a GregorCluster.
    default_throttle: int = 10 * 1024 * 1024
    # Where /healthz and /metrics are served (0: not served).
    http_port: int = 0
    namespaces: tuple[str, ...] = ()


@dataclass
class Context:
    config: OperatorConfig
    sessions: Sessions
    locks: defaultdict[str, threading.Lock] = field(
        default_factory=lambda: defaultdict(threading.Lock)
    )
    # uid -> topic id the operator created or adopted (status may lag behind).
    topic_ids: dict[str, str] = field(default_factory=dict)
    _kube: list[Kube] = field(default_factory=list)
    _kube_lock: threading.Lock = field(default_factory=threading.Lock)

    def kube(self) -> Kube:
        """The operator's own API client (``kube.Kube``), made on first use."""
        with self._kube_lock:
            if not self._kube:
                self._kube.append(Kube(self.config.kube_server))
            return self._kube[0]


class ClusterNotFound(Exception):
    pass


def cluster_index_value(spec: Mapping[str, Any]) -> dict[str, Any]:
    rebalancing = spec.get("rebalancing") or {}
    return {
        "connect": (spec.get("zookeeper") or {}).get("connect"),
        "throttle": rebalancing.get("throttleBytesPerSecond"),
    }


def register_cluster_index(registry: kopf.OperatorRegistry) -> None:
    @kopf.index(GROUP, VERSION, "gregorclusters", id="gregor_clusters", registry=registry)
    def gregor_clusters(namespace: str, name: str, spec: Mapping[str, Any], **_: Any):
        return {(namespace, name): cluster_index_value(spec)}


def cluster_of(
    ctx: Context, namespace: str, spec: Mapping[str, Any], gregor_clusters: Any
) -> tuple[str, str, int]:
    """``(cluster key, ZooKeeper connect string, move throttle)`` of a resource."""
    name = spec.get("cluster")
    if name:
        found = list(gregor_clusters.get((namespace, name), ()))
        if not found or not found[0].get("connect"):
            raise ClusterNotFound(
                f"GregorCluster {namespace}/{name} (spec.cluster) does not exist or has no "
                "spec.zookeeper.connect; create it or fix spec.cluster"
            )
        throttle = found[0].get("throttle") or ctx.config.default_throttle
        return f"{namespace}/{name}", found[0]["connect"], int(throttle)
    if ctx.config.zookeeper_connect:
        return "<default>", ctx.config.zookeeper_connect, ctx.config.default_throttle
    raise ClusterNotFound(
        "no spec.cluster and the operator has no --zookeeper-connect; set spec.cluster to "
        "a GregorCluster's name"
    )


def replacing(previous: Mapping[str, Any] | None, new: Mapping[str, Any]) -> dict[str, Any]:
    """``new`` as a status map that replaces ``previous``. kopf writes status with a JSON
    merge patch, which merges nested maps key by key: a key gone from ``new`` stays in the
    object for good unless the patch names it with None (delete)."""
    gone = {key: None for key in previous or () if key not in new}
    return {**gone, **new}
