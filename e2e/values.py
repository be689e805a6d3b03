"""The chart values both e2e modes install with, so local and kind run the same cluster:
three brokers, one per zone, replicated so that min.insync.replicas=2 holds with one
broker down; each mode adds only what its platform needs (ZooKeeper, storage, image tag).
"""

from __future__ import annotations

import copy
from typing import Any

BROKER_VALUES: dict[str, Any] = {
    "replicas": 3,
    "zones": ["a", "b", "c"],
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
