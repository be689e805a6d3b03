"""The controller's leader election and ISR rules (``cluster/election.py``), Kafka's
``PartitionLeaderElectionAlgorithms``: pure functions of the assignment, the current
state and which replicas are online. Preferred election is ``can_elect_preferred``."""

from __future__ import annotations

from gregor_broker.cluster.election import Decision, next_partition_state
from gregor_broker.cluster.models import PartitionState
from gregor_broker.cluster.reassignment import can_elect_preferred, preferred_leader

EPOCH = 7  # controller epoch
REPLICAS = (1, 2, 3)


def online(*brokers: int):
    return lambda replica: replica in brokers


def never() -> bool:
    raise AssertionError("unclean election is only consulted with no live in-sync replica")


def state(leader: int, leader_epoch: int, isr: tuple[int, ...]) -> PartitionState:
    return PartitionState(controller_epoch=3, leader=leader, leader_epoch=leader_epoch, isr=isr)


def test_a_new_partition_is_led_by_its_first_online_replica_at_epoch_zero():
    decision = next_partition_state(EPOCH, REPLICAS, None, online(2, 3), never)
    assert decision == Decision(PartitionState(EPOCH, 2, 0, (2, 3)), election=True)


def test_a_new_partition_with_no_replica_online_waits():
    assert next_partition_state(EPOCH, REPLICAS, None, online(), never) is None


def test_nothing_changes_while_the_leader_and_the_isr_are_online():
    current = state(1, 4, (1, 2, 3))
    assert next_partition_state(EPOCH, REPLICAS, current, online(1, 2, 3), never) is None


def test_an_in_sync_replica_that_goes_offline_leaves_the_isr_without_an_election():
    decision = next_partition_state(EPOCH, REPLICAS, state(1, 4, (1, 2, 3)), online(1, 2), never)
    assert decision == Decision(PartitionState(EPOCH, 1, 4, (1, 2)), election=False)


def test_clean_election_picks_the_first_live_in_sync_replica_in_assignment_order():
    current = state(1, 4, (3, 1, 2))  # ISR order does not matter; the assignment's does
    decision = next_partition_state(EPOCH, REPLICAS, current, online(2, 3), never)
    assert decision == Decision(PartitionState(EPOCH, 2, 5, (2, 3)), election=True)


def test_an_out_of_sync_replica_never_leads_without_unclean_election():
    current = state(1, 4, (1,))  # 2 and 3 fell out of the ISR before 1 died
    decision = next_partition_state(EPOCH, REPLICAS, current, online(2, 3), lambda: False)
    # Offline: no leader, and the ISR keeps its last member so it can lead on return.
    assert decision == Decision(PartitionState(EPOCH, -1, 5, (1,)), election=True)


def test_an_offline_partition_stays_offline_without_a_new_epoch():
    current = state(-1, 5, (1,))
    assert next_partition_state(EPOCH, REPLICAS, current, online(2), lambda: False) is None


def test_unclean_election_picks_the_first_live_replica_with_an_isr_of_itself():
    current = state(1, 4, (1,))
    decision = next_partition_state(EPOCH, REPLICAS, current, online(3, 2), lambda: True)
    assert decision == Decision(PartitionState(EPOCH, 2, 5, (2,)), election=True, unclean=True)


def test_the_last_in_sync_replica_leads_again_when_it_returns():
    current = state(-1, 5, (1,))
    decision = next_partition_state(EPOCH, REPLICAS, current, online(1, 2), never)
    assert decision == Decision(PartitionState(EPOCH, 1, 6, (1,)), election=True)


def test_controlled_shutdown_moves_leadership_to_another_in_sync_replica():
    # A broker shutting down deregisters first: to the controller it is no longer online,
    # and its partitions move to the next in-sync replica before it stops serving.
    current = state(1, 4, (1, 2, 3))
    decision = next_partition_state(EPOCH, REPLICAS, current, online(2, 3), never)
    assert decision == Decision(PartitionState(EPOCH, 2, 5, (2, 3)), election=True)


def test_preferred_election_needs_the_first_replica_live_and_in_sync():
    assert preferred_leader(REPLICAS) == 1
    assert can_elect_preferred(REPLICAS, (1, 2, 3), {1, 2, 3})
    assert not can_elect_preferred(REPLICAS, (2, 3), {1, 2, 3})  # not in sync yet
    assert not can_elect_preferred(REPLICAS, (1, 2, 3), {2, 3})  # not live
