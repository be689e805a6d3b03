"""One step of a GregorCluster's scaling, decided from what is observed (pure).

Scale up: grow the StatefulSet, wait until every new broker is registered, then (with
``autoRebalanceOnScale``) move replicas onto the new brokers. Scale down, decided in the
same step that would change the StatefulSet: move every replica off the brokers that will
go (the highest ordinals) first, wait until the moves are done and every ISR is full, and
only then shrink. When the remaining brokers cannot hold the replicas (replication factor,
racks) the step is refused and the StatefulSet stays as it is. Nothing here ever shrinks
the StatefulSet on a timeout: only "no replica left on the leaving brokers and every ISR
full" does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from gregor_operator.planners.rebalance import Plan, PlanRefused, plan_balance, plan_remove_brokers

Key = tuple[str, int]

RUNNING = "Running"
CREATING = "Creating"
SCALING_UP = "ScalingUp"
MOVING_ON = "MovingReplicasOn"
MOVING_OFF = "MovingReplicasOff"
SCALING_DOWN = "ScalingDown"
REFUSED = "ScaleDownRefused"
DEGRADED = "Degraded"


@dataclass(frozen=True)
class Observation:
    desired: int  # spec.replicas
    statefulset: int | None  # the StatefulSet's replicas (None: not created yet)
    registered: Mapping[int, str | None]  # live brokers and their racks
    assignment: Mapping[Key, tuple[int, ...]]
    isr: Mapping[Key, tuple[int, ...]]
    phase: str = RUNNING
    plan: Plan | None = None  # the moves started by an earlier step
    plan_done: bool = False
    reassignment_in_flight: bool = False
    auto_rebalance: bool = True


@dataclass(frozen=True)
class Step:
    phase: str
    message: str
    statefulset: int | None = None  # set the StatefulSet's replicas to this
    start: Plan | None = None  # start these moves
    plan: Plan | None = None  # the moves in flight, kept in status
    refused: str | None = None
    events: list[str] = field(default_factory=list)


def holders(assignment: Mapping[Key, tuple[int, ...]], brokers: set[int]) -> set[int]:
    return {r for replicas in assignment.values() for r in replicas if r in brokers}


def isr_full(assignment: Mapping[Key, tuple[int, ...]], isr: Mapping[Key, tuple[int, ...]]):
    """Partitions whose ISR is smaller than their replicas (empty: every ISR is full)."""
    return sorted(k for k, replicas in assignment.items() if set(isr.get(k, ())) != set(replicas))


def plan_step(o: Observation) -> Step:
    if o.statefulset is None:
        return Step(CREATING, f"creating {o.desired} brokers", statefulset=o.desired)
    if o.plan is not None and o.phase in (MOVING_ON, MOVING_OFF):
        if not o.plan_done:
            return Step(o.phase, "moving replicas", plan=o.plan)
        if o.phase == MOVING_ON:
            return Step(RUNNING, "replicas moved onto the new brokers", events=["moves done"])
        # MOVING_OFF done: fall through to the scale-down checks below.
    if o.desired > o.statefulset:
        return Step(
            SCALING_UP,
            f"adding brokers {list(range(o.statefulset, o.desired))}",
            statefulset=o.desired,
        )
    if o.desired == o.statefulset:
        wanted = set(range(o.desired))
        missing = sorted(wanted - set(o.registered))
        if o.phase in (SCALING_UP, CREATING):
            if missing:
                return Step(o.phase, f"waiting for brokers {missing} to register")
            empty = sorted(b for b in wanted if b not in holders(o.assignment, wanted))
            if o.phase == SCALING_UP and o.auto_rebalance and empty and o.assignment:
                if o.reassignment_in_flight:
                    return Step(SCALING_UP, "waiting for another reassignment to finish")
                brokers = {b: o.registered[b] for b in sorted(wanted)}
                plan = plan_balance(o.assignment, brokers, onto=empty)
                if plan.target:
                    return Step(
                        MOVING_ON,
                        f"moving {plan.replica_moves} replicas onto brokers {empty}",
                        start=plan,
                        plan=plan,
                        events=[f"moving {plan.replica_moves} replicas onto brokers {empty}"],
                    )
            return Step(RUNNING, f"{o.desired} brokers registered")
        if o.phase == SCALING_DOWN and set(o.registered) - wanted:
            return Step(SCALING_DOWN, f"waiting for brokers {sorted(set(o.registered) - wanted)}")
        if missing:
            return Step(DEGRADED, f"brokers {missing} are not registered")
        return Step(RUNNING, f"{o.desired} brokers")
    # Scale down.
    leaving = set(range(o.desired, o.statefulset))
    still_holding = holders(o.assignment, leaving)
    if not still_holding:
        lagging = isr_full(o.assignment, o.isr)
        if lagging:
            return Step(
                MOVING_OFF,
                f"waiting for full ISRs before removing brokers {sorted(leaving)}: "
                f"{len(lagging)} partitions catching up",
                plan=o.plan,
            )
        return Step(
            SCALING_DOWN,
            f"removing brokers {sorted(leaving)} (they hold no replicas, every ISR is full)",
            statefulset=o.desired,
            events=[f"shrinking to {o.desired} brokers"],
        )
    if o.reassignment_in_flight:
        return Step(MOVING_OFF, "waiting for the reassignment in flight", plan=o.plan)
    brokers = {b: o.registered.get(b) for b in set(o.registered) | leaving}
    try:
        plan = plan_remove_brokers(o.assignment, brokers, leaving)
    except PlanRefused as refusal:
        message = (
            f"cannot scale down from {o.statefulset} to {o.desired} brokers: {refusal}. "
            f"The cluster stays at {o.statefulset}; set spec.replicas back to {o.statefulset} "
            "or fix the cause"
        )
        return Step(REFUSED, message, refused=message)
    return Step(
        MOVING_OFF,
        f"moving {plan.replica_moves} replicas off brokers {sorted(leaving)}",
        start=plan,
        plan=plan,
        events=[f"moving {plan.replica_moves} replicas off brokers {sorted(leaving)}"],
    )
