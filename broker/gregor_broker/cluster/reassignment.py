"""Partition reassignment (KIP-455) and preferred leaders as pure planning steps.

A reassignment moves a partition from its original replicas (ORS) to target replicas
(TRS) without a moment below the ISR it had:
1. the leader epoch is bumped, then the topic znode lists the full set RS = TRS + ORS,
   with ``adding_replicas`` = TRS - ORS and ``removing_replicas`` = ORS - TRS (new
   replicas start fetching);
2. the controller waits until every target replica is in the ISR;
3. if the leader is not a target replica, leadership moves to one that is in sync;
4. the old replicas leave the ISR (3 and 4 at a new leader epoch) and the topic znode is
   rewritten with RS = TRS last.

The controller applies these steps; this module only computes them, so the rules are
tested without ZooKeeper.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ReassignmentStart:
    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]


def original_replicas(replicas: tuple[int, ...], adding: tuple[int, ...]) -> tuple[int, ...]:
    """ORS of a partition whose reassignment is in flight (RS minus the adding ones)."""
    return tuple(r for r in replicas if r not in adding)


def start(original: tuple[int, ...], target: tuple[int, ...]) -> ReassignmentStart:
    """Step 1. Matches Kafka: RS = (TRS ++ ORS).distinct, target first."""
    replicas = tuple(dict.fromkeys(target + original))
    adding = tuple(r for r in target if r not in original)
    removing = tuple(r for r in original if r not in target)
    return ReassignmentStart(replicas, adding, removing)


def target_in_sync(target: tuple[int, ...], isr: tuple[int, ...]) -> bool:
    """Step 2's condition."""
    return all(replica in isr for replica in target)


@dataclass(frozen=True, slots=True)
class Completion:
    leader: int
    isr: tuple[int, ...]
    leader_changes: bool


def complete(target: tuple[int, ...], leader: int, isr: tuple[int, ...]) -> Completion | None:
    """Steps 3 and 4: the leader and ISR once the old replicas are gone; None if no
    target replica is in sync yet (the reassignment cannot finish)."""
    in_sync_targets = tuple(r for r in target if r in isr)
    if not in_sync_targets:
        return None
    if leader in target:
        return Completion(leader, in_sync_targets, False)
    return Completion(in_sync_targets[0], in_sync_targets, True)


def preferred_leader(replicas: tuple[int, ...]) -> int:
    """Kafka's preferred leader: the first replica of the assignment."""
    return replicas[0] if replicas else -1


def can_elect_preferred(replicas: tuple[int, ...], isr: tuple[int, ...], live: set[int]) -> bool:
    preferred = preferred_leader(replicas)
    return preferred in isr and preferred in live


def imbalanced_brokers(
    assignments: dict[tuple[str, int], tuple[tuple[int, ...], int]], percentage: int
) -> set[int]:
    """Brokers whose share of partitions led by someone else, among those they are
    preferred leader of, exceeds ``leader.imbalance.per.broker.percentage``."""
    preferred_total: dict[int, int] = {}
    not_leading: dict[int, int] = {}
    for replicas, leader in assignments.values():
        preferred = preferred_leader(replicas)
        if preferred < 0:
            continue
        preferred_total[preferred] = preferred_total.get(preferred, 0) + 1
        if leader != preferred:
            not_leading[preferred] = not_leading.get(preferred, 0) + 1
    return {
        broker
        for broker, total in preferred_total.items()
        if not_leading.get(broker, 0) * 100 > percentage * total
    }


def plan_moves(
    current: dict[tuple[str, int], tuple[int, ...]],
    brokers: dict[int, str | None],
    replication_factor: int | None = None,
) -> dict[tuple[str, int], tuple[int, ...]]:
    """Move partitions onto ``brokers`` moving as little data as possible.

    Replicas already on a target broker stay (in their order, so a kept leader keeps
    leading); the missing ones go to the target brokers holding the fewest replicas,
    preferring racks the partition does not use yet. Raises ValueError when the
    brokers cannot hold the replication factor.
    """
    load = dict.fromkeys(brokers, 0)
    plan: dict[tuple[str, int], tuple[int, ...]] = {}
    kept_per_partition = {}
    for key, replicas in sorted(current.items()):
        size = replication_factor or len(replicas)
        if size > len(brokers):
            raise ValueError(
                f"{key[0]}-{key[1]} needs {size} replicas but only {len(brokers)} brokers are given"
            )
        kept = [r for r in replicas if r in brokers][:size]
        kept_per_partition[key] = kept
        for replica in kept:
            load[replica] += 1
    for key, kept in kept_per_partition.items():
        size = replication_factor or len(current[key])
        chosen = list(kept)
        while len(chosen) < size:
            racks_used = {brokers[r] for r in chosen}
            candidates = sorted(
                (b for b in brokers if b not in chosen),
                key=lambda b: (brokers[b] in racks_used and brokers[b] is not None, load[b], b),
            )
            pick = candidates[0]
            chosen.append(pick)
            load[pick] += 1
        plan[key] = tuple(chosen)
    return plan
