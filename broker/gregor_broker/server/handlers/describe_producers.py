"""DescribeProducers (API 61): the producers a partition leader knows, with their open
transactions (Kafka's ``KafkaApis.handleDescribeProducersRequest``, used by
``kafka-transactions.sh describe-producers`` and ``find-hanging``).

Per partition: NOT_LEADER_OR_FOLLOWER unless this broker leads it,
UNKNOWN_TOPIC_OR_PARTITION when no such partition exists; else each producer id with its
epoch, last sequence and timestamp, the epoch of the coordinator that wrote its last
marker, and the first offset of its open transaction (-1: none).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ...protocol.requests import DescribeProducersRequest
from ...protocol.response import BodyResponse
from ...replication.partition import PartitionError
from ...security.acl import AclOperation, ResourceType
from ..request_router import RequestContext
from ..services import BrokerServices


def handle_describe_producers(
    broker: BrokerServices, context: RequestContext, request: DescribeProducersRequest
) -> BodyResponse:
    topics = []
    # Kafka: Read on each topic, else TOPIC_AUTHORIZATION_FAILED.
    readable = broker.authorizer.filter_authorized(
        context, AclOperation.READ, ResourceType.TOPIC, (t.name for t in request.topics)
    )
    for topic in request.topics:
        partitions = []
        for index in topic.partition_indexes:
            if topic.name not in readable:
                partitions.append(
                    {
                        "partition_index": index,
                        "error_code": ErrorCode.topic_authorization_failed,
                        "error_message": None,
                        "active_producers": [],
                    }
                )
                continue
            try:
                partition = broker.replica_manager.partition_or_error(topic.name, index)
            except PartitionError as error:
                partitions.append(
                    {
                        "partition_index": index,
                        "error_code": error.error_code,
                        "error_message": error.error_code.name,
                        "active_producers": [],
                    }
                )
                continue
            partitions.append(
                {
                    "partition_index": index,
                    "error_code": ErrorCode.none,
                    "error_message": None,
                    "active_producers": [
                        {
                            "producer_id": producer_id,
                            "producer_epoch": epoch,
                            "last_sequence": last_sequence,
                            "last_timestamp": last_timestamp,
                            "coordinator_epoch": coordinator_epoch,
                            "current_txn_start_offset": txn_start,
                        }
                        for (
                            producer_id,
                            epoch,
                            last_sequence,
                            last_timestamp,
                            coordinator_epoch,
                            txn_start,
                        ) in partition.log.active_producers()
                    ],
                }
            )
        topics.append({"name": topic.name, "partitions": partitions})
    return context.respond({"throttle_time": 0, "topics": topics})
