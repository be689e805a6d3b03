"""Produce: validate whole batches, append them to the leader's log, acknowledge.

acks=0 gets no response; as in Kafka, a failed acks=0 produce closes the connection
so the producer notices. acks=1 answers once the leader has appended; acks=all once
the high watermark has passed the append, i.e. every in-sync replica has it.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

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
    responses = []
    waiting: list[tuple[dict[str, Any], str, Any]] = []
    for topic_data in request.topic_data:
        name = _topic_name(broker, topic_data)
        partition_responses = []
        for partition_data in topic_data.partition_data:
            index = partition_data.index
            try:
                if name is None:
                    raise PartitionError(ErrorCode.unknown_topic_id)
                result = replicas.append(name, index, partition_data.records, acks)
            except PartitionError as error:
                any_error = True
                partition_responses.append(_failed(index, error.error_code, str(error)))
                continue
            response = {
                "index": index,
                "error_code": ErrorCode.none,
                "base_offset": result.first_offset,
                "log_append_time": result.log_append_time,
                "log_start_offset": result.log_start_offset,
            }
            partition_responses.append(response)
            if acks == -1 and not replicas.is_replicated(name, index, result.last_offset):
                waiting.append((response, name, result))
        responses.append(
            {
                "name": name or "",
                "topic_id": getattr(topic_data, "topic_id", None),
                "partition_responses": partition_responses,
            }
        )
    if acks == 0:
        if any_error:
            context.connection.close_for("acks=0 produce failed")
        return None
    body = {"responses": responses, "throttle_time": 0}
    if waiting:
        return _await_replication(broker, body, waiting, request.timeout.total_seconds())
    return body


async def _await_replication(
    broker: Broker,
    body: dict[str, Any],
    waiting: list[tuple[dict[str, Any], str, Any]],
    timeout_s: float,
) -> dict[str, Any]:
    """acks=all: answer once every partition's high watermark passed its append."""
    outcomes = await asyncio.gather(
        *(
            broker.replicas.wait_for_replication(name, response["index"], result, timeout_s)
            for response, name, result in waiting
        )
    )
    for (response, _name, _result), error_code in zip(waiting, outcomes, strict=True):
        if error_code != ErrorCode.none:
            response.update(_failed(response["index"], error_code, error_code.name))
    return body


def _failed(index: int, error_code: ErrorCode, message: str) -> dict[str, Any]:
    return {
        "index": index,
        "error_code": error_code,
        "base_offset": -1,
        "log_append_time": -1,
        "log_start_offset": -1,
        "error_message": message,
    }


def _topic_name(broker: Broker, topic_data: Any) -> str | None:
    name = getattr(topic_data, "name", None)
    if name is not None:
        return name
    topic = broker.metadata.topic_by_uuid(topic_data.topic_id)
    return topic.name if topic is not None else None


def _reject_all(request: Any, error_code: ErrorCode) -> dict[str, Any]:
    return {
        "responses": [
            {
                "name": getattr(t, "name", ""),
                "topic_id": getattr(t, "topic_id", None),
                "partition_responses": [
                    {
                        "index": p.index,
                        "error_code": error_code,
                        "base_offset": -1,
                        "log_append_time": -1,
                        "log_start_offset": -1,
                    }
                    for p in t.partition_data
                ],
            }
            for t in request.topic_data
        ],
        "throttle_time": 0,
    }
