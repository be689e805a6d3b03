"""The transaction handlers over a real coordinator service, replica manager and logs
(no socket, no ZooKeeper): InitProducerId with a transactional id (new id, epoch bumps,
KIP-360 and KIP-588 answers, timeouts), AddPartitionsToTxn's per-partition errors,
DescribeTransactions (also of an unknown id and of an id with no transaction running,
whose -1 start time must encode) and ListTransactions."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode
from tests.one_broker import one_broker

from gregor_broker.cli.transactions import parse_describe_transactions
from gregor_broker.cluster.metadata_cache import MetadataCache
from gregor_broker.coordinator.service import CoordinatorService
from gregor_broker.coordinator.transaction_log import TRANSACTION_STATE_TOPIC
from gregor_broker.log.log_manager import LogManager
from gregor_broker.protocol import entities
from gregor_broker.protocol.response import BodyResponse
from gregor_broker.protocol.wire import RequestHeader
from gregor_broker.replication.replica_manager import ReplicaManager
from gregor_broker.server.authorizer import Authorizer
from gregor_broker.server.handlers.producer_ids import handle_init_producer_id
from gregor_broker.server.handlers.transactions import (
    handle_add_partitions_to_txn,
    handle_describe_transactions,
    handle_list_transactions,
)
from gregor_broker.server.request_router import RequestContext

INIT, ADD_PARTITIONS, DESCRIBE, LIST = 22, 24, 65, 66


@dataclass
class Services:
    metadata: MetadataCache
    coordinator: CoordinatorService
    authorizer: Authorizer = field(default_factory=Authorizer)  # none: everything allowed


class CountingIds:
    """Producer ids as ``ProducerIdManager`` hands them out, without ZooKeeper."""

    def __init__(self) -> None:
        self.next = 1000

    async def generate(self) -> int:
        self.next += 1
        return self.next


def build(tmp_path: Path) -> tuple[Services, LogManager, ReplicaManager]:
    broker = one_broker(tmp_path, {"transaction.max.timeout.ms": "60000"})
    coordinator = CoordinatorService(broker.config, broker.metadata, broker.replicas, None)  # type: ignore[arg-type]
    coordinator.producer_ids = CountingIds()  # type: ignore[assignment]
    broker.lead(TRANSACTION_STATE_TOPIC, 1)
    broker.lead("orders", 2)
    return Services(broker.metadata, coordinator), broker.logs, broker.replicas


def context(api_key: int, version: int) -> RequestContext:
    header = RequestHeader(api_key, version, 7, "handler-test", 0)
    return RequestContext(header, None)  # type: ignore[arg-type]


def encoded(api_key: int, version: int, answer: BodyResponse) -> Any:
    data = entities.encode_response(api_key, version, answer.body)
    return entities.response_reader(api_key, version)(data, 0)[0]


def test_transaction_handlers(tmp_path):
    services, logs, replicas = build(tmp_path)

    async def scenario() -> None:
        # Leadership arrives as the watcher applies it; the state partition loads next.
        replicas.reconcile(services.metadata.take_changed_topics())
        await asyncio.sleep(0.05)
        transactions = services.coordinator.transactions
        assert transactions.owned and not transactions.loading

        async def init(version: int = 4, timeout: int = 30000, **expected: int) -> Any:
            fields = {"transactional_id": "tx", "transaction_timeout": timeout, **expected}
            request = entities.build(entities.payload_class(INIT, version, "request"), fields)
            return await handle_init_producer_id(services, context(INIT, version), request)

        first = await init()
        assert (first.body["error_code"], first.body["producer_epoch"]) == (ErrorCode.none, 0)
        producer_id = first.body["producer_id"]
        assert producer_id == 1001
        second = await init()
        assert (second.body["producer_id"], second.body["producer_epoch"]) == (producer_id, 1)
        # KIP-360: the current producer bumps its own epoch ...
        bumped = await init(producer_id=producer_id, producer_epoch=1)
        assert (bumped.body["error_code"], bumped.body["producer_epoch"]) == (ErrorCode.none, 2)
        # ... an older one is fenced (INVALID_PRODUCER_EPOCH before v4, KIP-588).
        stale = await init(producer_id=producer_id, producer_epoch=0)
        assert stale.body["error_code"] is ErrorCode.producer_fenced
        stale_v3 = await init(version=3, producer_id=producer_id, producer_epoch=0)
        assert stale_v3.body["error_code"] is ErrorCode.invalid_producer_epoch
        too_long = await init(timeout=60001)
        assert too_long.body["error_code"] is ErrorCode.invalid_transaction_timeout

        add = entities.build(
            entities.payload_class(ADD_PARTITIONS, 3, "request"),
            {
                "v3_and_below_transactional_id": "tx",
                "v3_and_below_producer_id": producer_id,
                "v3_and_below_producer_epoch": 2,
                "v3_and_below_topics": [
                    {"name": "orders", "partitions": [0, 1]},
                    {"name": "missing", "partitions": [0]},
                ],
            },
        )
        refused = await handle_add_partitions_to_txn(services, context(ADD_PARTITIONS, 3), add)
        codes = {
            (topic["name"], p["partition_index"]): p["partition_error_code"]
            for topic in refused.body["results_by_topic_v3_and_below"]
            for p in topic["results_by_partition"]
        }
        assert codes == {
            ("missing", 0): ErrorCode.unknown_topic_or_partition,
            ("orders", 0): ErrorCode.operation_not_attempted,
            ("orders", 1): ErrorCode.operation_not_attempted,
        }
        add = entities.build(
            entities.payload_class(ADD_PARTITIONS, 3, "request"),
            {
                "v3_and_below_transactional_id": "tx",
                "v3_and_below_producer_id": producer_id,
                "v3_and_below_producer_epoch": 1,
                "v3_and_below_topics": [{"name": "orders", "partitions": [0, 1]}],
            },
        )
        fenced = await handle_add_partitions_to_txn(services, context(ADD_PARTITIONS, 1), add)
        assert {
            p["partition_error_code"]
            for t in fenced.body["results_by_topic_v3_and_below"]
            for p in t["results_by_partition"]
        } == {ErrorCode.invalid_producer_epoch}

        # v4, the batched broker-to-broker form: several ids, verify_only checks only.
        batched = entities.build(
            entities.payload_class(ADD_PARTITIONS, 4, "request"),
            {
                "transactions": [
                    {
                        "transactional_id": "tx",
                        "producer_id": producer_id,
                        "producer_epoch": 2,
                        "verify_only": True,
                        "topics": [{"name": "orders", "partitions": [0]}],
                    },
                    {
                        "transactional_id": "nobody",
                        "producer_id": 5,
                        "producer_epoch": 0,
                        "topics": [{"name": "orders", "partitions": [1]}],
                    },
                ]
            },
        )
        answer = await handle_add_partitions_to_txn(services, context(ADD_PARTITIONS, 4), batched)
        response = encoded(ADD_PARTITIONS, 4, answer)
        assert response.error_code is ErrorCode.none
        assert [
            (r.transactional_id, r.topic_results[0].results_by_partition[0].partition_error_code)
            for r in response.results_by_transaction
        ] == [
            ("tx", ErrorCode.invalid_txn_state),  # not in a transaction: verify fails
            ("nobody", ErrorCode.invalid_producer_id_mapping),
        ]

    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(scenario())
        # DescribeTransactions: an id with no transaction running (start time -1) and an
        # unknown one both encode, as Kafka sends them.
        request = entities.build(
            entities.payload_class(DESCRIBE, 0, "request"),
            {"transactional_ids": ["tx", "unknown"]},
        )
        answer = handle_describe_transactions(services, context(DESCRIBE, 0), request)
        # Read as ``gregor transactions describe`` reads it (kio refuses -1 timestamps).
        tx, unknown = parse_describe_transactions(
            memoryview(entities.encode_response(DESCRIBE, 0, answer.body)), 0
        )
        assert (tx["error_code"], tx["transaction_state"]) == (0, "Empty")
        assert (tx["producer_id"], tx["producer_epoch"]) == (1001, 2)
        assert tx["transaction_start_time_ms"] == -1
        assert tx["transaction_timeout_ms"] == 30000
        assert unknown["error_code"] == ErrorCode.transactional_id_not_found.value
        listed = handle_list_transactions(
            services,
            context(LIST, 1),
            entities.build(
                entities.payload_class(LIST, 1, "request"),
                {"state_filters": ["Empty", "Bogus"], "producer_id_filters": []},
            ),
        )
        response = encoded(LIST, 1, listed)
        assert [(s.transactional_id, s.transaction_state) for s in response.transaction_states] == [
            ("tx", "Empty")
        ]
        assert response.unknown_state_filters == ("Bogus",)
        loop.run_until_complete(services.coordinator.transactions.stop())
    finally:
        loop.close()
        logs.close()
