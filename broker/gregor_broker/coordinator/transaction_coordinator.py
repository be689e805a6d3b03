"""The transaction coordinator inside a broker: Kafka's ``TransactionCoordinator`` and
``TransactionStateManager``.

The rules for one transactional id are in ``transaction_metadata.py`` (pure); this is the
I/O around them:

- ``__transaction_state`` (``transaction.state.log.*``: partitions, replication factor,
  ``min.insync.replicas``, segment size; compacted), created on the first
  FindCoordinator(TRANSACTION) or InitProducerId like ``__consumer_offsets``;
- a transactional id's coordinator is the leader of partition
  ``abs(java_hashcode(transactional_id)) % partitions`` (the groups' helper);
- when this broker becomes a partition's leader it replays the partition (latest value of
  each transactional id wins, tombstones remove) and serves its ids from then on; its
  coordinator epoch is the partition's leader epoch, which every marker carries. Ids found
  in PrepareCommit/PrepareAbort are completed (markers, then Complete*): a coordinator
  that fails over resumes the commits and aborts its predecessor left;
- every transition is written to the id's partition (acks=all) before it takes effect;
  while it is in flight other requests for the id get CONCURRENT_TRANSACTIONS;
- EndTxn answers once PrepareCommit/PrepareAbort is replicated; the markers
  (``transaction_markers.py``) and Complete* follow in the background;
- timers: ongoing transactions older than their timeout are aborted under a bumped epoch
  (``transaction.abort.timed.out.transaction.cleanup.interval.ms``), and ids idle longer
  than ``transactional.id.expiration.ms`` are removed with a tombstone
  (``transaction.remove.expired.transaction.cleanup.interval.ms``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from ..cluster.metadata_cache import BrokerInfo, MetadataCache
from ..config import BrokerConfig
from ..log.partition_log import PartitionLog
from ..protocol.errors import KafkaError
from ..protocol.records import Record, make_batch
from ..replication.partition import Partition
from ..tasks import cancel_and_wait
from .internal_topic import InternalTopic
from .partition_writer import InternalTopicCreator, PartitionWriter
from .records import partition_for
from .transaction_log import (
    TRANSACTION_STATE_TOPIC,
    TransactionLogFormatError,
    TransactionLogValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from .transaction_markers import TransactionMarkerSender
from .transaction_metadata import (
    State,
    TopicPartition,
    TransactionError,
    TransactionMetadata,
    Transition,
    check_producer,
    new_metadata,
    prepare_abort_after_fence,
    prepare_add_partitions,
    prepare_complete,
    prepare_end_transaction,
    prepare_init_producer_id,
    timed_out,
)

log = logging.getLogger(__name__)

READ_RECORDS = Callable[[PartitionLog], list[tuple[bytes | None, bytes | None]]]
TERMINAL = (State.EMPTY, State.COMPLETE_COMMIT, State.COMPLETE_ABORT)
# Kafka's TransactionStateManager.DefaultRequestTimeoutMs for its own log appends.
WRITE_TIMEOUT_S = 30.0


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class TransactionCoordinatorUnavailable(Exception):
    """No coordinator can be named yet (COORDINATOR_NOT_AVAILABLE)."""


@dataclass(slots=True)
class _StatePartition:
    """One ``__transaction_state`` partition this broker leads."""

    coordinator_epoch: int
    ids: dict[str, TransactionMetadata] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class InitResult:
    error: ErrorCode
    producer_id: int = -1
    producer_epoch: int = -1


@dataclass(frozen=True, slots=True)
class TransactionDescription:
    transactional_id: str
    state: State
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_ms: int
    last_update_ms: int
    partitions: frozenset[TopicPartition]


# Kafka's names for the states in DescribeTransactions / ListTransactions.
STATE_NAMES = {
    State.EMPTY: "Empty",
    State.ONGOING: "Ongoing",
    State.PREPARE_COMMIT: "PrepareCommit",
    State.PREPARE_ABORT: "PrepareAbort",
    State.COMPLETE_COMMIT: "CompleteCommit",
    State.COMPLETE_ABORT: "CompleteAbort",
    State.DEAD: "Dead",
    State.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}


def log_value(transition: Transition) -> TransactionLogValue:
    """The ``__transaction_state`` value of a transition."""
    partitions: dict[str, list[int]] = {}
    for topic, index in sorted(transition.partitions):
        partitions.setdefault(topic, []).append(index)
    return TransactionLogValue(
        producer_id=transition.producer_id,
        producer_epoch=transition.producer_epoch,
        transaction_timeout_ms=transition.timeout_ms,
        status=int(transition.state),
        partitions={topic: tuple(ids) for topic, ids in partitions.items()},
        last_update_ms=transition.last_update_ms,
        start_ms=transition.start_ms,
        previous_producer_id=transition.previous_producer_id,
    )


def replay_state(
    records: list[tuple[bytes | None, bytes | None]],
) -> dict[str, TransactionMetadata]:
    """The transactional ids of one ``__transaction_state`` partition, replayed in offset
    order (Kafka's ``TransactionStateManager.loadTransactionMetadata``)."""
    values: dict[str, TransactionLogValue] = {}
    for key, value in records:
        if key is None:
            continue
        try:
            transactional_id = decode_key(key)
            if value is None:
                values.pop(transactional_id, None)
            else:
                values[transactional_id] = decode_value(value)
        except TransactionLogFormatError as error:
            log.warning("skipping a bad %s record: %s", TRANSACTION_STATE_TOPIC, error)
    loaded: dict[str, TransactionMetadata] = {}
    for transactional_id, value in values.items():
        try:
            state = State(value.status)
        except ValueError:
            log.warning("%s: unknown transaction status %d", transactional_id, value.status)
            continue
        if state == State.DEAD:
            continue
        loaded[transactional_id] = TransactionMetadata(
            transactional_id,
            value.producer_id,
            value.producer_epoch,
            value.transaction_timeout_ms,
            state=state,
            previous_producer_id=value.previous_producer_id,
            partitions={
                (topic, index) for topic, ids in (value.partitions or {}).items() for index in ids
            },
            start_ms=value.start_ms,
            last_update_ms=value.last_update_ms,
        )
    return loaded


def fenced_error(error: ErrorCode, version: int, first_version_with_fenced: int) -> ErrorCode:
    """KIP-588: clients older than ``first_version_with_fenced`` do not know
    PRODUCER_FENCED and get INVALID_PRODUCER_EPOCH, as Kafka answers them."""
    if error is ErrorCode.producer_fenced and version < first_version_with_fenced:
        return ErrorCode.invalid_producer_epoch
    return error


class TransactionCoordinator:
    def __init__(
        self,
        config: BrokerConfig,
        metadata: MetadataCache,
        partition_writer: PartitionWriter,
        topic_creator: InternalTopicCreator,
        generate_producer_id: Callable[[], Awaitable[int]],
        read_records: READ_RECORDS,
        holds_lease: Callable[[int], bool] | None = None,
    ) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.metadata = metadata
        self.partition_writer = partition_writer
        self.topic_creator = topic_creator
        self.generate_producer_id = generate_producer_id
        self.read_records = read_records
        # Whether this broker may still act for an owned __transaction_state partition
        # (the service's leadership lease, leadership_lease.py); always, without one.
        self.holds_lease = holds_lease or (lambda index: True)
        self.num_partitions = config.transaction_state_log_num_partitions
        self.owned: dict[int, _StatePartition] = {}
        self.loading: set[int] = set()
        self.markers = TransactionMarkerSender(
            config.broker_id, metadata, timeout_s=WRITE_TIMEOUT_S
        )
        self.state_topic = InternalTopic(
            TRANSACTION_STATE_TOPIC,
            self.broker_id,
            metadata,
            topic_creator,
            self.loading,
            TransactionCoordinatorUnavailable,
        )
        self._tasks: list[asyncio.Task[None]] = []
        self._completions: set[asyncio.Task[None]] = set()
        partition_writer.leadership_listeners.append(self.on_leadership_change)

    # -- lifecycle ----------------------------------------------------------------------
    def start(self) -> None:
        config = self.config
        self._tasks = [
            asyncio.create_task(
                self._every(
                    config.transaction_abort_timed_out_transaction_cleanup_interval_ms,
                    self.abort_timed_out_transactions,
                )
            ),
            asyncio.create_task(
                self._every(
                    config.transaction_remove_expired_transaction_cleanup_interval_ms,
                    self.remove_expired_transactional_ids,
                )
            ),
        ]

    async def stop(self) -> None:
        await cancel_and_wait([*self._tasks, *self._completions], "transaction coordinator")
        self._tasks = []
        await self.markers.close()

    async def _every(self, interval_ms: int, job: Callable[[], Awaitable[object]]) -> None:
        while True:
            await asyncio.sleep(max(interval_ms, 10) / 1000)
            try:
                await job()
            except Exception:
                log.exception("transaction coordinator timer failed")

    # -- __transaction_state --------------------------------------------------------------
    async def ensure_state_topic(self, timeout_s: float = 10.0) -> bool:
        """Create ``__transaction_state`` if needed; True once every partition has a leader."""
        config = self.config
        return await self.state_topic.ensure(
            config.transaction_state_log_num_partitions,
            config.transaction_state_log_replication_factor,
            lambda replication_factor: {
                "cleanup.policy": "compact",
                "compression.type": "uncompressed",
                "min.insync.replicas": str(
                    min(config.transaction_state_log_min_isr, replication_factor)
                ),
                "segment.bytes": str(config.transaction_state_log_segment_bytes),
                "unclean.leader.election.enable": "false",
            },
            timeout_s,
        )

    def _refresh_partition_count(self) -> None:
        count = self.state_topic.partition_count()
        if count is not None:
            self.num_partitions = count

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.num_partitions)

    def coordinator_for(self, transactional_id: str) -> BrokerInfo:
        topic = self.metadata.topics.get(TRANSACTION_STATE_TOPIC)
        if topic is None or not topic.partitions:
            raise TransactionCoordinatorUnavailable(f"{TRANSACTION_STATE_TOPIC} does not exist yet")
        self._refresh_partition_count()
        index = self.partition_for(transactional_id)
        partition = topic.partitions.get(index)
        if partition is None or partition.leader < 0:
            raise TransactionCoordinatorUnavailable(
                f"the {TRANSACTION_STATE_TOPIC} partition of {transactional_id} has no leader"
            )
        broker = self.metadata.brokers.get(partition.leader)
        if broker is None:
            raise TransactionCoordinatorUnavailable(
                f"coordinator broker {partition.leader} is not registered"
            )
        return broker

    def _owner(self, transactional_id: str) -> _StatePartition:
        """The partition state serving ``transactional_id``, or a TransactionError with
        NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS."""
        self._refresh_partition_count()
        index = self.partition_for(transactional_id)
        if index in self.loading:
            raise TransactionError(
                ErrorCode.coordinator_load_in_progress,
                f"{TRANSACTION_STATE_TOPIC}-{index} is loading",
            )
        owner = self.owned.get(index)
        if owner is None:
            raise TransactionError(
                ErrorCode.not_coordinator,
                f"this broker does not lead {TRANSACTION_STATE_TOPIC}-{index}",
            )
        if not self.holds_lease(index):
            # Possibly a zombie woken after its session expired: another broker may
            # coordinate these ids by now, with newer state than this cache.
            raise TransactionError(
                ErrorCode.not_coordinator,
                f"cannot confirm leading {TRANSACTION_STATE_TOPIC}-{index}",
            )
        return owner

    def _still_owner(self, transactional_id: str, owner: _StatePartition) -> bool:
        return self.owned.get(self.partition_for(transactional_id)) is owner

    # -- loading --------------------------------------------------------------------------
    def on_leadership_change(self, partition: Partition) -> None:
        if partition.topic != TRANSACTION_STATE_TOPIC:
            return
        self._refresh_partition_count()
        index = partition.index
        owner = self.owned.get(index)
        if (
            partition.leader == self.broker_id
            and owner is not None
            and owner.coordinator_epoch != partition.leader_epoch
        ):
            self.owned.pop(index)  # an earlier leadership's state: load it again
            owner = None
        self.state_topic.leadership_changed(
            partition,
            owner is not None,
            lambda loaded_partition: replay_state(self.read_records(loaded_partition.log)),
            dict,
            self._install,
            self._unload,
        )

    def _unload(self, index: int) -> None:
        self.owned.pop(index, None)

    def _install(
        self, partition: Partition, loaded: dict[str, TransactionMetadata], seconds: float
    ) -> None:
        index = partition.index
        owner = _StatePartition(partition.leader_epoch, loaded)
        self.owned[index] = owner
        resumed = 0
        for metadata in loaded.values():
            if metadata.state in (State.PREPARE_COMMIT, State.PREPARE_ABORT):
                resumed += 1
                self._complete_in_background(metadata, owner)
        if loaded:
            log.info(
                "loaded %d transactional ids from %s-%d (coordinator epoch %d, %d to complete)"
                " in %.3f s",
                len(loaded),
                TRANSACTION_STATE_TOPIC,
                index,
                owner.coordinator_epoch,
                resumed,
                seconds,
            )

    # -- writing ----------------------------------------------------------------------------
    async def _append(self, index: int, batch: bytes) -> ErrorCode:
        """Append to ``__transaction_state-<index>`` as its leader and wait for the
        in-sync replicas (acks=all); the partition's error code."""
        try:
            result = self.partition_writer.append(TRANSACTION_STATE_TOPIC, index, batch, -1)
            return await self.partition_writer.wait_for_replication(
                TRANSACTION_STATE_TOPIC, index, result, WRITE_TIMEOUT_S
            )
        except KafkaError as failure:
            return ErrorCode(failure.error_code)

    async def _write(
        self, metadata: TransactionMetadata, transition: Transition, owner: _StatePartition
    ) -> ErrorCode:
        """Append ``transition`` (acks=all); once replicated it is the metadata. On any
        failure the pending transition is dropped and the error says what the client
        gets (Kafka's mapping in ``TransactionStateManager.appendTransactionToLog``)."""
        transactional_id = metadata.transactional_id
        index = self.partition_for(transactional_id)
        batch = make_batch(
            [Record(0, 0, encode_key(transactional_id), encode_value(log_value(transition)))],
            base_timestamp=now_ms(),
        )
        error = await self._append(index, batch)
        if error is ErrorCode.none and not self._still_owner(transactional_id, owner):
            error = ErrorCode.not_leader_or_follower
        if error is not ErrorCode.none:
            if metadata.pending == transition:
                metadata.abort_pending()
            log.warning(
                "cannot write %s for %s to %s-%d: %s",
                transition.state.name,
                transactional_id,
                TRANSACTION_STATE_TOPIC,
                index,
                error.name,
            )
            if error in (ErrorCode.not_leader_or_follower, ErrorCode.kafka_storage_error):
                return ErrorCode.not_coordinator
            if error in (
                ErrorCode.unknown_topic_or_partition,
                ErrorCode.not_enough_replicas,
                ErrorCode.not_enough_replicas_after_append,
                ErrorCode.request_timed_out,
            ):
                return ErrorCode.coordinator_not_available
            return ErrorCode.unknown_server_error
        metadata.complete(transition)
        return ErrorCode.none

    # -- InitProducerId ---------------------------------------------------------------------
    async def init_producer_id(
        self,
        transactional_id: str,
        timeout_ms: int,
        expected: tuple[int, int] | None = None,
    ) -> InitResult:
        """Kafka's ``handleInitProducerId`` for a transactional id."""
        if not transactional_id:
            return InitResult(ErrorCode.invalid_request)
        if timeout_ms <= 0 or timeout_ms > self.config.transaction_max_timeout_ms:
            return InitResult(ErrorCode.invalid_transaction_timeout)
        try:
            owner = self._owner(transactional_id)
            metadata = owner.ids.get(transactional_id)
            if metadata is None:
                producer_id = await self.generate_producer_id()
                owner = self._owner(transactional_id)
                metadata = owner.ids.setdefault(
                    transactional_id, new_metadata(transactional_id, producer_id, timeout_ms)
                )
            spare = -1
            if metadata.epoch_exhausted:
                spare = await self.generate_producer_id()
            decision = prepare_init_producer_id(
                metadata,
                timeout_ms=timeout_ms,
                now_ms=now_ms(),
                new_producer_id=lambda: spare,
                expected=expected,
            )
        except TransactionError as error:
            return InitResult(error.error_code)
        transition = decision.transition
        if transition is None:
            return InitResult(ErrorCode.none, metadata.producer_id, metadata.producer_epoch)
        if decision.fence:
            # The ongoing transaction of the older producer is aborted under the bumped
            # epoch; this producer retries (CONCURRENT_TRANSACTIONS) until it has ended.
            error = await self._fence_and_abort(metadata, transition, owner)
            return InitResult(
                ErrorCode.concurrent_transactions if error is ErrorCode.none else error
            )
        error = await self._write(metadata, transition, owner)
        if error is not ErrorCode.none:
            return InitResult(error)
        log.info(
            "InitProducerId %s: producer id %d epoch %d",
            transactional_id,
            metadata.producer_id,
            metadata.producer_epoch,
        )
        return InitResult(ErrorCode.none, metadata.producer_id, metadata.producer_epoch)

    async def _fence_and_abort(
        self, metadata: TransactionMetadata, fence: Transition, owner: _StatePartition
    ) -> ErrorCode:
        """PrepareEpochFence (in memory, as in Kafka), then PrepareAbort under the bumped
        epoch, written; then markers and CompleteAbort in the background."""
        before = (metadata.producer_epoch, metadata.last_producer_epoch, metadata.state)
        metadata.complete(fence)
        abort = prepare_abort_after_fence(metadata, now_ms())
        error = await self._write(metadata, abort, owner)
        if error is not ErrorCode.none:
            if metadata.state == State.PREPARE_EPOCH_FENCE:
                metadata.producer_epoch, metadata.last_producer_epoch, metadata.state = before
            return error
        log.info(
            "%s: aborting the transaction of producer %d, fenced at epoch %d",
            metadata.transactional_id,
            metadata.producer_id,
            metadata.producer_epoch,
        )
        self._complete_in_background(metadata, owner)
        return ErrorCode.none

    # -- AddPartitionsToTxn / AddOffsetsToTxn -------------------------------------------------
    async def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: set[TopicPartition],
        *,
        verify_only: bool = False,
    ) -> ErrorCode:
        """One error for all of ``partitions`` (Kafka's ``handleAddPartitionsToTransaction``)."""
        try:
            owner = self._owner(transactional_id)
            metadata = owner.ids.get(transactional_id)
            if verify_only:
                metadata = check_producer(metadata, producer_id, producer_epoch)
                if metadata.state != State.ONGOING or not partitions <= metadata.partitions:
                    return ErrorCode.invalid_txn_state
                return ErrorCode.none
            transition = prepare_add_partitions(
                metadata, producer_id, producer_epoch, partitions, now_ms()
            )
        except TransactionError as error:
            return error.error_code
        if transition is None:
            return ErrorCode.none
        assert metadata is not None
        return await self._write(metadata, transition, owner)

    # -- EndTxn ---------------------------------------------------------------------------------
    async def end_transaction(
        self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool
    ) -> ErrorCode:
        """PrepareCommit/PrepareAbort is written before the answer; the markers and
        CompleteCommit/CompleteAbort follow (Kafka's ``handleEndTransaction``)."""
        try:
            owner = self._owner(transactional_id)
            metadata = owner.ids.get(transactional_id)
            transition = prepare_end_transaction(
                metadata, producer_id, producer_epoch, commit, now_ms()
            )
        except TransactionError as error:
            return error.error_code
        if transition is None:
            return ErrorCode.none
        assert metadata is not None
        error = await self._write(metadata, transition, owner)
        if error is ErrorCode.none:
            self._complete_in_background(metadata, owner)
        return error

    def _complete_in_background(
        self, metadata: TransactionMetadata, owner: _StatePartition
    ) -> None:
        task = asyncio.get_running_loop().create_task(self._complete(metadata, owner))
        self._completions.add(task)
        task.add_done_callback(self._completions.discard)

    async def _complete(self, metadata: TransactionMetadata, owner: _StatePartition) -> None:
        """Markers to every partition, then Complete*; retried until done or until this
        broker stops coordinating the id (its successor resumes from PrepareCommit/Abort)."""
        transactional_id = metadata.transactional_id
        commit = metadata.state == State.PREPARE_COMMIT
        started = time.monotonic()
        try:
            sent = await self.markers.send(
                producer_id=metadata.producer_id,
                producer_epoch=metadata.producer_epoch,
                coordinator_epoch=owner.coordinator_epoch,
                commit=commit,
                partitions=set(metadata.partitions),
                still_valid=lambda: self._still_owner(transactional_id, owner),
            )
            if not sent:
                log.info("%s: coordinator moved before the markers were written", transactional_id)
                return
            backoff = 0.05
            while self._still_owner(transactional_id, owner):
                try:
                    transition = prepare_complete(metadata, now_ms())
                except TransactionError as error:
                    if error.error_code is ErrorCode.concurrent_transactions:
                        await asyncio.sleep(backoff)
                        continue
                    log.warning("%s: %s", transactional_id, error)
                    return
                error_code = await self._write(metadata, transition, owner)
                if error_code is ErrorCode.none:
                    log.debug(
                        "%s: %s in %.3f s",
                        transactional_id,
                        metadata.state.name,
                        time.monotonic() - started,
                    )
                    return
                if error_code is ErrorCode.not_coordinator:
                    return
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 1.0)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("completing the transaction of %s failed", transactional_id)

    # -- timers ---------------------------------------------------------------------------------
    async def abort_timed_out_transactions(self) -> int:
        """Abort every ongoing transaction older than its timeout, fencing its producer
        with a bumped epoch (Kafka's ``abortTimedOutTransactions``)."""
        now = now_ms()
        aborted = 0
        for owner in list(self.owned.values()):
            for metadata in list(owner.ids.values()):
                if not timed_out(metadata, now):
                    continue
                if metadata.epoch_exhausted:
                    continue  # Kafka skips these too: the producer must re-init
                log.info(
                    "aborting the transaction of %s (producer %d epoch %d): older than its"
                    " timeout of %d ms",
                    metadata.transactional_id,
                    metadata.producer_id,
                    metadata.producer_epoch,
                    metadata.timeout_ms,
                )
                fence = metadata._prepare(
                    state=State.PREPARE_EPOCH_FENCE,
                    producer_epoch=metadata.producer_epoch + 1,
                    last_producer_epoch=metadata.producer_epoch,
                    last_update_ms=now,
                )
                if await self._fence_and_abort(metadata, fence, owner) is ErrorCode.none:
                    aborted += 1
        return aborted

    async def remove_expired_transactional_ids(self) -> int:
        """Tombstone ids idle in a finished state longer than
        ``transactional.id.expiration.ms``."""
        now = now_ms()
        expiration = self.config.transactional_id_expiration_ms
        removed = 0
        for index, owner in list(self.owned.items()):
            expired = [
                metadata
                for metadata in owner.ids.values()
                if metadata.state in TERMINAL
                and metadata.pending is None
                and now - metadata.last_update_ms > expiration
            ]
            if not expired:
                continue
            # What each looked like when chosen: one changed meanwhile (a new producer's
            # InitProducerId, written after the tombstone) stays.
            chosen = {m.transactional_id: m.last_update_ms for m in expired}
            batch = make_batch(
                [Record(i, 0, encode_key(m.transactional_id), None) for i, m in enumerate(expired)],
                base_timestamp=now,
            )
            error = await self._append(index, batch)
            if error is not ErrorCode.none or self.owned.get(index) is not owner:
                continue
            for metadata in expired:
                current = owner.ids.get(metadata.transactional_id)
                if (
                    current is metadata
                    and metadata.pending is None
                    and metadata.last_update_ms == chosen[metadata.transactional_id]
                ):
                    del owner.ids[metadata.transactional_id]
                    removed += 1
            log.info(
                "removed %d expired transactional ids from %s-%d",
                removed,
                TRANSACTION_STATE_TOPIC,
                index,
            )
        return removed

    # -- DescribeTransactions / ListTransactions --------------------------------------------
    def describe(self, transactional_id: str) -> tuple[ErrorCode, TransactionDescription | None]:
        try:
            owner = self._owner(transactional_id)
        except TransactionError as error:
            return error.error_code, None
        metadata = owner.ids.get(transactional_id)
        if metadata is None:
            return ErrorCode.transactional_id_not_found, None
        return ErrorCode.none, TransactionDescription(
            transactional_id,
            metadata.state,
            metadata.producer_id,
            metadata.producer_epoch,
            metadata.timeout_ms,
            metadata.start_ms,
            metadata.last_update_ms,
            frozenset(metadata.partitions),
        )

    def list_transactions(
        self,
        states: set[str],
        producer_ids: set[int],
        min_duration_ms: int = -1,
    ) -> tuple[ErrorCode, list[TransactionDescription]]:
        """Transactions this broker coordinates (Kafka's ``listTransactionStates``):
        COORDINATOR_LOAD_IN_PROGRESS while any partition is loading; partitions whose
        leadership this broker cannot confirm (its lease ran out) are left out."""
        if self.loading:
            return ErrorCode.coordinator_load_in_progress, []
        now = now_ms()
        found = []
        for index, owner in list(self.owned.items()):
            if not self.holds_lease(index):
                continue
            for transactional_id, metadata in owner.ids.items():
                if states and STATE_NAMES[metadata.state] not in states:
                    continue
                if producer_ids and metadata.producer_id not in producer_ids:
                    continue
                if min_duration_ms >= 0 and (
                    metadata.state != State.ONGOING or now - metadata.start_ms < min_duration_ms
                ):
                    continue
                found.append(self.describe(transactional_id)[1])
        return ErrorCode.none, [d for d in found if d is not None]
