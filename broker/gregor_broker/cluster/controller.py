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
- topic deletion requests under ``/admin/delete_topics``.

All ZooKeeper work runs on one thread fed by a queue, so events are handled one at a
time in order, as Kafka's controller event thread does. Brokers learn the outcome by
watching the partition state znodes (``metadata_cache``).
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from . import zk_paths
from .admin import ZkAdmin
from .models import ControllerRegistration, PartitionState, TopicAssignment, ZkDataError

log = logging.getLogger(__name__)


class Controller:
    def __init__(
        self,
        client: KazooClient,
        broker_id: int,
        *,
        delete_topic_enable: bool = True,
        unclean_leader_election_for: Callable[[str], bool] = lambda topic: False,
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
        self._live_brokers: set[int] = set()
        self._stopped = False
        self.elections_total = 0

    @property
    def active(self) -> bool:
        return self.epoch is not None

    def start(self) -> None:
        self._thread.start()
        DataWatch(self.client, zk_paths.CONTROLLER, self._on_controller_node)

    def stop(self) -> None:
        self._stopped = True
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
        while True:
            kind, payload = self._events.get()
            if kind == "stop":
                return
            try:
                self._handle(kind, payload)
            except Exception:
                log.exception("controller event %s failed", kind)

    def _handle(self, kind: str, payload: Any) -> None:
        if kind == "elect":
            self._elect()
        elif kind == "resign":
            if self.active:
                log.info("broker %d is no longer the controller", self.broker_id)
            self.epoch = None
        elif not self.active:
            return
        elif kind == "brokers":
            self._live_brokers = {int(b) for b in payload}
            self._reconcile_all()
        elif kind == "topics":
            for topic in payload:
                if topic not in self._watched_topics:
                    self._watched_topics.add(topic)
                    DataWatch(self.client, zk_paths.topic_path(topic), self._topic_changed(topic))
        elif kind == "topic":
            self._reconcile_topic(payload)
        elif kind == "delete_topics":
            for topic in payload:
                self._delete_topic(topic)

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
        epoch = self.admin.try_become_controller(self.broker_id)
        if epoch is None:
            return
        self.epoch = epoch
        log.info("broker %d is the controller (epoch %d)", self.broker_id, epoch)
        self._live_brokers = {int(b) for b in self.client.get_children(zk_paths.BROKER_IDS)}
        if not self._watches_set:
            self._watches_set = True
            ChildrenWatch(self.client, zk_paths.BROKER_IDS, self._enqueue("brokers"))
            ChildrenWatch(self.client, zk_paths.BROKER_TOPICS, self._enqueue("topics"))
            ChildrenWatch(self.client, zk_paths.ADMIN_DELETE_TOPICS, self._enqueue("delete_topics"))
        self._reconcile_all()

    # decisions ------------------------------------------------------------------------
    def _reconcile_all(self) -> None:
        for topic in self.client.get_children(zk_paths.BROKER_TOPICS):
            self._reconcile_topic(topic)

    def _reconcile_topic(self, topic: str) -> None:
        if not self.active:
            return
        try:
            data, _ = self.client.get(zk_paths.topic_path(topic))
            assignment = TopicAssignment.from_json(data)
        except NoNodeError:
            return
        except (ValueError, ZkDataError) as error:
            log.error("controller skips unreadable topic %s: %s", topic, error)
            return
        for index, replicas in assignment.partitions.items():
            self._reconcile_partition(topic, index, tuple(replicas))

    def _reconcile_partition(self, topic: str, index: int, replicas: tuple[int, ...]) -> None:
        assert self.epoch is not None
        live = [r for r in replicas if r in self._live_brokers]
        current = self.admin.get_partition_state(topic, index)
        if current is None:
            if not live:
                return  # offline until a replica registers; retried on broker change
            state = PartitionState(self.epoch, live[0], 0, tuple(live))
            try:
                self.admin.create_partition_state(topic, index, state)
                self.elections_total += 1
            except NodeExistsError:
                pass
            return
        state, version = current
        if state.leader in self._live_brokers:
            dead_in_sync = [r for r in state.isr if r not in self._live_brokers]
            if dead_in_sync:
                # Matches Kafka: a replica on a dead broker leaves the ISR at once, so
                # acks=all does not wait replica.lag.time.max.ms for it.
                isr = tuple(r for r in state.isr if r in self._live_brokers)
                self._write_state(
                    topic,
                    index,
                    PartitionState(self.epoch, state.leader, state.leader_epoch, isr),
                    version,
                )
            return
        in_sync_live = [r for r in replicas if r in state.isr and r in self._live_brokers]
        if in_sync_live:
            leader = in_sync_live[0]
            isr = tuple(in_sync_live)
        elif live and self.unclean_leader_election_for(topic):
            log.warning("unclean leader election for %s-%d: broker %d", topic, index, live[0])
            leader = live[0]
            isr = (live[0],)
        else:
            if state.leader == -1:
                return
            # Matches Kafka: with no live in-sync replica the partition goes offline and
            # the ISR keeps its last member, so that replica can lead when it returns.
            leader = -1
            isr = state.isr
        new_state = PartitionState(self.epoch, leader, state.leader_epoch + 1, isr)
        if self._write_state(topic, index, new_state, version):
            self.elections_total += 1

    def _write_state(self, topic: str, index: int, state: PartitionState, version: int) -> bool:
        try:
            self.admin.set_partition_state(topic, index, state, version)
            return True
        except BadVersionError:
            log.info("partition state of %s-%d changed meanwhile; re-reading", topic, index)
            self._events.put(("topic", topic))
            return False

    def _delete_topic(self, topic: str) -> None:
        request = zk_paths.delete_topic_path(topic)
        if not self.delete_topic_enable:
            log.warning("ignoring deletion of %s: delete.topic.enable=false", topic)
            self.client.delete(request)
            return
        log.info("deleting topic %s", topic)
        self.client.delete(zk_paths.topic_path(topic), recursive=True)
        with contextlib.suppress(NoNodeError):
            self.client.delete(zk_paths.topic_config_path(topic))
        with contextlib.suppress(NoNodeError):
            self.client.delete(request)
