"""Reads what the rebalance planners need from ZooKeeper (through ``ZkAdmin``) and starts
the moves they plan; shared by ``gregor-operator plan``, GregorRebalance and GregorCluster
scaling, and what a rolling restart decides on. The decisions are the planners'.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from gregor_broker.cluster.admin import ZkAdmin
from gregor_broker.cluster.models import PartitionReassignment
from gregor_broker.replication.reassignment_throttles import apply_throttles, remove_throttles
from gregor_operator.planners.cluster_objects import config_hash
from gregor_operator.planners.rebalance import (
    Plan,
    PlanRefused,
    plan_balance,
    plan_preferred_leaders,
    plan_remove_brokers,
    summary,
)
from gregor_operator.planners.rolling import BrokerPod, RollObservation

MODES = ("full", "add-brokers", "remove-brokers", "preferred-leaders")
DESCRIBE_LOG_DIRS = 35
Key = tuple[str, int]


@dataclass
class ClusterView:
    brokers: dict[int, str | None]
    assignment: dict[tuple[str, int], tuple[int, ...]]
    leaders: dict[tuple[str, int], int]
    isr: dict[tuple[str, int], tuple[int, ...]]


def read_cluster(admin: ZkAdmin, excluded: Iterable[str] = ()) -> ClusterView:
    skip = set(excluded) | set(admin.topics_marked_for_deletion())
    brokers = {b: r.rack for b, r in admin.list_brokers().items()}
    assignment: dict[tuple[str, int], tuple[int, ...]] = {}
    leaders: dict[tuple[str, int], int] = {}
    isr: dict[tuple[str, int], tuple[int, ...]] = {}
    for topic in admin.list_topics():
        if topic in skip:
            continue
        found = admin.get_topic(topic)
        if found is None:
            continue
        for partition, replicas in found.partitions.items():
            key = (topic, partition)
            assignment[key] = tuple(replicas)
            state = admin.get_partition_state(topic, partition)
            if state is not None:
                leaders[key] = state[0].leader
                isr[key] = tuple(state[0].isr)
    return ClusterView(brokers, assignment, leaders, isr)


def roll_observation(
    admin: ZkAdmin,
    view: ClusterView,
    spec: Mapping[str, Any],
    replicas: int,
    pods: Mapping[int, BrokerPod],
) -> RollObservation:
    """What a rolling restart decides on: pods, registrations, the controller, ISRs and
    each topic's min.insync.replicas (its override, else the brokers' configured default)."""
    default = int((spec.get("config") or {}).get("min.insync.replicas", 1))
    min_isr = {}
    for topic in {t for t, _ in view.assignment}:
        override = admin.get_topic_config(topic).get("min.insync.replicas")
        min_isr[topic] = int(override) if override is not None else default
    controller = admin.get_controller()
    return RollObservation(
        desired_hash=config_hash(spec),
        replicas=replicas,
        pods=pods,
        registered=frozenset(view.brokers),
        controller=controller.broker_id if controller is not None else None,
        assignment=view.assignment,
        isr=view.isr,
        min_isr=min_isr,
    )


def compute_plan(
    view: ClusterView, mode: str, brokers: Iterable[int] = (), all_brokers: dict | None = None
) -> Plan:
    """The target assignment for ``mode``; raises PlanRefused (or ValueError for bad input)."""
    known = dict(all_brokers if all_brokers is not None else view.brokers)
    chosen = set(brokers)
    unknown = chosen - set(known)
    if unknown:
        raise PlanRefused(f"brokers {sorted(unknown)} are not registered; check spec.brokers")
    if mode == "remove-brokers":
        return plan_remove_brokers(view.assignment, known, chosen)
    if mode == "add-brokers":
        return plan_balance(view.assignment, known, onto=chosen)
    if mode == "full":
        return plan_balance(view.assignment, known)
    if mode == "preferred-leaders":
        return Plan({}, {})
    raise ValueError(f"unknown mode {mode!r}; one of {', '.join(MODES)}")


def describe(
    view: ClusterView, mode: str, plan: Plan, sizes: Mapping[Key, int] | None = None
) -> dict[str, Any]:
    info = summary(plan, view.assignment, view.brokers, sizes)
    if mode == "preferred-leaders":
        elect = plan_preferred_leaders(view.assignment, view.leaders, view.brokers, view.isr)
        info["preferredLeaderElections"] = [f"{t}-{p}" for t, p in elect]
    return info


def replica_sizes(admin: ZkAdmin, timeout: float = 10.0) -> dict[tuple[int, Key], int]:
    """``(broker, (topic, partition)) -> bytes`` of every replica, from each registered
    broker's DescribeLogDirs (a broker that does not answer is left out)."""
    # Imported here, not at the top: the Kafka client pulls in the protocol library (kio
    # and, through it, hypothesis), which is most of the operator's start-up on a busy
    # machine, and only a rebalance plan needs it; the preferred-leader checks start sooner.
    from gregor_broker.replication.client import BrokerClient, BrokerConnectionError

    brokers = {b: (r.host, r.port) for b, r in admin.list_brokers().items() if r.host}

    async def ask(broker: int, host: str, port: int) -> dict[tuple[int, Key], int]:
        client = BrokerClient(host, port, "gregor-operator", timeout=timeout)
        try:
            response = await client.request(DESCRIBE_LOG_DIRS, 1, {"topics": None})
        except BrokerConnectionError:
            return {}
        finally:
            await client.close()
        return {
            (broker, (topic.name, int(p.partition_index))): int(p.partition_size)
            for result in response.results
            for topic in result.topics
            for p in topic.partitions
        }

    async def ask_all() -> dict[tuple[int, Key], int]:
        found: dict[tuple[int, Key], int] = {}
        for part in await asyncio.gather(*(ask(b, h, p) for b, (h, p) in brokers.items())):
            found.update(part)
        return found

    return asyncio.run(ask_all())


def partition_sizes(replicas: Mapping[tuple[int, Key], int]) -> dict[Key, int]:
    """A partition's size: its largest replica's (the leader's, give or take)."""
    sizes: dict[Key, int] = {}
    for (_, key), size in replicas.items():
        sizes[key] = max(sizes.get(key, 0), size)
    return sizes


def bytes_progress(plan: Plan, replicas: Mapping[tuple[int, Key], int]) -> tuple[int, int]:
    """``(bytes moved, bytes to move)`` of a plan: every replica it adds must copy the
    partition; what an adding replica already holds counts as moved (at most the size)."""
    sizes = partition_sizes(replicas)
    moved = total = 0
    for key, target in plan.target.items():
        for broker in set(target) - set(plan.current.get(key, ())):
            size = sizes.get(key, 0)
            total += size
            moved += min(size, replicas.get((broker, key), 0))
    return moved, total


def cancel_moves(admin: ZkAdmin, plan: Plan) -> list[Key]:
    """KIP-455 cancel: every partition of ``plan`` still moving is reassigned back to its
    replicas before the plan (the controller drops the adding replicas); finished ones
    stay where they are, as Kafka's cancel leaves completed moves. Returns those reverted."""
    reverted = {}
    for key, target in plan.target.items():
        found = admin.get_topic(key[0])
        if found is None or key[1] not in found.partitions:
            continue
        moving = key[1] in found.adding_replicas or key[1] in found.removing_replicas
        if moving or tuple(found.partitions[key[1]]) != tuple(target):
            # Moving, or requested and not started yet (then reverting is a no-op move).
            reverted[key] = tuple(plan.current[key])
    if reverted:
        admin.merge_reassignment(reverted)
    return sorted(reverted)


def start_moves(admin: ZkAdmin, plan: Plan, throttle: int) -> bool:
    """Throttle and start ``plan`` (one ``/admin/reassign_partitions``); False when another
    reassignment is in flight (try again later)."""
    if not plan.target:
        return True
    if admin.get_reassignment() is not None:
        return False
    apply_throttles(admin, plan.target, plan.current, throttle)
    admin.request_reassignment(PartitionReassignment(plan.target))
    return True


def moves_done(admin: ZkAdmin, plan: Plan) -> tuple[int, int]:
    """``(partitions done, partitions total)`` of a started plan."""
    done = 0
    for (topic, partition), target in plan.target.items():
        found = admin.get_topic(topic)
        if found is None:
            done += 1  # deleted meanwhile: nothing left to move
            continue
        if (
            tuple(found.partitions.get(partition, ())) == tuple(target)
            and partition not in found.adding_replicas
            and partition not in found.removing_replicas
        ):
            done += 1
    return done, len(plan.target)


def finish_moves(admin: ZkAdmin, plan: Plan) -> bool:
    """Clear the plan's throttles once nothing moves any more, as
    kafka-reassign-partitions --verify does; False (nothing cleared) while
    ``/admin/reassign_partitions`` still exists. The controller writes a finished
    partition's replicas before it drops the partition from that node, so a plan can read
    as done (``moves_done``) a moment before this succeeds: call again until it does."""
    if admin.get_reassignment() is not None:
        return False
    remove_throttles(admin, {t for t, _ in plan.target})
    return True


def plan_to_json(plan: Plan) -> dict[str, Any]:
    return {
        "target": [[t, p, list(r)] for (t, p), r in sorted(plan.target.items())],
        "current": [[t, p, list(r)] for (t, p), r in sorted(plan.current.items())],
    }


def plan_from_json(data: dict[str, Any]) -> Plan:
    return Plan(
        {(t, p): tuple(r) for t, p, r in data.get("target", [])},
        {(t, p): tuple(r) for t, p, r in data.get("current", [])},
    )
