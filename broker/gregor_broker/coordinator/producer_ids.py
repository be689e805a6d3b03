"""Producer ids for idempotent producers, handed out in blocks through ZooKeeper.

Matches Kafka's ``ZkProducerIdManager``: ``/latest_producer_id_block`` holds the last
block any broker claimed (``{"version":1,"broker":..,"block_start":"..","block_end":".."}``);
a broker claims the next 1000 ids with a conditional write on the znode version
(``ZkAdmin.claim_producer_id_block``) and hands them out one by one to InitProducerId.
Ids are therefore unique across the cluster and across restarts (a restarted broker
claims a fresh block).
"""

from __future__ import annotations

import asyncio
import logging

from ..cluster.admin import ZkAdmin
from ..cluster.models import ProducerIdBlock

log = logging.getLogger(__name__)

PRODUCER_ID_BLOCK_SIZE = 1000  # Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE


def next_block(current: ProducerIdBlock | None, broker_id: int) -> ProducerIdBlock:
    """The block after ``current`` (the first block starts at 0)."""
    start = 0 if current is None else current.block_end + 1
    if start + PRODUCER_ID_BLOCK_SIZE - 1 > 2**63 - 1:
        raise RuntimeError("producer ids exhausted: /latest_producer_id_block is at the end")
    return ProducerIdBlock(broker_id, start, start + PRODUCER_ID_BLOCK_SIZE - 1)


class ProducerIdManager:
    def __init__(self, zk_admin: ZkAdmin, broker_id: int) -> None:
        self.zk_admin = zk_admin
        self.broker_id = broker_id
        self._block: ProducerIdBlock | None = None
        self._next = 0
        self._lock = asyncio.Lock()

    async def generate(self) -> int:
        async with self._lock:
            if self._block is None or self._next > self._block.block_end:
                self._block = await asyncio.to_thread(
                    self.zk_admin.claim_producer_id_block,
                    lambda current: next_block(current, self.broker_id),
                )
                self._next = self._block.block_start
                log.info(
                    "claimed producer ids %d..%d", self._block.block_start, self._block.block_end
                )
            producer_id = self._next
            self._next += 1
            return producer_id
