"""Kafka's replica assignment (``AdminUtils.assignReplicasToBrokers``), as a pure function.

Shared by the controller (auto-created topics, CreateTopics, CreatePartitions) and the
operator (Topic resources, scaling). Owns only the choice of replicas for new partitions;
moving existing replicas (rebalancing, scale-down plans) is the planners' job.
"""

from __future__ import annotations

import random
from collections.abc import Mapping


class PlacementError(ValueError):
    """The requested placement is impossible; Kafka answers INVALID_REPLICATION_FACTOR."""


class InvalidReplicationFactor(PlacementError):
    """Replication factor below 1, above the broker count, or brokers with mixed rack info."""


class InvalidPartitions(PlacementError):
    """Partition count below 1; Kafka answers INVALID_PARTITIONS."""


def assign_replicas(
    brokers: Mapping[int, str | None],
    num_partitions: int,
    replication_factor: int,
    *,
    start_index: int | None = None,
    shift: int | None = None,
    start_partition_id: int = 0,
) -> dict[int, list[int]]:
    """Replicas for partitions ``start_partition_id .. start_partition_id + num_partitions - 1``.

    ``brokers`` maps broker id to rack (None without one). The first replica is the
    preferred leader. Rack-aware when every broker has a rack, rack-unaware when none has.

    Matches Kafka: with ``start_index`` fixed and ``shift`` None, the shift starts at
    ``start_index`` (Kafka's ``fixedStartIndex`` drives both); with both None, both are
    random. ``start_partition_id`` > 0 continues an existing topic (CreatePartitions).
    """
    if num_partitions <= 0:
        raise InvalidPartitions(f"Number of partitions must be larger than 0, got {num_partitions}")
    if replication_factor <= 0:
        raise InvalidReplicationFactor(
            f"Replication factor must be larger than 0, got {replication_factor}"
        )
    if replication_factor > len(brokers):
        raise InvalidReplicationFactor(
            f"Replication factor: {replication_factor} larger than available brokers: "
            f"{len(brokers)}"
        )
    with_rack = sorted(b for b, rack in brokers.items() if rack is not None)
    if with_rack and len(with_rack) != len(brokers):
        without = sorted(b for b, rack in brokers.items() if rack is None)
        raise InvalidReplicationFactor(
            "Not all brokers have rack information for replica rack aware assignment: "
            f"brokers {without} have no broker.rack while {with_rack} do; set broker.rack "
            "on every broker or on none"
        )
    if with_rack:
        racks = {b: rack for b, rack in brokers.items() if rack is not None}
        ordered = rack_alternated_brokers(racks)
        num_racks = len(set(racks.values()))
    else:
        racks = None
        ordered = sorted(brokers)
        num_racks = 1
    n = len(ordered)
    if start_index is None:
        start_index = random.randrange(n)
        if shift is None:
            shift = random.randrange(n)
    elif shift is None:
        shift = start_index
    return _assign(
        ordered, racks, num_racks, num_partitions, replication_factor, start_index, shift,
        max(0, start_partition_id),
    )  # fmt: skip


def rack_alternated_brokers(racks: Mapping[int, str]) -> list[int]:
    """Racks sorted by name, each rack's brokers by id, then one broker per rack in turn.

    ``{0:"r1", 1:"r3", 2:"r3", 3:"r2", 4:"r2", 5:"r1"}`` → ``[0, 3, 1, 5, 4, 2]``.
    """
    by_rack: dict[str, list[int]] = {}
    for broker in sorted(racks):
        by_rack.setdefault(racks[broker], []).append(broker)
    queues = [by_rack[rack] for rack in sorted(by_rack)]
    result: list[int] = []
    depth = 0
    while len(result) < len(racks):
        result.extend(queue[depth] for queue in queues if depth < len(queue))
        depth += 1
    return result


def _replica_index(first: int, shift: int, k: int, n: int) -> int:
    return (first + 1 + (shift + k) % (n - 1)) % n


def _assign(
    ordered: list[int],
    racks: Mapping[int, str] | None,
    num_racks: int,
    num_partitions: int,
    replication_factor: int,
    start_index: int,
    shift: int,
    first_partition: int,
) -> dict[int, list[int]]:
    n = len(ordered)
    assignment: dict[int, list[int]] = {}
    for partition in range(first_partition, first_partition + num_partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + start_index) % n
        leader = ordered[first]
        replicas = [leader]
        if racks is None:
            # assignReplicasToBrokersRackUnaware: the k-th follower is a fixed step away.
            replicas += [
                ordered[_replica_index(first, shift, k, n)] for k in range(replication_factor - 1)
            ]
        else:
            used_racks = {racks[leader]}
            used_brokers = {leader}
            k = 0
            while len(replicas) < replication_factor:
                broker = ordered[_replica_index(first, shift * num_racks, k, n)]
                rack = racks[broker]
                # Skip a broker whose rack already has a replica while some rack has none,
                # or that already has a replica while some broker has none.
                if (rack not in used_racks or len(used_racks) == num_racks) and (
                    broker not in used_brokers or len(used_brokers) == n
                ):
                    replicas.append(broker)
                    used_racks.add(rack)
                    used_brokers.add(broker)
                k += 1
        assignment[partition] = replicas
    return assignment
