"""The controller: one broker that decides partition leadership and topic lifecycle.

Election follows Kafka's ZooKeeper mode: the first broker to create the ephemeral
``/controller`` znode wins and increments ``/controller_epoch``; every decision it
writes carries that epoch and is a conditional (versioned) update, so a deposed
controller cannot overwrite a newer one's state.

What it handles now:
- new topics and new partitions: initial leader = first live replica in assignment
  order, ISR = the live replicas (Kafka's ``initializeLeaderAndIsrForPartitions``);
- broker loss and return: a partition whose leader is gone gets a new leader from
  the live ISR, in assignment order; with none, it stays offline (leader -1) unless
  ``unclean.leader.election.enable`` lets a live out-of-sync replica lead;
- topic deletion requests under ``/admin/delete_topics``;
- failed log dirs (``/log_dir_event_notification``): the replicas a broker reports
  offline count as dead for their partitions only (Kafka's ``onReplicasBecomeOffline``):
  they leave the ISR, and a partition they led gets a new leader from the rest of the ISR.
  The record lasts until that broker's registration changes (a restart).

A broker acts as controller only while its own ``/brokers/ids/<id>`` exists and belongs
to its current ZooKeeper session (checked before every event, and before standing for
election). After a session loss the broker registers again first and only then stands
for election, as Kafka's ``processRegisterBrokerAndReelect`` does; until then it resigns
or holds back: a controller missing from ``/brokers/ids`` would count itself dead and
move every partition it hosts away from itself.

All ZooKeeper work runs on one thread fed by a queue, so events are handled one at a
time in order, as Kafka's controller event thread does. Brokers learn the outcome by
watching the partition state znodes (``metadata_cache``).
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    ConnectionLoss,
    KazooException,
    NodeExistsError,
    NoNodeError,
    OperationTimeoutError,
)
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from . import election, reassignment, zk_paths
from .admin import BadVersion, ZkAdmin
from .models import (
    LOG_DIR_FAILURE_EVENT,
    ControllerRegistration,
    LogDirEventNotification,
    PartitionReassignment,
    PartitionState,
    PreferredReplicaElection,
    TopicAssignment,
    ZkDataError,
)
from .watches import AsyncDataWatch

log = logging.getLogger(__name__)

TICK_S = 0.5
# Topics deleted per controller event: other events (new topics, broker changes) wait
# at most one batch.
DELETE_BATCH = 200
# Partition state updates per ZooKeeper transaction (elections, ISR changes).
STATE_WRITE_BATCH = 100
# Tries of a leader epoch bump that loses to a leader's ISR change (re-read each time).
EPOCH_BUMP_TRIES = 5


KnownPartitionState = Callable[[str, str | None, int], tuple[PartitionState, int] | None]


def _set_or_drop(mapping: dict[int, tuple[int, ...]], index: int, value: tuple[int, ...]) -> None:
    if value:
        mapping[index] = value
    else:
        mapping.pop(index, None)


class Controller:
    def __init__(
        self,
        client: KazooClient,
        broker_id: int,
        *,
        delete_topic_enable: bool = True,
        unclean_leader_election_for: Callable[[str], bool] = lambda topic: False,
        auto_leader_rebalance_enable: bool = True,
        leader_imbalance_per_broker_percentage: int = 10,
        leader_imbalance_check_interval_s: float = 300.0,
        known_partition_state: KnownPartitionState | None = None,
    ) -> None:
        self.client = client
        self.admin = ZkAdmin(client)
        self.broker_id = broker_id
        self.delete_topic_enable = delete_topic_enable
        self.unclean_leader_election_for = unclean_leader_election_for
        self.epoch: int | None = None
        self._events: queue.Queue[tuple[str, Any]] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="controller", daemon=True)
        self._watched_topics: set[str] = set()
        self._watches_set = False
        # The epoch whose controller start-up (watches, reconcile, resumed work) finished:
        # an ``elect`` that finds this broker already controller at that epoch has
        # nothing to do, one interrupted half-way through starts it again.
        self._started_epoch: int | None = None
        self._live_brokers: set[int] = set()
        # Each live broker's epoch: the czxid of its registration, as Kafka's controller
        # keeps it, so that a broker that restarted between two reads of /brokers/ids
        # (same id, new registration) is told apart from one that stayed up.
        self._broker_epochs: dict[int, int] = {}
        # Replicas on failed log dirs: broker -> (its registration's czxid, partitions).
        self._offline_replicas: dict[int, tuple[int, set[tuple[str, int]]]] = {}
        self._stopped = False
        self.elections_total = 0
        self.auto_leader_rebalance_enable = auto_leader_rebalance_enable
        self.leader_imbalance_per_broker_percentage = leader_imbalance_per_broker_percentage
        self.leader_imbalance_check_interval_s = leader_imbalance_check_interval_s
        # Reassignments in flight: (topic, partition) -> target replicas.
        self.reassignments: dict[tuple[str, int], tuple[int, ...]] = {}
        # Reassignments resumed at failover whose leader epoch is not bumped yet: a new
        # controller fences each one before it advances it (``_fence_resumed``).
        self._unfenced: set[tuple[str, int]] = set()
        self._timer: threading.Timer | None = None
        self._last_balance_check = time.monotonic()
        self._deletion_queued = False
        # The partition states this broker already knows from its watches (its metadata
        # cache): (topic, topic id, partition) -> (state, znode version), or None. A
        # failover decides from them instead of reading thousands of znodes; every write
        # is conditional on that version, so a state that moved on since is refused and
        # its topic re-read from ZooKeeper (``_reread_states``).
        self.known_partition_state = known_partition_state
        self._reread_states: set[str] = set()
        # States this controller read or wrote (Kafka's controller context): (topic,
        # partition) -> (topic id, state, znode version). With the metadata cache's, the
        # newer of the two is what a decision starts from.
        self._seen: dict[tuple[str, int], tuple[str | None, PartitionState, int]] = {}

    @property
    def active(self) -> bool:
        return self.epoch is not None

    def start(self) -> None:
        self._thread.start()
        DataWatch(self.client, zk_paths.CONTROLLER, self._on_controller_node)

    def stop(self) -> None:
        self._stopped = True
        if self._timer is not None:
            self._timer.cancel()
        self._events.put(("stop", None))
        self._thread.join(timeout=5)
        if self.active:
            # Resign so another broker can take over at once, not after our session ends.
            try:
                self.admin.resign_controller(self.broker_id)
            except Exception:  # the session may already be gone at shutdown
                log.debug("could not resign as controller", exc_info=True)
            self.epoch = None

    # watch callbacks (kazoo thread): only enqueue -----------------------------------
    def _on_controller_node(self, data: bytes | None, _stat: Any) -> bool:
        if self._stopped:
            return False
        if data is None:
            self._events.put(("elect", None))
        else:
            try:
                holder = ControllerRegistration.from_json(data).broker_id
            except (ValueError, ZkDataError):
                holder = -1
            if holder != self.broker_id:
                self._events.put(("resign", None))
        return True

    def _enqueue(self, kind: str) -> Callable[..., bool]:
        def callback(*args: Any) -> bool:
            if self._stopped:
                return False
            self._events.put((kind, args[0] if args else None))
            return True

        return callback

    # event thread ---------------------------------------------------------------------
    def _run(self) -> None:
        following: tuple[str, Any] | None = None
        while True:
            kind, payload = following or self._events.get()
            following = None
            if kind == "stop":
                return
            if kind == "topic":
                # Consecutive topic events (thousands when topics are created in bulk)
                # are reconciled together: a few pipelined round trips for all of them,
                # not a few per topic.
                topics = {payload}
                while True:
                    try:
                        following = self._events.get_nowait()
                    except queue.Empty:
                        break
                    if following[0] != "topic":
                        break
                    topics.add(following[1])
                    following = None
                payload = topics
            try:
                self._handle(kind, payload)
            except (ConnectionLoss, OperationTimeoutError) as error:
                self._retry_when_connected(kind, payload, error)
            except Exception:
                log.exception("controller event %s failed", kind)

    def _retry_when_connected(self, kind: str, payload: Any, error: Exception) -> None:
        """Handle an event again once ZooKeeper answers: dropped, a lost connection in the
        middle of a broker change or an election would leave its partitions undecided
        until some later event (Kafka's controller client blocks until reconnected)."""
        log.warning("controller event %s interrupted (%r); retrying once reconnected", kind, error)
        while not self._stopped and not self.client.connected:
            time.sleep(0.1)
        if self._stopped:
            return
        time.sleep(0.1)  # a connection just back may drop again at once: do not spin
        if kind == "topic":  # a batch of topics: queue them one by one again
            for topic in payload:
                self._events.put(("topic", topic))
        else:
            self._events.put((kind, payload))

    def registration_restored(self) -> None:
        """The broker registered again (after a session loss): stand for election."""
        if not self._stopped:
            self._events.put(("elect", None))

    def _registered(self) -> bool:
        """Whether ``/brokers/ids/<id>`` exists and is this client's current session's.

        ``/controller`` is created in the same session, so while this holds the two
        ephemeral nodes live and die together.
        """
        return self._registration_check()()

    def _registration_check(self) -> Callable[[], bool]:
        """``_registered`` in two halves: the read is sent now, the answer awaited when
        the returned function is called, so a topic event's reads go out alongside it
        (one round trip fewer per event: bulk topic creation spent a fifth of the
        controller's time waiting on this check alone)."""
        session = self.client.client_id
        pending = self.client.exists_async(zk_paths.broker_path(self.broker_id))

        def registered() -> bool:
            stat = pending.get()
            return stat is not None and session is not None and stat.ephemeralOwner == session[0]

        return registered

    def _resign(self, reason: str) -> None:
        log.warning("broker %d resigns as controller: %s", self.broker_id, reason)
        self.epoch = None
        try:
            self.admin.resign_controller(self.broker_id)
        except Exception:  # the session may be gone; then /controller went with it
            log.debug("could not delete /controller", exc_info=True)

    def _handle(self, kind: str, payload: Any) -> None:
        if kind == "delete_topics":
            self._deletion_queued = False  # a request arriving from now on queues again
        if kind == "elect":
            self._elect()
        elif kind == "resign":
            if self.active:
                log.info("broker %d is no longer the controller", self.broker_id)
            self.epoch = None
        elif not self.active:
            return
        elif kind == "topic":
            # Checked before the first write, its read sent with the topics' reads.
            registration = self._registration_check()
            if self._catch_up_on_brokers(registration):
                self._reconcile_topics(sorted(payload), registration=registration)
        elif not self._registered():
            self._resign(f"its registration {zk_paths.broker_path(self.broker_id)} is missing")
            return
        elif kind == "brokers":
            self._on_broker_change(payload)
        elif kind == "log_dir_events":
            self._catch_up_on_brokers()
            self._handle_log_dir_events(payload)
        elif kind == "topics":
            new = [topic for topic in payload if topic not in self._watched_topics]
            self._watched_topics.update(new)
            for topic in new:
                AsyncDataWatch(self.client, zk_paths.topic_path(topic), self._topic_changed(topic))
        elif kind == "delete_topics":
            self._delete_requested_topics()
        elif kind == "reassign_request":
            self._catch_up_on_brokers()
            self._start_requested_reassignments()
        elif kind == "preferred_election":
            self._catch_up_on_brokers()
            self._run_requested_preferred_election()
        elif kind == "tick":
            self._tick()

    def _on_delete_requests(self, _children: list[str]) -> bool:
        """Every deleted request node fires this watch; one queued event reads them all
        (handling each firing's full list was quadratic in the topics being deleted)."""
        if self._stopped:
            return False
        if not self._deletion_queued:
            self._deletion_queued = True
            self._events.put(("delete_topics", None))
        return True

    def _topic_changed(self, topic: str) -> Callable[[bytes | None, Any], bool]:
        def callback(data: bytes | None, _stat: Any) -> bool:
            if self._stopped:
                return False
            if data is None:
                self._watched_topics.discard(topic)
                return False
            self._events.put(("topic", topic))
            return True

        return callback

    def _elect(self) -> None:
        if not self._registered():
            if self.active:
                self._resign(f"its registration {zk_paths.broker_path(self.broker_id)} is missing")
            log.info(
                "broker %d does not stand for controller until it is registered again",
                self.broker_id,
            )
            return
        epoch = self.admin.try_become_controller(self.broker_id)
        if epoch is None or epoch == self._started_epoch:
            return
        self.epoch = epoch
        log.info("broker %d is the controller (epoch %d)", self.broker_id, epoch)
        topics, self._broker_epochs = self._read_topics_then_brokers()
        self._live_brokers = set(self._broker_epochs)
        if not self._watches_set:
            self._watches_set = True
            ChildrenWatch(self.client, zk_paths.BROKER_IDS, self._enqueue("brokers"))
            ChildrenWatch(self.client, zk_paths.BROKER_TOPICS, self._enqueue("topics"))
            ChildrenWatch(self.client, zk_paths.ADMIN_DELETE_TOPICS, self._on_delete_requests)
            ChildrenWatch(
                self.client, zk_paths.LOG_DIR_EVENT_NOTIFICATION, self._enqueue("log_dir_events")
            )
            DataWatch(
                self.client,
                zk_paths.ADMIN_REASSIGN_PARTITIONS,
                self._on_admin_node("reassign_request"),
            )
            DataWatch(
                self.client,
                zk_paths.ADMIN_PREFERRED_REPLICA_ELECTION,
                self._on_admin_node("preferred_election"),
            )
        restarted = self._restarted_in_sync_replicas(topics)
        if restarted:
            # As ``_on_broker_change`` handles a bounce: failed, then back.
            log.info(
                "brokers %s registered after states naming them leader or in sync were "
                "written (restarted while no controller watched): handled as failed, then back",
                sorted(restarted),
            )
            self._live_brokers = set(self._broker_epochs) - restarted
            self._reconcile_topics(topics)
            self._live_brokers = set(self._broker_epochs)
        self._reconcile_topics(topics)
        self._load_reassignments_in_flight()
        self._on_delete_requests([])  # deletions a former controller left unfinished
        self._schedule_tick()
        self._started_epoch = epoch

    def _restarted_in_sync_replicas(self, topics: list[str]) -> set[int]:
        """Registered brokers that a partition state names leader or in sync although it
        was written before their registration (its mzxid below their czxid): they
        restarted since, and no controller handled it (this one was not running; the
        previous one may have been that broker). Such a broker's log may be shorter than
        its previous run's (a power loss, an emptied disk): it does not take up that
        leadership (``ReplicaManager._elected_since_registration``), and it is in sync
        again only once a leader sees it caught up. Every member of an ISR was registered
        when that ISR was written, so a czxid above the mzxid means a restart. Reads
        every partition state, pipelined: once per election of a controller."""
        assignment_reads = [
            (topic, self.client.get_async(zk_paths.topic_path(topic))) for topic in topics
        ]
        state_reads = []
        for topic, pending in assignment_reads:
            try:
                data, _ = pending.get()
                assignment = TopicAssignment.from_json(data)
            except (NoNodeError, ValueError, ZkDataError):
                continue  # gone, or unreadable (``_reconcile_topics`` says so)
            state_reads.extend(
                self.client.get_async(zk_paths.partition_state_path(topic, index))
                for index in assignment.partitions
            )
        restarted = set()
        epochs = self._broker_epochs
        for pending in state_reads:
            try:
                data, stat = pending.get()
                state = PartitionState.from_json(data)
            except (NoNodeError, ValueError, ZkDataError):
                continue
            restarted.update(
                broker
                for broker in (state.leader, *state.isr)
                if broker in epochs and epochs[broker] > stat.mzxid
            )
        return restarted

    # failed log dirs ----------------------------------------------------------------------
    def _handle_log_dir_events(self, children: list[str]) -> None:
        """Read and delete each notification, then re-decide the partitions it names."""
        topics: set[str] = set()
        for child in sorted(children):
            path = f"{zk_paths.LOG_DIR_EVENT_NOTIFICATION}/{child}"
            try:
                data, _ = self.client.get(path)
                event: LogDirEventNotification | None = LogDirEventNotification.from_json(data)
            except NoNodeError:
                continue
            except (ValueError, ZkDataError) as error:
                log.error("ignoring unreadable %s: %s", path, error)
                event = None
            if event is not None and event.event == LOG_DIR_FAILURE_EVENT and event.partitions:
                stat = self.client.exists(zk_paths.broker_path(event.broker))
                czxid = stat.czxid if stat is not None else -1
                known_czxid, offline = self._offline_replicas.get(event.broker, (czxid, set()))
                if known_czxid != czxid:
                    offline = set()
                offline.update(event.partitions)
                self._offline_replicas[event.broker] = (czxid, offline)
                topics.update(topic for topic, _ in event.partitions)
                log.warning(
                    "broker %d reports a failed log dir; offline replicas: %s",
                    event.broker,
                    ", ".join(f"{t}-{p}" for t, p in event.partitions),
                )
            with contextlib.suppress(NoNodeError):
                self.client.delete(path)
        if topics:
            self._reconcile_topics(sorted(topics))

    # broker changes -----------------------------------------------------------------------
    def _read_broker_epochs(self, children: list[str]) -> dict[int, int]:
        """Registered broker id -> its registration's czxid (pipelined reads)."""
        reads = [
            (int(child), self.client.exists_async(zk_paths.broker_path(int(child))))
            for child in children
        ]
        epochs = {}
        for broker, pending in reads:
            stat = pending.get()
            if stat is not None:  # gone again since the listing
                epochs[broker] = stat.czxid
        return epochs

    def _read_topics_then_brokers(self) -> tuple[list[str], dict[int, int]]:
        """Every topic, then the registered brokers (``_read_broker_epochs``), read in
        that order: a broker that registered before one of these topics was created is
        among the brokers, so a new partition's first leader is the first replica live
        when its topic came (Kafka's new-partition election). The other way round, a
        broker registered between the two reads, followed by a topic naming it first,
        was counted dead for that topic: the next replica led it, for good with
        ``auto.leader.rebalance.enable=false``. A topic created after the first read is
        decided by its own event, queued behind the broker change of any registration
        before it (ZooKeeper notifies in order, and the watches enqueue in order)."""
        topics = self.client.get_children(zk_paths.BROKER_TOPICS)
        return topics, self._read_broker_epochs(self.client.get_children(zk_paths.BROKER_IDS))

    def _on_broker_change(self, _children: list[str]) -> None:
        """Re-decide every partition for the brokers now registered.

        Read now, with the topics (``_read_topics_then_brokers``), not the watch's list:
        the event may wait behind others (seconds on a busy controller) while brokers
        register and topics are created, and those topics are decided here.

        A broker that restarts within its old session's lifetime re-registers the moment
        ZooKeeper expires that session, often before this watch has re-read the children:
        the id never seems to leave. Like Kafka's controller (``bouncedBrokerIds``), a
        registration with a new czxid is handled as a failure then a startup: the restarted
        process lost its in-memory replication state, so it leaves every ISR and gives up
        leadership, then rejoins as a follower that must catch up.
        """
        topics, epochs = self._read_topics_then_brokers()
        bounced = {
            broker
            for broker, czxid in epochs.items()
            if broker in self._live_brokers and self._broker_epochs.get(broker, czxid) != czxid
        }
        if bounced:
            log.info("brokers %s restarted (new registrations)", sorted(bounced))
            self._live_brokers = set(epochs) - bounced
            self._reconcile_topics(topics)
        self._live_brokers = set(epochs)
        self._broker_epochs = epochs
        self._forget_restarted_offline_replicas()
        self._reconcile_topics(topics)

    def _catch_up_on_brokers(self, registration: Callable[[], bool] | None = None) -> bool:
        """Handle a change of the registered brokers first, if one happened since the
        last broker event handled: its event may be queued behind this one, and a state
        written meanwhile with a restarted broker counted as its previous run (leader,
        or in sync, at the old epoch: an ISR shrink, a preferred or reassignment
        election) was written after the new registration, so that broker would take up
        the leadership with a log that may be shorter than its previous run's
        (``ReplicaManager._elected_since_registration``). Two pipelined reads when
        nothing changed. ``registration``: this broker's registration check, when the
        caller has not made it; False if it failed (this broker resigned)."""
        epochs = self._read_broker_epochs(self.client.get_children(zk_paths.BROKER_IDS))
        if epochs == self._broker_epochs:
            return True
        if registration is not None and not registration():
            self._resign(f"its registration {zk_paths.broker_path(self.broker_id)} is missing")
            return False
        self._on_broker_change(list(map(str, epochs)))
        return True

    def _forget_restarted_offline_replicas(self) -> None:
        """A broker that left or registered anew (a restart) recovered its log dirs."""
        for broker, (czxid, _) in list(self._offline_replicas.items()):
            stat = self.client.exists(zk_paths.broker_path(broker))
            if stat is None or stat.czxid != czxid:
                del self._offline_replicas[broker]

    def _online(self, replica: int, topic: str, index: int) -> bool:
        """Live and, for this partition, not on a failed log dir."""
        if replica not in self._live_brokers:
            return False
        offline = self._offline_replicas.get(replica)
        return offline is None or (topic, index) not in offline[1]

    # decisions ------------------------------------------------------------------------
    def _reconcile_topics(
        self, topics: list[str], *, registration: Callable[[], bool] | None = None
    ) -> None:
        """Bring every partition of ``topics`` in line with the live brokers.

        Reads and writes are pipelined (kazoo's async calls), so thousands of partitions
        cost a few round trips, not thousands: failover time depends on it.
        ``registration``: this broker's registration check (``_registration_check``),
        answered before anything is written; without it the caller checked already.
        """
        if not self.active:
            return
        started = time.monotonic()
        assignment_reads = [
            (topic, self.client.get_async(zk_paths.topic_path(topic))) for topic in topics
        ]
        partitions: list[tuple[str, int, tuple[int, ...]]] = []
        known: dict[tuple[str, int], tuple[PartitionState, int]] = {}
        topic_ids: dict[str, str | None] = {}
        for topic, pending in assignment_reads:
            try:
                data, _ = pending.get()
                assignment = TopicAssignment.from_json(data)
            except NoNodeError:
                for key in [key for key in self._seen if key[0] == topic]:
                    del self._seen[key]  # deleted
                continue
            except (ValueError, ZkDataError) as error:
                log.error("controller skips unreadable topic %s: %s", topic, error)
                continue
            partitions.extend((topic, i, tuple(r)) for i, r in assignment.partitions.items())
            topic_ids[topic] = assignment.topic_id
            if self.known_partition_state is not None and topic not in self._reread_states:
                for index in assignment.partitions:
                    state = self._known_state(topic, assignment.topic_id, index)
                    if state is not None:
                        known[(topic, index)] = state
        self._reread_states.difference_update(topics)
        # A topic without a ``partitions`` node (just created) has no partition state to
        # read: one exists per topic instead of a read per partition.
        parent_checks = [
            (topic, self.client.exists_async(zk_paths.topic_partitions_path(topic)))
            for topic in {topic for topic, index, _ in partitions if (topic, index) not in known}
        ]
        fresh_topics = {topic for topic, pending in parent_checks if pending.get() is None}
        state_reads = [
            (
                topic,
                index,
                replicas,
                None
                if topic in fresh_topics or (topic, index) in known
                else self.client.get_async(zk_paths.partition_state_path(topic, index)),
            )
            for topic, index, replicas in partitions
        ]
        decisions = []
        for topic, index, replicas, pending in state_reads:
            current: tuple[PartitionState, int] | None = known.get((topic, index))
            try:
                if current is not None:
                    pass
                elif pending is None:
                    raise NoNodeError
                else:
                    data, stat = pending.get()
                    current = (PartitionState.from_json(data), stat.version)
                    self._seen[(topic, index)] = (topic_ids.get(topic), *current)
            except NoNodeError:
                current = None
            except (ValueError, ZkDataError) as error:
                log.error("controller skips unreadable state of %s-%d: %s", topic, index, error)
                continue
            decision = self._decide(topic, index, replicas, current)
            if decision is not None:
                decisions.append((topic, index, decision))
        decided = time.monotonic()
        if registration is not None and not registration():
            self._resign(f"its registration {zk_paths.broker_path(self.broker_id)} is missing")
            return
        created = self._create_new_partitions_in_transactions(
            [
                (topic, index, state)
                for topic, index, (state, version, _) in decisions
                if version is None
            ],
            topic_ids,
        )
        self.elections_total += len(created)
        decisions = [d for d in decisions if (d[0], d[1]) not in created]
        self._create_partition_parents(
            [(topic, index) for topic, index, (_, version, _) in decisions if version is None]
        )
        # Elections first: a partition without a live leader is unavailable until its
        # write lands, while an ISR shrink of a led partition only waits for it (Kafka
        # elects the offline partitions before removing the dead replicas from ISRs).
        decisions.sort(key=lambda decision: not decision[2][2])
        if not decisions:
            return
        written = self._write_states(decisions, topic_ids)
        log.info(
            "reconciled %d partitions of %d topics (%d states known, %d read): %d state "
            "changes (%d elections) in %.3f s (reads %.3f s, writes %.3f s)",
            len(partitions),
            len(topics),
            len(known),
            sum(1 for *_, pending in state_reads if pending is not None),
            len(decisions),
            written,
            time.monotonic() - started,
            decided - started,
            time.monotonic() - decided,
        )

    def _known_state(
        self, topic: str, topic_id: str | None, index: int
    ) -> tuple[PartitionState, int] | None:
        """The newest state known without reading ZooKeeper: the metadata cache's, or
        the one this controller read or wrote last if the cache has not seen it (its
        watches deliver thousands of changes after a failover, and lag on a busy
        broker; deciding again from older states would repeat writes, each refused)."""
        assert self.known_partition_state is not None
        cached = self.known_partition_state(topic, topic_id, index)
        seen = self._seen.get((topic, index))
        if seen is None or seen[0] != topic_id or not topic_id:
            return cached
        if cached is not None and cached[1] >= seen[2]:
            return cached
        return seen[1], seen[2]

    def _write_states(
        self,
        decisions: list[tuple[str, int, tuple[PartitionState, int | None, bool]]],
        topic_ids: dict[str, str | None],
    ) -> int:
        """Write the decided states, in order; returns the elections written.

        Updates go in ZooKeeper transactions of ``STATE_WRITE_BATCH`` conditional
        set_data operations (a multi): one request instead of one per partition, which
        is what a failover of thousands of partitions waited on (kazoo sends one request
        per turn of its I/O loop). A transaction is all or nothing: if any of its
        partitions changed meanwhile, none is written, and that batch goes again one
        partition at a time, each conditional on its own version as before. A stale
        write is refused either way, so a decision never lands on a state it did not see.
        """
        elections = 0
        retry: set[str] = set()

        def remember(topic: str, index: int, data: bytes, version: int) -> None:
            self._seen[(topic, index)] = (
                topic_ids.get(topic),
                PartitionState.from_json(data),
                version,
            )

        def settle(topic: str, index: int, is_election: bool, request: Any) -> None:
            nonlocal elections
            try:
                result = request.get()
                if is_election:
                    elections += 1
                # A set gives the node's new ZnodeStat, a create its path (version 0).
                version = result.version if hasattr(result, "version") else 0
                remember(topic, index, states[(topic, index)], version)
            except (BadVersionError, NodeExistsError):
                log.info("state of %s-%d changed meanwhile; re-reading", topic, index)
                retry.add(topic)
            except NoNodeError:
                log.info("%s-%d is gone (topic deleted meanwhile)", topic, index)

        batches: list[tuple[list[tuple[str, int, bytes, int, bool]], Any]] = []
        singles = []
        batch: list[tuple[str, int, bytes, int, bool]] = []

        def send_batch() -> None:
            transaction = self.client.transaction()
            for topic, index, data, version, _ in batch:
                transaction.set_data(zk_paths.partition_state_path(topic, index), data, version)
            batches.append((list(batch), transaction.commit_async()))
            batch.clear()

        states = {(topic, index): state.to_json() for topic, index, (state, _, _) in decisions}
        for topic, index, (state, version, is_election) in decisions:
            path = zk_paths.partition_state_path(topic, index)
            if version is None:
                singles.append(
                    (topic, index, is_election, self.client.create_async(path, state.to_json()))
                )
                continue
            batch.append((topic, index, states[(topic, index)], version, is_election))
            if len(batch) >= STATE_WRITE_BATCH:
                send_batch()
        if batch:
            send_batch()
        for topic, index, is_election, request in singles:
            settle(topic, index, is_election, request)
        for members, pending in batches:
            try:
                results = pending.get()
                failed = any(isinstance(result, Exception) for result in results)
            except KazooException as error:
                log.info("a batch of %d state writes failed: %s", len(members), error)
                failed = True
            if not failed:
                elections += sum(1 for *_, is_election in members if is_election)
                for (topic, index, data, _, _), stat in zip(members, results, strict=True):
                    remember(topic, index, data, stat.version)
                continue
            # Rolled back: one conditional write per partition shows which changed.
            requests = [
                (
                    topic,
                    index,
                    is_election,
                    self.client.set_async(
                        zk_paths.partition_state_path(topic, index), data, version=version
                    ),
                )
                for topic, index, data, version, is_election in members
            ]
            for request in requests:
                settle(*request)
        self.elections_total += elections
        self._reread_states.update(retry)  # the known state was stale: ask ZooKeeper
        for topic in retry:
            self._events.put(("topic", topic))
        return elections

    def _create_new_partitions_in_transactions(
        self, new: list[tuple[str, int, PartitionState]], topic_ids: dict[str, str | None]
    ) -> set[tuple[str, int]]:
        """For topics whose partitions are all new (a created topic), write every node
        (``partitions``, each ``partitions/<p>`` and its ``state``) in one ZooKeeper
        transaction per topic: one request instead of two or three per partition, which
        is what bounded creating thousands of partitions (kazoo sends one request per
        turn of its I/O loop). A transaction that fails (a node already there: partitions
        added to an existing topic, a retry) changes nothing; those partitions take the
        per-node path. Returns the partitions created."""
        by_topic: dict[str, list[tuple[int, PartitionState]]] = {}
        for topic, index, state in new:
            by_topic.setdefault(topic, []).append((index, state))
        commits = []
        for topic, partitions in by_topic.items():
            if sorted(index for index, _ in partitions) != list(range(len(partitions))):
                continue  # not a whole new topic: some partitions exist already
            transaction = self.client.transaction()
            transaction.create(zk_paths.topic_partitions_path(topic), b"")
            for index, state in partitions:
                transaction.create(zk_paths.partition_path(topic, index), b"")
                transaction.create(zk_paths.partition_state_path(topic, index), state.to_json())
            commits.append((topic, partitions, transaction.commit_async()))
        created: set[tuple[str, int]] = set()
        for topic, partitions, pending in commits:
            try:
                results = pending.get()
            except KazooException as error:
                log.info(
                    "creating the partitions of %s in one transaction failed: %s", topic, error
                )
                continue
            if any(isinstance(result, Exception) for result in results):
                continue  # rolled back: the per-node path creates what is missing
            created.update((topic, index) for index, _ in partitions)
            for index, state in partitions:
                self._seen[(topic, index)] = (topic_ids.get(topic), state, 0)
        return created

    def _create_partition_parents(self, partitions: list[tuple[str, int]]) -> None:
        """Create ``/brokers/topics/<t>/partitions/<p>`` for new partitions in two
        pipelined waves (kazoo's ``makepath`` walks each path on its own, several round
        trips per partition, one after the other)."""
        if not partitions:
            return
        topics = sorted({topic for topic, _ in partitions})
        for wave in (
            [zk_paths.topic_partitions_path(topic) for topic in topics],
            [zk_paths.partition_path(topic, index) for topic, index in partitions],
        ):
            pending = [self.client.create_async(path, b"") for path in wave]
            for request in pending:
                with contextlib.suppress(NodeExistsError, NoNodeError):
                    request.get()

    def _decide(
        self,
        topic: str,
        index: int,
        replicas: tuple[int, ...],
        current: tuple[PartitionState, int] | None,
    ) -> tuple[PartitionState, int | None, bool] | None:
        """The state a partition should move to: (state, expected version or None to
        create, whether it is a leader election), or None when nothing changes."""
        assert self.epoch is not None
        decision = election.next_partition_state(
            self.epoch,
            replicas,
            current[0] if current is not None else None,
            lambda replica: self._online(replica, topic, index),
            lambda: self.unclean_leader_election_for(topic),
        )
        if decision is None:
            return None
        if decision.unclean:
            log.warning(
                "unclean leader election for %s-%d: broker %d",
                topic,
                index,
                decision.state.leader,
            )
        version = current[1] if current is not None else None
        return decision.state, version, decision.election

    def _write_state(self, topic: str, index: int, state: PartitionState, version: int) -> bool:
        try:
            self.admin.set_partition_state(topic, index, state, version)
            return True
        except BadVersionError:
            log.info("partition state of %s-%d changed meanwhile; re-reading", topic, index)
            self._events.put(("topic", topic))
            return False

    def _on_admin_node(self, kind: str) -> Callable[[bytes | None, Any], bool]:
        def callback(data: bytes | None, _stat: Any) -> bool:
            if self._stopped:
                return False
            if data is not None:
                self._events.put((kind, None))
            return True

        return callback

    def _schedule_tick(self) -> None:
        """Re-check reassignments twice a second and leader balance now and then."""
        if self._stopped:
            return
        if self._timer is not None:  # one chain of ticks, however often it was elected
            self._timer.cancel()
        self._timer = threading.Timer(TICK_S, lambda: self._events.put(("tick", None)))
        self._timer.daemon = True
        self._timer.start()

    def _tick(self) -> None:
        try:
            now = time.monotonic()
            balance = (
                self.auto_leader_rebalance_enable
                and now - self._last_balance_check >= self.leader_imbalance_check_interval_s
            )
            if self.reassignments or balance:
                self._catch_up_on_brokers()
            if self.reassignments:
                self._advance_reassignments()
            if balance:
                self._last_balance_check = now
                self._rebalance_leaders()
        finally:
            self._schedule_tick()

    # preferred leaders --------------------------------------------------------------------
    def _run_requested_preferred_election(self) -> None:
        try:
            data, _ = self.client.get(zk_paths.ADMIN_PREFERRED_REPLICA_ELECTION)
            requested = PreferredReplicaElection.from_json(data).partitions
        except NoNodeError:
            return
        except (ValueError, ZkDataError) as error:
            log.error("ignoring unreadable preferred replica election request: %s", error)
            requested = ()
        for topic, index in requested:
            self.elect_preferred_leader(topic, index)
        with contextlib.suppress(NoNodeError):
            self.client.delete(zk_paths.ADMIN_PREFERRED_REPLICA_ELECTION)

    def elect_preferred_leader(self, topic: str, index: int) -> bool:
        """Move leadership to the first replica if it is live and in sync."""
        assert self.epoch is not None
        assignment = self.admin.get_topic(topic)
        current = self.admin.get_partition_state(topic, index)
        if assignment is None or current is None or index not in assignment.partitions:
            return False
        state, version = current
        replicas = tuple(assignment.partitions[index])
        preferred = reassignment.preferred_leader(replicas)
        if state.leader == preferred:
            return False
        if not reassignment.can_elect_preferred(replicas, state.isr, self._live_brokers):
            log.info(
                "preferred leader %d of %s-%d is not live and in sync", preferred, topic, index
            )
            return False
        new_state = PartitionState(self.epoch, preferred, state.leader_epoch + 1, state.isr)
        if self._write_state(topic, index, new_state, version):
            self.elections_total += 1
            return True
        return False

    def _rebalance_leaders(self) -> None:
        """``auto.leader.rebalance.enable``: give brokers back the partitions they are
        preferred leader of, when more than ``leader.imbalance.per.broker.percentage``
        of them are led elsewhere."""
        assignments: dict[tuple[str, int], tuple[tuple[int, ...], int]] = {}
        for topic in self.client.get_children(zk_paths.BROKER_TOPICS):
            assignment = self.admin.get_topic(topic)
            if assignment is None:
                continue
            for index, replicas in assignment.partitions.items():
                current = self.admin.get_partition_state(topic, index)
                if current is not None:
                    assignments[(topic, index)] = (tuple(replicas), current[0].leader)
        brokers = reassignment.imbalanced_brokers(
            assignments, self.leader_imbalance_per_broker_percentage
        )
        for (topic, index), (replicas, leader) in assignments.items():
            preferred = reassignment.preferred_leader(replicas)
            if (
                preferred in brokers
                and leader != preferred
                and (topic, index) not in (self.reassignments)
            ):
                self.elect_preferred_leader(topic, index)

    # reassignment -------------------------------------------------------------------------
    def _load_reassignments_in_flight(self) -> None:
        """After a controller change, the topic znodes say what is in flight (KIP-455).

        Each one is fenced again before it advances (``_fence_resumed``), as Kafka's new
        controller runs onPartitionReassignment for it: the old controller may have died
        between writing the replica set and bumping the epoch, and fetches of a replica
        it was removing must not count at the epoch they were made in."""
        self.reassignments.clear()
        self._unfenced.clear()
        # Pipelined reads: one after the other, 2,500 topics kept a new controller (and
        # every topic created meanwhile) waiting for seconds, minutes under load.
        reads = [
            (topic, self.client.get_async(zk_paths.topic_path(topic)))
            for topic in self.client.get_children(zk_paths.BROKER_TOPICS)
        ]
        for topic, pending in reads:
            try:
                assignment = TopicAssignment.from_json(pending.get()[0])
            except NoNodeError:
                continue
            except (ValueError, ZkDataError) as error:
                log.error("controller skips unreadable topic %s: %s", topic, error)
                continue
            for index, adding in assignment.adding_replicas.items():
                removing = assignment.removing_replicas.get(index, ())
                replicas = tuple(assignment.partitions.get(index, ()))
                target = tuple(r for r in replicas if r not in removing)
                if adding or removing:
                    self.reassignments[(topic, index)] = target
            for index, removing in assignment.removing_replicas.items():
                if (topic, index) not in self.reassignments and removing:
                    replicas = tuple(assignment.partitions.get(index, ()))
                    self.reassignments[(topic, index)] = tuple(
                        r for r in replicas if r not in removing
                    )
        if self.reassignments:
            log.info("resuming %d reassignments in flight", len(self.reassignments))
        self._unfenced.update(self.reassignments)
        self._start_requested_reassignments()

    def _start_requested_reassignments(self) -> None:
        try:
            data, _ = self.client.get(zk_paths.ADMIN_REASSIGN_PARTITIONS)
            requested = PartitionReassignment.from_json(data).partitions
        except NoNodeError:
            return
        except (ValueError, ZkDataError) as error:
            log.error("deleting unreadable /admin/reassign_partitions: %s", error)
            self.client.delete(zk_paths.ADMIN_REASSIGN_PARTITIONS)
            return
        for (topic, index), target in requested.items():
            if self.reassignments.get((topic, index)) == tuple(target):
                continue
            self._start_reassignment(topic, index, tuple(target))
        self._advance_reassignments()

    def _start_reassignment(self, topic: str, index: int, target: tuple[int, ...]) -> None:
        found = self.admin.get_topic_with_version(topic)
        if found is None or index not in found[0].partitions or not target:
            log.warning("dropping reassignment of unknown partition %s-%d", topic, index)
            self._forget_request(topic, index)
            return
        if len(set(target)) != len(target):
            log.warning(
                "dropping reassignment of %s-%d: duplicate replicas %s", topic, index, list(target)
            )
            self._forget_request(topic, index)
            return
        assignment, version = found
        current = tuple(assignment.partitions[index])
        adding_now = tuple(assignment.adding_replicas.get(index, ()))
        original = reassignment.original_replicas(current, adding_now)
        plan = reassignment.start(original, target)
        partitions = dict(assignment.partitions)
        adding = dict(assignment.adding_replicas)
        removing = dict(assignment.removing_replicas)
        partitions[index] = plan.replicas
        _set_or_drop(adding, index, plan.adding)
        _set_or_drop(removing, index, plan.removing)
        updated = TopicAssignment(partitions, assignment.topic_id, adding, removing)
        # The new epoch goes before the new replica set (Kafka sends both in one
        # LeaderAndIsr; brokers here read them from two znodes): no broker sees the
        # replica set at the epoch of the old one.
        if not self._bump_leader_epoch(topic, index, plan.replicas):
            self._events.put(("reassign_request", None))  # try again with fresh data
            return
        try:
            self.admin.set_topic_assignment(topic, updated, version)
        except BadVersion:
            self._events.put(("reassign_request", None))  # try again with fresh data
            return
        log.info("reassigning %s-%d from %s to %s", topic, index, list(original), list(target))
        self.reassignments[(topic, index)] = target
        self._unfenced.discard((topic, index))  # fenced just now

    def _bump_leader_epoch(self, topic: str, index: int, replicas: tuple[int, ...]) -> bool:
        """Kafka's ``updateLeaderEpoch`` when a reassignment starts (phase A): same
        leader, epoch + 1, so that fetches and follower progress from before the change
        are fenced. A follower's fetch carries its epoch and the leader refuses an old
        one; the leader starts its followers' state afresh at a new epoch. Without it, a
        replica reassigned away (its log deleted) and straight back rejoined the ISR
        from the progress of the deleted log, empty (chaos seed 20261123, issue 9).

        Replicas no longer in ``replicas`` (dropped from an earlier target) leave the
        ISR in the same write, as Kafka's U3 takes them offline. False when the state
        kept changing under it (a leader's ISR changes)."""
        for _ in range(EPOCH_BUMP_TRIES):
            current = self.admin.get_partition_state(topic, index)
            if current is None:
                return True  # no leader yet: nothing to fence
            state, version = current
            isr = tuple(r for r in state.isr if r in replicas)
            if state.leader not in isr:
                isr = state.isr
            bumped = PartitionState(self.epoch or 0, state.leader, state.leader_epoch + 1, isr)
            try:
                self.admin.set_partition_state(topic, index, bumped, version)
            except BadVersion:
                continue
            log.info(
                "leader epoch of %s-%d bumped to %d for its reassignment",
                topic,
                index,
                bumped.leader_epoch,
            )
            return True
        log.info("state of %s-%d kept changing; reassignment retried later", topic, index)
        return False

    def _advance_reassignments(self) -> None:
        for (topic, index), target in list(self.reassignments.items()):
            try:
                self._advance_reassignment(topic, index, target)
            except Exception:
                log.exception("reassignment of %s-%d failed a step", topic, index)

    def _advance_reassignment(self, topic: str, index: int, target: tuple[int, ...]) -> None:
        assert self.epoch is not None
        found = self.admin.get_topic_with_version(topic)
        current = self.admin.get_partition_state(topic, index)
        if found is None or current is None:
            self.reassignments.pop((topic, index), None)
            self._unfenced.discard((topic, index))
            return
        state, state_version = current
        completion = (
            reassignment.complete(target, state.leader, state.isr)
            if reassignment.target_in_sync(target, state.isr)
            else None
        )
        if completion is None:
            self._fence_resumed(topic, index, tuple(found[0].partitions.get(index, ())))
            return
        # Always at a new epoch, as Kafka's phase B (B3 elects or bumps the epoch, B4
        # shrinks the ISR at another): the removed replicas' fetches and progress are
        # fenced, and a leader forgets what it knew of its followers.
        new_state = PartitionState(
            self.epoch, completion.leader, state.leader_epoch + 1, completion.isr
        )
        if not self._write_state(topic, index, new_state, state_version):
            return
        self._unfenced.discard((topic, index))  # phase B fenced it
        assignment, version = found
        partitions = dict(assignment.partitions)
        adding = dict(assignment.adding_replicas)
        removing = dict(assignment.removing_replicas)
        partitions[index] = target
        adding.pop(index, None)
        removing.pop(index, None)
        updated = TopicAssignment(partitions, assignment.topic_id, adding, removing)
        try:
            self.admin.set_topic_assignment(topic, updated, version)
        except BadVersion:
            return  # next tick retries with fresh data
        log.info("reassignment of %s-%d to %s complete", topic, index, list(target))
        # Forgotten only once its request is gone: a connection loss while removing it
        # (raised out of here) is retried by the next tick, which finds the move done.
        self._forget_request(topic, index)
        self.reassignments.pop((topic, index), None)

    def _fence_resumed(self, topic: str, index: int, replicas: tuple[int, ...]) -> None:
        """Phase A's epoch bump for a reassignment this controller resumed and cannot
        complete yet (one it can complete gets phase B's bump instead, as in Kafka's
        onPartitionReassignment). A failed bump is retried on the next tick."""
        if (topic, index) in self._unfenced and self._bump_leader_epoch(topic, index, replicas):
            self._unfenced.discard((topic, index))

    def _forget_request(self, topic: str, index: int) -> None:
        """Remove a finished partition from /admin/reassign_partitions (and the node
        once it is empty), as Kafka's controller does for kafka-reassign-partitions."""
        try:
            data, stat = self.client.get(zk_paths.ADMIN_REASSIGN_PARTITIONS)
        except NoNodeError:
            return
        try:
            requested = dict(PartitionReassignment.from_json(data).partitions)
        except (ValueError, ZkDataError):
            requested = {}
        requested.pop((topic, index), None)
        try:
            if requested:
                self.client.set(
                    zk_paths.ADMIN_REASSIGN_PARTITIONS,
                    PartitionReassignment(requested).to_json(),
                    version=stat.version,
                )
            else:
                self.client.delete(zk_paths.ADMIN_REASSIGN_PARTITIONS, version=stat.version)
        except (BadVersionError, NoNodeError):
            self._events.put(("reassign_request", None))

    def _delete_requested_topics(self) -> None:
        """Delete the topics under ``/admin/delete_topics``, ``DELETE_BATCH`` at a time.

        Brokers drop their logs when they see the topic znode go. Each batch is a few
        pipelined ZooKeeper round trips (``ZkAdmin.delete_topics_znodes``); between
        batches the event queue runs, so new topics get leaders while a mass deletion
        goes on.
        """
        try:
            requested = sorted(self.client.get_children(zk_paths.ADMIN_DELETE_TOPICS))
        except NoNodeError:
            return
        if not requested:
            return
        batch = requested[:DELETE_BATCH]
        if not self.delete_topic_enable:
            log.warning("ignoring deletion of %d topics: delete.topic.enable=false", len(batch))
            for topic in batch:
                with contextlib.suppress(NoNodeError):
                    self.client.delete(zk_paths.delete_topic_path(topic))
        else:
            started = time.monotonic()
            deleted = self.admin.delete_topics_znodes(batch)
            self._watched_topics.difference_update(deleted)
            log.info(
                "deleted %d topics in %.2f s (%s%s)",
                len(deleted),
                time.monotonic() - started,
                ", ".join(deleted[:5]),
                ", ..." if len(deleted) > 5 else "",
            )
        if len(requested) > len(batch) and not self._deletion_queued:
            self._deletion_queued = True
            self._events.put(("delete_topics", None))
