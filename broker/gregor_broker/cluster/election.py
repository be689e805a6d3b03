"""Partition leader election and ISR on broker loss: the controller's pure decisions.

Kafka's ``PartitionLeaderElectionAlgorithms`` (controller/PartitionStateMachine.scala) in
one function, ``next_partition_state``: given a partition's assignment, its current state
in ZooKeeper and which replicas are online, what its state must become. No ZooKeeper, no
clock: the controller (``controller.py``) reads the inputs, writes the result with a
conditional update and logs it. Preferred-leader election is
``reassignment.can_elect_preferred``. Controlled shutdown is the same rule: a broker that
deregisters is no longer online, so its partitions move to another in-sync replica.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .models import PartitionState


@dataclass(frozen=True, slots=True)
class Decision:
    """A partition's next state. ``election``: its leader (and leader epoch) changes;
    ``unclean``: the new leader was not in the ISR (``unclean.leader.election.enable``)."""

    state: PartitionState
    election: bool
    unclean: bool = False


def next_partition_state(
    controller_epoch: int,
    replicas: tuple[int, ...],
    current: PartitionState | None,
    online: Callable[[int], bool],
    unclean_election_enabled: Callable[[], bool],
) -> Decision | None:
    """What ``current`` must become, or None when nothing changes.

    - a new partition (no state yet) is led by its first online replica, at epoch 0, with
      every online replica in the ISR (offline until one registers);
    - while the leader is online, in-sync replicas that went offline leave the ISR at once
      (acks=all does not wait ``replica.lag.time.max.ms`` for a dead broker);
    - a leader that went offline is replaced by the first online in-sync replica in
      assignment order (a clean election), else, when unclean election is enabled, the
      first online replica with an ISR of itself, else nobody: leader -1 and the ISR keeps
      its last members so one of them can lead when it returns (as Kafka does). Every
      election bumps the leader epoch.
    """
    live = [r for r in replicas if online(r)]
    if current is None:
        if not live:
            return None
        return Decision(PartitionState(controller_epoch, live[0], 0, tuple(live)), True)
    if online(current.leader):
        if all(online(r) for r in current.isr):
            return None
        isr = tuple(r for r in current.isr if online(r))
        return Decision(
            PartitionState(controller_epoch, current.leader, current.leader_epoch, isr), False
        )
    in_sync_live = [r for r in replicas if r in current.isr and online(r)]
    unclean = False
    if in_sync_live:
        leader, isr = in_sync_live[0], tuple(in_sync_live)
    elif live and unclean_election_enabled():
        leader, isr, unclean = live[0], (live[0],), True
    else:
        if current.leader == -1:
            return None
        leader, isr = -1, current.isr
    return Decision(
        PartitionState(controller_epoch, leader, current.leader_epoch + 1, isr), True, unclean
    )
