"""Kafka's rack-aware replica selection (KIP-392), as pure decisions."""

from __future__ import annotations

from gregor_broker.replication.replica_selector import (
    LEADER_SELECTOR,
    RACK_AWARE_REPLICA_SELECTOR,
    ReplicaView,
    select_read_replica,
)

LEADER = ReplicaView(1, "a", 100, 0)


def test_without_a_selector_every_consumer_reads_from_the_leader():
    followers = [ReplicaView(2, "b", 100, 0)]
    assert select_read_replica(None, "b", LEADER, followers) is None
    assert select_read_replica(LEADER_SELECTOR, "b", LEADER, followers) is None


def test_a_consumer_in_a_followers_rack_is_sent_to_that_follower():
    followers = [ReplicaView(2, "b", 100, 0), ReplicaView(3, "c", 100, 0)]
    assert select_read_replica(RACK_AWARE_REPLICA_SELECTOR, "b", LEADER, followers) == 2
    assert select_read_replica(RACK_AWARE_REPLICA_SELECTOR, "c", LEADER, followers) == 3


def test_the_leader_is_kept_when_it_shares_the_consumers_rack():
    followers = [ReplicaView(2, "a", 100, 0)]
    assert select_read_replica(RACK_AWARE_REPLICA_SELECTOR, "a", LEADER, followers) is None


def test_no_rack_or_an_unknown_rack_means_the_leader():
    followers = [ReplicaView(2, "b", 100, 0)]
    assert select_read_replica(RACK_AWARE_REPLICA_SELECTOR, "", LEADER, followers) is None
    assert select_read_replica(RACK_AWARE_REPLICA_SELECTOR, "z", LEADER, followers) is None


def test_the_most_caught_up_replica_of_the_rack_wins():
    followers = [
        ReplicaView(2, "b", 90, 0),
        ReplicaView(3, "b", 100, 500),
        ReplicaView(4, "b", 100, 20),
    ]
    assert select_read_replica(RACK_AWARE_REPLICA_SELECTOR, "b", LEADER, followers) == 4
