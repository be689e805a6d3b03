"""KIP-455 reassignment steps and move planning, without ZooKeeper."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gregor_broker.cluster import reassignment


def test_start_lists_targets_first_then_originals_with_adding_and_removing() -> None:
    plan = reassignment.start((1, 2, 3), (2, 3, 4))
    assert plan.replicas == (2, 3, 4, 1)
    assert plan.adding == (4,)
    assert plan.removing == (1,)


def test_original_replicas_are_the_full_set_minus_the_adding_ones() -> None:
    assert reassignment.original_replicas((2, 3, 4, 1), (4,)) == (2, 3, 1)


def test_completion_waits_for_every_target_in_the_isr() -> None:
    assert not reassignment.target_in_sync((2, 3, 4), (1, 2, 3))
    assert reassignment.target_in_sync((2, 3, 4), (1, 2, 3, 4))


def test_completion_moves_leadership_only_when_the_leader_leaves() -> None:
    kept = reassignment.complete((2, 3, 4), leader=2, isr=(1, 2, 3, 4))
    assert kept == reassignment.Completion(2, (2, 3, 4), False)
    moved = reassignment.complete((2, 3, 4), leader=1, isr=(1, 2, 3, 4))
    assert moved == reassignment.Completion(2, (2, 3, 4), True)


def test_imbalance_counts_partitions_led_away_from_their_preferred_broker() -> None:
    assignments = {("t", p): ((1, 2), 2) for p in range(3)} | {("t", 3): ((2, 1), 2)}
    assert reassignment.imbalanced_brokers(assignments, 10) == {1}
    assert reassignment.imbalanced_brokers(assignments, 100) == set()


def test_plan_keeps_replicas_already_on_target_brokers() -> None:
    current = {("t", 0): (1, 2, 3), ("t", 1): (2, 3, 1)}
    plan = reassignment.plan_moves(current, {2: None, 3: None, 4: None})
    assert plan[("t", 0)][:2] == (2, 3) and plan[("t", 1)][:2] == (2, 3)
    assert all(set(r) == {2, 3, 4} for r in plan.values())


@given(
    st.dictionaries(
        st.integers(0, 20),
        st.lists(st.integers(1, 6), min_size=3, max_size=3, unique=True),
        min_size=1,
        max_size=20,
    ),
    st.lists(st.integers(1, 8), min_size=3, max_size=8, unique=True),
)
def test_plans_use_only_target_brokers_and_move_the_minimum(assignment, targets) -> None:
    current = {("t", p): tuple(r) for p, r in assignment.items()}
    brokers = dict.fromkeys(targets)
    plan = reassignment.plan_moves(current, brokers)
    for key, replicas in plan.items():
        assert len(replicas) == len(set(replicas)) == 3
        assert set(replicas) <= set(targets)
        # Every replica already on a target broker stays: moves are the minimum.
        kept = set(current[key]) & set(targets)
        assert kept <= set(replicas)
