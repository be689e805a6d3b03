"""Properties of the operator's replica movement planners (hypothesis)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gregor_broker.cluster.placement import assign_replicas
from gregor_operator.planners.rebalance import (
    PlanRefused,
    plan_balance,
    plan_preferred_leaders,
    plan_remove_brokers,
    racks_spanned,
    summary,
)

RACKS = ["a", "b", "c"]


@st.composite
def clusters(draw, min_brokers=3, max_brokers=9):
    """A rack-aware assignment of a few topics over N brokers on up to three racks."""
    n = draw(st.integers(min_brokers, max_brokers))
    racks = {b: RACKS[b % draw(st.integers(1, 3))] for b in range(n)}
    current = {}
    for t in range(draw(st.integers(1, 3))):
        rf = draw(st.integers(1, min(3, n)))
        partitions = draw(st.integers(1, 12))
        start = draw(st.integers(0, n - 1))
        for p, replicas in assign_replicas(racks, partitions, rf, start_index=start).items():
            current[(f"t{t}", p)] = tuple(replicas)
    return racks, current


def after(current, plan):
    result = dict(current)
    result.update(plan.target)
    return result


def check_common(racks, current, plan):
    result = after(current, plan)
    for key, replicas in result.items():
        assert len(replicas) == len(current[key]), key
        assert len(set(replicas)) == len(replicas), key
        assert set(replicas) <= set(racks), key
    assert plan.current == {k: current[k] for k in plan.target}
    return result


@settings(max_examples=150, deadline=None)
@given(clusters(), st.data())
def test_remove_brokers_empties_them_moving_only_their_replicas(cluster, data):
    racks, current = cluster
    leaving = set(data.draw(st.sets(st.sampled_from(sorted(racks)), min_size=1)))
    try:
        plan = plan_remove_brokers(current, racks, leaving)
    except PlanRefused as refusal:
        remaining = {b: r for b, r in racks.items() if b not in leaving}
        assert any(
            len(v) > len(remaining) or racks_spanned(v, racks) > len(set(remaining.values()))
            for v in current.values()
            if set(v) & leaving
        ), str(refusal)
        return
    result = check_common(racks, current, plan)
    for key, replicas in result.items():
        assert not set(replicas) & leaving
        # Minimal movement: exactly the replicas on leaving brokers move; others keep place.
        kept = [r for r in current[key] if r not in leaving]
        assert [r for r in replicas if r in kept] == kept
        assert racks_spanned(replicas, racks) >= racks_spanned(current[key], racks)
    moved = sum(len(set(v) & leaving) for v in current.values())
    assert plan.replica_moves == moved


def test_removing_brokers_below_the_replication_factor_is_refused():
    racks = {1: "a", 2: "b", 3: "c"}
    current = {("t", 0): (1, 2, 3)}
    with pytest.raises(PlanRefused, match="3 replicas but only 2 brokers would remain"):
        plan_remove_brokers(current, racks, {3})


def test_removing_a_whole_rack_is_refused_when_partitions_span_every_rack():
    racks = {1: "a", 2: "b", 3: "c", 4: "a", 5: "b"}
    current = {("t", 0): (1, 2, 3)}
    with pytest.raises(PlanRefused, match="rack"):
        plan_remove_brokers(current, racks, {3})
    plan = plan_remove_brokers(current, racks, {4, 5})
    assert plan.target == {}


def loads(result, racks):
    count = dict.fromkeys(racks, 0)
    for replicas in result.values():
        for r in replicas:
            count[r] += 1
    return count


@settings(max_examples=150, deadline=None)
@given(clusters(), st.integers(1, 3))
def test_add_brokers_moves_replicas_only_onto_the_new_brokers(cluster, added):
    racks, current = cluster
    first_new = max(racks) + 1
    new = {first_new + i: RACKS[(first_new + i) % 3] for i in range(added)}
    # Keep every broker rack-labelled in the same scheme: mixed racks would not be placed.
    if len(set(racks.values())) < 3:
        new = {b: racks[b % len(racks)] for b in new}
    brokers = {**racks, **new}
    plan = plan_balance(current, brokers, onto=new)
    result = check_common(brokers, current, plan)
    for key, replicas in result.items():
        gained = set(replicas) - set(current[key])
        assert gained <= set(new)
        assert racks_spanned(replicas, brokers) >= racks_spanned(current[key], brokers)
    before, now = loads(current, brokers), loads(result, brokers)
    assert all(now[b] <= before[b] for b in racks)
    assert max(now.values()) - min(now.values()) <= max(before.values()) - min(before.values())


@settings(max_examples=150, deadline=None)
@given(clusters())
def test_full_balance_never_widens_the_spread_nor_narrows_rack_spread(cluster):
    racks, current = cluster
    plan = plan_balance(current, racks)
    result = check_common(racks, current, plan)
    for key, replicas in result.items():
        assert racks_spanned(replicas, racks) >= racks_spanned(current[key], racks)
    before, now = loads(current, racks), loads(result, racks)
    assert max(now.values()) - min(now.values()) <= max(before.values()) - min(before.values())
    # Idempotent: a balanced cluster plans nothing more.
    assert plan_balance(result, racks).target == {}


def test_balance_fills_new_brokers_evenly_with_followers_first():
    racks = {1: "a", 2: "b", 3: "c"}
    current = assign_replicas(racks, 6, 3, start_index=0)
    current = {("t", p): tuple(r) for p, r in current.items()}
    brokers = {**racks, 4: "a", 5: "b"}
    plan = plan_balance(current, brokers, onto={4, 5})
    result = after(current, plan)
    counts = loads(result, brokers)
    # Rack c has one broker, and every partition keeps a replica in each rack: broker 3
    # keeps all six; racks a and b split theirs with the new brokers.
    assert counts == {1: 3, 2: 3, 3: 6, 4: 3, 5: 3}
    assert all(result[k][0] == current[k][0] for k in result)  # leaders stay
    info = summary(plan, current, brokers, {k: 1000 for k in current})
    assert info["replicaMoves"] == 6 and info["bytesToMove"] == 6000
    assert info["replicasPerBroker"] == {str(b): counts[b] for b in sorted(brokers)}
    assert info["replicasPerRack"] == {"a": 6, "b": 6, "c": 6}


def test_preferred_leaders_lists_partitions_led_by_another_replica():
    current = {("t", 0): (1, 2), ("t", 1): (2, 1), ("t", 2): (3, 1)}
    leaders = {("t", 0): 2, ("t", 1): 2, ("t", 2): 1}
    assert plan_preferred_leaders(current, leaders, live={1, 2}) == [("t", 0)]
    # A preferred replica out of the ISR cannot lead yet: not asked for.
    isr = {("t", 0): (2,), ("t", 1): (2, 1), ("t", 2): (1,)}
    assert plan_preferred_leaders(current, leaders, live={1, 2}, isr=isr) == []


def test_balancing_without_registered_brokers_is_refused_not_a_crash():
    with pytest.raises(PlanRefused, match="no broker is registered"):
        plan_balance({("t", 0): (0, 1)}, {})
