"""What a Topic resource asks of ZooKeeper: create, grow partitions, change the replication
factor (a reassignment), rewrite configs, or refuse with a message naming the fix.

Owns the rules (partitions only grow, configs validated against Gregor's topic config
table, adoption of an existing topic, drift); not the I/O (``handlers.topics``).
Placement is ``gregor_broker.cluster.placement``'s, replica moves
``gregor_broker.cluster.reassignment``'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gregor_broker.cluster.placement import PlacementError, assign_replicas
from gregor_broker.cluster.reassignment import plan_moves
from gregor_broker.config import InvalidConfig, validate_topic_configs
from gregor_broker.replication.throttle import FOLLOWER_REPLICAS, LEADER_REPLICAS

# Set by reassignments while data moves (by the operator or `gregor reassign`): never part of
# a Topic's spec, never drift, kept when the spec's configs are written.
THROTTLE_CONFIGS = frozenset({LEADER_REPLICAS, FOLLOWER_REPLICAS})

Assignment = dict[int, list[int]]


@dataclass(frozen=True)
class TopicSpec:
    """A Topic resource's spec, normalised (config values as Kafka's strings)."""

    resource: str  # "namespace/name", for messages
    name: str
    partitions: int
    replicas: int
    config: Mapping[str, str]

    @classmethod
    def from_resource(cls, namespace: str, name: str, spec: Mapping[str, Any]) -> TopicSpec:
        return cls(
            resource=f"{namespace}/{name}",
            name=spec.get("topicName") or name,
            partitions=int(spec.get("partitions", 1)),
            replicas=int(spec.get("replicas", 1)),
            config={k: config_string(v) for k, v in (spec.get("config") or {}).items()},
        )


@dataclass(frozen=True)
class TopicState:
    """The topic as ZooKeeper has it."""

    partitions: Mapping[int, tuple[int, ...]]
    topic_id: str
    config: Mapping[str, str]
    reassigning: bool = False  # adding/removing replicas recorded in the topic znode

    @property
    def replication_factor(self) -> int:
        return len(next(iter(self.partitions.values()), ()))


@dataclass(frozen=True)
class TopicPlan:
    create: Assignment | None = None
    add_partitions: Assignment | None = None
    reassign: dict[tuple[str, int], tuple[int, ...]] | None = None
    set_config: dict[str, str] | None = None
    refused: str | None = None
    waiting: str | None = None  # nothing wrong, but a step must wait (a move in flight)
    adopted: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def changes(self) -> bool:
        return any(
            x is not None
            for x in (self.create, self.add_partitions, self.reassign, self.set_config)
        )


def config_string(value: Any) -> str:
    """Kafka stores every config value as a string; YAML gives ints and booleans."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def validate_config(spec: TopicSpec) -> str | None:
    """An Error message naming the key and the fix, or None."""
    try:
        validate_topic_configs(spec.config)
    except InvalidConfig as error:
        keys = [k for k in spec.config if k in str(error)] or sorted(spec.config)
        return (
            f"Topic {spec.resource}: invalid config {keys[0]!r}: {error}. Fix spec.config "
            "(names and ranges as in docs/configuration.md)."
        )
    for key in THROTTLE_CONFIGS & set(spec.config):
        return (
            f"Topic {spec.resource}: config {key!r} is set by reassignments while data "
            "moves; remove it from spec.config."
        )
    return None


def desired_config(spec: TopicSpec, current: Mapping[str, str]) -> dict[str, str]:
    """The spec's configs, keeping throttles an in-flight move set."""
    config = dict(spec.config)
    config.update({k: v for k, v in current.items() if k in THROTTLE_CONFIGS})
    return config


def config_drift(spec: TopicSpec, current: Mapping[str, str]) -> dict[str, str]:
    """Configs in ZooKeeper that differ from the spec: ``{key: value in ZooKeeper}``
    (``"<unset>"`` for a spec key missing in ZooKeeper)."""
    drift = {
        k: v for k, v in current.items() if k not in THROTTLE_CONFIGS and spec.config.get(k) != v
    }
    drift.update({k: "<unset>" for k in spec.config if k not in current})
    return drift


def plan_topic(
    spec: TopicSpec,
    state: TopicState | None,
    brokers: Mapping[int, str | None],
    *,
    owned_topic_id: str | None = None,
    apply_config: bool = True,
    start_index: int | None = None,
) -> TopicPlan:
    """Plan one reconcile step of a Topic.

    ``owned_topic_id`` is the topic id in the resource's status (None before the operator
    created or adopted it): a topic that exists with another id is adopted when compatible.
    """
    error = validate_config(spec)
    if error:
        return TopicPlan(refused=error)
    if state is None:
        try:
            assignment = assign_replicas(
                brokers, spec.partitions, spec.replicas, start_index=start_index
            )
        except PlacementError as problem:
            return TopicPlan(
                refused=f"Topic {spec.resource}: cannot place {spec.partitions} partitions "
                f"with {spec.replicas} replicas on brokers {sorted(brokers)}: {problem}. "
                "Lower spec.replicas or add brokers."
            )
        return TopicPlan(create=assignment, set_config=None)
    adopted = owned_topic_id != state.topic_id
    have = len(state.partitions)
    if have > spec.partitions:
        if adopted:
            message = (
                f"Topic {spec.resource}: Kafka topic {spec.name!r} already exists with {have} "
                f"partitions, more than spec.partitions={spec.partitions}; set "
                f"spec.partitions to at least {have} to adopt it, or choose another topicName."
            )
        else:
            message = (
                f"Topic {spec.resource}: cannot shrink partitions from {have} to "
                f"{spec.partitions}; Kafka partitions can only grow. Set spec.partitions back "
                f"to {have}, or create a new Topic and move the data."
            )
        return TopicPlan(refused=message)
    plan: dict[str, Any] = {"adopted": adopted, "notes": []}
    if have < spec.partitions:
        try:
            plan["add_partitions"] = assign_replicas(
                brokers,
                spec.partitions - have,
                state.replication_factor,
                start_index=start_index,
                start_partition_id=have,
            )
        except PlacementError as problem:
            return TopicPlan(
                refused=f"Topic {spec.resource}: cannot add partitions: {problem}. Add brokers "
                "or lower spec.replicas."
            )
    if state.replication_factor != spec.replicas:
        if state.reassigning:
            plan["waiting"] = (
                f"Topic {spec.resource}: replicas {state.replication_factor} -> {spec.replicas} "
                "waits for the reassignment in flight"
            )
        else:
            current = {(spec.name, p): tuple(r) for p, r in state.partitions.items()}
            try:
                plan["reassign"] = plan_moves(current, dict(brokers), spec.replicas)
            except ValueError as problem:
                return TopicPlan(
                    refused=f"Topic {spec.resource}: cannot change replicas from "
                    f"{state.replication_factor} to {spec.replicas}: {problem}. Add brokers "
                    "or lower spec.replicas.",
                    adopted=adopted,
                )
    if apply_config:
        wanted = desired_config(spec, state.config)
        if wanted != dict(state.config):
            plan["set_config"] = wanted
    return TopicPlan(**plan)


@dataclass(frozen=True)
class PartitionStatus:
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


def topic_status(
    partitions: Mapping[int, tuple[int, ...]],
    states: Mapping[int, tuple[int, tuple[int, ...]] | None],
    live_brokers: set[int],
) -> dict[str, Any]:
    """Status fields of a topic: per-partition leader/replicas/ISR, under-replicated and
    offline counts (Kafka's definitions: ISR smaller than the replicas; no live leader)."""
    rows = []
    under = offline = 0
    for partition in sorted(partitions):
        replicas = tuple(partitions[partition])
        leader, isr = states.get(partition) or (-1, ())
        if len(isr) < len(replicas):
            under += 1
        if leader < 0 or leader not in live_brokers:
            offline += 1
        rows.append(
            {"partition": partition, "leader": leader, "replicas": list(replicas), "isr": list(isr)}
        )
    return {
        "partitions": rows,
        "partitionCount": len(rows),
        "replicationFactor": len(next(iter(partitions.values()), ())),
        "underReplicatedPartitions": under,
        "offlinePartitions": offline,
    }
