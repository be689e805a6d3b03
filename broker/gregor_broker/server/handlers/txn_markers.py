"""WriteTxnMarkers (API 27): a transaction coordinator ends a transaction on a partition.

Broker to broker (Kafka's ``KafkaApis.handleWriteTxnMarkersRequest``): for each marker
(producer id and epoch, coordinator epoch, COMMIT or ABORT) and each of its partitions,
this broker, as the partition's leader, appends a control batch
(``ReplicaManager.append_txn_marker``) and answers once the high watermark has passed it,
like an acks=all produce. Per-partition errors are Kafka's: UNKNOWN_TOPIC_OR_PARTITION
(no replica here), NOT_LEADER_OR_FOLLOWER, INVALID_PRODUCER_EPOCH (an older producer
epoch than the partition knows), TRANSACTION_COORDINATOR_FENCED (an older coordinator
epoch), NOT_ENOUGH_REPLICAS(_AFTER_APPEND), REQUEST_TIMED_OUT, KAFKA_STORAGE_ERROR. The
coordinator retries the retriable ones.

Markers on ``__consumer_offsets`` partitions also settle the producer's transactional
offset commits: once they are replicated, the group coordinator's
``complete_transactional_offsets(producer_id, partitions, commit)`` is called (Kafka's
``GroupCoordinator.scheduleHandleTxnCompletion``; see docs/design/txn-contract.md).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from kio.schema.errors import ErrorCode

from ...coordinator.records import OFFSETS_TOPIC
from ...log.partition_log import AppendResult
from ...protocol.requests import WriteTxnMarkersRequest
from ...protocol.response import BodyResponse
from ...replication.partition import PartitionError
from ...security.acl import AclOperation
from ..request_router import RequestContext
from ..services import BrokerServices

log = logging.getLogger(__name__)

# Kafka waits request.timeout.ms (30 s by default) for the markers' replication.
MARKER_REPLICATION_TIMEOUT_S = 30.0


async def handle_write_txn_markers(
    broker: BrokerServices, context: RequestContext, request: WriteTxnMarkersRequest
) -> BodyResponse:
    # Kafka: Alter on the cluster, or ClusterAction (brokers), else refused as a whole.
    if not broker.authorizer.authorize_cluster(context, AclOperation.ALTER, log_if_denied=False):
        broker.authorizer.require_cluster(context, AclOperation.CLUSTER_ACTION)
    results = await asyncio.gather(*(_write_marker(broker, marker) for marker in request.markers))
    return context.respond({"markers": results})


async def _write_marker(broker: BrokerServices, marker: Any) -> dict[str, Any]:
    replicas = broker.replica_manager
    producer_id = marker.producer_id
    commit = bool(marker.transaction_result)
    errors: dict[tuple[str, int], ErrorCode] = {}
    appended: list[tuple[str, int, AppendResult]] = []
    for topic in marker.topics:
        for index in topic.partition_indexes:
            key = (topic.name, index)
            try:
                result = replicas.append_txn_marker(
                    topic.name,
                    index,
                    producer_id=producer_id,
                    producer_epoch=marker.producer_epoch,
                    coordinator_epoch=marker.coordinator_epoch,
                    commit=commit,
                )
            except PartitionError as error:
                log.info(
                    "%s marker of producer %d for %s-%d refused: %s",
                    "COMMIT" if commit else "ABORT",
                    producer_id,
                    topic.name,
                    index,
                    error.error_code.name,
                )
                errors[key] = error.error_code
                continue
            appended.append((topic.name, index, result))
    outcomes = await asyncio.gather(
        *(
            replicas.wait_for_replication(name, index, result, MARKER_REPLICATION_TIMEOUT_S)
            for name, index, result in appended
        )
    )
    offsets_partitions = []
    for (name, index, _result), error_code in zip(appended, outcomes, strict=True):
        errors[(name, index)] = error_code
        if name == OFFSETS_TOPIC and error_code == ErrorCode.none:
            offsets_partitions.append(index)
    if offsets_partitions:
        _complete_transactional_offsets(broker, producer_id, offsets_partitions, commit)
    return {
        "producer_id": producer_id,
        "topics": [
            {
                "name": topic.name,
                "partitions": [
                    {"partition_index": index, "error_code": errors[(topic.name, index)]}
                    for index in topic.partition_indexes
                ],
            }
            for topic in marker.topics
        ],
    }


def _complete_transactional_offsets(
    broker: BrokerServices, producer_id: int, partitions: list[int], commit: bool
) -> None:
    """The group coordinator's side of a marker on ``__consumer_offsets``
    (docs/design/txn-contract.md, section 2): pending transactional offsets become
    committed, or are dropped."""
    try:
        broker.coordinator.complete_transactional_offsets(producer_id, partitions, commit)
    except Exception:
        log.exception("completing transactional offsets of producer %d failed", producer_id)
