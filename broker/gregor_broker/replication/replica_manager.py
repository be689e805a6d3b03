"""The partitions this broker hosts: appends, reads, and their replication roles.

Kafka's ReplicaManager in miniature. It turns metadata (who leads which partition at
which leader epoch) into local logs and roles: a leader appends produced batches and
tracks its followers (ISR, high watermark); a follower copies its leader's log through
the replica fetchers. Handlers call it with whole batches and never see files; the
leader's append rule is ``Partition.append_as_leader``, the log's own checks are
``PartitionLog``'s, and the per-partition read of a Fetch is ``fetch_reader.py``.

Two waiters live here (``purgatory.py``, Kafka's purgatories): fetches waiting for data
(``append_waiters``: a follower's woken by appends, a consumer's by the high watermark
moving, both by leadership changes and failed log dirs) and acks=all produces waiting
for the high watermark to pass their last offset.

A failed log dir (``LogManager.log_dir_failed``, on any ``OSError`` writing to it) takes
its partitions offline here, as Kafka's ``ReplicaManager.handleLogDirFailure`` does: they
stop following and leading, every request for them answers KAFKA_STORAGE_ERROR (acks=all
produces waiting on them too), and metadata never recreates them on another dir until
the broker restarts. Telling the controller is the broker's job (``server/broker.py``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from kio.schema.errors import ErrorCode

from ..cluster.admin import BadVersion, ZkAdmin
from ..cluster.metadata_cache import MetadataCache, PartitionInfo, TopicInfo
from ..cluster.models import PartitionState
from ..deferred import Deferred
from ..log.log_config import LogConfig
from ..log.log_manager import LogDirOffline, LogManager
from ..log.partition_log import AppendResult
from ..log.validator import (
    DecompressionBudget,
)
from ..protocol.record_batch import BatchHeader
from .delayed_produce import DelayedProduce, ProducePurgatory
from .fetcher import ReplicaFetcherManager
from .partition import Partition, PartitionError
from .purgatory import Waiters
from .replica_selector import ReplicaView, select_read_replica
from .replication_config import ReplicationConfig
from .throttle import LeaderReplicationQuota

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
# produce.decompressed.max.bytes: socket.request.max.bytes, so a compressed request costs
# at most the validation work of the largest uncompressed one.
DEFAULT_PRODUCE_DECOMPRESSED_MAX_BYTES = 104857600
# Loop time one turn of the periodic ISR shrink may take (``shrink_lagging_isrs``).
SHRINK_TURN_S = 0.005

__all__ = ["Partition", "PartitionError", "ReplicaManager"]


class TopicCounters:
    """Per-topic traffic on this broker, read by the metrics collector at scrape time."""

    __slots__ = ("bytes_in", "bytes_out", "messages_in")

    def __init__(self) -> None:
        self.bytes_in = 0
        self.messages_in = 0
        self.bytes_out = 0  # to consumers; followers' fetches are replication_bytes_out


def now_ms() -> int:
    return int(time.time() * 1000)


class ReplicaManager:
    def __init__(
        self,
        broker_id: int,
        logs: LogManager,
        metadata: MetadataCache,
        log_config_for: Callable[[dict[str, str]], LogConfig],
        *,
        zk_admin: ZkAdmin | None = None,
        replication_config: ReplicationConfig | None = None,
        produce_decompressed_max_bytes: int = DEFAULT_PRODUCE_DECOMPRESSED_MAX_BYTES,
    ) -> None:
        self.broker_id = broker_id
        self.produce_decompressed_max_bytes = produce_decompressed_max_bytes
        self.logs = logs
        self.metadata = metadata
        self.log_config_for = log_config_for
        self.zk_admin = zk_admin
        self.replication_config = replication_config or ReplicationConfig()
        self.truncate_to_high_watermark = self.replication_config.truncate_to_high_watermark
        self.partitions: dict[TopicPartition, Partition] = {}
        # The indexes in ``partitions`` per topic: reconciling a few topics looks at their
        # partitions only (scanning all of them per call was quadratic while thousands of
        # partitions were created, a slice of topics at a time).
        self._indexes_of: dict[str, set[int]] = {}
        # Where a call of ``reconcile`` capped at ``max_changes`` stopped in each topic:
        # the next call starts there while the topic is unchanged, instead of walking
        # (and applying again) every partition before it.
        self._resume: dict[str, _Resume] = {}
        # Partitions wanted here whose old log (deleted a moment ago) is still being
        # removed: reconciled again when the log manager says it is gone.
        self._held: set[TopicPartition] = set()
        # This broker's registration in ZooKeeper (its czxid, Kafka's broker epoch), once
        # ``expect_registration`` said one is coming: leadership is taken up only from a
        # state written after it (``_elected_since_registration``). None: not tracked
        # (tools, tests without ZooKeeper).
        self.registration_czxid: int | None = None
        self._tracks_registration = False
        # Partitions a state names this broker leader of, written before it registered:
        # neither led nor followed until the controller elects again.
        self._awaiting_election: set[TopicPartition] = set()
        self.append_waiters = Waiters()
        self.produce_purgatory = ProducePurgatory()
        self.fetchers = ReplicaFetcherManager(self)
        self.messages_in_total = 0
        self.bytes_in_total = 0
        # Called with a partition whenever its leader changes or it is dropped here
        # (the group coordinator loads and unloads __consumer_offsets partitions).
        self.leadership_listeners: list[Callable[[Partition], None]] = []
        self.isr_shrinks_total = 0
        self.isr_expands_total = 0
        self.topic_counters: dict[str, TopicCounters] = {}
        self.replication_bytes_out_total = 0
        # Record bytes this broker sent consumers as a follower (fetch from follower).
        self.follower_served_bytes_total = 0
        self.leader_replication_quota = LeaderReplicationQuota()
        logs.dir_failure_listeners.append(self._on_log_dir_failure)
        logs.ready_listeners.append(self.create_held)

    # metadata -> local state ---------------------------------------------------------
    def reconcile(
        self, topics: set[str] | None = None, *, max_changes: int | None = None
    ) -> set[str]:
        """Create, update and delete local partitions to match the metadata cache
        (only for ``topics`` when given). At most ``max_changes`` partitions are created,
        change leadership or are dropped per call (a log is a directory and three files,
        a new term a log line, wake-ups and listeners: a topic of thousands of partitions
        held the event loop for seconds); returns the topics with partitions still to
        apply, for the caller to apply again later. The next call starts such a topic
        where this one stopped, as long as the topic did not change (``_Resume``)."""
        names = set(self.metadata.topics) if topics is None else topics
        wanted: set[TopicPartition] = set()
        unfinished: set[str] = set()
        changes = 0
        for name in names:
            resume = self._resume.pop(name, None)
            topic = self.metadata.topics.get(name)
            if topic is None:
                continue
            config = self.log_config_for(topic.config)
            start = resume.position if resume is not None and resume.holds(topic, config) else 0
            for position, (index, info) in enumerate(topic.partitions.items()):
                if self.broker_id not in info.replicas:
                    continue
                key = (topic.name, index)
                wanted.add(key)
                if position < start or name in unfinished:
                    continue  # applied by an earlier call, or left to the next one
                if self.logs.is_offline(key):
                    continue  # Kafka: an offline replica stays offline until a restart
                partition = self.partitions.get(key)
                if (
                    max_changes is not None
                    and changes >= max_changes
                    and (partition is None or _news_for(partition, info))
                ):
                    unfinished.add(name)
                    self._resume[name] = _Resume(topic, topic.generation, config, position)
                    continue
                if partition is None:
                    if self.logs.removing(key) or self.logs.creating(key):
                        # Its files are being made on the log manager's threads (or, if
                        # it was deleted a moment ago, its old directory renamed away).
                        # Created once that is done (``create_held``): the file system
                        # can take seconds, and the event loop does not wait for it.
                        self._held.add(key)
                        changes += 1  # a thread's work started (or checked): bounded too
                        continue
                    changes += 1
                    try:
                        partition = self._create(topic, index, config)
                    except LogDirOffline as error:
                        log.error("cannot host %s-%d: %s", topic.name, index, error)
                        continue
                elif partition.log.config != config:
                    partition.log.update_config(config)
                if self._apply_state(partition, info):
                    changes += 1
        if topics is None:
            local = list(self.partitions)
        else:
            local = [(name, i) for name in topics for i in self._indexes_of.get(name, ())]
        for key in local:
            if key not in wanted:
                if max_changes is not None and changes >= max_changes:
                    unfinished.add(key[0])
                    continue
                changes += 1
                self._drop(key)
        for key in self.logs.preparing():
            if (topics is None or key[0] in topics) and key not in wanted:
                self.logs.discard_prepared(key)  # its topic went while it was made
        for key in self.logs.offline_partitions():
            if (topics is None or key[0] in topics) and key not in wanted:
                self.logs.delete_log(*key)  # forgets it; the files stay on the failed dir
        return unfinished

    def create_held(self, key: TopicPartition) -> None:
        """The log manager's threads are done with ``key``'s files (a new partition's
        made, or a deleted one's directory renamed away): create the partition a
        reconcile held back, with its state from the metadata cache, unless it is no
        longer wanted here. One partition per call: bounded work on the event loop."""
        if key not in self._held:
            return
        self._held.discard(key)
        if key in self.partitions or self.logs.is_offline(key):
            return
        topic = self.metadata.topics.get(key[0])
        info = topic.partitions.get(key[1]) if topic is not None else None
        if topic is None or info is None or self.broker_id not in info.replicas:
            self.logs.discard_prepared(key)
            return
        if self.logs.removing(key) or self.logs.creating(key):
            self._held.add(key)  # its old directory is gone: now its new files are made
            return
        try:
            partition = self._create(topic, key[1], self.log_config_for(topic.config))
        except LogDirOffline as error:
            log.error("cannot host %s-%d: %s", key[0], key[1], error)
            return
        self._apply_state(partition, info)

    def expect_registration(self) -> None:
        """This broker registers in ZooKeeper (``registered``); until then it leads
        nothing. Called before any metadata arrives."""
        self._tracks_registration = True

    def registered(self, czxid: int) -> None:
        """This broker's registration (its czxid) is in ZooKeeper: at start-up, and again
        after a lost session. From now on it takes up leadership from states written
        after it; the partitions held back are applied again (a state may have come
        before this call did)."""
        self.registration_czxid = czxid
        self.metadata.mark_changed({topic for topic, _ in self._awaiting_election})

    def _elected_since_registration(self, info: PartitionInfo) -> bool:
        """Whether a state naming this broker leader was written after this broker's
        current registration, i.e. by a controller that knew of this run of it.

        A state written before names a previous run, which may have had more of the log
        than this one: kill -9 keeps the page cache, a power loss or an emptied disk do
        not. Leading at that run's epoch, this broker would answer its followers' fetches
        with OFFSET_OUT_OF_RANGE and their epoch queries with its own shorter log end,
        and they would cut acknowledged records to match. Kafka's ZooKeeper-mode broker
        leads nothing until the controller's LeaderAndIsr, and the controller handles a
        restart as a failure then a startup (a new epoch, a leader with the whole log);
        here the controller does the same (``Controller._on_broker_change``, and at its
        election ``Controller._restarted_in_sync_replicas``), and its new state is the signal."""
        if not self._tracks_registration:
            return True
        czxid = self.registration_czxid
        return czxid is not None and info.state_mzxid > czxid

    def _create(self, topic: TopicInfo, index: int, config: LogConfig) -> Partition:
        partition_log = self.logs.get_or_create(topic.name, index, config)
        partition = Partition(topic.name, index, topic.topic_id, partition_log)
        self.partitions[(topic.name, index)] = partition
        self._indexes_of.setdefault(topic.name, set()).add(index)
        return partition

    def _apply_state(self, partition: Partition, info: PartitionInfo) -> bool:
        """Whether leadership changed (a new term: the costly case)."""
        partition.update_assignment(info.replicas)
        if info.state is None:
            return False
        if info.state_version < partition.state_version:
            return False
        new_term = info.leader_epoch != partition.leader_epoch or info.leader != partition.leader
        partition.isr = info.isr
        partition.state_version = info.state_version
        partition.controller_epoch = info.state.controller_epoch
        if not new_term:
            if partition.is_leader(self.broker_id):
                self._after_high_watermark_inputs_changed(partition)
                self._drop_unassigned_from_isr(partition)
            return False
        partition.leader = info.leader
        partition.leader_epoch = info.leader_epoch
        key = (partition.topic, partition.index)
        if partition.is_leader(self.broker_id) and not self._elected_since_registration(info):
            partition.leader = -1  # neither leads nor follows: the next state decides
            if key not in self._awaiting_election:
                self._awaiting_election.add(key)
                log.info(
                    "%s-%d: named leader at epoch %d by a state written before this broker "
                    "registered (zxid %d, registration %s); waiting for the controller to "
                    "elect again",
                    partition.topic,
                    partition.index,
                    info.leader_epoch,
                    info.state_mzxid,
                    self.registration_czxid,
                )
        else:
            self._awaiting_election.discard(key)
        if partition.is_leader(self.broker_id):
            self.fetchers.unfollow(key)
            partition.become_leader(self.broker_id, now_ms())
            self._after_high_watermark_inputs_changed(partition)
            self._drop_unassigned_from_isr(partition)
            log.info(
                "leader of %s-%d at epoch %d (ISR %s; log end %d, high watermark %d)",
                partition.topic,
                partition.index,
                partition.leader_epoch,
                list(partition.isr),
                partition.log.log_end_offset,
                partition.log.high_watermark,
            )
        else:
            partition.followers = {}
            partition.log.stop_following_log_end()
            if partition.leader >= 0:
                self.fetchers.follow(partition)
            else:
                self.fetchers.unfollow(key)
        # Anyone waiting on this partition must re-check who leads it.
        self.append_waiters.notify(key)
        self.produce_purgatory.notify(key)
        self._notify_leadership(partition)
        return True

    def _drop(self, key: TopicPartition) -> None:
        partition = self.partitions.pop(key)
        self._forget_index(key)
        self._awaiting_election.discard(key)
        partition.leader = -1
        self._notify_leadership(partition)
        self.fetchers.unfollow(key)
        log.info("deleting local log of %s-%d (topic deleted or replica moved)", *key)
        self.logs.delete_log(partition.topic, partition.index)
        # Kafka's StopReplica: acks=all produces and fetches waiting on it answer now
        # (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION), not at their timeouts.
        self.append_waiters.notify(key)
        self.produce_purgatory.notify(key)

    def _forget_index(self, key: TopicPartition) -> None:
        indexes = self._indexes_of.get(key[0])
        if indexes is not None:
            indexes.discard(key[1])
            if not indexes:
                del self._indexes_of[key[0]]

    def _on_log_dir_failure(self, log_dir: object, keys: list[TopicPartition]) -> None:
        """Partitions on a failed log dir go offline here (Kafka's handleLogDirFailure)."""
        for key in keys:
            partition = self.partitions.pop(key, None)
            self._forget_index(key)
            self.fetchers.unfollow(key)
            if partition is not None:
                partition.leader = -1
                self._notify_leadership(partition)
            # Fetches and acks=all produces waiting on it answer KAFKA_STORAGE_ERROR now.
            self.append_waiters.notify(key)
            self.produce_purgatory.notify(key)

    def storage_failed(self, partition: Partition, error: OSError) -> PartitionError:
        """A write to ``partition``'s log failed: its log dir goes offline. Returns the
        error to answer (KAFKA_STORAGE_ERROR)."""
        key = (partition.topic, partition.index)
        log.error("I/O error writing %s-%d: %s", partition.topic, partition.index, error)
        self.logs.failed_on(key, error)
        return PartitionError(ErrorCode.kafka_storage_error, f"log dir failed: {error}")

    def leads_as_assigned(self, name: str) -> bool:
        """Whether every partition of topic ``name`` whose leader the metadata says is this
        broker is led here (created, not held back, leader at that epoch)."""
        topic = self.metadata.topics.get(name)
        if topic is None:
            return False
        partitions = self.partitions
        for index, info in topic.partitions.items():
            if info.leader == self.broker_id:
                partition = partitions.get((name, index))
                if (
                    partition is None
                    or not partition.is_leader(self.broker_id)
                    or partition.leader_epoch != info.leader_epoch
                ):
                    return False
        return True

    def _notify_leadership(self, partition: Partition) -> None:
        # What waits on the metadata may wait on local leadership too (``leads_as_assigned``).
        self.metadata.recheck_waiters()
        for listener in self.leadership_listeners:
            try:
                listener(partition)
            except Exception:
                log.exception(
                    "leadership listener failed for %s-%d", partition.topic, partition.index
                )

    # high watermark and ISR ------------------------------------------------------------
    def _after_high_watermark_inputs_changed(self, partition: Partition) -> None:
        if partition.maybe_advance_high_watermark(self.broker_id):
            key = (partition.topic, partition.index)
            # Consumers' fetches only: a follower's copies up to the log end, and a high
            # watermark move gives it nothing new (Kafka's DelayedFetch: the log end).
            # First: their answers are the end-to-end latency; the waiting produces'
            # (answered in this call too, below) only acknowledge.
            self.append_waiters.notify_committed(key)
            self.produce_purgatory.notify_high_watermark(key, partition.log.high_watermark)

    def record_follower_fetch(self, partition: Partition, replica_id: int, offset: int) -> None:
        """The leader side of a follower's fetch: its progress, the HW, ISR growth.

        A fetch from an in-sync follower at the log end offset it already had moves
        nothing the high watermark or the ISR depends on (every other input, an append,
        an ISR or leadership change, recomputes it when it changes): only its fetch
        times are kept. That is every partition of a follower's fetch session that had
        no traffic, each round trip."""
        follower = partition.followers.get(replica_id)
        unchanged = (
            follower is not None
            and follower.log_end_offset == offset
            and replica_id in partition.isr
        )
        partition.record_follower_fetch(replica_id, offset, now_ms())
        if unchanged:
            return
        self._after_high_watermark_inputs_changed(partition)
        # Only a live broker joins the ISR (Kafka's isReplicaIsrEligible: in ZooKeeper mode,
        # hasAliveBroker): a broker in controlled shutdown has deregistered and keeps
        # fetching until it exits; taken back into the ISR, it would hold every acks=all
        # write of the partition once it is gone, until the lag timeout drops it.
        if partition.may_rejoin_isr(replica_id) and replica_id in self.metadata.brokers:
            new_isr = tuple(r for r in partition.replicas if r in partition.isr or r == replica_id)
            if not partition.isr_change_in_flight:
                log.info(
                    "expanding ISR of %s-%d from %s to %s: follower %d fetched at %d "
                    "(epoch %d, log end %d, high watermark %d)",
                    partition.topic,
                    partition.index,
                    list(partition.isr),
                    list(new_isr),
                    replica_id,
                    offset,
                    partition.leader_epoch,
                    partition.log.log_end_offset,
                    partition.log.high_watermark,
                )
            self._change_isr(partition, new_isr, expand=True)

    def _drop_unassigned_from_isr(self, partition: Partition) -> None:
        """Take brokers that are no longer replicas out of the ISR at once.

        The assignment and the leader/ISR state are separate znodes, so a leader can
        see a reassignment's new leadership before the replica it drops: meanwhile the
        departing replica may fetch and be added back to the ISR. It will never fetch
        again, and with it in the ISR the high watermark (and every acks=all produce)
        would wait replica.lag.time.max.ms for the ISR shrink.
        """
        if any(r not in partition.replicas for r in partition.isr):
            assigned = tuple(r for r in partition.isr if r in partition.replicas)
            log.info(
                "removing %s from the ISR of %s-%d: no longer replicas",
                sorted(set(partition.isr) - set(assigned)),
                partition.topic,
                partition.index,
            )
            self._change_isr(partition, assigned, expand=False)

    async def shrink_lagging_isrs(self) -> None:
        """Kafka's periodic ISR shrink: drop followers lagging replica.lag.time.max.ms,
        and brokers no longer assigned (when the immediate removal could not run).

        At 10,000 partitions one pass took over 100 ms of a loaded machine's event loop:
        it gives the loop a turn every ``SHRINK_TURN_S``."""
        lag = self.replication_config.replica_lag_time_max_ms
        now = now_ms()
        turn_ends = time.perf_counter() + SHRINK_TURN_S
        for key, partition in list(self.partitions.items()):
            if time.perf_counter() >= turn_ends:
                await asyncio.sleep(0)
                turn_ends = time.perf_counter() + SHRINK_TURN_S
                now = now_ms()
            if self.partitions.get(key) is not partition or not partition.is_leader(self.broker_id):
                continue
            lagging = partition.out_of_sync_replicas(self.broker_id, now, lag)
            lagging |= {r for r in partition.isr if r not in partition.replicas}
            if lagging:
                new_isr = tuple(r for r in partition.isr if r not in lagging)
                log.info(
                    "shrinking ISR of %s-%d from %s to %s (lagging %s)",
                    partition.topic,
                    partition.index,
                    list(partition.isr),
                    list(new_isr),
                    sorted(lagging),
                )
                self._change_isr(partition, new_isr, expand=False)

    def _change_isr(self, partition: Partition, new_isr: tuple[int, ...], *, expand: bool) -> None:
        """Write ``new_isr``, computed from the partition's state as it is now, conditional
        on that state's version: read here, in the same step, not when the write's task
        first runs. In between, the metadata can bring a newer state (the controller
        taking a dead broker out of the ISR); a write conditional on that newer version
        would have put the broker back, computed from the state before it, and a later
        election could then pick a replica that never caught up (chaos seed 20261130:
        acknowledged writes lost)."""
        if partition.isr_change_in_flight or self.zk_admin is None:
            return
        partition.isr_change_in_flight = True
        state = PartitionState(
            partition.controller_epoch, self.broker_id, partition.leader_epoch, new_isr
        )
        expected = partition.state_version
        if expand:
            # Counted for the high watermark from the moment the write is sent (below).
            partition.pending_isr_additions = tuple(r for r in new_isr if r not in partition.isr)
        asyncio.get_running_loop().create_task(self._write_isr(partition, state, expected, expand))

    async def _write_isr(
        self, partition: Partition, state: PartitionState, expected: int, expand: bool
    ) -> None:
        """Persist an ISR change (``state``, if ZooKeeper still holds version
        ``expected``), then apply it.

        Applying only after ZooKeeper accepted it is what fences a deposed leader: its
        expected version is stale, the write fails, and it cannot commit alone. An
        expansion's new replicas count for the high watermark from the moment the write is
        sent (``Partition.pending_isr_additions``): ZooKeeper may hold the new ISR, and a
        controller may elect from it, before the answer arrives, or when it is lost.
        """
        assert self.zk_admin is not None
        new_isr = state.isr
        try:
            version = await asyncio.to_thread(
                self.zk_admin.set_partition_state,
                partition.topic,
                partition.index,
                state,
                expected,
            )
            if partition.leader_epoch == state.leader_epoch and partition.is_leader(self.broker_id):
                # The new ISR first, then the additions are no longer pending: the high
                # watermark never sees an ISR without them in between.
                self._apply_isr(partition, new_isr, version)
                if expand:
                    self.isr_expands_total += 1
                else:
                    self.isr_shrinks_total += 1
        except BadVersion:
            log.info(
                "ISR change of %s-%d lost to a newer state (version %d); waiting for metadata",
                partition.topic,
                partition.index,
                expected,
            )
        except Exception:
            log.exception("writing the ISR of %s-%d failed", partition.topic, partition.index)
            if partition.pending_isr_additions:
                # The write may have reached ZooKeeper: keep counting the additions until
                # ZooKeeper says which state is there (no other ISR change meanwhile).
                await self._resolve_isr_write(partition, state, expected)
        finally:
            partition.isr_change_in_flight = False
            self._settle_pending_isr_additions(partition)

    def _settle_pending_isr_additions(self, partition: Partition) -> None:
        """The expansion is decided (applied, refused, or read back): stop counting its
        replicas beyond the ISR."""
        if partition.pending_isr_additions:
            partition.pending_isr_additions = ()
            if partition.is_leader(self.broker_id):
                self._after_high_watermark_inputs_changed(partition)

    def _apply_isr(self, partition: Partition, new_isr: tuple[int, ...], version: int) -> None:
        partition.isr = new_isr
        partition.state_version = version
        self._after_high_watermark_inputs_changed(partition)
        # Shrinking may leave acks=all produces short of min.insync.replicas: wake them.
        self.produce_purgatory.notify((partition.topic, partition.index))

    async def _resolve_isr_write(
        self, partition: Partition, written: PartitionState, expected: int
    ) -> None:
        """After an ISR write of unknown outcome, read the state back (retrying while
        ZooKeeper is away and this broker still leads at that epoch) and take on the ISR
        ZooKeeper holds for this leadership; then the pending additions are settled."""
        assert self.zk_admin is not None
        backoff = 0.1
        try:
            while partition.is_leader(self.broker_id) and (
                partition.leader_epoch == written.leader_epoch
            ):
                try:
                    current = await asyncio.to_thread(
                        self.zk_admin.get_partition_state, partition.topic, partition.index
                    )
                except Exception as error:
                    log.info(
                        "reading back the ISR of %s-%d failed (%s); retrying",
                        partition.topic,
                        partition.index,
                        error,
                    )
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, 2.0)
                    continue
                if current is None:
                    return
                stored, version = current
                if version == expected or version <= partition.state_version:
                    return  # the write did not land
                if (
                    stored.leader == self.broker_id
                    and stored.leader_epoch == partition.leader_epoch
                    and partition.leader_epoch == written.leader_epoch
                ):
                    log.info(
                        "ISR of %s-%d read back after a failed write: %s (version %d)",
                        partition.topic,
                        partition.index,
                        list(stored.isr),
                        version,
                    )
                    self._apply_isr(partition, stored.isr, version)
                    if stored.isr == written.isr:
                        self.isr_expands_total += 1
                return
        finally:
            self._settle_pending_isr_additions(partition)

    # lookups -----------------------------------------------------------------------
    def partition_or_error(
        self, topic: str, index: int, *, require_leader: bool = True
    ) -> Partition:
        """The partition, else the Kafka error to return (Kafka's ``getPartitionOrError``
        + ``localLogOrException``): with ``require_leader``, only if this broker leads it;
        without, also if it follows a leader (fetch from follower, KIP-392: the follower
        serves up to its own high watermark)."""
        partition = self.partitions.get((topic, index))
        if partition is None:
            self._raise_if_offline(topic, index)
            known = self.metadata.topics.get(topic)
            if known is None or index not in known.partitions:
                raise PartitionError(ErrorCode.unknown_topic_or_partition)
            raise PartitionError(ErrorCode.not_leader_or_follower)
        if require_leader:
            if not partition.is_leader(self.broker_id):
                raise PartitionError(ErrorCode.not_leader_or_follower)
        elif self.broker_id not in partition.replicas or partition.leader < 0:
            raise PartitionError(ErrorCode.not_leader_or_follower)
        return partition

    def preferred_read_replica(
        self, partition: Partition, client_rack: str, fetch_offset: int
    ) -> int | None:
        """The replica a consumer in ``client_rack`` should read from, if not this leader.

        Candidates are followers that hold ``fetch_offset`` and are caught up within
        ``replica.lag.time.max.ms`` (stricter than Kafka, which takes any replica holding
        the offset: a lagging follower would make the consumer wait at its high watermark).
        """
        selector = self.replication_config.replica_selector
        if selector is None:
            return None
        now = now_ms()
        lag = self.replication_config.replica_lag_time_max_ms
        brokers = self.metadata.brokers
        own = brokers.get(self.broker_id)
        leader = ReplicaView(
            self.broker_id, own.rack if own is not None else None, partition.log.log_end_offset, 0
        )
        followers = []
        for replica_id in partition.replicas:
            follower = partition.followers.get(replica_id)
            if replica_id == self.broker_id or follower is None or replica_id not in brokers:
                continue
            behind_ms = now - follower.last_caught_up_ms
            if follower.log_end_offset >= fetch_offset and behind_ms <= lag:
                followers.append(
                    ReplicaView(
                        replica_id, brokers[replica_id].rack, follower.log_end_offset, behind_ms
                    )
                )
        return select_read_replica(selector, client_rack, leader, followers)

    def hosted_partition(self, topic: str, index: int) -> Partition:
        partition = self.partitions.get((topic, index))
        if partition is None:
            self._raise_if_offline(topic, index)
            raise PartitionError(ErrorCode.unknown_topic_or_partition)
        return partition

    def _raise_if_offline(self, topic: str, index: int) -> None:
        if self.logs.is_offline((topic, index)):
            raise PartitionError(
                ErrorCode.kafka_storage_error,
                f"{topic}-{index} is offline on this broker: its log dir failed",
            )

    # produce -----------------------------------------------------------------------
    def append(
        self,
        topic: str,
        index: int,
        records: bytes | None,
        acks: int,
        *,
        api_version: int | None = None,
        budget: DecompressionBudget | None = None,
    ) -> AppendResult:
        """Append as leader. For acks=all, follow with ``wait_for_replication``.

        ``api_version`` is the Produce request's (None for the broker's own writes);
        ``budget`` bounds what the request's compressed batches may inflate to while
        they are validated (``produce.decompressed.max.bytes``, shared by the request).
        """
        partition = self.partition_or_error(topic, index)
        try:
            result = partition.append_as_leader(
                records,
                acks,
                budget=budget or DecompressionBudget(self.produce_decompressed_max_bytes),
                api_version=api_version,
            )
        except OSError as error:
            # Matches Kafka: KAFKA_STORAGE_ERROR for the partition, never a closed
            # connection; the log dir goes offline (a failed segment write is truncated
            # back, so nothing half-written stays in the log).
            raise self.storage_failed(partition, error) from error
        if result.duplicate:
            return result
        messages = result.last_offset - result.first_offset + 1
        self.messages_in_total += messages
        self.bytes_in_total += len(records)
        counters = self.topic_counters_for(topic)
        counters.messages_in += messages
        counters.bytes_in += len(records)
        key = (topic, index)
        # Followers long-polling for data; consumers wait for the high watermark (at
        # RF=1 it moves just below).
        self.append_waiters.notify_appended(key)
        self._after_high_watermark_inputs_changed(partition)
        return result

    def append_txn_marker(
        self,
        topic: str,
        index: int,
        *,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        commit: bool,
    ) -> AppendResult:
        """Append a transaction marker as leader (WriteTxnMarkers; Kafka's append with
        origin COORDINATOR). For acks=all, follow with ``wait_for_replication``.
        ``PartitionError``: UNKNOWN_TOPIC_OR_PARTITION when no replica is here,
        NOT_LEADER_OR_FOLLOWER when this broker does not lead it, INVALID_PRODUCER_EPOCH
        or TRANSACTION_COORDINATOR_FENCED for a stale marker, NOT_ENOUGH_REPLICAS under
        ``min.insync.replicas``, KAFKA_STORAGE_ERROR."""
        partition = self.partitions.get((topic, index))
        if partition is None:
            self._raise_if_offline(topic, index)
            # Kafka: no local replica (getMagic is empty) is UNKNOWN_TOPIC_OR_PARTITION.
            raise PartitionError(ErrorCode.unknown_topic_or_partition)
        if not partition.is_leader(self.broker_id):
            raise PartitionError(ErrorCode.not_leader_or_follower)
        try:
            result = partition.append_txn_marker(
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                coordinator_epoch=coordinator_epoch,
                commit=commit,
            )
        except OSError as error:
            raise self.storage_failed(partition, error) from error
        self.append_waiters.notify_appended((topic, index))
        self._after_high_watermark_inputs_changed(partition)
        return result

    def topic_counters_for(self, topic: str) -> TopicCounters:
        counters = self.topic_counters.get(topic)
        if counters is None:
            counters = self.topic_counters[topic] = TopicCounters()
        return counters

    def is_replicated(self, topic: str, index: int, last_offset: int) -> bool:
        partition = self.partitions.get((topic, index))
        return partition is not None and partition.log.high_watermark > last_offset

    async def wait_for_replication(
        self, topic: str, index: int, result: AppendResult, timeout_s: float
    ) -> ErrorCode:
        """acks=all: wait until the high watermark passes the append (Kafka's
        DelayedProduce). NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR fell below
        min.insync.replicas meanwhile, REQUEST_TIMED_OUT when the time ran out,
        NOT_LEADER_OR_FOLLOWER when leadership moved."""
        (outcome,) = await self.wait_for_replications([(topic, index, result)], timeout_s)
        return outcome

    def wait_for_replications(
        self, appends: list[tuple[str, int, AppendResult]], timeout_s: float
    ) -> Deferred:
        """``wait_for_replication`` for every append of one request, in one waiter: a
        ``DelayedProduce`` answered (one ``ErrorCode`` per append, in order) in the call
        that gives the last append its outcome, usually the follower fetch that moves the
        high watermark. Each partition's leader epoch is taken now, so a leadership that
        moved away and back while waiting still fails the append."""
        partitions = self.partitions
        delayed = DelayedProduce(
            self.produce_purgatory,
            self.replication_outcome,
            [
                (
                    (topic, index),
                    partitions[(topic, index)].leader_epoch if (topic, index) in partitions else -1,
                    result.last_offset,
                )
                for topic, index, result in appends
            ],
            timeout_s,
        )
        return delayed.answer

    def replication_outcome(
        self, key: TopicPartition, epoch: int, last_offset: int
    ) -> ErrorCode | None:
        """An acks=all append's answer, or None while the high watermark is short of it."""
        partition = self.partitions.get(key)
        if partition is None and self.logs.is_offline(key):
            return ErrorCode.kafka_storage_error
        if partition is None or not partition.is_leader(self.broker_id):
            return ErrorCode.not_leader_or_follower
        if partition.leader_epoch != epoch:
            return ErrorCode.not_leader_or_follower
        if partition.log.high_watermark > last_offset:
            if len(partition.isr) < partition.log.config.min_insync_replicas:
                return ErrorCode.not_enough_replicas_after_append
            return ErrorCode.none
        return None

    # follower side -----------------------------------------------------------------
    def append_as_follower(
        self, partition: Partition, buffer: bytearray, headers: list[BatchHeader]
    ) -> None:
        """Append copied batches. On a disk error the partition goes offline here (and
        stops being fetched); the fetcher carries on with the others."""
        try:
            partition.log.append_as_follower(buffer, headers)
        except OSError as error:
            self.storage_failed(partition, error)
            return
        # Consumers fetching from this follower (KIP-392) too: the leader's high
        # watermark that came with these records is applied in the same callback.
        self.append_waiters.notify((partition.topic, partition.index))

    def follower_high_watermark_moved(self, partition: Partition) -> None:
        """The leader's high watermark, copied by this follower, moved: consumers fetching
        from this replica (KIP-392) may read further. An answer with no records but a
        higher high watermark (the followers' fetch after the one that copied the
        records) woke nobody, and such a consumer waited its whole ``fetch.max.wait.ms``
        for records the follower had and could serve."""
        self.append_waiters.notify_committed((partition.topic, partition.index))

    async def stop(self) -> None:
        await self.fetchers.stop()


class _Resume:
    """The partition (by position in the topic's partitions) a capped ``reconcile``
    stopped at. Those before it were applied, so the next call skips them while the
    topic is the same one (not re-created), its partitions unchanged (``generation``)
    and its log config the same; otherwise it starts over. Without this, each call of a
    topic of 2,000 partitions applied every partition created so far again (40-50 us
    each: 75-100 ms of loop time per call near the end), and calls of 4 changes took
    13 s of loop time to create the topic (2.5-3.7 s with this; a call after a change,
    such as the controller's state for one of its partitions, still walks them all)."""

    __slots__ = ("config", "generation", "position", "topic")

    def __init__(self, topic: TopicInfo, generation: int, config: LogConfig, position: int):
        self.topic = topic
        self.generation = generation
        self.config = config
        self.position = position

    def holds(self, topic: TopicInfo, config: LogConfig) -> bool:
        return topic is self.topic and topic.generation == self.generation and config == self.config


def _news_for(partition: Partition, info: PartitionInfo) -> bool:
    """Whether the metadata holds a newer leadership state than the partition applied."""
    return info.state is not None and (
        info.state_version > partition.state_version
        or info.leader != partition.leader
        or info.leader_epoch != partition.leader_epoch
    )
