"""The partitions this broker hosts, and appends and reads against them.

Kafka's ReplicaManager in miniature: it turns metadata (who leads which partition)
into local logs, appends produced batches to the logs it leads, and answers reads.
Handlers call it with whole batches and never see files. ``AppendWaiters`` lets
long-polling fetches sleep until an append lands (Kafka's fetch purgatory).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from ..cluster.metadata_cache import MetadataCache, PartitionInfo, TopicInfo
from ..log.log_config import LogConfig
from ..log.log_manager import LogManager
from ..log.partition_log import AppendResult, PartitionLog
from ..protocol.record_batch import InvalidBatch, scan_batches
from ..protocol.records import iter_batch_records

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


class PartitionError(Exception):
    """A per-partition failure carrying the Kafka error code to return."""

    def __init__(self, error_code: ErrorCode, message: str = "") -> None:
        super().__init__(message or error_code.name)
        self.error_code = error_code


@dataclass(slots=True)
class Partition:
    """A partition hosted here: its log and what the controller says about it."""

    topic: str
    index: int
    topic_id: str | None
    log: PartitionLog
    replicas: tuple[int, ...] = ()
    leader: int = -1
    leader_epoch: int = -1
    isr: tuple[int, ...] = ()

    def is_leader(self, broker_id: int) -> bool:
        return self.leader == broker_id


class AppendWaiters:
    """Futures of fetches waiting for data, per partition."""

    def __init__(self) -> None:
        self._waiters: dict[TopicPartition, set[asyncio.Future[None]]] = {}

    async def wait_any(self, keys: Iterable[TopicPartition], timeout: float) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        keys = list(keys)
        for key in keys:
            self._waiters.setdefault(key, set()).add(future)
        try:
            await asyncio.wait_for(future, timeout)
        except TimeoutError:
            pass
        finally:
            for key in keys:
                waiters = self._waiters.get(key)
                if waiters is not None:
                    waiters.discard(future)
                    if not waiters:
                        del self._waiters[key]

    def notify(self, key: TopicPartition) -> None:
        waiters = self._waiters.get(key)
        if waiters:
            for future in waiters:
                if not future.done():
                    future.set_result(None)


class ReplicaManager:
    def __init__(
        self,
        broker_id: int,
        logs: LogManager,
        metadata: MetadataCache,
        log_config_for: Callable[[dict[str, str]], LogConfig],
    ) -> None:
        self.broker_id = broker_id
        self.logs = logs
        self.metadata = metadata
        self.log_config_for = log_config_for
        self.partitions: dict[TopicPartition, Partition] = {}
        self.append_waiters = AppendWaiters()
        self.messages_in_total = 0
        self.bytes_in_total = 0

    # metadata -> local state ---------------------------------------------------------
    def reconcile(self) -> None:
        """Create, update and delete local partitions to match the metadata cache."""
        wanted: set[TopicPartition] = set()
        for topic in self.metadata.topics.values():
            config = self.log_config_for(topic.config)
            for index, info in topic.partitions.items():
                if self.broker_id not in info.replicas:
                    continue
                key = (topic.name, index)
                wanted.add(key)
                partition = self.partitions.get(key)
                if partition is None:
                    partition = self._create(topic, index, config)
                elif partition.log.config != config:
                    partition.log.update_config(config)
                self._apply_state(partition, info)
        for key in list(self.partitions):
            if key not in wanted:
                self._drop(key)

    def _create(self, topic: TopicInfo, index: int, config: LogConfig) -> Partition:
        partition_log = self.logs.get_or_create(topic.name, index, config)
        partition = Partition(topic.name, index, topic.topic_id, partition_log)
        self.partitions[(topic.name, index)] = partition
        return partition

    def _apply_state(self, partition: Partition, info: PartitionInfo) -> None:
        partition.replicas = info.replicas
        partition.isr = info.isr
        if info.leader_epoch != partition.leader_epoch or info.leader != partition.leader:
            partition.leader = info.leader
            partition.leader_epoch = info.leader_epoch
            if partition.is_leader(self.broker_id):
                # A single-replica leader's high watermark is its log end offset;
                # replication (followers' fetches) moves it otherwise.
                self._maybe_advance_high_watermark(partition)

    def _drop(self, key: TopicPartition) -> None:
        partition = self.partitions.pop(key)
        log.info("deleting local log of %s-%d (topic deleted or replica moved)", *key)
        self.logs.delete_log(partition.topic, partition.index)

    def _maybe_advance_high_watermark(self, partition: Partition) -> None:
        if set(partition.isr) <= {self.broker_id}:
            partition.log.high_watermark = partition.log.log_end_offset

    # lookups -----------------------------------------------------------------------
    def leader_partition(self, topic: str, index: int) -> Partition:
        """The partition if this broker leads it, else the Kafka error to return."""
        partition = self.partitions.get((topic, index))
        if partition is None:
            known = self.metadata.topics.get(topic)
            if known is None or index not in known.partitions:
                raise PartitionError(ErrorCode.unknown_topic_or_partition)
            raise PartitionError(ErrorCode.not_leader_or_follower)
        if not partition.is_leader(self.broker_id):
            raise PartitionError(ErrorCode.not_leader_or_follower)
        return partition

    # produce -----------------------------------------------------------------------
    def append(self, topic: str, index: int, records: bytes | None, acks: int) -> AppendResult:
        partition = self.leader_partition(topic, index)
        if not records:
            raise PartitionError(ErrorCode.corrupt_message, "produce without records")
        config = partition.log.config
        try:
            headers = scan_batches(records, max_batch_size=config.max_message_bytes)
        except InvalidBatch as error:
            raise PartitionError(ErrorCode[error.error.lower()], str(error)) from error
        if config.compacted:
            _require_keys(records, headers)
        if acks == -1 and len(partition.isr) < config.min_insync_replicas:
            raise PartitionError(
                ErrorCode.not_enough_replicas,
                f"{len(partition.isr)} in-sync replicas, min.insync.replicas="
                f"{config.min_insync_replicas}",
            )
        result = partition.log.append(
            bytearray(records), headers, leader_epoch=partition.leader_epoch
        )
        self._maybe_advance_high_watermark(partition)
        self.messages_in_total += result.last_offset - result.first_offset + 1
        self.bytes_in_total += len(records)
        self.append_waiters.notify((topic, index))
        return result


def _require_keys(records: bytes, headers: list) -> None:
    """Matches Kafka: a compacted topic rejects records without a key (INVALID_RECORD)."""
    for header in headers:
        try:
            for record in iter_batch_records(records, header):
                if record.key is None:
                    raise PartitionError(
                        ErrorCode.invalid_record,
                        "compacted topic rejects a record without a key",
                    )
        except InvalidBatch as error:
            raise PartitionError(ErrorCode[error.error.lower()], str(error)) from error


def now_ms() -> int:
    return int(time.time() * 1000)
