"""Topic creation, deletion and partition addition, as a broker does them for clients.

Shared by CreateTopics, DeleteTopics, CreatePartitions and Metadata's auto-creation.
The broker validates, places replicas (``cluster.placement``), and writes Kafka's
znodes through ``ZkAdmin`` like Kafka's AdminZkClient; the controller then elects
leaders. ZooKeeper calls are blocking, so they run in a worker thread.

Bounded work: one CreateTopics or CreatePartitions request adds at most
``max.partitions.per.request`` partitions (Kafka's controller refuses more than 10,000
per request with POLICY_VIOLATION), and placing more than ``_PLACE_ON_LOOP_MAX``
partitions runs in a worker thread, so no request holds the event loop for long.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from ..cluster.admin import (
    InvalidPartitions,
    InvalidReplicaAssignment,
    InvalidTopic,
    TopicExists,
    UnknownTopic,
    ZkAdmin,
)
from ..cluster.metadata_cache import MetadataCache
from ..cluster.models import TopicAssignment, new_uuid
from ..cluster.placement import PlacementError, assign_replicas
from ..cluster.topic_names import topic_name_error
from ..config import BrokerConfig, InvalidConfig, validate_topic_configs
from ..protocol.errors import KafkaError


class TopicAdminError(KafkaError):
    """A topic that cannot be created, grown or deleted, with Kafka's error code."""


# ZkAdmin's refusals as Kafka's error codes (cluster/ has no wire vocabulary: it serves
# the CLI and the operator too).
_ADMIN_ERROR_CODES: dict[type[Exception], ErrorCode] = {
    TopicExists: ErrorCode.topic_already_exists,
    UnknownTopic: ErrorCode.unknown_topic_or_partition,
    InvalidTopic: ErrorCode.invalid_topic_exception,
    InvalidPartitions: ErrorCode.invalid_partitions,
    InvalidReplicaAssignment: ErrorCode.invalid_replica_assignment,
    InvalidConfig: ErrorCode.invalid_config,
}


def _admin_error(name: str, refusal: Exception) -> TopicAdminError:
    """``ZkAdmin``'s refusal of ``name`` with Kafka's error code (UNKNOWN_SERVER_ERROR for
    one no client request should meet)."""
    if isinstance(refusal, TopicExists):
        return TopicAdminError(ErrorCode.topic_already_exists, f"topic {name!r} already exists")
    code = next(
        (c for kind, c in _ADMIN_ERROR_CODES.items() if isinstance(refusal, kind)),
        ErrorCode.unknown_server_error,
    )
    return TopicAdminError(code, str(refusal))


# Placing this many partitions takes a few milliseconds; larger requests go to a thread.
_PLACE_ON_LOOP_MAX = 1000


def too_many_partitions(count: int, limit: int) -> TopicAdminError:
    """Matches Kafka's controller: a request adding more partitions than it allows is a
    policy violation, whatever else it asks."""
    return TopicAdminError(
        ErrorCode.policy_violation,
        f"Excessively large number of partitions per request: {count} requested, at most "
        f"{limit} allowed (max.partitions.per.request)",
    )


@dataclass(frozen=True, slots=True)
class _Placement:
    """A validated request for ``count`` new partitions, to be placed by Kafka's rule."""

    brokers: Mapping[int, str | None]
    count: int
    replication_factor: int
    start_partition_id: int = 0
    # ZooKeeper's registered brokers, asked when the cached ones are too few.
    registered: Callable[[], Mapping[int, str | None]] | None = None

    def place(self, brokers: Mapping[int, str | None] | None = None) -> dict[int, list[int]]:
        try:
            assignment = assign_replicas(
                self.brokers if brokers is None else brokers,
                self.count,
                self.replication_factor,
                start_partition_id=self.start_partition_id,
            )
        except PlacementError as error:
            raise TopicAdminError(ErrorCode.invalid_replication_factor, str(error)) from error
        return {p: list(r) for p, r in assignment.items()}

    async def place_off_loop(self) -> dict[int, list[int]]:
        brokers = self.brokers
        if len(brokers) < self.replication_factor and self.registered is not None:
            # The metadata cache learns of brokers through a watch, so right after a broker
            # registers it can lag ZooKeeper (a cluster that just started refused RF=3
            # with "larger than available brokers: 2"). Ask ZooKeeper before refusing.
            fresh = await asyncio.to_thread(self.registered)
            if len(fresh) > len(brokers):
                brokers = fresh
        if self.count <= _PLACE_ON_LOOP_MAX:
            return self.place(brokers)
        return await asyncio.to_thread(self.place, brokers)


class TopicAdmin:
    def __init__(
        self,
        config: BrokerConfig,
        metadata: MetadataCache,
        admin: ZkAdmin,
        led_here: Callable[[str], bool] | None = None,
    ) -> None:
        """``led_here(topic)``: whether this broker leads every partition of ``topic``
        the metadata says it leads (the replica manager's ``leads_as_assigned``)."""
        self.config = config
        self.metadata = metadata
        self.admin = admin
        self.led_here = led_here

    def _registered_brokers(self) -> dict[int, str | None]:
        """Broker id -> rack of every broker registered in ZooKeeper (blocking)."""
        return {
            broker_id: registration.rack
            for broker_id, registration in self.admin.list_brokers().items()
        }

    def plan_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        assignments: Mapping[int, list[int]] | None,
        configs: Mapping[str, str | None],
    ) -> dict[int, list[int]]:
        """Validate a creation request and return its replica assignment."""
        plan = self.check_topic(name, num_partitions, replication_factor, assignments, configs)
        return plan if isinstance(plan, dict) else plan.place()

    async def plan_topic_off_loop(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        assignments: Mapping[int, list[int]] | None,
        configs: Mapping[str, str | None],
        *,
        already_added: int = 0,
    ) -> dict[int, list[int]]:
        """``plan_topic`` for client requests: a large placement runs in a thread."""
        plan = self.check_topic(
            name,
            num_partitions,
            replication_factor,
            assignments,
            configs,
            already_added=already_added,
        )
        return plan if isinstance(plan, dict) else await plan.place_off_loop()

    def _check_partition_limit(self, count: int, already_added: int) -> None:
        """``max.partitions.per.request``, for CreateTopics and CreatePartitions alike:
        ``already_added`` partitions earlier entries of the same request create."""
        limit = self.config.max_partitions_per_request
        if already_added + count > limit:
            raise too_many_partitions(already_added + count, limit)

    def check_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        assignments: Mapping[int, list[int]] | None,
        configs: Mapping[str, str | None],
        *,
        already_added: int = 0,
    ) -> dict[int, list[int]] | _Placement:
        """Validate a creation request: its explicit assignment, or what to place.
        ``already_added``: partitions earlier topics of the same request create."""
        config = self.config
        if (error := topic_name_error(name)) is not None:
            raise TopicAdminError(ErrorCode.invalid_topic_exception, error)
        if name in self.metadata.topics:
            raise TopicAdminError(ErrorCode.topic_already_exists, f"topic {name!r} already exists")
        try:
            validate_topic_configs(configs)
        except InvalidConfig as error:
            raise TopicAdminError(ErrorCode.invalid_config, str(error)) from error
        brokers = {b.broker_id: b.rack for b in self.metadata.brokers.values()}
        if assignments:
            if num_partitions != -1 or replication_factor != -1:
                raise TopicAdminError(
                    ErrorCode.invalid_request,
                    "give either a replica assignment or partitions and replication factor",
                )
            self._check_partition_limit(len(assignments), already_added)
            return self._check_assignment(assignments, brokers)
        partitions = config.num_partitions if num_partitions == -1 else num_partitions
        replicas = (
            config.default_replication_factor if replication_factor == -1 else replication_factor
        )
        if partitions <= 0:
            raise TopicAdminError(
                ErrorCode.invalid_partitions,
                f"number of partitions must be at least 1, got {partitions}",
            )
        self._check_partition_limit(partitions, already_added)
        if replicas <= 0:
            raise TopicAdminError(
                ErrorCode.invalid_replication_factor,
                f"replication factor must be at least 1, got {replicas}",
            )
        return _Placement(brokers, partitions, replicas, registered=self._registered_brokers)

    def _check_assignment(
        self, assignments: Mapping[int, list[int]], brokers: Mapping[int, str | None]
    ) -> dict[int, list[int]]:
        if sorted(assignments) != list(range(len(assignments))):
            raise TopicAdminError(
                ErrorCode.invalid_replica_assignment,
                "partitions in a replica assignment must be numbered 0..n-1",
            )
        sizes = {len(r) for r in assignments.values()}
        if len(sizes) != 1 or 0 in sizes:
            raise TopicAdminError(
                ErrorCode.invalid_replica_assignment,
                "every partition needs the same, non-zero number of replicas",
            )
        for partition, replicas in assignments.items():
            if len(set(replicas)) != len(replicas):
                raise TopicAdminError(
                    ErrorCode.invalid_replica_assignment,
                    f"partition {partition} lists a broker twice: {replicas}",
                )
            unknown = [b for b in replicas if b not in brokers]
            if unknown:
                raise TopicAdminError(
                    ErrorCode.invalid_replica_assignment,
                    f"partition {partition} names unknown brokers {unknown}",
                )
        return {p: list(r) for p, r in assignments.items()}

    async def create_topic(
        self, name: str, assignment: Mapping[int, list[int]], configs: Mapping[str, str | None]
    ) -> str:
        topic_id = new_uuid()
        clean = {k: v for k, v in configs.items() if v is not None}
        try:
            await asyncio.to_thread(self.admin.create_topic, name, assignment, clean, topic_id)
        except TopicExists as error:
            raise _admin_error(name, error) from error
        return topic_id

    async def create_topics(
        self, topics: list[tuple[str, Mapping[int, list[int]], Mapping[str, str | None]]]
    ) -> dict[str, str | TopicAdminError]:
        """Create planned topics in one pipelined ZooKeeper batch; maps each name to its
        new topic id or its error."""
        batch = [
            (name, assignment, {k: v for k, v in configs.items() if v is not None}, new_uuid())
            for name, assignment, configs in topics
        ]
        outcome = await asyncio.to_thread(self.admin.create_topics, batch)
        results: dict[str, str | TopicAdminError] = {}
        for name, _, _, topic_id in batch:
            created = outcome[name]
            if isinstance(created, TopicAssignment):
                results[name] = topic_id
            else:
                results[name] = _admin_error(name, created)
        return results

    def ready(self, name: str) -> bool:
        """Every partition of topic ``name`` has a leader, and those this broker leads are
        led here, not only named so in ZooKeeper: Kafka's controller sends a broker
        LeaderAndIsr before the UpdateMetadata that shows it as leader, so a client
        answered by one broker can produce to it at once. Gregor's replica manager may
        still hold a new partition back while the log manager's threads make its files
        (seconds on a busy disk), and a produce sent then was refused with
        NOT_LEADER_OR_FOLLOWER."""
        return self.metadata.topic_has_leaders(name) and (
            self.led_here is None or self.led_here(name)
        )

    def not_ready_because(self, name: str) -> str:
        """Why ``ready(name)`` does not hold, for the log line of a request that timed
        out waiting on it."""
        topic = self.metadata.topics.get(name)
        if topic is None:
            return "not in this broker's metadata"
        leaderless = sorted(i for i, p in topic.partitions.items() if p.leader < 0)
        if leaderless or not topic.partitions:
            return f"partitions without a leader: {leaderless}"
        if self.led_here is not None and not self.led_here(name):
            return "partitions this broker is named to lead are not led here yet"
        return "ready"

    async def wait_for_leaders(self, names: list[str], timeout: float) -> bool:
        """Until every topic of ``names`` is ``ready``; False at the timeout."""
        ready = self.ready
        return await self.metadata.wait_for(lambda: all(ready(n) for n in names), timeout)

    async def delete_topics(self, names: list[str]) -> dict[str, TopicAdminError | None]:
        """Request the deletion of every topic in ``names`` (pipelined in ZooKeeper);
        maps each name to None or its error."""
        results: dict[str, TopicAdminError | None] = {}
        if not self.config.delete_topic_enable:
            error = TopicAdminError(
                ErrorCode.topic_deletion_disabled,
                "topic deletion is disabled (delete.topic.enable)",
            )
            return dict.fromkeys(names, error)
        known = []
        for name in names:
            if name in self.metadata.topics:
                known.append(name)
            else:
                results[name] = TopicAdminError(
                    ErrorCode.unknown_topic_or_partition, f"unknown topic {name!r}"
                )
        if known:
            outcome = await asyncio.to_thread(self.admin.request_topic_deletions, known)
            for name, problem in outcome.items():
                if isinstance(problem, UnknownTopic):
                    results[name] = _admin_error(name, problem)
                else:
                    # Kafka answers success for a topic already marked for deletion.
                    results[name] = None
        return results

    async def create_partitions(
        self,
        name: str,
        count: int,
        assignments: list[list[int]] | None,
        validate_only: bool,
        *,
        already_added: int = 0,
    ) -> int:
        """Grow ``name`` to ``count`` partitions; return how many were added.
        ``already_added``: partitions earlier topics of the same request add."""
        topic = self.metadata.topics.get(name)
        if topic is None:
            raise TopicAdminError(ErrorCode.unknown_topic_or_partition, f"unknown topic {name!r}")
        current = len(topic.partitions)
        if count < current:
            raise TopicAdminError(
                ErrorCode.invalid_partitions,
                f"topic {name} has {current} partitions; Kafka partitions can only grow, "
                f"not shrink to {count}",
            )
        if count == current:
            raise TopicAdminError(
                ErrorCode.invalid_partitions, f"topic {name} already has {count} partitions"
            )
        new_count = count - current
        self._check_partition_limit(new_count, already_added)
        brokers = {b.broker_id: b.rack for b in self.metadata.brokers.values()}
        replication_factor = len(next(iter(topic.partitions.values())).replicas)
        if assignments:
            if len(assignments) != new_count:
                raise TopicAdminError(
                    ErrorCode.invalid_replica_assignment,
                    f"{len(assignments)} assignments given for {new_count} new partitions",
                )
            plan = self._check_assignment({i: list(a) for i, a in enumerate(assignments)}, brokers)
            new = {current + i: replicas for i, replicas in plan.items()}
        else:
            placement = _Placement(
                brokers, new_count, replication_factor, current, self._registered_brokers
            )
            new = await placement.place_off_loop()
        if not validate_only:
            try:
                await asyncio.to_thread(self.admin.add_partitions, name, new)
            # Deleted since the metadata said it was there, or grown meanwhile by another
            # request.
            except (UnknownTopic, InvalidPartitions, InvalidReplicaAssignment) as error:
                raise _admin_error(name, error) from error
        return new_count
