"""ListOffsets: earliest, latest, max timestamp, and offsets for times.

Matches Kafka: "latest" is the high watermark (the next offset to be committed, not
the last batch's base offset + 1), or the last stable offset for a read_committed
consumer (``isolation_level`` 1, v2+); a timestamp lookup returns the first offset
whose record timestamp is at or after the target and below that same bound, or -1 when
there is none.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from ...protocol.requests import ListOffsetsRequest
from ...protocol.response import BodyResponse
from ...replication.partition import PartitionError
from ...security.acl import AclOperation, ResourceType
from ..request_router import RequestContext
from ..services import BrokerServices

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5


def handle_list_offsets(
    broker: BrokerServices, context: RequestContext, request: ListOffsetsRequest
) -> BodyResponse:
    read_committed = getattr(request, "isolation_level", 0) == 1
    # Kafka: Describe on each topic, else TOPIC_AUTHORIZATION_FAILED.
    describable = broker.authorizer.filter_authorized(
        context, AclOperation.DESCRIBE, ResourceType.TOPIC, (t.name for t in request.topics)
    )
    topics = []
    for topic in request.topics:
        partitions = []
        for requested in topic.partitions:
            if topic.name not in describable:
                partitions.append(
                    _result(
                        requested.partition_index, ErrorCode.topic_authorization_failed, -1, -1, -1
                    )
                )
                continue
            partitions.append(_lookup(broker, topic.name, requested, read_committed))
        topics.append({"name": topic.name, "partitions": partitions})
    return context.respond({"topics": topics, "throttle_time": 0})


def _lookup(
    broker: BrokerServices, topic: str, requested: Any, read_committed: bool
) -> dict[str, Any]:
    index = requested.partition_index
    try:
        partition = broker.replica_manager.partition_or_error(topic, index)
        partition.check_current_leader_epoch(getattr(requested, "current_leader_epoch", -1))
    except PartitionError as error:
        return _result(index, error.error_code, -1, -1, -1)
    partition_log = partition.log
    epoch = partition.leader_epoch
    target = requested.timestamp
    # Kafka's lastFetchableOffset: what this consumer may read.
    fetchable = partition_log.last_stable_offset if read_committed else partition_log.high_watermark
    if target == LATEST:
        return _result(index, ErrorCode.none, -1, fetchable, epoch)
    if target in (EARLIEST, EARLIEST_LOCAL):
        return _result(index, ErrorCode.none, -1, partition_log.log_start_offset, epoch)
    if target == LATEST_TIERED:
        # No tiered storage: Kafka answers -1 for the latest tiered offset then.
        return _result(index, ErrorCode.none, -1, -1, -1)
    if target == MAX_TIMESTAMP:
        found = partition_log.max_timestamp_offset()
    elif target < 0:
        return _result(index, ErrorCode.invalid_request, -1, -1, -1)
    else:
        found = partition_log.offset_for_timestamp(target)
    if found is None or found[0] >= fetchable:
        return _result(index, ErrorCode.none, -1, -1, -1)
    offset, timestamp = found
    return _result(index, ErrorCode.none, timestamp, offset, epoch)


def _result(index: int, error: ErrorCode, timestamp: int, offset: int, epoch: int) -> dict:
    return {
        "partition_index": index,
        "error_code": error,
        "timestamp": timestamp,
        "offset": offset,
        "leader_epoch": epoch,
    }
