"""Produce: validate whole batches, append them to the leader's log, acknowledge.

Transactional batches come with the request's ``transactional_id`` (Kafka refuses them
without one); the log checks them like idempotent ones and tracks the transaction they
open (``log/producer_state.py``). Whether the partition was added to the transaction
(KIP-890 verification) is not checked.

acks=0 gets no response; as in Kafka, a failed acks=0 produce closes the connection
so the producer notices. acks=1 answers once the leader has appended; acks=all once
the high watermark has passed the append, i.e. every in-sync replica has it. While an
acks=all produce waits, the connection may take the client's next produce
(``RequestContext.allow_next_produce``): one replication round trip then carries every
request the client pipelined, not one.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from ...deferred import Deferred
from ...log.validator import DecompressionBudget
from ...protocol.produce_response import PartitionProduceResult, ProduceResponse
from ...protocol.record_batch import first_batch_is_transactional
from ...protocol.requests import ProduceRequest
from ...protocol.response import NoResponse
from ...replication.partition import PartitionError
from ...security.acl import AclOperation, ResourceType
from ..request_router import RequestContext
from ..services import BrokerServices


def handle_produce(
    broker: BrokerServices, context: RequestContext, request: ProduceRequest
) -> ProduceResponse | NoResponse | Deferred:
    authorizer = broker.authorizer
    if _has_transactional_records(request) and (
        request.transactional_id is None
        or not authorizer.authorize(
            context, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id
        )
    ):
        # Matches Kafka's answer to transactional records that come without an
        # (authorized) transactional id: the whole request fails.
        return _reject_all(request, ErrorCode.transactional_id_authorization_failed)
    # None without an authorizer: the hot path does no per-topic work then.
    writable = (
        authorizer.filter_authorized(
            context, AclOperation.WRITE, ResourceType.TOPIC, request.topic_data, _topic_name
        )
        if authorizer.enabled
        else None
    )
    acks = request.acks
    if acks not in (0, 1, -1):
        return _reject_all(request, ErrorCode.invalid_required_acks)
    replicas = broker.replica_manager
    api_version = context.version
    # One budget per request: every partition's compressed batches share it.
    budget = DecompressionBudget(replicas.produce_decompressed_max_bytes)
    any_error = False
    topics: list[tuple[str, list[PartitionProduceResult]]] = []
    waiting: list[tuple[PartitionProduceResult, str, Any]] = []
    for topic_data in request.topic_data:
        name = topic_data.name
        results = []
        for partition_data in topic_data.partition_data:
            index = partition_data.index
            if writable is not None and name not in writable:
                any_error = True
                results.append(_failed(index, ErrorCode.topic_authorization_failed, ""))
                continue
            try:
                result = replicas.append(
                    name,
                    index,
                    partition_data.records,
                    acks,
                    api_version=api_version,
                    budget=budget,
                )
            except PartitionError as error:
                any_error = True
                failed = _failed(index, error.error_code, str(error))
                failed.record_errors = error.record_errors
                results.append(failed)
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
        return NoResponse()
    response = ProduceResponse(topics)
    if waiting:
        # Appended: only the answer waits for the followers, and the client's next
        # produce may append behind this one meanwhile.
        context.allow_next_produce()
        return _await_replication(broker, response, waiting, request.timeout.total_seconds())
    return response


def _await_replication(
    broker: BrokerServices,
    response: ProduceResponse,
    waiting: list[tuple[PartitionProduceResult, str, Any]],
    timeout_s: float,
) -> Deferred:
    """acks=all: the response once every partition's high watermark passed its append,
    completed in the call that moves the last one (``DelayedProduce``)."""
    answer = Deferred()

    def complete(outcomes: Any, error: BaseException | None) -> None:
        if error is None:
            try:
                for (result, _name, _appended), error_code in zip(waiting, outcomes, strict=True):
                    if error_code != ErrorCode.none:
                        failed = _failed(result.index, error_code, error_code.name)
                        result.error_code = failed.error_code
                        result.base_offset = -1
                        result.log_start_offset = -1
                        result.error_message = failed.error_message
            except Exception as failure:  # the router answers UNKNOWN_SERVER_ERROR
                error = failure
        if error is not None:
            answer.fail(error)
        else:
            answer.resolve(response)

    broker.replica_manager.wait_for_replications(
        [(name, result.index, appended) for result, name, appended in waiting], timeout_s
    ).then(complete)
    return answer


def _topic_name(topic_data: Any) -> str:
    return str(topic_data.name)


def _failed(index: int, error_code: ErrorCode, message: str) -> PartitionProduceResult:
    return PartitionProduceResult(index, error_code, error_message=message)


def _has_transactional_records(request: Any) -> bool:
    """Kafka's ``RequestUtils.hasTransactionalRecords``: any partition's first batch.
    Plain loops, not ``any`` over a generator: this runs for every Produce, and the
    generator cost as much as the check."""
    for topic in request.topic_data:
        for partition in topic.partition_data:
            if first_batch_is_transactional(partition.records):
                return True
    return False


def _reject_all(request: Any, error_code: ErrorCode) -> ProduceResponse:
    return ProduceResponse(
        [
            (t.name, [PartitionProduceResult(p.index, error_code) for p in t.partition_data])
            for t in request.topic_data
        ]
    )
