"""Sending transaction markers: Kafka's ``TransactionMarkerChannelManager``.

When a transaction ends the coordinator asks the leader of every partition in it to
append a COMMIT or ABORT control batch (WriteTxnMarkers, API 27, broker to broker; Kafka
sends it over the network even to itself). A partition is done when its leader answers
NONE; the answers Kafka's ``TransactionMarkerRequestCompletionHandler`` retries on
(leadership moved, not enough replicas, a timeout, the broker unreachable) are retried
against the leader the metadata names then, with a growing pause, until every partition
has its marker or the coordinator is no longer the one in charge (``still_valid``).
INVALID_PRODUCER_EPOCH and TRANSACTION_COORDINATOR_FENCED end the attempt for that
partition (a newer producer or coordinator has moved on); a partition whose topic was
deleted needs no marker.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable

from kio.schema.errors import ErrorCode

from ..cluster.metadata_cache import MetadataCache
from ..replication.client import BrokerClient, BrokerConnectionError

log = logging.getLogger(__name__)

WRITE_TXN_MARKERS = 27
WRITE_TXN_MARKERS_VERSION = 1
RETRY_BACKOFF_S = 0.05
MAX_RETRY_BACKOFF_S = 1.0
# Answers after which the partition needs no further attempt.
GIVE_UP = frozenset({ErrorCode.invalid_producer_epoch, ErrorCode.transaction_coordinator_fenced})

TopicPartition = tuple[str, int]


class _Channel:
    """One connection to one broker; one request at a time on it."""

    def __init__(self, host: str, port: int, client_id: str, timeout_s: float) -> None:
        self.client = BrokerClient(host, port, client_id, timeout=timeout_s)
        self.lock = asyncio.Lock()


class TransactionMarkerSender:
    def __init__(self, broker_id: int, metadata: MetadataCache, timeout_s: float = 30.0) -> None:
        self.broker_id = broker_id
        self.metadata = metadata
        self.timeout_s = timeout_s
        self._channels: dict[int, _Channel] = {}

    async def close(self) -> None:
        channels, self._channels = self._channels, {}
        for channel in channels.values():
            await channel.client.close()

    async def send(
        self,
        *,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        commit: bool,
        partitions: Iterable[TopicPartition],
        still_valid: Callable[[], bool],
    ) -> bool:
        """Write the marker to every partition; False when ``still_valid`` turned false
        first (this broker stopped coordinating the transaction)."""
        remaining = set(partitions)
        backoff = RETRY_BACKOFF_S
        while remaining:
            if not still_valid():
                return False
            by_leader: dict[int, list[TopicPartition]] = {}
            for key in sorted(remaining):
                topic = self.metadata.topics.get(key[0])
                if topic is None or key[1] not in topic.partitions:
                    log.info("no marker for %s-%d: the partition no longer exists", *key)
                    remaining.discard(key)
                    continue
                leader = topic.partitions[key[1]].leader
                if leader >= 0 and leader in self.metadata.brokers:
                    by_leader.setdefault(leader, []).append(key)
            outcomes = await asyncio.gather(
                *(
                    self._send_to(
                        leader, keys, producer_id, producer_epoch, coordinator_epoch, commit
                    )
                    for leader, keys in by_leader.items()
                )
            )
            for done in outcomes:
                remaining -= done
            if remaining:
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, MAX_RETRY_BACKOFF_S)
        return True

    async def _send_to(
        self,
        leader: int,
        keys: list[TopicPartition],
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        commit: bool,
    ) -> set[TopicPartition]:
        """The partitions of ``keys`` that need no further attempt."""
        broker = self.metadata.brokers[leader]
        channel = self._channels.get(leader)
        if channel is None or (channel.client.host, channel.client.port) != (
            broker.host,
            broker.port,
        ):
            if channel is not None:
                await channel.client.close()
            channel = self._channels[leader] = _Channel(
                broker.host,
                broker.port,
                f"gregor-txn-coordinator-{self.broker_id}",
                self.timeout_s,
            )
        topics: dict[str, list[int]] = {}
        for topic, index in keys:
            topics.setdefault(topic, []).append(index)
        body = {
            "markers": [
                {
                    "producer_id": producer_id,
                    "producer_epoch": producer_epoch,
                    "transaction_result": commit,
                    "topics": [
                        {"name": name, "partition_indexes": indexes}
                        for name, indexes in topics.items()
                    ],
                    "coordinator_epoch": coordinator_epoch,
                }
            ]
        }
        try:
            async with channel.lock:
                response = await channel.client.request(
                    WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_VERSION, body
                )
        except (TimeoutError, BrokerConnectionError, OSError) as error:
            log.info("WriteTxnMarkers to broker %d failed, will retry: %s", leader, error)
            return set()
        except Exception:
            log.exception("WriteTxnMarkers to broker %d failed, will retry", leader)
            return set()
        done: set[TopicPartition] = set()
        for marker in response.markers:
            for topic in marker.topics:
                for result in topic.partitions:
                    key = (topic.name, int(result.partition_index))
                    code = result.error_code
                    if code is ErrorCode.none:
                        done.add(key)
                    elif code in GIVE_UP:
                        log.warning(
                            "marker for producer %d on %s-%d refused (%s); not retried",
                            producer_id,
                            key[0],
                            key[1],
                            code.name,
                        )
                        done.add(key)
                    else:
                        log.debug("marker on %s-%d: %s, will retry", key[0], key[1], code.name)
        return done & set(keys)
