"""Replica movement plans: empty brokers before a scale-down, fill new brokers after a scale
up, balance a whole cluster, and restore preferred leaders.

Pure: the current assignment ``{(topic, partition): replicas}`` and the brokers
``{id: rack}`` in, a target assignment (only the partitions that change) and a summary out.
Every plan keeps each partition's replication factor, never puts two replicas on one
broker, never lowers the number of racks a partition spans while the brokers allow it, and
moves as few replicas as it can. A move is executed as Kafka's KIP-455 reassignment (the
new replicas join before the old leave), so no partition's ISR drops below its size while
data moves. Placement of new partitions is ``gregor_broker.cluster.placement``'s.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

Key = tuple[str, int]
Assignment = Mapping[Key, tuple[int, ...]]
Brokers = Mapping[int, str | None]


class PlanRefused(ValueError):
    """The plan is impossible (replication factor or rack constraints); says why and the fix."""


@dataclass(frozen=True)
class Plan:
    target: dict[Key, tuple[int, ...]]  # only partitions whose replicas change
    current: dict[Key, tuple[int, ...]] = field(default_factory=dict)

    @property
    def replica_moves(self) -> int:
        return sum(len(set(self.target[k]) - set(self.current[k])) for k in self.target)


def racks_spanned(replicas: Iterable[int], brokers: Brokers) -> int:
    return len({brokers.get(b) for b in replicas})


def _load(assignment: Assignment, brokers: Iterable[int]) -> Counter[int]:
    load: Counter[int] = Counter(dict.fromkeys(brokers, 0))
    for replicas in assignment.values():
        load.update(r for r in replicas if r in load)
    return load


def _replace(
    replicas: tuple[int, ...], leaving: int, candidates: list[int], brokers: Brokers, wanted: int
) -> int | None:
    """The first candidate that can take ``leaving``'s place: not already a replica, and
    keeping the partition on at least ``wanted`` racks."""
    others = [r for r in replicas if r != leaving]
    for candidate in candidates:
        if candidate in replicas:
            continue
        if racks_spanned([*others, candidate], brokers) >= wanted:
            return candidate
    return None


def plan_remove_brokers(current: Assignment, brokers: Brokers, leaving: Iterable[int]) -> Plan:
    """Move every replica off ``leaving``; raises PlanRefused when the remaining brokers
    cannot hold a partition's replication factor or its rack spread."""
    leaving = set(leaving)
    remaining = {b: r for b, r in brokers.items() if b not in leaving}
    remaining_racks = len(set(remaining.values()))
    load = _load(current, remaining)
    target: dict[Key, tuple[int, ...]] = {}
    for key in sorted(current):
        replicas = tuple(current[key])
        if not leaving & set(replicas):
            continue
        if len(replicas) > len(remaining):
            raise PlanRefused(
                f"partition {key[0]}-{key[1]} has {len(replicas)} replicas but only "
                f"{len(remaining)} brokers would remain ({sorted(remaining)}); keep at least "
                f"{len(replicas)} brokers or lower the topic's replication factor first"
            )
        wanted = min(racks_spanned(replicas, brokers), remaining_racks)
        if racks_spanned(replicas, brokers) > remaining_racks:
            raise PlanRefused(
                f"partition {key[0]}-{key[1]} spans {racks_spanned(replicas, brokers)} racks "
                f"but the remaining brokers are on {remaining_racks}; removing brokers "
                f"{sorted(leaving)} would lose rack redundancy. Add a broker in the missing "
                "rack first"
            )
        new = list(replicas)
        for index, replica in enumerate(replicas):
            if replica not in leaving:
                continue
            candidates = sorted(remaining, key=lambda b: (load[b], b))
            pick = _replace(tuple(new), replica, candidates, brokers, wanted)
            if pick is None:  # pragma: no cover - guarded by the checks above
                raise PlanRefused(f"no broker can take {key[0]}-{key[1]}'s replica on {replica}")
            new[index] = pick
            load[pick] += 1
        target[key] = tuple(new)
    return Plan(target, {k: tuple(current[k]) for k in target})


def plan_balance(
    current: Assignment, brokers: Brokers, *, onto: Iterable[int] | None = None
) -> Plan:
    """Even out replica counts, moving as few replicas as possible.

    With ``onto`` (add-brokers), replicas only move onto those brokers; otherwise from the
    most loaded brokers to the least loaded ones. A replica moves only when that does not
    lower the partition's rack spread, and a partition's first replica (its preferred
    leader) moves last, to keep leadership where it is.
    """
    ids = sorted(brokers)
    if not ids:
        raise PlanRefused("no broker is registered; start the brokers first")
    receivers = set(ids if onto is None else onto)
    load = _load(current, ids)
    total = sum(load.values())
    ceiling = -(-total // len(ids))  # at most this many replicas per broker when balanced
    floor = total // len(ids)
    assignment = {k: tuple(v) for k, v in current.items()}
    changed: set[Key] = set()
    while True:
        under = sorted((b for b in receivers if load[b] < floor), key=lambda b: (load[b], b))
        if onto is None and not under:
            under = sorted(
                (b for b in receivers if load[b] < ceiling and load[b] + 1 < max(load.values())),
                key=lambda b: (load[b], b),
            )
        if not under:
            break
        moved = False
        for receiver in under:
            donors = sorted(
                (b for b in ids if load[b] > max(load[receiver] + 1, floor)),
                key=lambda b: (-load[b], b),
            )
            for donor in donors:
                move = _movable(assignment, donor, receiver, brokers)
                if move is None:
                    continue
                key, index = move
                replicas = list(assignment[key])
                replicas[index] = receiver
                assignment[key] = tuple(replicas)
                changed.add(key)
                load[donor] -= 1
                load[receiver] += 1
                moved = True
                break
            if moved:
                break
        if not moved:
            break
    target = {k: assignment[k] for k in sorted(changed) if assignment[k] != tuple(current[k])}
    return Plan(target, {k: tuple(current[k]) for k in target})


def _movable(
    assignment: Mapping[Key, tuple[int, ...]], donor: int, receiver: int, brokers: Brokers
) -> tuple[Key, int] | None:
    best: tuple[int, Key, int] | None = None
    for key in sorted(assignment):
        replicas = assignment[key]
        if donor not in replicas or receiver in replicas:
            continue
        index = replicas.index(donor)
        before = racks_spanned(replicas, brokers)
        after = racks_spanned([receiver if r == donor else r for r in replicas], brokers)
        if after < before:
            continue
        rank = 1 if index == 0 else 0  # followers first: the leader stays put
        if best is None or rank < best[0]:
            best = (rank, key, index)
            if rank == 0:
                break
    return None if best is None else (best[1], best[2])


def plan_preferred_leaders(
    current: Assignment,
    leaders: Mapping[Key, int],
    live: Iterable[int],
    isr: Mapping[Key, Iterable[int]] | None = None,
) -> list[Key]:
    """Partitions whose leader is not their preferred (first) replica, where that replica
    is alive (and, given ``isr``, in sync): the ones a preferred leader election would
    move. The controller refuses a preferred replica out of the ISR, so asking for it
    would only spend the check."""
    alive = set(live)
    return [
        key
        for key in sorted(current)
        if current[key]
        and current[key][0] in alive
        and leaders.get(key, current[key][0]) != current[key][0]
        and (isr is None or current[key][0] in set(isr.get(key, ())))
    ]


def summary(
    plan: Plan,
    current: Assignment,
    brokers: Brokers,
    sizes: Mapping[Key, int] | None = None,
    limit: int = 200,
) -> dict[str, Any]:
    """What a GregorRebalance status and ``gregor-operator plan`` show: the moves per
    partition (first ``limit``), bytes to move, and replica and leader counts per broker
    and rack after the plan."""
    sizes = sizes or {}
    after = {k: tuple(v) for k, v in current.items()}
    after.update(plan.target)
    moves = [
        {
            "topic": key[0],
            "partition": key[1],
            "from": list(plan.current[key]),
            "to": list(plan.target[key]),
        }
        for key in sorted(plan.target)
    ]
    bytes_to_move = sum(
        sizes.get(key, 0) * len(set(plan.target[key]) - set(plan.current[key]))
        for key in plan.target
    )
    replicas = _load(after, brokers)
    leaders: Counter[int] = Counter(dict.fromkeys(brokers, 0))
    leaders.update(v[0] for v in after.values() if v and v[0] in leaders)
    by_rack: Counter[str] = Counter()
    for broker, count in replicas.items():
        by_rack[str(brokers.get(broker))] += count
    return {
        "partitionsMoving": len(plan.target),
        "replicaMoves": plan.replica_moves,
        "bytesToMove": bytes_to_move,
        "moves": moves[:limit],
        "movesTruncated": max(0, len(moves) - limit),
        "replicasPerBroker": {str(b): replicas[b] for b in sorted(brokers)},
        "leadersPerBroker": {str(b): leaders[b] for b in sorted(brokers)},
        "replicasPerRack": dict(sorted(by_rack.items())),
    }
