"""Replication throttle arithmetic and the reassign tool's throttle lists (no I/O)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gregor_broker.replication.reassignment_throttles import throttle_configs
from gregor_broker.replication.throttle import (
    FOLLOWER_REPLICAS,
    LEADER_REPLICAS,
    MIN_RETRY_S,
    LeaderReplicationQuota,
    is_throttled,
    parse_rate,
)

MB = 1_000_000
MIB = 1 << 20


class Clock:
    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def saturate(quota: LeaderReplicationQuota, clock: Clock, bound: float, fetch: int, seconds: float):
    """A follower that always has ``fetch`` bytes to copy, against the leader's quota: it
    sends whenever the quota allows and otherwise waits as long as ``delay`` says.
    Returns the bytes sent."""
    end = clock.now + seconds
    sent = 0
    while clock.now < end:
        if quota.exceeded(bound):
            clock.now += quota.delay(bound)
        else:
            quota.record(fetch)
            sent += fetch
            clock.now += 0.002  # a round trip
    return sent


def test_throttled_replicas_lists_partition_broker_pairs_or_a_wildcard() -> None:
    config = {LEADER_REPLICAS: "0:1, 1:2,3:1"}
    assert is_throttled(config, LEADER_REPLICAS, 0, 1)
    assert is_throttled(config, LEADER_REPLICAS, 3, 1)
    assert not is_throttled(config, LEADER_REPLICAS, 1, 1)  # partition 1 only on broker 2
    assert not is_throttled(config, FOLLOWER_REPLICAS, 0, 1)
    assert is_throttled({LEADER_REPLICAS: "*"}, LEADER_REPLICAS, 7, 9)
    assert not is_throttled({LEADER_REPLICAS: ""}, LEADER_REPLICAS, 0, 1)


def test_an_unset_or_unreadable_rate_means_no_throttle() -> None:
    assert parse_rate(None) is None
    assert parse_rate("fast") is None
    assert parse_rate("-1") is None
    assert parse_rate("1048576") == 1048576.0


@pytest.mark.parametrize(
    ("bound", "fetch"),
    [(MB, MIB), (MB, 100_000), (5 * MB, MIB), (200_000, MIB)],
    ids=["1MB/s-1MiB-fetches", "1MB/s-small-fetches", "5MB/s", "200KB/s-big-fetches"],
)
def test_a_saturating_follower_gets_the_rate_plus_at_most_one_fetch(bound, fetch) -> None:
    for seconds in (5, 20):
        clock = Clock()
        quota = LeaderReplicationQuota(clock=clock)
        sent = saturate(quota, clock, bound, fetch, seconds)
        assert sent <= bound * seconds + fetch
        assert sent >= 0.95 * bound * seconds


def test_the_first_fetch_goes_through_even_when_larger_than_a_second_of_quota() -> None:
    clock = Clock()
    quota = LeaderReplicationQuota(clock=clock)
    assert not quota.exceeded(1000)
    quota.record(MIB)
    assert quota.exceeded(1000)
    # Kafka's throttle time: back within the bound after size / bound seconds.
    assert quota.delay(1000) == pytest.approx(MIB / 1000 - 1, rel=0.01)


def test_bytes_already_in_the_response_count_against_the_quota() -> None:
    clock = Clock()
    quota = LeaderReplicationQuota(clock=clock)
    assert not quota.exceeded(MB, pending=0)
    # A second throttled partition in the same response: 1 MiB already picked.
    assert quota.exceeded(MB, pending=MIB)


def test_a_quota_started_late_allows_no_saved_up_burst() -> None:
    clock = Clock()
    quota = LeaderReplicationQuota(clock=clock)
    clock.now += 60  # the broker ran for a minute before anything was throttled
    quota.record(MB)
    assert quota.observed() == pytest.approx(MB, rel=0.01)
    assert quota.exceeded(MB, pending=1)


def test_a_new_rate_applies_to_what_was_already_measured() -> None:
    clock = Clock()
    quota = LeaderReplicationQuota(clock=clock)
    quota.record(2 * MB)
    clock.now += 1.0
    assert quota.exceeded(MB)
    assert not quota.exceeded(3 * MB)


def test_a_held_back_fetch_waits_at_least_a_little() -> None:
    clock = Clock()
    quota = LeaderReplicationQuota(clock=clock)
    quota.record(MB + 1)
    assert quota.delay(MB) == MIN_RETRY_S


def test_sent_bytes_are_counted_for_the_metrics() -> None:
    clock = Clock()
    quota = LeaderReplicationQuota(clock=clock)
    assert quota.observed() == 0.0
    quota.record(0)
    quota.record(500)
    quota.record(700)
    assert quota.bytes_total == 1200


def test_reassign_throttles_leaders_on_current_replicas_and_followers_on_new_ones() -> None:
    current = {("orders", 0): (1, 2, 3), ("orders", 1): (2, 3, 1), ("audit", 0): (1, 2)}
    plan = {("orders", 0): (2, 3, 4), ("orders", 1): (3, 1, 2), ("audit", 0): (1, 5)}
    assert throttle_configs(plan, current) == {
        # orders-1 only changes order: nothing is copied, nothing throttled.
        "orders": {LEADER_REPLICAS: "0:1,0:2,0:3", FOLLOWER_REPLICAS: "0:4"},
        "audit": {LEADER_REPLICAS: "0:1,0:2", FOLLOWER_REPLICAS: "0:5"},
    }


@given(
    st.dictionaries(
        st.integers(0, 20),
        st.tuples(
            st.lists(st.integers(1, 9), min_size=1, max_size=4, unique=True),
            st.lists(st.integers(1, 9), min_size=1, max_size=4, unique=True),
        ),
        min_size=1,
    )
)
def test_every_copy_is_throttled_on_both_sides(moves) -> None:
    current = {("t", p): tuple(before) for p, (before, _) in moves.items()}
    plan = {("t", p): tuple(after) for p, (_, after) in moves.items()}
    configs = throttle_configs(plan, current).get("t", {})
    leader = configs.get(LEADER_REPLICAS, "")
    follower = configs.get(FOLLOWER_REPLICAS, "")
    for p, (before, after) in moves.items():
        for new in set(after) - set(before):
            # The new replica is throttled where it copies, and so is every replica that
            # may lead the partition while it copies.
            assert is_throttled({FOLLOWER_REPLICAS: follower}, FOLLOWER_REPLICAS, p, new)
            for source in before:
                assert is_throttled({LEADER_REPLICAS: leader}, LEADER_REPLICAS, p, source)
        for kept in set(after) & set(before):
            assert not is_throttled({FOLLOWER_REPLICAS: follower}, FOLLOWER_REPLICAS, p, kept)
