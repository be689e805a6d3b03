"""Produce: validate whole batches, append them to the leader's log, acknowledge.

acks=0 gets no response; as in Kafka, a failed acks=0 produce closes the connection
so the producer notices. acks=1 answers once the leader has appended; acks=all once
the high watermark has passed the append, i.e. every in-sync replica has it.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from ...protocol.produce_response import PartitionProduceResult, ProduceResponse
from ..replica_manager import PartitionError

if TYPE_CHECKING:
    from ..broker import Broker
    from ..request_router import RequestContext


def handle_produce(broker: Broker, context: RequestContext, request: Any) -> Any:
    if request.transactional_id is not None:
        return _reject_all(request, ErrorCode.transactional_id_authorization_failed)
    acks = request.acks
    if acks not in (0, 1, -1):
        return _reject_all(request, ErrorCode.invalid_required_acks)
    replicas = broker.replicas
    any_error = False
    topics: list[tuple[str, list[PartitionProduceResult]]] = []
    waiting: list[tuple[PartitionProduceResult, str, Any]] = []
    for topic_data in request.topic_data:
        name = topic_data.name
        results = []
        for partition_data in topic_data.partition_data:
            index = partition_data.index
            try:
                result = replicas.append(name, index, partition_data.records, acks)
            except PartitionError as error:
                any_error = True
                results.append(_failed(index, error.error_code, str(error)))
                continue
            response = PartitionProduceResult(
                index,
                ErrorCode.none,
                result.first_offset,
                result.log_append_time,
                result.log_start_offset,
            )
            results.append(response)
            if acks == -1 and not replicas.is_replicated(name, index, result.last_offset):
                waiting.append((response, name, result))
        topics.append((name, results))
    if acks == 0:
        if any_error:
            context.connection.close_for("acks=0 produce failed")
        return None
    response = ProduceResponse(topics)
    if waiting:
        return _await_replication(broker, response, waiting, request.timeout.total_seconds())
    return response


async def _await_replication(
    broker: Broker,
    response: ProduceResponse,
    waiting: list[tuple[PartitionProduceResult, str, Any]],
    timeout_s: float,
) -> ProduceResponse:
    """acks=all: answer once every partition's high watermark passed its append."""
    outcomes = await asyncio.gather(
        *(
            broker.replicas.wait_for_replication(name, result.index, appended, timeout_s)
            for result, name, appended in waiting
        )
    )
    for (result, _name, _appended), error_code in zip(waiting, outcomes, strict=True):
        if error_code != ErrorCode.none:
            failed = _failed(result.index, error_code, error_code.name)
            result.error_code = failed.error_code
            result.base_offset = -1
            result.log_start_offset = -1
            result.error_message = failed.error_message
    return response


def _failed(index: int, error_code: ErrorCode, message: str) -> PartitionProduceResult:
    return PartitionProduceResult(index, error_code, error_message=message)


def _reject_all(request: Any, error_code: ErrorCode) -> ProduceResponse:
    return ProduceResponse(
        [
            (t.name, [PartitionProduceResult(p.index, error_code) for p in t.partition_data])
            for t in request.topic_data
        ]
    )
