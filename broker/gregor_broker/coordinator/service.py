"""The coordinator inside a broker: ``__consumer_offsets``, timers, producer ids.

This is the I/O side of the group coordinator; the rules are in
``group_coordinator.py``. It owns:

- creating ``__consumer_offsets`` on the first FindCoordinator for a group
  (``offsets.topic.num.partitions`` partitions, replication factor
  min(``offsets.topic.replication.factor``, live brokers), ``cleanup.policy=compact``);
- finding a group's coordinator: the leader of partition
  ``abs(java_hashcode(group_id)) % partitions``;
- appending the coordinator's records to the group's partition through a
  ``PartitionWriter`` (the replica manager), as a leader appends any produced batch;
- loading a partition's groups and offsets when this broker becomes its leader (the
  replica manager's leadership listener), by replaying the log in offset order so the
  latest value of each key wins (the log does not compact yet), and unloading them when
  leadership moves away;
- the timer that drives sessions and rebalances, and offset retention;
- the leadership leases (``leadership_lease.py``): a group, or a transactional id, is
  served only while this broker has confirmed in ZooKeeper, within the last
  ``LEASE_FRACTION`` of its session timeout, that it still leads the group's
  ``__consumer_offsets`` (the id's ``__transaction_state``) partition;
- producer ids for InitProducerId (``producer_ids.py``);
- the transaction coordinator (``transaction_coordinator.py``), which shares the seams, and
  the ``__consumer_offsets`` end of transactions: TxnOffsetCommit's offsets stay pending
  until the producer's marker reaches the group's partition
  (``complete_transactional_offsets``, called by the WriteTxnMarkers handler; on load, a
  transactional batch waits for its producer's marker in the partition).

It is given narrow seams (``partition_writer.py``), never the broker object, so it sits
below the server layer: the broker wires it to its replica manager and topic admin.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable

from kio.schema.errors import ErrorCode

from ..cluster.admin import ZkAdmin
from ..cluster.metadata_cache import BrokerInfo, MetadataCache
from ..config import BrokerConfig
from ..log.partition_log import AppendResult, PartitionLog
from ..protocol.control_records import ControlRecordType, marker_of
from ..protocol.errors import KafkaError
from ..protocol.record_batch import TRANSACTIONAL_FLAG, InvalidBatch, rewrite_header, scan_batches
from ..protocol.records import Record, iter_batch_records, make_batch
from ..replication.partition import Partition
from ..tasks import cancel_and_wait
from .group_coordinator import CoordinatorConfig, GroupCoordinator, Records
from .internal_topic import InternalTopic
from .leadership_lease import LeadershipLease
from .partition_writer import InternalTopicCreator, PartitionWriter
from .producer_ids import ProducerIdManager
from .records import OFFSETS_TOPIC, LoadedPartition, replay
from .transaction_coordinator import TransactionCoordinator
from .transaction_log import TRANSACTION_STATE_TOPIC

log = logging.getLogger(__name__)

TICK_INTERVAL_S = 0.1
_READ_CHUNK = 4 * 1024 * 1024


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class CoordinatorUnavailable(Exception):
    """FindCoordinator cannot name a coordinator yet (COORDINATOR_NOT_AVAILABLE)."""


class CoordinatorService:
    def __init__(
        self,
        config: BrokerConfig,
        metadata: MetadataCache,
        partition_writer: PartitionWriter,
        topic_creator: InternalTopicCreator,
    ) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.metadata = metadata
        self.partition_writer = partition_writer
        self.topic_creator = topic_creator
        self.groups = GroupCoordinator(
            CoordinatorConfig(
                num_partitions=config.offsets_topic_num_partitions,
                group_min_session_timeout_ms=config.group_min_session_timeout_ms,
                group_max_session_timeout_ms=config.group_max_session_timeout_ms,
                group_initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
                offsets_retention_ms=config.offsets_retention_minutes * 60 * 1000,
                offset_metadata_max_bytes=config.offset_metadata_max_bytes,
            ),
            self,
            holds_lease=self.holds_lease,
        )
        self.offsets_lease = LeadershipLease(
            OFFSETS_TOPIC, self.broker_id, partition_writer, config.zookeeper_session_timeout_ms
        )
        self.transactions_lease = LeadershipLease(
            TRANSACTION_STATE_TOPIC,
            self.broker_id,
            partition_writer,
            config.zookeeper_session_timeout_ms,
        )
        self.producer_ids: ProducerIdManager | None = None
        self.zk_admin: ZkAdmin | None = None  # from start()
        self.last_append: dict[int, AppendResult] = {}
        self.offsets_topic = InternalTopic(
            OFFSETS_TOPIC,
            self.broker_id,
            metadata,
            topic_creator,
            self.groups.loading_partitions,
            CoordinatorUnavailable,
        )
        self._tasks: list[asyncio.Task[None]] = []
        # Waits for the replication of group metadata and tombstone writes.
        self._replication_waits: set[asyncio.Task[None]] = set()
        partition_writer.leadership_listeners.append(self.on_leadership_change)
        self.transactions = TransactionCoordinator(
            config,
            metadata,
            partition_writer,
            topic_creator,
            self._generate_producer_id,
            read_records,
            holds_lease=self.transactions_lease.holds,
        )

    async def _generate_producer_id(self) -> int:
        if self.producer_ids is None:
            raise RuntimeError("the coordinator has not started")
        return await self.producer_ids.generate()

    # -- lifecycle ----------------------------------------------------------------------
    def start(self, zk_admin: ZkAdmin) -> None:
        self.zk_admin = zk_admin
        self.producer_ids = ProducerIdManager(zk_admin, self.broker_id)
        self._tasks = [
            asyncio.create_task(self._tick_forever()),
            asyncio.create_task(self._expire_offsets_forever()),
            asyncio.create_task(self._confirm_leadership_forever()),
        ]
        self.transactions.start()

    async def stop(self) -> None:
        await self.transactions.stop()
        await cancel_and_wait([*self._tasks, *self._replication_waits], "group coordinator")
        self._tasks = []

    async def _tick_forever(self) -> None:
        while True:
            await asyncio.sleep(TICK_INTERVAL_S)
            try:
                self.groups.tick(now_ms())
            except Exception:
                log.exception("group coordinator timer failed")

    async def _expire_offsets_forever(self) -> None:
        interval = max(self.config.offsets_retention_check_interval_ms, 100) / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                expired = self.groups.expire_offsets(now_ms())
                if expired:
                    log.info("writing off %d expired offsets", expired)
            except Exception:
                log.exception("offset expiration failed")

    # -- the leadership leases -------------------------------------------------------------
    def holds_lease(self, partition: int) -> bool:
        """True while this broker may answer for ``__consumer_offsets`` partition
        ``partition``'s groups (see ``leadership_lease.py``)."""
        return self.offsets_lease.holds(partition)

    async def _confirm_leadership_forever(self) -> None:
        while True:
            await asyncio.sleep(self.offsets_lease.lease_s / 3)
            zk_admin = self.zk_admin
            if zk_admin is None:
                continue
            transactions = self.transactions
            try:
                # Both topics' reads at once: neither waits behind the other's.
                await asyncio.gather(
                    self.offsets_lease.confirm(
                        zk_admin, self.groups.owned_partitions | self.groups.loading_partitions
                    ),
                    self.transactions_lease.confirm(
                        zk_admin, set(transactions.owned) | transactions.loading
                    ),
                )
            except Exception:
                log.exception("confirming the leadership of coordinator partitions failed")

    # -- __consumer_offsets ---------------------------------------------------------------
    async def ensure_offsets_topic(self, timeout_s: float = 10.0) -> bool:
        """Create ``__consumer_offsets`` if needed; True once every partition has a leader."""
        config = self.config
        return await self.offsets_topic.ensure(
            config.offsets_topic_num_partitions,
            config.offsets_topic_replication_factor,
            lambda _replication_factor: {
                "cleanup.policy": "compact",
                "compression.type": "producer",
                "segment.bytes": str(config.offsets_topic_segment_bytes),
            },
            timeout_s,
        )

    def coordinator_for_group(self, group_id: str) -> BrokerInfo:
        metadata = self.metadata
        topic = metadata.topics.get(OFFSETS_TOPIC)
        if topic is None or not topic.partitions:
            raise CoordinatorUnavailable(f"{OFFSETS_TOPIC} does not exist yet")
        self.groups.num_partitions = len(topic.partitions)
        partition = topic.partitions.get(self.groups.partition_for(group_id))
        if partition is None or partition.leader < 0:
            raise CoordinatorUnavailable(
                f"the {OFFSETS_TOPIC} partition of {group_id} has no leader"
            )
        broker = metadata.brokers.get(partition.leader)
        if broker is None:
            raise CoordinatorUnavailable(f"coordinator broker {partition.leader} is not registered")
        return broker

    # -- the Store the coordinator writes through -----------------------------------------
    def append(
        self,
        group_id: str,
        records: Records,
        producer: tuple[int, int] | None = None,
        on_replicated: Callable[[ErrorCode], None] | None = None,
    ) -> ErrorCode:
        partition = self.groups.partition_for(group_id)
        batch = make_batch(
            [Record(i, 0, key, value) for i, (key, value) in enumerate(records)],
            base_timestamp=now_ms(),
            producer_id=producer[0] if producer else -1,
            producer_epoch=producer[1] if producer else -1,
        )
        if producer is not None:
            # TxnOffsetCommit: a transactional batch of the producer, no sequence (Kafka's
            # origin COORDINATOR append); its marker decides whether it counts.
            batch = rewrite_header(batch, attributes=TRANSACTIONAL_FLAG)
        try:
            # acks=all, like Kafka's offsets.commit.required.acks=-1: min.insync.replicas
            # holds for commits too, or a commit acknowledged by a lone in-sync leader is
            # lost when that leader goes (found by the chaos campaign, seed 101).
            result = self.partition_writer.append(OFFSETS_TOPIC, partition, batch, -1)
        except KafkaError as error:  # the replica manager's PartitionError
            log.warning(
                "cannot write to %s-%d for group %s: %s", OFFSETS_TOPIC, partition, group_id, error
            )
            # The partition's own code: the group coordinator maps it for its client
            # (group_coordinator.write_error), as Kafka's does.
            return ErrorCode(error.error_code)
        self.last_append[partition] = result
        if on_replicated is not None:
            task = asyncio.create_task(self._report_replication(partition, result, on_replicated))
            self._replication_waits.add(task)
            task.add_done_callback(self._replication_waits.discard)
        return ErrorCode.none

    async def _report_replication(
        self, partition: int, result: AppendResult, on_replicated: Callable[[ErrorCode], None]
    ) -> None:
        error = ErrorCode.unknown_server_error
        try:
            error = await self._wait_for(partition, result)
        finally:
            # Also when cancelled (the broker stops): the writer learns it failed.
            try:
                on_replicated(error)
            except Exception:
                log.exception("completing a write to %s-%d failed", OFFSETS_TOPIC, partition)

    async def wait_for_replication(self, group_id: str) -> ErrorCode:
        """Kafka acknowledges commits once the offsets partition's ISR has them
        (acks=all, ``offsets.commit.timeout.ms``); the partition's error otherwise
        (REQUEST_TIMED_OUT, NOT_LEADER_OR_FOLLOWER, ...), for ``write_error`` to map."""
        partition = self.groups.partition_for(group_id)
        result = self.last_append.get(partition)
        if result is None:
            return ErrorCode.none
        return await self._wait_for(partition, result)

    async def _wait_for(self, partition: int, result: AppendResult) -> ErrorCode:
        error = await self.partition_writer.wait_for_replication(
            OFFSETS_TOPIC, partition, result, self.config.offsets_commit_timeout_ms / 1000
        )
        return ErrorCode(error)

    # -- the __consumer_offsets end of WriteTxnMarkers ----------------------------------------
    def complete_transactional_offsets(
        self, producer_id: int, partitions: list[int], commit: bool
    ) -> None:
        """The producer's marker is in these ``__consumer_offsets`` partitions (Kafka's
        ``GroupCoordinator.scheduleHandleTxnCompletion``); never raises."""
        try:
            changed = self.groups.complete_transactional_offsets(producer_id, partitions, commit)
        except Exception:
            log.exception("completing the transactional offsets of producer %d failed", producer_id)
            return
        if changed:
            log.debug(
                "%s the transactional offsets of producer %d in %d groups",
                "committed" if commit else "aborted",
                producer_id,
                changed,
            )

    # -- loading --------------------------------------------------------------------------
    def on_leadership_change(self, partition: Partition) -> None:
        if partition.topic == TRANSACTION_STATE_TOPIC:
            # The transaction coordinator loads or unloads the partition (its own
            # listener); its lease starts with a leadership just read from ZooKeeper.
            if partition.leader == self.broker_id:
                self.transactions_lease.started(partition.index)
            else:
                self.transactions_lease.forget(partition.index)
            return
        if partition.topic != OFFSETS_TOPIC:
            return
        count = self.offsets_topic.partition_count()
        if count is not None:
            self.groups.num_partitions = count
        if partition.leader == self.broker_id:
            # This leadership was just read from ZooKeeper: the lease starts now.
            self.offsets_lease.started(partition.index)
        self.offsets_topic.leadership_changed(
            partition,
            partition.index in self.groups.owned_partitions,
            _read_groups,
            LoadedPartition,
            self._install,
            self._unload,
        )

    def _install(self, partition: Partition, loaded: LoadedPartition, seconds: float) -> None:
        self.groups.load_partition(partition.index, loaded, now_ms())
        if loaded.records:
            log.info(
                "loaded %d groups and offsets of %d groups from %s-%d (%d records) in %.3f s",
                len(loaded.groups),
                len(loaded.offsets),
                OFFSETS_TOPIC,
                partition.index,
                loaded.records,
                seconds,
            )

    def _unload(self, index: int) -> None:
        self.offsets_lease.forget(index)
        self.groups.unload_partition(index)


def _read_groups(partition: Partition) -> LoadedPartition:
    """A ``__consumer_offsets`` partition's groups and offsets, with the offsets of open
    transactions kept per producer until their markers come."""
    committed, pending = read_offsets_log(partition.log)
    loaded = replay(committed)
    for producer_id, records in pending.items():
        for group_id, offsets in replay(records).offsets.items():
            loaded.pending_txn_offsets.setdefault(group_id, {})[producer_id] = offsets
    return loaded


KeyValues = list[tuple[bytes | None, bytes | None]]


def read_records(partition_log: PartitionLog) -> KeyValues:
    """Every (key, value) outside aborted or open transactions, in offset order (the
    records of a committed transaction where its COMMIT marker is)."""
    return read_offsets_log(partition_log)[0]


def read_offsets_log(partition_log: PartitionLog) -> tuple[KeyValues, dict[int, KeyValues]]:
    """(committed records in order, producer id -> records of its open transaction).

    A tombstone (OffsetDelete, DeleteGroups) also removes its key from the open
    transactions, as Kafka's ``OffsetMetadataManager.replay`` does: a transaction
    committed after its group was deleted does not bring the offset back."""
    records: KeyValues = []
    open_transactions: dict[int, KeyValues] = {}
    offset = partition_log.log_start_offset
    end = partition_log.log_end_offset
    while offset < end:
        found = partition_log.read(offset, _READ_CHUNK)
        if found is None:
            break
        data = os.pread(found.fd, found.size, found.position)
        try:
            headers = scan_batches(data, verify_crc=False, dense=False)
        except InvalidBatch:
            log.warning(
                "stopping the load of %r at a bad batch near offset %d", partition_log, offset
            )
            break
        if not headers:
            break
        for header in headers:
            if header.next_offset <= offset:
                continue
            if header.is_control:
                marker = marker_of(data, header)
                held = open_transactions.pop(header.producer_id, None)
                if marker is not None and marker.type == ControlRecordType.COMMIT and held:
                    records.extend(held)
                continue
            if header.is_transactional:
                held = open_transactions.setdefault(header.producer_id, [])
                for record in iter_batch_records(data, header):
                    held.append((record.key, record.value))
                continue
            for record in iter_batch_records(data, header):
                records.append((record.key, record.value))
                if record.value is None and open_transactions:
                    _drop_held(open_transactions, record.key)
        offset = headers[-1].next_offset
    return records, open_transactions


def _drop_held(open_transactions: dict[int, KeyValues], key: bytes | None) -> None:
    for producer_id, held in open_transactions.items():
        open_transactions[producer_id] = [(k, v) for k, v in held if k != key]
