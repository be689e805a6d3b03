"""Which replica a consumer should read from: Kafka's replica selectors (KIP-392).

``replica.selector.class`` names the selector, as in Kafka. Without one (Kafka's default)
every consumer reads from the leader. With Kafka's ``RackAwareReplicaSelector`` the leader
answers a consumer whose ``client.rack`` matches a replica's ``broker.rack`` with that
replica as ``preferred_read_replica`` (Fetch v11+), and the client then fetches from it; a
follower serves consumers up to its own high watermark. Cross-zone traffic costs money in
every cloud, which is why users turn this on.

Pure: the leader passes in what it knows of its replicas; nothing here reads state.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..config import LEADER_SELECTOR, RACK_AWARE_REPLICA_SELECTOR

__all__ = ["LEADER_SELECTOR", "RACK_AWARE_REPLICA_SELECTOR", "ReplicaView", "select_read_replica"]


@dataclass(frozen=True, slots=True)
class ReplicaView:
    """A replica as the leader sees it (Kafka's ``ReplicaView``)."""

    broker_id: int
    rack: str | None
    log_end_offset: int
    time_since_last_caught_up_ms: int


def select_read_replica(
    selector: str | None, client_rack: str, leader: ReplicaView, followers: list[ReplicaView]
) -> int | None:
    """The replica to tell the consumer about, or ``None`` to keep reading from the leader.

    ``followers`` must hold only replicas that can serve the consumer's fetch offset (the
    caller filters them, as Kafka's ``ReplicaManager.findPreferredReadReplica`` does).
    Matches Kafka's ``RackAwareReplicaSelector``: no client rack, or no replica in it, means
    the leader; the leader too when it is in the client's rack; otherwise the most caught-up
    replica of that rack (highest log end offset, then most recently caught up).
    """
    if selector != RACK_AWARE_REPLICA_SELECTOR or not client_rack:
        return None
    if leader.rack == client_rack:
        return None
    same_rack = [replica for replica in followers if replica.rack == client_rack]
    if not same_rack:
        return None
    best = max(
        same_rack,
        key=lambda replica: (replica.log_end_offset, -replica.time_since_last_caught_up_ms),
    )
    return best.broker_id
