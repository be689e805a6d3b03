"""InitProducerId for idempotent producers (``enable.idempotence=true``).

Matches Kafka for a request without a transactional id: every call gets a fresh
producer id (from this broker's block, see ``coordinator/producer_ids.py``) at epoch 0,
whatever producer id and epoch the client sent (KIP-360 bumps are for transactions).
Transactions are not implemented: a transactional id is refused with
TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as Produce refuses transactional batches.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

if TYPE_CHECKING:
    from ..broker import Broker
    from ..request_router import RequestContext

log = logging.getLogger(__name__)


async def handle_init_producer_id(broker: Broker, context: RequestContext, request: Any) -> Any:
    if request.transactional_id is not None:
        return {
            "throttle_time": 0,
            "error_code": ErrorCode.transactional_id_authorization_failed,
            "producer_id": -1,
            "producer_epoch": -1,
        }
    manager = broker.coordinator.producer_ids
    try:
        assert manager is not None
        producer_id = await manager.generate()
    except Exception:
        log.exception("cannot allocate a producer id")
        return {
            "throttle_time": 0,
            "error_code": ErrorCode.coordinator_not_available,
            "producer_id": -1,
            "producer_epoch": -1,
        }
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
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "producer_id": producer_id,
        "producer_epoch": 0,
    }
