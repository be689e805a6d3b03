"""InitProducerId.

Without a transactional id (idempotent producers, ``enable.idempotence=true``) it matches
Kafka: every call gets a fresh producer id (from this broker's block, see
``coordinator/producer_ids.py``) at epoch 0, whatever producer id and epoch the client
sent (KIP-360 bumps are for transactions). With one, the transaction coordinator answers
(``coordinator/transaction_coordinator.py``): the id's producer id with a bumped epoch,
fencing the older producer; v3+ clients send their producer id and epoch to recover
after an abortable error (KIP-360).
"""

from __future__ import annotations

import logging
from typing import Any

from kio.schema.errors import ErrorCode

from ...protocol.requests import InitProducerIdRequest
from ...protocol.response import BodyResponse
from ...security.acl import AclOperation, ResourceType
from ..request_router import RequestContext
from ..services import BrokerServices
from .groups import hashes_group_ids_off_loop

log = logging.getLogger(__name__)


def _refused(error: ErrorCode) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": error, "producer_id": -1, "producer_epoch": -1}


@hashes_group_ids_off_loop
async def handle_init_producer_id(
    broker: BrokerServices, context: RequestContext, request: InitProducerIdRequest
) -> BodyResponse:
    authorizer = broker.authorizer
    if request.transactional_id is not None:
        if not authorizer.authorize(
            context, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id
        ):
            return context.respond(_refused(ErrorCode.transactional_id_authorization_failed))
    elif not authorizer.authorize_cluster(
        context, AclOperation.IDEMPOTENT_WRITE, log_if_denied=False
    ) and not authorizer.authorize_by_resource_type(
        context, AclOperation.WRITE, ResourceType.TOPIC
    ):
        # Kafka (KIP-679): IdempotentWrite on the cluster, or Write on any topic.
        return context.respond(_refused(ErrorCode.cluster_authorization_failed))
    if request.transactional_id is not None:
        expected = None
        if context.version >= 3:
            expected = (int(request.producer_id), int(request.producer_epoch))
        result = await broker.coordinator.transactions.init_producer_id(
            request.transactional_id,
            int(request.transaction_timeout.total_seconds() * 1000),
            expected,
        )
        error = result.error
        if error is ErrorCode.producer_fenced and context.version < 4:
            error = ErrorCode.invalid_producer_epoch  # KIP-588: older clients
        body = {
            "throttle_time": 0,
            "error_code": error,
            "producer_id": result.producer_id,
            "producer_epoch": result.producer_epoch,
        }
        return context.respond(body)
    manager = broker.coordinator.producer_ids
    try:
        assert manager is not None
        producer_id = await manager.generate()
    except Exception:
        log.exception("cannot allocate a producer id")
        body = {
            "throttle_time": 0,
            "error_code": ErrorCode.coordinator_not_available,
            "producer_id": -1,
            "producer_epoch": -1,
        }
        return context.respond(body)
    # One line per producer (a client calls this once, then again only after a fatal
    # error or UNKNOWN_PRODUCER_ID): with the epoch bumps and refused sequences that
    # replica_manager logs, what explains a fault campaign's re-sends.
    asked_id = getattr(request, "producer_id", -1)
    asked_epoch = getattr(request, "producer_epoch", -1)
    log.info(
        "InitProducerId from %s: producer id %d epoch 0%s",
        context.header.client_id,
        producer_id,
        f" (it asked to bump {asked_id} epoch {asked_epoch}; without a transactional id "
        "Kafka gives a new id)"
        if asked_id >= 0
        else "",
    )
    body = {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "producer_id": producer_id,
        "producer_epoch": 0,
    }
    return context.respond(body)
