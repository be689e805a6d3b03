"""ElectLeaders, AlterPartitionReassignments and ListPartitionReassignments.

These ask the controller to act, the way Kafka's ZooKeeper-mode tools did: the broker
merges the request into ``/admin/preferred_replica_election`` or
``/admin/reassign_partitions`` (``ZkAdmin.merge_preferred_replica_election`` /
``merge_reassignment``, shared with the operator) and the controller carries it out.
Progress is read back from the topic znodes (``adding_replicas``/``removing_replicas``,
KIP-455).
"""

from __future__ import annotations

import asyncio
from typing import Any

from kio.schema.errors import ErrorCode

from ...cluster.reassignment import original_replicas, preferred_leader
from ...cluster.topic_names import topic_name_error
from ...protocol.requests import (
    AlterPartitionReassignmentsRequest,
    ElectLeadersRequest,
    ListPartitionReassignmentsRequest,
)
from ...protocol.response import BodyResponse
from ...security.acl import AclOperation
from ..request_router import RequestContext
from ..services import BrokerServices

PREFERRED = 0


async def handle_elect_leaders(
    broker: BrokerServices, context: RequestContext, request: ElectLeadersRequest
) -> BodyResponse:
    # Kafka: Alter on the cluster, else CLUSTER_AUTHORIZATION_FAILED everywhere.
    broker.authorizer.require_cluster(context, AclOperation.ALTER)
    metadata = broker.metadata
    if request.topic_partitions is None:
        wanted = [(t.name, p) for t in metadata.topics.values() for p in t.partitions]
    else:
        wanted = [(t.topic, p) for t in request.topic_partitions for p in t.partitions]
    election_type = getattr(request, "election_type", PREFERRED)
    results: dict[tuple[str, int], tuple[ErrorCode, str | None]] = {}
    to_elect = []
    for topic, index in wanted:
        info = metadata.topics.get(topic)
        partition = info.partitions.get(index) if info is not None else None
        if partition is None:
            results[(topic, index)] = (ErrorCode.unknown_topic_or_partition, None)
        elif election_type != PREFERRED:
            results[(topic, index)] = (
                ErrorCode.invalid_request,
                "unclean elections are made by the controller when a topic sets "
                "unclean.leader.election.enable=true",
            )
        elif partition.leader == preferred_leader(partition.replicas):
            results[(topic, index)] = (ErrorCode.election_not_needed, None)
        else:
            to_elect.append((topic, index))
    if to_elect:
        await asyncio.to_thread(broker.zk_admin.merge_preferred_replica_election, to_elect)

        def elected() -> bool:
            for topic, index in to_elect:
                info = metadata.topics.get(topic)
                partition = info.partitions.get(index) if info else None
                if partition is None or partition.leader != preferred_leader(partition.replicas):
                    return False
            return True

        await metadata.wait_for(elected, max(request.timeout.total_seconds(), 1.0))
        for topic, index in to_elect:
            info = metadata.topics.get(topic)
            partition = info.partitions.get(index) if info else None
            if partition is not None and partition.leader == preferred_leader(partition.replicas):
                results[(topic, index)] = (ErrorCode.none, None)
            else:
                results[(topic, index)] = (
                    ErrorCode.preferred_leader_not_available,
                    "the preferred leader is not live and in sync",
                )
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, index), (error, message) in results.items():
        by_topic.setdefault(topic, []).append(
            {"partition_id": index, "error_code": error, "error_message": message}
        )
    body = {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "replica_election_results": [
            {"topic": topic, "partition_result": partitions}
            for topic, partitions in by_topic.items()
        ],
    }
    return context.respond(body)


async def handle_alter_partition_reassignments(
    broker: BrokerServices, context: RequestContext, request: AlterPartitionReassignmentsRequest
) -> BodyResponse:
    broker.authorizer.require_cluster(context, AclOperation.ALTER)
    metadata = broker.metadata
    live = set(metadata.brokers)
    accepted: dict[tuple[str, int], tuple[int, ...]] = {}
    responses = []
    for topic in request.topics:
        info = metadata.topics.get(topic.name)
        partitions = []
        for requested in topic.partitions:
            index = requested.partition_index
            error, message = ErrorCode.none, None
            partition = info.partitions.get(index) if info is not None else None
            if partition is None:
                error = ErrorCode.unknown_topic_or_partition
            elif requested.replicas is None:
                found = await asyncio.to_thread(broker.zk_admin.get_topic, topic.name)
                adding = tuple(found.adding_replicas.get(index, ())) if found else ()
                removing = tuple(found.removing_replicas.get(index, ())) if found else ()
                if not adding and not removing:
                    error = ErrorCode.no_reassignment_in_progress
                else:
                    # Cancelling is reassigning back to the original replicas.
                    accepted[(topic.name, index)] = original_replicas(
                        tuple(found.partitions[index]), adding
                    )
            else:
                target = tuple(requested.replicas)
                unknown = [b for b in target if b not in live]
                if not target or len(set(target)) != len(target):
                    error = ErrorCode.invalid_replica_assignment
                    message = f"replicas {list(target)} are empty or repeat a broker"
                elif unknown:
                    error = ErrorCode.invalid_replica_assignment
                    message = f"brokers {unknown} are not live"
                else:
                    accepted[(topic.name, index)] = target
            partitions.append(
                {"partition_index": index, "error_code": error, "error_message": message}
            )
        responses.append({"name": topic.name, "partitions": partitions})
    if accepted:
        await asyncio.to_thread(broker.zk_admin.merge_reassignment, accepted)
    return context.respond(
        {"throttle_time": 0, "error_code": ErrorCode.none, "responses": responses}
    )


async def handle_list_partition_reassignments(
    broker: BrokerServices, context: RequestContext, request: ListPartitionReassignmentsRequest
) -> BodyResponse:
    broker.authorizer.require_cluster(context, AclOperation.DESCRIBE)
    if request.topics is None:
        names = list(broker.metadata.topics)
        wanted = None
    else:
        names = [t.name for t in request.topics]
        wanted = {(t.name, p) for t in request.topics for p in t.partition_indexes}
    topics = []
    for name in names:
        if topic_name_error(name) is not None:
            continue  # no topic can have that name ("", ".", a path): nothing is moving
        found = await asyncio.to_thread(broker.zk_admin.get_topic, name)
        if found is None:
            continue
        partitions = []
        for index in sorted(set(found.adding_replicas) | set(found.removing_replicas)):
            if wanted is not None and (name, index) not in wanted:
                continue
            partitions.append(
                {
                    "partition_index": index,
                    "replicas": list(found.partitions.get(index, ())),
                    "adding_replicas": list(found.adding_replicas.get(index, ())),
                    "removing_replicas": list(found.removing_replicas.get(index, ())),
                }
            )
        if partitions:
            topics.append({"name": name, "partitions": partitions})
    return context.respond({"throttle_time": 0, "error_code": ErrorCode.none, "topics": topics})
