"""The leadership lease of a coordinator's internal topic partitions.

A broker frozen (SIGSTOP, a swap storm) or cut off from ZooKeeper past its session
timeout loses its session, and the controller makes another broker the leader of its
partitions. When it wakes it believes, until its watches catch up (a few hundred ms),
that it still leads. Writes are fenced then (ISR changes are conditional znode writes;
acks=all waits for followers that moved on), reads are not: a coordinator answered from
its cache, older than what the new coordinator had acknowledged meanwhile (chaos seed
20261123: OffsetFetch read 4812 after 5180). ZooKeeper expires a session no sooner than
the session timeout after the last request it got, so a read sent at t0 that showed this
broker leading proves no other broker was elected in its place before t0 + the timeout;
the lease ends earlier, at ``LEASE_FRACTION`` of it.

One lease per internal topic: ``__consumer_offsets`` for the group coordinator,
``__transaction_state`` for the transaction coordinator (Kafka has neither; it relies on
its controller's epochs reaching the zombie).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable

from ..cluster.admin import ZkAdmin
from .partition_writer import PartitionWriter

log = logging.getLogger(__name__)

# The lease lasts this share of zookeeper.session.timeout.ms after the confirming read was
# sent, and is renewed three times within it.
LEASE_FRACTION = 0.75


class LeadershipLease:
    def __init__(
        self,
        topic: str,
        broker_id: int,
        partition_writer: PartitionWriter,
        zookeeper_session_timeout_ms: int,
    ) -> None:
        self.topic = topic
        self.broker_id = broker_id
        self.partition_writer = partition_writer
        self.lease_s = zookeeper_session_timeout_ms * LEASE_FRACTION / 1000
        # Partition -> time.monotonic() when a ZooKeeper read that showed this broker
        # leading it (at the local leader epoch) was sent.
        self._confirmed_at: dict[int, float] = {}

    def holds(self, index: int) -> bool:
        """True while this broker may answer for partition ``index``."""
        confirmed = self._confirmed_at.get(index)
        return confirmed is not None and time.monotonic() - confirmed < self.lease_s

    def started(self, index: int) -> None:
        """This broker's leadership of ``index`` was just read from ZooKeeper."""
        self._confirmed_at[index] = time.monotonic()

    def forget(self, index: int) -> None:
        self._confirmed_at.pop(index, None)

    async def confirm(self, zk_admin: ZkAdmin, indexes: Iterable[int]) -> None:
        """Renew the lease of ``indexes``: read their state znodes; renewed where one
        still names this broker at the local leader epoch. Without an answer (ZooKeeper
        unreachable) the lease runs out."""
        epochs: dict[int, int] = {}
        for index in sorted(indexes):
            partition = self.partition_writer.partitions.get((self.topic, index))
            if partition is not None:
                epochs[index] = partition.leader_epoch
        if not epochs:
            return
        asked_at = time.monotonic()
        # Off the event loop (a slow ZooKeeper must not freeze the broker), and all the
        # partitions in one pipelined round trip (one slow read does not leave the
        # others' leases to run out behind it).
        try:
            states = await asyncio.to_thread(
                zk_admin.get_partition_states, self.topic, list(epochs), self.lease_s
            )
        except Exception as error:
            log.debug("cannot confirm leadership of %s: %s", self.topic, error)
            return
        for index, found in states.items():
            if found is None:
                continue
            state, _version = found
            if state.leader == self.broker_id and state.leader_epoch == epochs[index]:
                previous = self._confirmed_at.get(index, asked_at)
                self._confirmed_at[index] = max(previous, asked_at)
