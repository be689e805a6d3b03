"""Replica placement matches Kafka's AdminUtils.assignReplicasToBrokers."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gregor_broker.cluster.placement import (
    InvalidPartitions,
    InvalidReplicationFactor,
    PlacementError,
    assign_replicas,
    rack_alternated_brokers,
)

KAFKA_RACKS = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}


def test_rack_alternated_list_matches_kafka():
    # AdminRackAwareTest.testGetRackAlternatedBrokerListAndAssignReplicasToBrokers
    assert rack_alternated_brokers(KAFKA_RACKS) == [0, 3, 1, 5, 4, 2]
    without_5 = {b: r for b, r in KAFKA_RACKS.items() if b != 5}
    assert rack_alternated_brokers(without_5) == [0, 3, 1, 4, 2]


def test_rack_aware_assignment_matches_kafka_test_vector():
    assert assign_replicas(KAFKA_RACKS, 7, 3, start_index=0) == {
        0: [0, 3, 1],
        1: [3, 1, 5],
        2: [1, 5, 4],
        3: [5, 4, 2],
        4: [4, 2, 0],
        5: [2, 0, 3],
        6: [0, 4, 2],
    }


def test_rack_unaware_assignment_matches_kafka_test_vector():
    # AdminTest.testReplicaAssignment / ReplicaAssignmentTest
    brokers = dict.fromkeys(range(5))
    assert assign_replicas(brokers, 10, 3, start_index=0) == {
        0: [0, 1, 2],
        1: [1, 2, 3],
        2: [2, 3, 4],
        3: [3, 4, 0],
        4: [4, 0, 1],
        5: [0, 2, 3],
        6: [1, 3, 4],
        7: [2, 4, 0],
        8: [3, 0, 1],
        9: [4, 1, 2],
    }


def test_rack_unaware_walk_uses_id_sorted_brokers():
    brokers = {12: None, 3: None, 7: None}
    assert assign_replicas(brokers, 3, 1, start_index=0) == {0: [3], 1: [7], 2: [12]}


def test_start_partition_id_numbers_new_partitions_and_places_leaders_by_partition_id():
    brokers = dict.fromkeys(range(5))
    whole = assign_replicas(brokers, 10, 3, start_index=0)
    # Matches Kafka: the shift only grows at partition-id multiples of N crossed during
    # this call, so a continuation reproduces a single call only given the same shift
    # (here 1: the single call bumped it at partition 5).
    tail = assign_replicas(brokers, 4, 3, start_index=0, shift=1, start_partition_id=6)
    assert tail == {p: whole[p] for p in range(6, 10)}
    leaders = assign_replicas(brokers, 4, 3, start_index=0, start_partition_id=6)
    assert [leaders[p][0] for p in range(6, 10)] == [1, 2, 3, 4]


def test_explicit_shift_is_independent_of_start_index():
    brokers = dict.fromkeys(range(4))
    assert assign_replicas(brokers, 1, 2, start_index=0, shift=1) == {0: [0, 2]}
    assert assign_replicas(brokers, 1, 2, start_index=0, shift=0) == {0: [0, 1]}


def test_replication_factor_above_broker_count_names_both_numbers():
    with pytest.raises(InvalidReplicationFactor, match=r"Replication factor: 4 .* brokers: 3"):
        assign_replicas(dict.fromkeys(range(3)), 1, 4)


@pytest.mark.parametrize("rf", [0, -1])
def test_replication_factor_must_be_positive(rf):
    with pytest.raises(InvalidReplicationFactor, match="larger than 0"):
        assign_replicas(dict.fromkeys(range(3)), 1, rf)


def test_partition_count_must_be_positive():
    with pytest.raises(InvalidPartitions):
        assign_replicas(dict.fromkeys(range(3)), 0, 1)


def test_mixing_brokers_with_and_without_rack_is_an_error():
    with pytest.raises(PlacementError, match=r"\[2\] have no broker.rack"):
        assign_replicas({0: "a", 1: "b", 2: None}, 3, 2)


@pytest.mark.parametrize(
    ("racks", "partitions", "rf"),
    [
        # The even-rack cases of Kafka's AdminRackAwareTest, where it checks every broker
        # leads and holds the same number of replicas.
        ({0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}, 6, 3),
        ({0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}, 12, 2),
        ({0: "rack1", 1: "rack2", 4: "rack3"}, 3, 2),
        ({6: "rack1", 7: "rack2", 8: "rack2", 9: "rack3", 10: "rack3", 11: "rack1"}, 12, 2),
    ],
)
@pytest.mark.parametrize("start_index", range(6))
def test_kafka_even_rack_cases_spread_leaders_and_replicas_evenly(
    racks, partitions, rf, start_index
):
    start_index %= len(racks)
    assignment = assign_replicas(racks, partitions, rf, start_index=start_index)
    leaders = Counter(replicas[0] for replicas in assignment.values())
    replicas = Counter(b for rs in assignment.values() for b in rs)
    assert set(leaders.values()) == {partitions // len(racks)}
    assert set(replicas.values()) == {partitions * rf // len(racks)}
    for rs in assignment.values():
        assert len({racks[b] for b in rs}) == rf


def test_more_replicas_than_racks_still_uses_every_rack():
    racks = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack2"}
    for replicas in assign_replicas(racks, 6, 5).values():
        assert len(replicas) == 5
        assert {racks[b] for b in replicas} == {"rack1", "rack2", "rack3"}


def test_skips_brokers_already_holding_a_replica():
    # AdminRackAwareTest.testSkipBrokerWithReplicaAlreadyAssigned
    racks = {0: "a", 1: "b", 2: "c", 3: "a", 4: "a"}
    for replicas in assign_replicas(racks, 6, 4, start_index=2).values():
        assert len(set(replicas)) == 4


# --- properties -------------------------------------------------------------------------


@st.composite
def clusters(draw, racked: bool):
    ids = draw(st.lists(st.integers(0, 200), min_size=1, max_size=12, unique=True))
    if racked:
        names = draw(st.lists(st.sampled_from("abcdef"), min_size=len(ids), max_size=len(ids)))
        brokers = dict(zip(ids, names, strict=True))
    else:
        brokers = dict.fromkeys(ids)
    rf = draw(st.integers(1, len(ids)))
    partitions = draw(st.integers(1, 40))
    start_index = draw(st.integers(0, len(ids) - 1))
    shift = draw(st.integers(0, len(ids) - 1))
    first = draw(st.sampled_from([0, 0, draw(st.integers(0, 50))]))
    return brokers, partitions, rf, start_index, shift, first


@settings(max_examples=300, deadline=None)
@given(st.booleans().flatmap(clusters))
def test_every_partition_gets_rf_distinct_live_replicas(case):
    brokers, partitions, rf, start_index, shift, first = case
    assignment = assign_replicas(
        brokers, partitions, rf, start_index=start_index, shift=shift, start_partition_id=first
    )
    assert sorted(assignment) == list(range(first, first + partitions))
    for replicas in assignment.values():
        assert len(replicas) == rf
        assert len(set(replicas)) == rf
        assert set(replicas) <= set(brokers)


@settings(max_examples=300, deadline=None)
@given(clusters(racked=True))
def test_each_partition_spans_min_of_racks_and_rf_racks(case):
    brokers, partitions, rf, start_index, shift, first = case
    num_racks = len(set(brokers.values()))
    assignment = assign_replicas(
        brokers, partitions, rf, start_index=start_index, shift=shift, start_partition_id=first
    )
    for replicas in assignment.values():
        assert len({brokers[b] for b in replicas}) == min(num_racks, rf)


@settings(max_examples=300, deadline=None)
@given(st.booleans().flatmap(clusters), st.integers(1, 4))
def test_leaders_are_even_when_partitions_are_a_multiple_of_brokers(case, multiple):
    """Property: with P = m * N partitions starting at partition 0 (any start index, any
    shift, racks or not), every broker is the preferred leader of exactly m partitions."""
    brokers, _, rf, start_index, shift, _ = case
    partitions = multiple * len(brokers)
    assignment = assign_replicas(brokers, partitions, rf, start_index=start_index, shift=shift)
    leaders = Counter(replicas[0] for replicas in assignment.values())
    assert set(leaders) == set(brokers)
    assert set(leaders.values()) == {multiple}


@settings(max_examples=300, deadline=None)
@given(clusters(racked=False), st.integers(1, 4))
def test_rack_unaware_replicas_are_even_when_partitions_are_a_multiple_of_brokers(case, multiple):
    """Property: without racks and with P = m * N partitions from 0, every broker holds
    exactly m * RF replicas (each follower position is a rotation within a block of N)."""
    brokers, _, rf, start_index, shift, _ = case
    partitions = multiple * len(brokers)
    assignment = assign_replicas(brokers, partitions, rf, start_index=start_index, shift=shift)
    replicas = Counter(b for rs in assignment.values() for b in rs)
    assert set(replicas.values()) == {multiple * rf}


@settings(max_examples=100, deadline=None)
@given(clusters(racked=False))
def test_random_start_is_still_a_valid_assignment(case):
    brokers, partitions, rf, *_ = case
    assignment = assign_replicas(brokers, partitions, rf)
    assert all(len(set(r)) == rf for r in assignment.values())
