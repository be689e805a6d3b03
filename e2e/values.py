"""The chart values both e2e modes install with, so local and kind run the same cluster:
three brokers, one per zone, replicated so that min.insync.replicas=2 holds with one
broker down; each mode adds only what its platform needs (ZooKeeper, storage, image tag).
"""

from __future__ import annotations

import copy
from typing import Any

# The brokers' node pool: the label their nodes carry (kind-config.yaml, local.py's fake
# nodes) and the taint that keeps other pods off them (local mode; a kind worker has none,
# where the toleration is harmless).
NODE_POOL = {"gregor.dev/e2e-pool": "brokers"}
POOL_TAINT = {"key": "gregor.dev/e2e-dedicated", "value": "brokers", "effect": "NoSchedule"}

BROKER_VALUES: dict[str, Any] = {
    "replicas": 3,
    "zones": ["a", "b", "c"],
    # Placement passed through the GregorCluster to the broker pods (check_installed
    # asserts the pods carry it and run on the pool's nodes).
    "nodeSelector": NODE_POOL,
    "tolerations": [
        {"key": POOL_TAINT["key"], "operator": "Equal", "value": "brokers", "effect": "NoSchedule"}
    ],
    "affinity": {
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "podAffinityTerm": {
                        "topologyKey": "kubernetes.io/hostname",
                        "labelSelector": {
                            "matchLabels": {
                                "app.kubernetes.io/instance": "gregor",
                                "app.kubernetes.io/component": "broker",
                            }
                        },
                    },
                }
            ]
        }
    },
    "config": {
        "min.insync.replicas": 2,
        "default.replication.factor": 3,
        "offsets.topic.replication.factor": 3,
        # Followers drop out of the ISR within 10 s (Kafka's default is 30 s), so a
        # scenario sees the ISR shrink while its broker is down.
        "replica.lag.time.max.ms": 10000,
    },
}


def merge_values(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """``extra`` over ``base``, maps merged key by key at every depth (as helm merges
    ``--set-json`` into a chart's values); neither argument is changed."""
    merged = copy.deepcopy(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge_values(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged
