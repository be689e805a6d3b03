"""Setting and clearing the replication throttles of a reassignment in ZooKeeper, as
kafka-reassign-partitions --throttle / --verify do.

Shared by ``gregor reassign`` and the operator (topic replica changes, scaling,
GregorRebalance). Owns which configs a throttled move writes; the arithmetic of the
throttle itself is ``throttle``'s, the ZooKeeper I/O ``ZkAdmin``'s.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from gregor_broker.cluster.admin import ZkAdmin
from gregor_broker.replication.throttle import (
    FOLLOWER_RATE,
    FOLLOWER_REPLICAS,
    LEADER_RATE,
    LEADER_REPLICAS,
)

Plan = Mapping[tuple[str, int], tuple[int, ...]]


def throttle_configs(plan: Plan, current: Plan) -> dict[str, dict[str, str]]:
    """Kafka's throttled-replica lists per topic, as kafka-reassign-partitions writes them:
    leader side = the existing replicas of moving partitions (whichever of them leads
    serves the copy), follower side = the replicas being added."""
    per_topic: dict[str, dict[str, list[str]]] = {}
    for (topic, index), target in plan.items():
        before = current[(topic, index)]
        adding = [b for b in target if b not in before]
        if not adding:
            continue
        entry = per_topic.setdefault(topic, {LEADER_REPLICAS: [], FOLLOWER_REPLICAS: []})
        entry[LEADER_REPLICAS] += [f"{index}:{b}" for b in before]
        entry[FOLLOWER_REPLICAS] += [f"{index}:{b}" for b in adding]
    return {topic: {k: ",".join(v) for k, v in entry.items()} for topic, entry in per_topic.items()}


def apply_throttles(admin: ZkAdmin, plan: Plan, current: Plan, rate: int) -> None:
    """Write the throttled-replica lists of the moving partitions and ``rate`` (bytes/s)
    as both replication rates of every broker involved."""
    for topic, throttles in throttle_configs(plan, current).items():
        config = admin.get_topic_config(topic)
        config.update(throttles)
        admin.set_topic_config(topic, config)
    brokers = {b for replicas in [*plan.values(), *current.values()] for b in replicas}
    for broker in sorted(brokers):
        config = admin.get_entity_config(f"brokers/{broker}")
        config[LEADER_RATE] = str(rate)
        config[FOLLOWER_RATE] = str(rate)
        admin.set_entity_config(f"brokers/{broker}", config)


def remove_throttles(admin: ZkAdmin, topics: Iterable[str]) -> bool:
    """Clear what ``apply_throttles`` set: both throttled-replica lists of ``topics`` and
    both rates of every broker, like kafka-reassign-partitions --verify. Kafka clears only
    the live brokers; Gregor also clears brokers that are down, which would otherwise come
    back still throttled. Returns whether anything was removed."""
    removed = False
    for topic in sorted(set(topics)):
        config = admin.get_topic_config(topic)
        if LEADER_REPLICAS in config or FOLLOWER_REPLICAS in config:
            config.pop(LEADER_REPLICAS, None)
            config.pop(FOLLOWER_REPLICAS, None)
            if admin.get_topic(topic) is not None:  # a deleted topic keeps no configs
                admin.set_topic_config(topic, config)
            removed = True
    for broker in sorted(set(admin.list_brokers()) | admin.list_broker_config_entities()):
        config = admin.get_entity_config(f"brokers/{broker}")
        if LEADER_RATE in config or FOLLOWER_RATE in config:
            config.pop(LEADER_RATE, None)
            config.pop(FOLLOWER_RATE, None)
            admin.set_entity_config(f"brokers/{broker}", config)
            removed = True
    return removed
