"""DeleteRecords: move a partition's log start offset forward."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ...log.partition_log import OffsetOutOfRange
from ...protocol.requests import DeleteRecordsRequest
from ...protocol.response import BodyResponse
from ...replication.partition import PartitionError
from ...security.acl import AclOperation, ResourceType
from ..request_router import RequestContext
from ..services import BrokerServices

HIGH_WATERMARK = -1  # Kafka: offset -1 means "delete up to the high watermark"


def handle_delete_records(
    broker: BrokerServices, context: RequestContext, request: DeleteRecordsRequest
) -> BodyResponse:
    topics = []
    # Kafka: Delete on each topic, else TOPIC_AUTHORIZATION_FAILED.
    deletable = broker.authorizer.filter_authorized(
        context, AclOperation.DELETE, ResourceType.TOPIC, (t.name for t in request.topics)
    )
    for topic in request.topics:
        partitions = []
        for requested in topic.partitions:
            index = requested.partition_index
            if topic.name not in deletable:
                partitions.append(
                    {
                        "partition_index": index,
                        "low_watermark": -1,
                        "error_code": ErrorCode.topic_authorization_failed,
                    }
                )
                continue
            try:
                partition = broker.replica_manager.partition_or_error(topic.name, index)
            except PartitionError as error:
                partitions.append(
                    {"partition_index": index, "low_watermark": -1, "error_code": error.error_code}
                )
                continue
            partition_log = partition.log
            offset = requested.offset
            if offset == HIGH_WATERMARK:
                offset = partition_log.high_watermark
            if offset < 0 or offset > partition_log.high_watermark:
                partitions.append(
                    {
                        "partition_index": index,
                        "low_watermark": -1,
                        "error_code": ErrorCode.offset_out_of_range,
                    }
                )
                continue
            try:
                low_watermark = partition_log.delete_records_before(offset)
            except OffsetOutOfRange:
                partitions.append(
                    {
                        "partition_index": index,
                        "low_watermark": -1,
                        "error_code": ErrorCode.offset_out_of_range,
                    }
                )
                continue
            partitions.append(
                {
                    "partition_index": index,
                    "low_watermark": low_watermark,
                    "error_code": ErrorCode.none,
                }
            )
        topics.append({"name": topic.name, "partitions": partitions})
    return context.respond({"topics": topics, "throttle_time": 0})
