"""Transaction APIs: AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit,
DescribeTransactions, ListTransactions (InitProducerId with a transactional id is in
``producer_ids.py``, FindCoordinator TRANSACTION in ``groups.py``).

Thin translations between kio requests and ``coordinator.transaction_coordinator`` (the
transaction's rules) or ``coordinator.group_coordinator`` (TxnOffsetCommit), answered as
Kafka's ``KafkaApis`` answers them, including KIP-588's mapping of PRODUCER_FENCED to
INVALID_PRODUCER_EPOCH for clients older than the versions that know it.
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode

from ...coordinator.records import OFFSETS_TOPIC, partition_for
from ...coordinator.service import CoordinatorUnavailable, now_ms
from ...coordinator.transaction_coordinator import STATE_NAMES, fenced_error
from ...protocol.requests import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    DescribeTransactionsRequest,
    EndTxnRequest,
    ListTransactionsRequest,
    TxnOffsetCommitRequest,
)
from ...protocol.response import BodyResponse
from ...security.acl import AclOperation, ResourceType
from ..request_router import RequestContext
from ..services import BrokerServices
from .groups import (
    commit_response,
    hashes_group_ids_off_loop,
    offsets_to_commit,
    replicated_commit,
)

_EPOCH = datetime.datetime.fromtimestamp(0, tz=datetime.UTC)


def _start_time(start_ms: int) -> datetime.datetime:
    """A datetime even for -1 (no transaction running), which Kafka sends as is (a plain
    -1 would become kio's null, which this non-nullable field cannot carry)."""
    return _EPOCH + datetime.timedelta(milliseconds=start_ms)


# The first version of each API whose clients know PRODUCER_FENCED (KIP-588).
FENCED_SINCE = {"add_partitions": 2, "add_offsets": 2, "end_txn": 2, "txn_offset_commit": 3}


# -- AddPartitionsToTxn -------------------------------------------------------------------


@hashes_group_ids_off_loop
async def handle_add_partitions_to_txn(
    broker: BrokerServices, context: RequestContext, request: AddPartitionsToTxnRequest
) -> BodyResponse:
    version = context.version
    if version >= 4:
        # Kafka: v4+ comes from brokers only (ClusterAction), and checks no ACL per topic.
        broker.authorizer.require_cluster(context, AclOperation.CLUSTER_ACTION)
        results = [
            await _add_partitions(
                broker,
                version,
                txn.transactional_id,
                txn.producer_id,
                txn.producer_epoch,
                {(t.name, int(p)) for t in txn.topics for p in t.partitions},
                verify_only=txn.verify_only,
            )
            for txn in request.transactions
        ]
        body = {
            "throttle_time": 0,
            "error_code": ErrorCode.none,
            "results_by_transaction": [
                {"transactional_id": txn.transactional_id, "topic_results": topics}
                for txn, topics in zip(request.transactions, results, strict=True)
            ],
        }
        return context.respond(body)
    transactional_id = request.v3_and_below_transactional_id
    wanted = {(t.name, int(p)) for t in request.v3_and_below_topics for p in t.partitions}
    authorizer = broker.authorizer
    if not authorizer.authorize(
        context, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id
    ):
        body = {
            "throttle_time": 0,
            "results_by_topic_v3_and_below": _by_topic(
                dict.fromkeys(wanted, ErrorCode.transactional_id_authorization_failed)
            ),
        }
        return context.respond(body)
    writable = authorizer.filter_authorized(
        context, AclOperation.WRITE, ResourceType.TOPIC, (name for name, _ in wanted)
    )
    if any(name not in writable for name, _ in wanted):
        # Kafka: one refused topic fails the whole transaction's request.
        body = {
            "throttle_time": 0,
            "results_by_topic_v3_and_below": _by_topic(
                {
                    key: ErrorCode.topic_authorization_failed
                    if key[0] not in writable
                    else ErrorCode.operation_not_attempted
                    for key in wanted
                }
            ),
        }
        return context.respond(body)
    topics = await _add_partitions(
        broker,
        version,
        transactional_id,
        request.v3_and_below_producer_id,
        request.v3_and_below_producer_epoch,
        {(t.name, int(p)) for t in request.v3_and_below_topics for p in t.partitions},
    )
    return context.respond({"throttle_time": 0, "results_by_topic_v3_and_below": topics})


async def _add_partitions(
    broker: BrokerServices,
    version: int,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    partitions: set[tuple[str, int]],
    *,
    verify_only: bool = False,
) -> list[dict[str, Any]]:
    """Per-topic results: unknown partitions fail the request (the others are
    OPERATION_NOT_ATTEMPTED); otherwise the coordinator's one answer for all."""
    topics = broker.metadata.topics
    unknown = {
        key for key in partitions if key[0] not in topics or key[1] not in topics[key[0]].partitions
    }
    errors: dict[tuple[str, int], ErrorCode]
    if unknown:
        errors = {
            key: ErrorCode.unknown_topic_or_partition
            if key in unknown
            else ErrorCode.operation_not_attempted
            for key in partitions
        }
    else:
        error = await broker.coordinator.transactions.add_partitions(
            transactional_id, producer_id, producer_epoch, partitions, verify_only=verify_only
        )
        error = fenced_error(error, version, FENCED_SINCE["add_partitions"])
        errors = dict.fromkeys(partitions, error)
    return _by_topic(errors)


def _by_topic(errors: dict[tuple[str, int], ErrorCode]) -> list[dict[str, Any]]:
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (name, index), code in sorted(errors.items()):
        by_topic.setdefault(name, []).append(
            {"partition_index": index, "partition_error_code": code}
        )
    return [{"name": name, "results_by_partition": parts} for name, parts in by_topic.items()]


# -- AddOffsetsToTxn -------------------------------------------------------------------------


@hashes_group_ids_off_loop
async def handle_add_offsets_to_txn(
    broker: BrokerServices, context: RequestContext, request: AddOffsetsToTxnRequest
) -> BodyResponse:
    """The group's ``__consumer_offsets`` partition joins the transaction, so the
    commit/abort marker reaches the pending offsets there."""
    authorizer = broker.authorizer
    if not authorizer.authorize(
        context, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id
    ):
        return context.respond(
            {"throttle_time": 0, "error_code": ErrorCode.transactional_id_authorization_failed}
        )
    if not authorizer.authorize(context, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return context.respond(
            {"throttle_time": 0, "error_code": ErrorCode.group_authorization_failed}
        )
    service = broker.coordinator
    try:
        if not await service.ensure_offsets_topic():
            return context.respond(
                {"throttle_time": 0, "error_code": ErrorCode.coordinator_not_available}
            )
    except CoordinatorUnavailable:
        return context.respond(
            {"throttle_time": 0, "error_code": ErrorCode.coordinator_not_available}
        )
    offsets_topic = broker.metadata.topics.get(OFFSETS_TOPIC)
    if offsets_topic is None or not offsets_topic.partitions:
        return context.respond(
            {"throttle_time": 0, "error_code": ErrorCode.coordinator_not_available}
        )
    partition = partition_for(request.group_id, len(offsets_topic.partitions))
    error = await service.transactions.add_partitions(
        request.transactional_id,
        request.producer_id,
        request.producer_epoch,
        {(OFFSETS_TOPIC, partition)},
    )
    body = {
        "throttle_time": 0,
        "error_code": fenced_error(error, context.version, FENCED_SINCE["add_offsets"]),
    }
    return context.respond(body)


# -- EndTxn -------------------------------------------------------------------------------------


@hashes_group_ids_off_loop
async def handle_end_txn(
    broker: BrokerServices, context: RequestContext, request: EndTxnRequest
) -> BodyResponse:
    if not broker.authorizer.authorize(
        context, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id
    ):
        return context.respond(
            {"throttle_time": 0, "error_code": ErrorCode.transactional_id_authorization_failed}
        )
    error = await broker.coordinator.transactions.end_transaction(
        request.transactional_id, request.producer_id, request.producer_epoch, request.committed
    )
    body = {
        "throttle_time": 0,
        "error_code": fenced_error(error, context.version, FENCED_SINCE["end_txn"]),
    }
    return context.respond(body)


# -- TxnOffsetCommit ----------------------------------------------------------------------------


@hashes_group_ids_off_loop
async def handle_txn_offset_commit(
    broker: BrokerServices, context: RequestContext, request: TxnOffsetCommitRequest
) -> BodyResponse:
    now = now_ms()
    authorizer = broker.authorizer
    refusal = None
    if not authorizer.authorize(
        context, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id
    ):
        refusal = ErrorCode.transactional_id_authorization_failed
    elif not authorizer.authorize(context, AclOperation.READ, ResourceType.GROUP, request.group_id):
        refusal = ErrorCode.group_authorization_failed
    if refusal is not None:
        return context.respond(
            commit_response(
                {(t.name, p.partition_index): refusal for t in request.topics for p in t.partitions}
            )
        )
    readable = authorizer.filter_authorized(
        context, AclOperation.READ, ResourceType.TOPIC, (t.name for t in request.topics)
    )
    errors, offsets = offsets_to_commit(
        broker, [t for t in request.topics if t.name in readable], now
    )
    errors.update(
        ((t.name, p.partition_index), ErrorCode.topic_authorization_failed)
        for t in request.topics
        if t.name not in readable
        for p in t.partitions
    )
    if not request.group_id:
        errors.update(dict.fromkeys(offsets, ErrorCode.invalid_group_id))
    elif offsets:
        service = broker.coordinator
        outcome = service.groups.commit_transactional_offsets(
            request.group_id,
            request.producer_id,
            request.producer_epoch,
            getattr(request, "generation_id", -1),
            getattr(request, "member_id", ""),
            getattr(request, "group_instance_id", None),
            offsets,
            now,
        )
        results = outcome.errors
        pending = outcome.pending
        if pending is not None:
            # A commit that did not replicate stops being pending: the producer's marker
            # must not apply it.
            results = await replicated_commit(
                broker,
                request.group_id,
                results,
                lambda error: service.groups.complete_transactional_offset_commit(pending, error),
            )
        errors.update(results)
    since = FENCED_SINCE["txn_offset_commit"]
    return context.respond(
        commit_response(
            {key: fenced_error(code, context.version, since) for key, code in errors.items()}
        )
    )


# -- DescribeTransactions / ListTransactions ---------------------------------------------------


@hashes_group_ids_off_loop
def handle_describe_transactions(
    broker: BrokerServices, context: RequestContext, request: DescribeTransactionsRequest
) -> BodyResponse:
    states = []
    authorizer = broker.authorizer
    for transactional_id in request.transactional_ids:
        if not authorizer.authorize(
            context, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, transactional_id
        ):
            error, found = ErrorCode.transactional_id_authorization_failed, None
        else:
            error, found = broker.coordinator.transactions.describe(transactional_id)
        entry: dict[str, Any] = {
            "error_code": error,
            "transactional_id": transactional_id,
            "transaction_state": "",
            "transaction_timeout": 0,
            "transaction_start_time": _start_time(-1),
            "producer_id": -1,
            "producer_epoch": -1,
            "topics": [],
        }
        if found is not None:
            by_topic: dict[str, list[int]] = {}
            for topic, index in sorted(found.partitions):
                # Kafka: only the topics the client may describe.
                if authorizer.authorize(context, AclOperation.DESCRIBE, ResourceType.TOPIC, topic):
                    by_topic.setdefault(topic, []).append(index)
            entry.update(
                transaction_state=STATE_NAMES[found.state],
                transaction_timeout=found.timeout_ms,
                transaction_start_time=_start_time(found.start_ms),
                producer_id=found.producer_id,
                producer_epoch=found.producer_epoch,
                topics=[{"topic": t, "partitions": ids} for t, ids in by_topic.items()],
            )
        states.append(entry)
    return context.respond({"throttle_time": 0, "transaction_states": states})


def handle_list_transactions(
    broker: BrokerServices, context: RequestContext, request: ListTransactionsRequest
) -> BodyResponse:
    known = set(STATE_NAMES.values())
    wanted = set(request.state_filters)
    error, found = broker.coordinator.transactions.list_transactions(
        wanted & known,
        {int(p) for p in request.producer_id_filters},
        int(getattr(request, "duration_filter", -1)),
    )
    # Filters naming no known state match nothing (Kafka lists them as unknown).
    if wanted and not wanted & known:
        found = []
    body = {
        "throttle_time": 0,
        "error_code": error,
        "unknown_state_filters": sorted(wanted - known),
        "transaction_states": [
            {
                "transactional_id": d.transactional_id,
                "producer_id": d.producer_id,
                "transaction_state": STATE_NAMES[d.state],
            }
            for d in found
            if broker.authorizer.authorize(
                context, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, d.transactional_id
            )
        ],
    }
    return context.respond(body)
