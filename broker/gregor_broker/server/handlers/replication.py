"""OffsetForLeaderEpoch: where a leader epoch ends in this leader's log (KIP-101).

A follower (or a KIP-320 consumer) sends the latest epoch it has; the answer is the
largest epoch at or below it that this log knows and the offset where that epoch ends,
so the asker truncates any tail written under a leadership that did not last.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ...protocol.requests import OffsetForLeaderEpochRequest
from ...protocol.response import BodyResponse
from ...replication.partition import PartitionError
from ...security.acl import AclOperation, ResourceType
from ..request_router import RequestContext
from ..services import BrokerServices


def handle_offset_for_leader_epoch(
    broker: BrokerServices, context: RequestContext, request: OffsetForLeaderEpochRequest
) -> BodyResponse:
    topics = []
    authorizer = broker.authorizer
    # Kafka: a follower's ClusterAction covers everything; else Describe on each topic.
    if authorizer.authorize_cluster(context, AclOperation.CLUSTER_ACTION, log_if_denied=False):
        describable = {t.topic for t in request.topics}
    else:
        describable = authorizer.filter_authorized(
            context, AclOperation.DESCRIBE, ResourceType.TOPIC, (t.topic for t in request.topics)
        )
    for topic in request.topics:
        partitions = []
        for requested in topic.partitions:
            index = requested.partition
            if topic.topic not in describable:
                partitions.append(
                    {
                        "error_code": ErrorCode.topic_authorization_failed,
                        "partition": index,
                        "leader_epoch": -1,
                        "end_offset": -1,
                    }
                )
                continue
            try:
                partition = broker.replica_manager.partition_or_error(topic.topic, index)
                partition.check_current_leader_epoch(requested.current_leader_epoch)
            except PartitionError as error:
                partitions.append(
                    {
                        "error_code": error.error_code,
                        "partition": index,
                        "leader_epoch": -1,
                        "end_offset": -1,
                    }
                )
                continue
            epoch, end_offset = partition.log.leader_epoch_cache.end_offset_for(
                requested.leader_epoch
            )
            partitions.append(
                {
                    "error_code": ErrorCode.none,
                    "partition": index,
                    "leader_epoch": epoch,
                    "end_offset": end_offset,
                }
            )
        topics.append({"topic": topic.topic, "partitions": partitions})
    return context.respond({"topics": topics, "throttle_time": 0})
