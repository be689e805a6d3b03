"""What a broker knows of the cluster: brokers, topics, assignments, leaders, configs.

Brokers learn metadata from ZooKeeper watches (see docs/design/metadata.md): the
controller writes partition state znodes, every broker watches them. Watch callbacks
run on kazoo's thread; ``ZooKeeperMetadataWatcher`` hands every change to the event
loop with ``call_soon_threadsafe``, so the cache itself is only ever touched from the
loop thread and needs no locks.

This module does not decide anything (that is the controller's job) and does not
touch logs (the replica manager reacts to ``listeners``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoNodeError
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from . import zk_paths
from .models import (
    BrokerRegistration,
    ConfigChangeNotification,
    ControllerRegistration,
    EntityConfig,
    PartitionState,
    TopicAssignment,
    ZkDataError,
    uuid_from_str,
    uuid_to_str,
)
from .watches import AsyncDataWatch

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """A live broker. ``host``/``port``: its PLAINTEXT endpoint, else its first one;
    ``endpoints``: every advertised listener's ``(host, port)`` by listener name."""

    broker_id: int
    host: str
    port: int
    rack: str | None
    endpoints: Mapping[str, tuple[str, int]] = field(default_factory=dict)

    def endpoint(self, listener: str | None) -> tuple[str, int] | None:
        """Where to reach this broker on ``listener`` (Kafka answers a client with the
        endpoints of the listener it connected to); None when it has no such listener.
        ``None`` as the listener: the default endpoint."""
        if listener is None or not self.endpoints:
            return self.host, self.port
        return self.endpoints.get(listener)


@dataclass(slots=True)
class PartitionInfo:
    replicas: tuple[int, ...]
    state: PartitionState | None = None
    state_version: int = -1  # ZooKeeper version of the state znode, for conditional writes
    # The zxid of the state znode's last write: a broker takes up leadership only from a
    # state written after its own registration (``ReplicaManager``), -1 when unknown.
    state_mzxid: int = -1

    @property
    def leader(self) -> int:
        return self.state.leader if self.state is not None else -1

    @property
    def leader_epoch(self) -> int:
        return self.state.leader_epoch if self.state is not None else -1

    @property
    def isr(self) -> tuple[int, ...]:
        return self.state.isr if self.state is not None else ()


@dataclass(slots=True)
class TopicInfo:
    name: str
    topic_id: str | None
    partitions: dict[int, PartitionInfo] = field(default_factory=dict)
    config: dict[str, str] = field(default_factory=dict)
    # Moves on every change of the topic or its partitions (Metadata caches the topic's
    # encoded form against it).
    generation: int = 0
    encoded: tuple[Any, bytes] | None = None

    @property
    def uuid(self) -> uuid.UUID:
        """The topic id as the wire carries it (zero when the topic has none)."""
        if not self.topic_id:
            return uuid.UUID(int=0)
        return uuid.UUID(bytes=uuid_from_str(self.topic_id))

    @property
    def internal(self) -> bool:
        return self.name in ("__consumer_offsets", "__transaction_state")


class MetadataCache:
    """Loop-thread view of the cluster; ``changed`` fires after every update."""

    def __init__(self) -> None:
        self.brokers: dict[int, BrokerInfo] = {}
        self.topics: dict[str, TopicInfo] = {}
        self.controller_id: int = -1
        self.cluster_id: str | None = None
        self.listeners: list[Callable[[], None]] = []
        self._waiters: list[tuple[Callable[[], bool], asyncio.Future[None]]] = []
        self._waiters_check_scheduled = False
        self.topics_by_id: dict[str, TopicInfo] = {}
        # Ids of topics this cache saw deleted (or re-created under a new id): a
        # controlled shutdown waiting to see such a topic's partition handed over stops
        # waiting for it. A few bytes per deleted topic for the broker's lifetime.
        self.deleted_topic_ids: set[str] = set()
        self.brokers_generation = 0  # moves with every change of the live brokers
        # Topics changed since the last ``take_changed_topics`` (so that reacting to one
        # partition's change costs one topic's work, not the whole cluster's).
        self.changed_topics: set[str] = set()
        # Dynamic broker configs, by entity name ("<id>" or "<default>").
        self.broker_configs: dict[str, dict[str, str]] = {}
        # Client quota configs by entity path ("users/<u>", "clients/<c>",
        # "users/<u>/clients/<c>", sanitized as in ZooKeeper); the version moves on change.
        self.quota_configs: dict[str, dict[str, str]] = {}
        self.quota_configs_version = 0

    def take_changed_topics(self) -> set[str]:
        changed, self.changed_topics = self.changed_topics, set()
        return changed

    def mark_changed(self, topics: set[str]) -> None:
        """Have ``topics`` applied again as if they had changed (something the replica
        manager's decisions depend on moved that is not in the cache: its registration)."""
        if topics:
            self.changed_topics.update(topics)
            self.notify()

    def notify(self) -> None:
        for listener in self.listeners:
            listener()
        self.recheck_waiters()

    def recheck_waiters(self) -> None:
        """Check the ``wait_for`` predicates again (after an update, or after something
        they also look at changed: a partition this broker now leads)."""
        if not self._waiters or self._waiters_check_scheduled:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._check_waiters()
            return
        # Once per burst, not once per update: creating or deleting thousands of
        # partitions posts thousands of updates, and a waiter's predicate may look at
        # every partition of a request (that was quadratic).
        self._waiters_check_scheduled = True
        loop.call_soon(self._check_waiters)

    def _check_waiters(self) -> None:
        self._waiters_check_scheduled = False
        still_waiting = []
        for predicate, future in self._waiters:
            if future.done():
                continue
            if predicate():
                future.set_result(None)
            else:
                still_waiting.append((predicate, future))
        self._waiters = still_waiting

    async def wait_for(self, predicate: Callable[[], bool], timeout: float) -> bool:
        """Wait until ``predicate()`` holds after an update; False on timeout."""
        if predicate():
            return True
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((predicate, future))
        try:
            # asyncio.timeout, not wait_for: Python 3.11's wait_for can lose a
            # cancellation (a stopping broker waits here in its controlled shutdown).
            async with asyncio.timeout(timeout):
                await future
            return True
        except TimeoutError:
            return False

    def topic_by_uuid(self, topic_id: uuid.UUID | None) -> TopicInfo | None:
        if topic_id is None:
            return None
        return self.topics_by_id.get(uuid_to_str(topic_id.bytes))

    def topic_has_leaders(self, name: str) -> bool:
        topic = self.topics.get(name)
        return (
            topic is not None
            and bool(topic.partitions)
            and all(p.leader >= 0 for p in topic.partitions.values())
        )

    # updates (loop thread) ----------------------------------------------------------
    def set_brokers(self, brokers: dict[int, BrokerInfo]) -> None:
        self.brokers = brokers
        self.brokers_generation += 1
        self.notify()

    def set_controller(self, controller_id: int) -> None:
        self.controller_id = controller_id
        self.notify()

    def set_topic(self, name: str, assignment: TopicAssignment | None) -> None:
        self.changed_topics.add(name)
        if assignment is None:
            removed = self.topics.pop(name, None)
            if removed is not None and removed.topic_id:
                self.topics_by_id.pop(removed.topic_id, None)
                self.deleted_topic_ids.add(removed.topic_id)
            self.notify()
            return
        topic = self.topics.get(name)
        if topic is not None and topic.topic_id and topic.topic_id != assignment.topic_id:
            self.deleted_topic_ids.add(topic.topic_id)  # re-created under a new id
        if topic is None or topic.topic_id != assignment.topic_id:
            topic = TopicInfo(name, assignment.topic_id, config=topic.config if topic else {})
            self.topics[name] = topic
            if assignment.topic_id:
                self.topics_by_id[assignment.topic_id] = topic
        for index, replicas in assignment.partitions.items():
            existing = topic.partitions.get(index)
            if existing is None:
                topic.partitions[index] = PartitionInfo(tuple(replicas))
            else:
                existing.replicas = tuple(replicas)
        for index in list(topic.partitions):
            if index not in assignment.partitions:
                del topic.partitions[index]
        topic.generation += 1
        self.notify()

    def set_partition_state(
        self,
        name: str,
        index: int,
        state: PartitionState | None,
        version: int = -1,
        mzxid: int = -1,
    ) -> None:
        topic = self.topics.get(name)
        if topic is None:
            return
        partition = topic.partitions.get(index)
        if partition is None:
            partition = topic.partitions[index] = PartitionInfo(())
            topic.generation += 1
        if state is not None and version < partition.state_version:
            return  # an older watch event arriving after a newer write we already applied
        self.changed_topics.add(name)
        partition.state = state
        partition.state_version = version
        partition.state_mzxid = mzxid
        topic.generation += 1
        self.notify()

    def known_partition_state(
        self, name: str, topic_id: str | None, index: int
    ) -> tuple[PartitionState, int] | None:
        """A partition's state and its znode version as last seen, for the controller
        (which runs on its own thread). None unless known for this incarnation of the
        topic (``topic_id``: a recreated topic's versions start again). The version is
        read before the state and ``set_partition_state`` writes it after, so a read
        racing an update pairs a state with its own version or an older one; a write
        conditional on an older version is refused."""
        topic = self.topics.get(name)
        if topic is None or topic.topic_id != topic_id or not topic_id:
            return None
        partition = topic.partitions.get(index)
        if partition is None:
            return None
        version = partition.state_version
        state = partition.state
        if state is None or version < 0:
            return None
        return state, version

    def set_broker_config(self, entity: str, config: dict[str, str]) -> None:
        self.broker_configs[entity] = config
        self.notify()

    def dynamic_broker_config(self, broker_id: int, key: str) -> str | None:
        """A dynamic broker config, this broker's own value before the cluster default."""
        for entity in (str(broker_id), zk_paths.DEFAULT_ENTITY):
            value = self.broker_configs.get(entity, {}).get(key)
            if value is not None:
                return value
        return None

    def set_quota_config(self, entity_path: str, config: dict[str, str]) -> None:
        if config:
            self.quota_configs[entity_path] = config
        else:
            self.quota_configs.pop(entity_path, None)
        self.quota_configs_version += 1
        self.notify()

    def set_topic_config(self, name: str, config: dict[str, str]) -> None:
        topic = self.topics.get(name)
        if topic is not None:
            topic.config = config
            self.changed_topics.add(name)
            self.notify()


class ZooKeeperMetadataWatcher:
    """Keeps a MetadataCache in step with ZooKeeper through kazoo watches."""

    def __init__(
        self,
        client: KazooClient,
        cache: MetadataCache,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self.client = client
        self.cache = cache
        self.loop = loop
        self._watched_topics: set[str] = set()
        # Partitions with a state watch, by topic (a deleted topic drops its own entry).
        self._watched_partitions: dict[str, set[int]] = {}
        self._lock = threading.Lock()
        self._last_config_change = -1
        self._stopped = False

    def _read(self, operation: Callable[..., Any], *args: Any) -> Any:
        """A ZooKeeper read that waits out a connection loss (the client's retry policy).

        These reads run at start-up and inside watch callbacks: a ``ConnectionLoss`` raised
        there would end the broker's start or drop the change the watch reported until the
        next one, where Kafka's client waits for the connection and carries on.
        """
        return self.client.retry(operation, *args)

    def _post(self, function: Callable[..., Any], *args: Any) -> None:
        if self._stopped or self.loop.is_closed():
            return  # a watch firing while the broker shuts down: nothing left to update
        with contextlib.suppress(RuntimeError):  # the loop closed between check and call
            self.loop.call_soon_threadsafe(function, *args)

    def start(self) -> None:
        ChildrenWatch(self.client, zk_paths.BROKER_IDS, self._on_brokers)
        ChildrenWatch(self.client, zk_paths.BROKER_TOPICS, self._on_topics)
        DataWatch(self.client, zk_paths.CONTROLLER, self._on_controller)
        # Only changes made after start-up matter: configs are read with each topic.
        try:
            existing = self._read(self.client.get_children, zk_paths.CONFIG_CHANGES)
            self._last_config_change = max((_sequence(n) for n in existing), default=-1)
        except NoNodeError:
            pass
        for entity in self._broker_config_entities():
            self._post(
                self.cache.set_broker_config,
                entity,
                self._read_entity_config(zk_paths.broker_config_path(entity)),
            )
        for entity_path in self._quota_entity_paths():
            self._post(
                self.cache.set_quota_config,
                entity_path,
                self._read_entity_config(zk_paths.entity_config_path(entity_path)),
            )
        ChildrenWatch(self.client, zk_paths.CONFIG_CHANGES, self._on_config_changes)

    def stop(self) -> None:
        self._stopped = True

    # kazoo-thread callbacks ----------------------------------------------------------
    def _on_brokers(self, children: list[str]) -> bool:
        if self._stopped:
            return False
        brokers: dict[int, BrokerInfo] = {}
        for child in children:
            try:
                data, _ = self._read(self.client.get, zk_paths.broker_path(int(child)))
                registration = BrokerRegistration.from_json(data)
            except (NoNodeError, ValueError, ZkDataError):
                continue
            try:
                tuples = registration.endpoint_tuples()
            except ValueError:
                continue
            host, port = registration.host, registration.port
            if host is None or port < 0:
                if not tuples:
                    continue
                _, host, port = tuples[0]
            endpoints = {name: (h, p) for name, h, p in tuples}
            brokers[int(child)] = BrokerInfo(int(child), host, port, registration.rack, endpoints)
        self._post(self.cache.set_brokers, brokers)
        return True

    def _on_controller(self, data: bytes | None, _stat: Any) -> bool:
        if self._stopped:
            return False
        controller_id = -1
        if data:
            try:
                controller_id = ControllerRegistration.from_json(data).broker_id
            except (ValueError, ZkDataError):
                controller_id = -1
        self._post(self.cache.set_controller, controller_id)
        return True

    def _on_topics(self, children: list[str]) -> bool:
        if self._stopped:
            return False
        with self._lock:
            new = [t for t in children if t not in self._watched_topics]
            self._watched_topics.update(new)
        for topic in new:
            AsyncDataWatch(self.client, zk_paths.topic_path(topic), self._topic_watcher(topic))
        return True

    def _topic_watcher(self, topic: str) -> Callable[[bytes | None, Any], bool]:
        def on_topic(data: bytes | None, _stat: Any) -> bool:
            if self._stopped:
                return False
            if data is None:
                with self._lock:
                    self._watched_topics.discard(topic)
                    self._watched_partitions.pop(topic, None)
                self._post(self.cache.set_topic, topic, None)
                return False
            try:
                assignment = TopicAssignment.from_json(data)
            except (ValueError, ZkDataError) as error:
                log.error("ignoring unreadable topic znode %s: %s", topic, error)
                return True
            # The config is read asynchronously too: a read per topic on kazoo's
            # callback thread, one after the other, took minutes for thousands of topics.
            self.client.get_async(zk_paths.topic_config_path(topic)).rawlink(
                lambda result: self._topic_config_read(topic, assignment, result)
            )
            return True

        return on_topic

    def _topic_config_read(self, topic: str, assignment: TopicAssignment, result: Any) -> None:
        """Second half of a topic change, once its config is read (kazoo's callback
        thread): hand both to the loop, then watch the new partitions' states."""
        if self._stopped:
            return
        try:
            data, _ = result.get()
            config = self._parse_topic_config(topic, data)
        except NoNodeError:
            config = {}
        except KazooException:  # connection trouble: read it the blocking way
            config = self._read_topic_config(topic)
        fresh = []
        with self._lock:
            if topic not in self._watched_topics:
                return  # deleted while its config was being read
            watched = self._watched_partitions.setdefault(topic, set())
            for index in assignment.partitions:
                if index not in watched:
                    watched.add(index)
                    fresh.append(index)
        self._post(self._apply_topic, topic, assignment, config)
        for index in fresh:
            AsyncDataWatch(
                self.client,
                zk_paths.partition_state_path(topic, index),
                self._partition_watcher(topic, index),
                until_deleted=True,
            )

    def _apply_topic(self, topic: str, assignment: TopicAssignment, config: dict[str, str]) -> None:
        info = self.cache.topics.get(topic)
        if info is not None:
            info.config = config
        self.cache.set_topic(topic, assignment)
        self.cache.set_topic_config(topic, config)

    def _partition_watcher(self, topic: str, index: int) -> Callable[[bytes | None, Any], bool]:
        def on_state(data: bytes | None, stat: Any) -> bool:
            if self._stopped:
                return False
            with self._lock:
                if index not in self._watched_partitions.get(topic, ()):
                    return False
            state = None
            if data:
                try:
                    state = PartitionState.from_json(data)
                except (ValueError, ZkDataError) as error:
                    log.error("ignoring unreadable state of %s-%d: %s", topic, index, error)
                    return True
            version, mzxid = (stat.version, stat.mzxid) if stat is not None else (-1, -1)
            self._post(self.cache.set_partition_state, topic, index, state, version, mzxid)
            return True

        return on_state

    def _broker_config_entities(self) -> list[str]:
        try:
            return list(self._read(self.client.get_children, zk_paths.CONFIG_BROKERS))
        except NoNodeError:
            return []

    def _quota_entity_paths(self) -> list[str]:
        """Every client quota entity: users/<u>, users/<u>/clients/<c>, clients/<c>."""
        paths = []
        for user in self._children(zk_paths.CONFIG_USERS):
            paths.append(f"users/{user}")
            for client in self._children(f"{zk_paths.CONFIG_USERS}/{user}/clients"):
                paths.append(f"users/{user}/clients/{client}")
        paths.extend(f"clients/{client}" for client in self._children(zk_paths.CONFIG_CLIENTS))
        return paths

    def _children(self, path: str) -> list[str]:
        try:
            return list(self._read(self.client.get_children, path))
        except NoNodeError:
            return []

    def _read_entity_config(self, path: str) -> dict[str, str]:
        try:
            data, _ = self._read(self.client.get, path)
        except NoNodeError:
            return {}
        try:
            return dict(EntityConfig.from_json(data).config)
        except (ValueError, ZkDataError) as error:
            log.error("ignoring unreadable config %s: %s", path, error)
            return {}

    def _read_topic_config(self, topic: str) -> dict[str, str]:
        try:
            data, _ = self._read(self.client.get, zk_paths.topic_config_path(topic))
        except NoNodeError:
            return {}
        return self._parse_topic_config(topic, data)

    @staticmethod
    def _parse_topic_config(topic: str, data: bytes) -> dict[str, str]:
        try:
            return dict(EntityConfig.from_json(data).config)
        except (ValueError, ZkDataError) as error:
            log.error("ignoring unreadable config of topic %s: %s", topic, error)
            return {}

    def _on_config_changes(self, children: list[str]) -> bool:
        if self._stopped:
            return False
        for child in sorted(children, key=_sequence):
            sequence = _sequence(child)
            if sequence <= self._last_config_change:
                continue
            self._last_config_change = sequence
            try:
                data, _ = self._read(self.client.get, f"{zk_paths.CONFIG_CHANGES}/{child}")
                notification = ConfigChangeNotification.from_json(data)
            except (NoNodeError, ValueError, ZkDataError):
                continue
            entity_type, _, name = notification.entity_path.partition("/")
            if entity_type == "topics":
                config = self._read_topic_config(name)
                self._post(self.cache.set_topic_config, name, config)
            elif entity_type == "brokers":
                config = self._read_entity_config(zk_paths.broker_config_path(name))
                self._post(self.cache.set_broker_config, name, config)
            elif entity_type in ("users", "clients"):
                # Client quotas: users/<u>, clients/<c> or users/<u>/clients/<c>.
                path = notification.entity_path
                config = self._read_entity_config(zk_paths.entity_config_path(path))
                self._post(self.cache.set_quota_config, path, config)
        return True


def _sequence(name: str) -> int:
    try:
        return int(name.rsplit("_", 1)[-1])
    except ValueError:
        return -1
