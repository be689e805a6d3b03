"""What Kafka's ``AdminZkClient``/``KafkaZkClient`` do, on kazoo: reads and writes of Kafka's
ZooKeeper layout with Kafka's ordering and conditional-update rules.

Owns ZooKeeper I/O for topics, topic and entity configs, partition state, broker
registration and controller election. Does not own decisions: which replicas a topic
gets (``placement``), who leads a partition (the controller), or watches.
All calls are blocking kazoo calls; run them in a thread from asyncio code.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError

from gregor_broker.cluster import zk_paths as paths
from gregor_broker.cluster.models import (
    BrokerRegistration,
    ClusterId,
    ConfigChangeNotification,
    ControllerRegistration,
    EntityConfig,
    IsrChangeNotification,
    LogDirEventNotification,
    PartitionReassignment,
    PartitionState,
    PreferredReplicaElection,
    ProducerIdBlock,
    TopicAssignment,
    ZkDataError,
    decode_controller_epoch,
    encode_controller_epoch,
    new_uuid,
)
from gregor_broker.cluster.topic_names import topic_name_error
from gregor_broker.config import InvalidConfig, validate_topic_configs

log = logging.getLogger(__name__)

# Znode deletions per ZooKeeper multi when a topic is deleted (a multi is one request,
# and requests must stay below ZooKeeper's jute.maxbuffer of 1 MiB).
_DELETES_PER_MULTI = 1000
# kazoo's ``connection_retry`` for every client of ours: attempts at most 1 s apart, for
# good, as ZooKeeper's Java client reconnects. kazoo's default doubles the pause up to an
# hour, so a client that failed for 10-15 s (ZooKeeper restarting) waited another 12-25 s
# before trying again.
ZOOKEEPER_CONNECTION_RETRY = {"max_tries": -1, "delay": 0.1, "backoff": 2, "max_delay": 1.0}


# A ZooKeeper multi is one request, and requests must stay below jute.maxbuffer (1 MiB by
# default): a version check costs its path and about this much more.
_CHECK_OP_BYTES = 24
_MULTI_MAX_BYTES = 512 * 1024


class ZkAdminError(Exception):
    """Base class of errors from ``ZkAdmin``; messages name the object and the problem."""


class TopicExists(ZkAdminError):
    """Kafka: TOPIC_ALREADY_EXISTS."""


class UnknownTopic(ZkAdminError):
    """Kafka: UNKNOWN_TOPIC_OR_PARTITION."""


class InvalidTopic(ZkAdminError):
    """Kafka: INVALID_TOPIC_EXCEPTION (bad name, or collides with an existing topic)."""


class InvalidReplicaAssignment(ZkAdminError):
    """Kafka: INVALID_REPLICA_ASSIGNMENT."""


class InvalidPartitions(ZkAdminError):
    """Kafka: INVALID_PARTITIONS."""


class TopicAlreadyMarkedForDeletion(ZkAdminError):
    """Kafka: the topic already has an ``/admin/delete_topics`` entry."""


class BadVersion(ZkAdminError, BadVersionError):
    """A conditional update lost: someone else wrote the znode since it was read.

    Also a ``kazoo.exceptions.BadVersionError``, so callers may catch either.
    """


class BrokerIdInUse(ZkAdminError):
    """Another live session holds ``/brokers/ids/<id>``."""


def validate_topic_name(name: str) -> None:
    """Kafka's ``Topic.validate`` (``topic_names.py``): raises ``InvalidTopic``."""
    if (error := topic_name_error(name)) is not None:
        raise InvalidTopic(error)


def _collision_key(name: str) -> str:
    # Kafka: '.' and '_' collide in metric names, so "a.b" and "a_b" cannot both exist.
    return name.replace(".", "_")


def _validate_assignment(topic: str, assignment: Mapping[int, list[int]], first: int) -> None:
    if not assignment:
        raise InvalidReplicaAssignment(f"Topic {topic}: the assignment has no partitions")
    expected = list(range(first, first + len(assignment)))
    if sorted(assignment) != expected:
        raise InvalidPartitions(
            f"Topic {topic}: partitions must be consecutive from {first}, got {sorted(assignment)}"
        )
    sizes = {len(replicas) for replicas in assignment.values()}
    if len(sizes) != 1:
        raise InvalidReplicaAssignment(
            f"Topic {topic}: every partition needs the same replication factor, got {sorted(sizes)}"
        )
    for partition, replicas in assignment.items():
        if not replicas:
            raise InvalidReplicaAssignment(f"Topic {topic}: partition {partition} has no replicas")
        if len(set(replicas)) != len(replicas):
            raise InvalidReplicaAssignment(
                f"Topic {topic}: duplicate brokers in the replicas of partition {partition}: "
                f"{list(replicas)}"
            )


class ZkAdmin:
    """Kafka's ZooKeeper admin operations over a started ``KazooClient``."""

    def __init__(self, client: KazooClient) -> None:
        self.client = client

    # -- cluster -------------------------------------------------------------------------

    def ensure_paths(self) -> None:
        """Create the persistent parents Kafka's brokers create at start-up."""
        for path in paths.PERSISTENT_PATHS:
            self.client.ensure_path(path)

    def get_or_create_cluster_id(self) -> str:
        """Read ``/cluster/id``, creating it with a new id if absent (the first writer wins)."""
        try:
            data, _ = self.client.get(paths.CLUSTER_ID)
        except NoNodeError:
            cluster_id = new_uuid()
            try:
                self.client.create(paths.CLUSTER_ID, ClusterId(cluster_id).to_json(), makepath=True)
                return cluster_id
            except NodeExistsError:
                data, _ = self.client.get(paths.CLUSTER_ID)
        return ClusterId.from_json(data).id

    # -- topics --------------------------------------------------------------------------

    def list_topics(self) -> list[str]:
        try:
            return sorted(self.client.get_children(paths.BROKER_TOPICS))
        except NoNodeError:
            return []

    def get_topic(self, name: str) -> TopicAssignment | None:
        found = self.get_topic_with_version(name)
        return found[0] if found else None

    def get_topic_with_version(self, name: str) -> tuple[TopicAssignment, int] | None:
        try:
            data, stat = self.client.get(paths.topic_path(name))
        except NoNodeError:
            return None
        return TopicAssignment.from_json(data), stat.version

    def create_topic(
        self,
        name: str,
        assignment: Mapping[int, list[int]],
        configs: Mapping[str, str],
        topic_id: str | None = None,
    ) -> TopicAssignment:
        """Write ``/config/topics/<t>`` then ``/brokers/topics/<t>``, as AdminZkClient does.

        Partition state znodes are the controller's to create once it sees the topic.
        Raises TopicExists, InvalidTopic, InvalidReplicaAssignment or InvalidConfig.
        """
        validate_topic_name(name)
        _validate_assignment(name, assignment, 0)
        validate_topic_configs(configs)
        existing = self.list_topics()
        if name in existing:
            raise TopicExists(f"Topic '{name}' already exists.")
        colliding = [t for t in existing if _collision_key(t) == _collision_key(name)]
        if colliding:
            raise InvalidTopic(
                f"Topic '{name}' collides with existing topic: {colliding[0]} "
                "('.' and '_' are the same in metric names)"
            )
        self._write_entity_config(paths.topic_config_path(name), configs, delete_if_empty=False)
        topic = TopicAssignment.of(assignment, topic_id or new_uuid())
        try:
            self.client.create(paths.topic_path(name), topic.to_json(), makepath=True)
        except NodeExistsError:
            raise TopicExists(f"Topic '{name}' already exists.") from None
        return topic

    def create_topics(
        self, topics: list[tuple[str, Mapping[int, list[int]], Mapping[str, str], str]]
    ) -> dict[str, TopicAssignment | ZkAdminError | InvalidConfig]:
        """``create_topic`` for many topics (name, assignment, configs, topic id), pipelined:
        one listing, then every config node, then every topic znode, each a batch of
        requests in flight together (sequentially, 2,000 topics took minutes). Same
        order per topic as AdminZkClient: the config node before the topic znode. Maps
        each name to its assignment or its error."""
        results: dict[str, TopicAssignment | ZkAdminError | InvalidConfig] = {}
        existing = self.list_topics()
        taken = {_collision_key(t): t for t in existing}
        accepted = []
        for name, assignment, configs, topic_id in topics:
            try:
                validate_topic_name(name)
                _validate_assignment(name, assignment, 0)
                validate_topic_configs(configs)
            except (ZkAdminError, InvalidConfig) as error:
                results[name] = error
                continue
            key = _collision_key(name)
            if key in taken:
                other = taken[key]
                results[name] = (
                    TopicExists(f"Topic '{name}' already exists.")
                    if other == name
                    else InvalidTopic(
                        f"Topic '{name}' collides with existing topic: {other} "
                        "('.' and '_' are the same in metric names)"
                    )
                )
                continue
            taken[key] = name
            accepted.append((name, TopicAssignment.of(assignment, topic_id), configs))
        config_writes = [
            (
                name,
                configs,
                self.client.create_async(
                    paths.topic_config_path(name),
                    EntityConfig(dict(configs)).to_json(),
                    makepath=True,
                ),
            )
            for name, _, configs in accepted
        ]
        for name, configs, pending in config_writes:
            try:
                pending.get()
            except NodeExistsError:  # a leftover config node: overwrite it, as set would
                self._write_entity_config(
                    paths.topic_config_path(name), configs, delete_if_empty=False
                )
        topic_writes = [
            (name, topic, self.client.create_async(paths.topic_path(name), topic.to_json()))
            for name, topic, _ in accepted
        ]
        for name, topic, pending in topic_writes:
            try:
                pending.get()
                results[name] = topic
            except NodeExistsError:
                results[name] = TopicExists(f"Topic '{name}' already exists.")
            except NoNodeError:  # /brokers/topics itself is missing
                self.client.create(paths.topic_path(name), topic.to_json(), makepath=True)
                results[name] = topic
        return results

    def add_partitions(self, name: str, new_partitions: Mapping[int, list[int]]) -> TopicAssignment:
        """Add partitions (ids continuing the existing ones) with a versioned rewrite.

        A rewrite that loses to another writer (a reassignment's, another CreatePartitions)
        reads the topic again and checks anew: partitions added meanwhile make these
        ``InvalidPartitions``, a topic deleted meanwhile ``UnknownTopic``."""
        if not new_partitions:
            raise InvalidPartitions(f"Topic {name}: no partitions to add")
        while True:
            found = self.get_topic_with_version(name)
            if found is None:
                raise UnknownTopic(f"Topic '{name}' does not exist.")
            current, version = found
            _validate_assignment(name, new_partitions, len(current.partitions))
            old_rf = len(next(iter(current.partitions.values())))
            new_rf = len(next(iter(new_partitions.values())))
            if current.partitions and new_rf != old_rf:
                raise InvalidReplicaAssignment(
                    f"Topic {name}: new partitions have replication factor {new_rf}, "
                    f"existing ones {old_rf}"
                )
            merged = dict(current.partitions)
            merged.update({p: tuple(r) for p, r in new_partitions.items()})
            updated = TopicAssignment(
                merged, current.topic_id, current.adding_replicas, current.removing_replicas
            )
            try:
                self.set_topic_assignment(name, updated, version)
            except BadVersion:
                continue
            return updated

    def set_topic_assignment(self, name: str, topic: TopicAssignment, expected_version: int) -> int:
        """Conditionally rewrite ``/brokers/topics/<t>``; returns the new znode version."""
        try:
            stat = self.client.set(
                paths.topic_path(name), topic.to_json(), version=expected_version
            )
        except BadVersionError:
            raise BadVersion(
                f"Topic {name}: its assignment changed since version {expected_version}; "
                "read it again and retry"
            ) from None
        except NoNodeError:
            raise UnknownTopic(f"Topic '{name}' does not exist.") from None
        return stat.version

    def request_topic_deletion(self, name: str) -> None:
        """Create ``/admin/delete_topics/<t>``; the controller does the deletion."""
        if self.client.exists(paths.topic_path(name)) is None:
            raise UnknownTopic(f"Topic '{name}' does not exist.")
        try:
            self.client.create(paths.delete_topic_path(name), b"", makepath=True)
        except NodeExistsError:
            raise TopicAlreadyMarkedForDeletion(
                f"Topic '{name}' is already marked for deletion."
            ) from None

    def request_topic_deletions(self, names: Iterable[str]) -> dict[str, ZkAdminError | None]:
        """``request_topic_deletion`` for many topics, pipelined: a few round trips for the
        whole batch instead of two per topic. Maps each name to None or its error."""
        names = list(dict.fromkeys(names))
        exists = [(name, self.client.exists_async(paths.topic_path(name))) for name in names]
        results: dict[str, ZkAdminError | None] = {}
        creates = []
        for name, pending in exists:
            if pending.get() is None:
                results[name] = UnknownTopic(f"Topic '{name}' does not exist.")
            else:
                creates.append((name, self.client.create_async(paths.delete_topic_path(name), b"")))
        for name, pending in creates:
            try:
                pending.get()
                results[name] = None
            except NodeExistsError:
                results[name] = TopicAlreadyMarkedForDeletion(
                    f"Topic '{name}' is already marked for deletion."
                )
            except NoNodeError:  # /admin/delete_topics itself is missing: create it once
                self.request_topic_deletion(name)
                results[name] = None
        return results

    def delete_topics_znodes(self, names: Iterable[str]) -> list[str]:
        """Remove the znodes of deleted topics (assignment, partition states, config,
        deletion request), pipelined across the batch: one ZooKeeper multi per topic,
        sent together, so ZooKeeper commits them in a few group commits. Work is linear
        in the number of partitions. Returns the topics whose znodes are gone."""
        names = list(names)
        listings = [
            (
                name,
                self.client.get_children_async(paths.topic_partitions_path(name)),
                self.client.exists_async(paths.topic_path(name)),
                self.client.exists_async(paths.topic_config_path(name)),
                self.client.exists_async(paths.delete_topic_path(name)),
            )
            for name in names
        ]
        commits = []
        for name, partitions, topic, config, request in listings:
            try:
                indexes = partitions.get()
                has_partitions_node = True
            except NoNodeError:
                indexes, has_partitions_node = [], False
            deletions = []
            for index in indexes:
                state = paths.partition_state_path(name, int(index))
                deletions += [state, state.rsplit("/", 1)[0]]
            if has_partitions_node:
                deletions.append(paths.topic_partitions_path(name))
            if topic.get() is not None:
                deletions.append(paths.topic_path(name))
            if config.get() is not None:
                deletions.append(paths.topic_config_path(name))
            if request.get() is not None:
                deletions.append(paths.delete_topic_path(name))
            # Multis in order on one session; each stays far below jute.maxbuffer.
            pending = []
            for first in range(0, len(deletions), _DELETES_PER_MULTI):
                transaction = self.client.transaction()
                for path in deletions[first : first + _DELETES_PER_MULTI]:
                    transaction.delete(path)
                pending.append(transaction.commit_async())
            commits.append((name, pending))
        done = []
        for name, pending in commits:
            results = [result for multi in pending for result in multi.get()]
            if any(isinstance(result, Exception) for result in results):
                # Something changed meanwhile (a node appeared or went): delete the slow
                # way, node by node, tolerating what is already gone.
                log.info("deleting the znodes of %s one by one", name)
                self._delete_topic_znodes_one_by_one(name)
            done.append(name)
        return done

    def _delete_topic_znodes_one_by_one(self, name: str) -> None:
        for path in (paths.topic_path(name), paths.topic_config_path(name)):
            with contextlib.suppress(NoNodeError):
                self.client.delete(path, recursive=True)
        with contextlib.suppress(NoNodeError):
            self.client.delete(paths.delete_topic_path(name))

    def topics_marked_for_deletion(self) -> list[str]:
        try:
            return sorted(self.client.get_children(paths.ADMIN_DELETE_TOPICS))
        except NoNodeError:
            return []

    # -- configs -------------------------------------------------------------------------

    def get_topic_config(self, name: str) -> dict[str, str]:
        return self.get_entity_config(f"topics/{name}")

    def set_topic_config(self, name: str, config: Mapping[str, str]) -> None:
        """Replace a topic's overrides: config node first, then the change notification.

        Matches Kafka: a topic's config node stays, written as ``{}`` when empty.
        """
        validate_topic_configs(config)
        if self.client.exists(paths.topic_path(name)) is None:
            raise UnknownTopic(f"Topic '{name}' does not exist.")
        self.set_entity_config(f"topics/{name}", config)

    def get_entity_config(self, entity_path: str) -> dict[str, str]:
        """Config of ``/config/<entity_path>``, e.g. ``topics/t`` or ``users/<sanitized>``."""
        try:
            data, _ = self.client.get(paths.entity_config_path(entity_path))
        except NoNodeError:
            return {}
        return dict(EntityConfig.from_json(data).config)

    def set_entity_config(self, entity_path: str, config: Mapping[str, str]) -> None:
        """Write ``/config/<entity_path>`` then ``/config/changes/config_change_<seq>``.

        Entity paths are already sanitized (see ``zk_paths.user_config_path``). A non-topic
        entity whose config becomes empty has its node deleted (quotas).
        """
        is_topic = entity_path.startswith("topics/")
        self._write_entity_config(
            paths.entity_config_path(entity_path), config, delete_if_empty=not is_topic
        )
        self.create_config_change_notification(entity_path)

    def create_config_change_notification(self, entity_path: str) -> str:
        return self.client.create(
            paths.CONFIG_CHANGE_PREFIX,
            ConfigChangeNotification(entity_path).to_json(),
            sequence=True,
            makepath=True,
        )

    def _write_entity_config(
        self, path: str, config: Mapping[str, str], *, delete_if_empty: bool
    ) -> None:
        if not config and delete_if_empty:
            try:
                self.client.delete(path)
            except NoNodeError:
                pass
            except NotEmptyError:
                # /config/users/<u> may have /clients children: keep it, with no config.
                self.client.set(path, EntityConfig({}).to_json())
            return
        data = EntityConfig(dict(config)).to_json()
        try:
            self.client.set(path, data)
        except NoNodeError:
            try:
                self.client.create(path, data, makepath=True)
            except NodeExistsError:
                self.client.set(path, data)

    # -- partition state -----------------------------------------------------------------

    def get_partition_state(self, topic: str, partition: int) -> tuple[PartitionState, int] | None:
        try:
            data, stat = self.client.get(paths.partition_state_path(topic, partition))
        except NoNodeError:
            return None
        return PartitionState.from_json(data), stat.version

    def get_partition_states(
        self, topic: str, partitions: list[int], timeout_s: float
    ) -> dict[int, tuple[PartitionState, int] | None]:
        """The state znodes of ``partitions``, read in one pipelined round trip; a
        partition whose read failed or took over ``timeout_s`` is left out."""
        pending = [
            (index, self.client.get_async(paths.partition_state_path(topic, index)))
            for index in partitions
        ]
        deadline = time.monotonic() + timeout_s
        found: dict[int, tuple[PartitionState, int] | None] = {}
        for index, result in pending:
            try:
                data, stat = result.get(timeout=max(deadline - time.monotonic(), 0.001))
            except NoNodeError:
                found[index] = None
                continue
            except Exception:  # connection loss, timeout: this partition stays unconfirmed
                continue
            found[index] = PartitionState.from_json(data), stat.version
        return found

    def _answer(self, pending: Any, deadline: float, what: str) -> Any:
        """A pipelined request's answer, waited for until ``deadline`` (TimeoutError
        after, naming ``what``); its ZooKeeper error is raised as is."""
        left = deadline - time.monotonic()
        timeout_exception = self.client.handler.timeout_exception
        try:
            if left <= 0:
                raise timeout_exception()
            return pending.get(timeout=left)
        except timeout_exception as error:
            raise TimeoutError(f"{what} not read in time") from error

    def assigned_partitions(
        self, broker_id: int, timeout_s: float
    ) -> dict[tuple[str, int], str | None]:
        """Every partition assigned to ``broker_id``: (topic, partition) -> topic id,
        from the topic znodes (one listing, then every topic znode, pipelined).
        TimeoutError when that takes over ``timeout_s``; a connection loss is raised."""
        deadline = time.monotonic() + timeout_s
        topics = [
            (topic, self.client.get_async(paths.topic_path(topic))) for topic in self.list_topics()
        ]
        assigned: dict[tuple[str, int], str | None] = {}
        for topic, pending in topics:
            try:
                data, _ = self._answer(pending, deadline, f"topics assigned to {broker_id}")
                assignment = TopicAssignment.from_json(data)
            except NoNodeError:
                continue  # deleted meanwhile
            except (ValueError, ZkDataError):
                log.warning("skipping unreadable topic znode %s", topic)
                continue
            for index, replicas in assignment.partitions.items():
                if broker_id in replicas:
                    assigned[(topic, index)] = assignment.topic_id
        return assigned

    def partitions_led_by(
        self,
        broker_id: int,
        timeout_s: float,
        *,
        assigned: Mapping[tuple[str, int], str | None] | None = None,
        then: Callable[[], object] | None = None,
    ) -> dict[tuple[str, int], tuple[str | None, int]]:
        """The partitions whose state znode names ``broker_id`` leader: (topic,
        partition) -> (topic id, state znode version). ZooKeeper's truth, for a broker
        whose metadata cache may not have loaded its latest states yet.

        Two pipelined rounds (``assigned_partitions``, unless ``assigned`` is given,
        then the states of those partitions), not a round trip per partition.
        TimeoutError when they take over ``timeout_s``; a connection loss is raised too.

        ``then`` is called once the state reads are sent, before their answers are
        awaited: a request it sends on this client goes out right behind them, and
        ZooKeeper executes one session's requests in the order sent, so the reads see
        ZooKeeper as it was before that request (a controlled shutdown deregisters
        there, without waiting for a thousand answers first)."""
        deadline = time.monotonic() + timeout_s
        if assigned is None:
            assigned = self.assigned_partitions(broker_id, timeout_s)
        states = [
            (key, topic_id, self.client.get_async(paths.partition_state_path(*key)))
            for key, topic_id in assigned.items()
        ]
        if then is not None:
            then()
        led: dict[tuple[str, int], tuple[str | None, int]] = {}
        for key, topic_id, pending in states:
            try:
                data, stat = self._answer(pending, deadline, f"partitions led by {broker_id}")
                state = PartitionState.from_json(data)
            except NoNodeError:
                continue  # no leader elected yet
            except (ValueError, ZkDataError):
                log.warning("skipping unreadable state of %s-%d", *key)
                continue
            if state.leader == broker_id:
                led[key] = (topic_id, stat.version)
        return led

    def deregister_broker_if_states_unchanged(
        self, broker_id: int, versions: Mapping[tuple[str, int], int]
    ) -> bool:
        """Delete ``/brokers/ids/<id>`` in one ZooKeeper transaction with a version check
        of each partition state in ``versions``: True when it committed (every one of
        those states was at that version when the registration went), False when one
        had changed or is gone (nothing deleted) or when the transaction would be too
        large for one request. NoNodeError when the registration is absent.

        A controlled shutdown that knows every state assigned to it from its metadata
        cache learns, in one request, that the cache was exact, instead of reading a
        thousand states before it deregisters."""
        size = sum(len(paths.partition_state_path(*key)) + _CHECK_OP_BYTES for key in versions)
        if size > _MULTI_MAX_BYTES:
            return False
        transaction = self.client.transaction()
        for (topic, index), version in versions.items():
            transaction.check(paths.partition_state_path(topic, index), version)
        transaction.delete(paths.broker_path(broker_id))
        results = transaction.commit()
        if not any(isinstance(result, Exception) for result in results):
            return True
        if isinstance(results[-1], NoNodeError):
            raise results[-1]
        return False

    def create_partition_state(self, topic: str, partition: int, state: PartitionState) -> int:
        """Create the state znode (and its parents); returns its version (0).

        Raises ``kazoo.exceptions.NodeExistsError`` if it already exists.
        """
        self.client.create(
            paths.partition_state_path(topic, partition), state.to_json(), makepath=True
        )
        return 0

    def set_partition_state(
        self, topic: str, partition: int, state: PartitionState, expected_version: int
    ) -> int:
        """Conditional update; returns the new version, raises BadVersion if it lost."""
        try:
            stat = self.client.set(
                paths.partition_state_path(topic, partition),
                state.to_json(),
                version=expected_version,
            )
        except BadVersionError:
            raise BadVersion(
                f"Partition {topic}-{partition}: state changed since version {expected_version}"
            ) from None
        return stat.version

    # -- brokers -------------------------------------------------------------------------

    def list_brokers(self) -> dict[int, BrokerRegistration]:
        brokers: dict[int, BrokerRegistration] = {}
        try:
            ids = self.client.get_children(paths.BROKER_IDS)
        except NoNodeError:
            return brokers
        for child in ids:
            registration = self.get_broker(int(child))
            if registration is not None:  # None: it went away while we listed
                brokers[int(child)] = registration
        return dict(sorted(brokers.items()))

    def get_broker(self, broker_id: int) -> BrokerRegistration | None:
        try:
            data, _ = self.client.get(paths.broker_path(broker_id))
        except NoNodeError:
            return None
        return BrokerRegistration.from_json(data)

    def register_broker(
        self, registration: BrokerRegistration, broker_id: int, timeout: float | None = None
    ) -> int:
        """Create the ephemeral ``/brokers/ids/<id>``; returns its czxid (Kafka's broker
        epoch: every registration, a restart's or a new session's, has a greater one).

        If a node from an older session of this broker is still there (a restart within
        the session timeout), wait up to ``timeout`` seconds (default: the session
        timeout) for ZooKeeper to expire it, then raise BrokerIdInUse.
        """
        path = paths.broker_path(broker_id)
        if timeout is None:
            timeout = self.client._session_timeout / 1000.0
        deadline = time.monotonic() + timeout
        session_id = self.client.client_id[0] if self.client.client_id else None
        while True:
            try:
                _, created = self.client.create(
                    path, registration.to_json(), ephemeral=True, makepath=True, include_data=True
                )
                return created.czxid
            except NodeExistsError:
                stat = self.client.exists(path)
                if stat is not None and stat.ephemeralOwner == session_id:
                    # Ours already (a retried create): refresh the data, as Kafka does.
                    self.client.set(path, registration.to_json())
                    return stat.czxid
                if time.monotonic() >= deadline:
                    owner = f"0x{stat.ephemeralOwner:x}" if stat is not None else "unknown"
                    raise BrokerIdInUse(
                        f"Broker id {broker_id} is registered by another ZooKeeper session "
                        f"({owner}) at {path}; another broker with broker.id={broker_id} is "
                        "running, or the old session has not expired yet. Use a unique "
                        "broker.id, or wait zookeeper.session.timeout.ms and retry."
                    ) from None
                time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))

    # -- controller ----------------------------------------------------------------------

    def get_controller(self) -> ControllerRegistration | None:
        try:
            data, _ = self.client.get(paths.CONTROLLER)
        except NoNodeError:
            return None
        return ControllerRegistration.from_json(data)

    def get_controller_epoch(self) -> tuple[int, int] | None:
        """``(epoch, znode version)`` of ``/controller_epoch``, or None before any controller."""
        try:
            data, stat = self.client.get(paths.CONTROLLER_EPOCH)
        except NoNodeError:
            return None
        return decode_controller_epoch(data), stat.version

    def try_become_controller(self, broker_id: int) -> int | None:
        """Create the ephemeral ``/controller`` and bump ``/controller_epoch``, atomically.

        Returns the new controller epoch, or None when another broker is controller.
        Like Kafka's ``registerControllerAndIncrementControllerEpoch``: one multi-op
        creates ``/controller`` and sets the epoch at the version read, so two brokers
        can never both win with the same epoch.

        A ``/controller`` this client's own session created is this broker's win: an
        earlier try whose answer the connection lost (the caller retries after a
        ConnectionLoss) committed, and its epoch is the current one, since nobody else can
        bump the epoch while that node exists. Kafka checks the same after a NodeExists
        (``checkControllerAndEpoch``); answering None here left the cluster without a
        working controller for as long as this session lived.
        """
        while True:
            current = self.get_controller_epoch()
            if current is None:
                # Kafka's initial controller epoch is 0, so the first controller gets 1.
                with contextlib.suppress(NodeExistsError):
                    self.client.create(paths.CONTROLLER_EPOCH, encode_controller_epoch(0))
                continue
            epoch, version = current
            transaction = self.client.transaction()
            transaction.create(
                paths.CONTROLLER, ControllerRegistration(broker_id).to_json(), ephemeral=True
            )
            transaction.set_data(
                paths.CONTROLLER_EPOCH, encode_controller_epoch(epoch + 1), version=version
            )
            results = transaction.commit()
            if isinstance(results[0], NodeExistsError):
                return self._own_controller_epoch()
            if isinstance(results[1], BadVersionError):
                continue  # someone bumped the epoch between our read and our write
            for result in results:
                if isinstance(result, Exception):
                    raise result
            return epoch + 1

    def _own_controller_epoch(self) -> int | None:
        """The controller epoch if ``/controller`` is this session's, else None."""
        stat = self.client.exists(paths.CONTROLLER)
        session_id = self.client.client_id[0] if self.client.client_id else None
        if stat is None or stat.ephemeralOwner != session_id:
            return None
        current = self.get_controller_epoch()
        return None if current is None else current[0]

    def resign_controller(self, broker_id: int) -> bool:
        """Delete ``/controller`` if this broker holds it; returns whether it did."""
        try:
            data, stat = self.client.get(paths.CONTROLLER)
        except NoNodeError:
            return False
        if ControllerRegistration.from_json(data).broker_id != broker_id:
            return False
        try:
            self.client.delete(paths.CONTROLLER, version=stat.version)
        except (NoNodeError, BadVersionError):
            return False
        return True

    # -- admin requests and notifications ------------------------------------------------

    def get_reassignment(self) -> PartitionReassignment | None:
        try:
            data, _ = self.client.get(paths.ADMIN_REASSIGN_PARTITIONS)
        except NoNodeError:
            return None
        return PartitionReassignment.from_json(data)

    def request_reassignment(self, reassignment: PartitionReassignment) -> None:
        """Create ``/admin/reassign_partitions``; raises NodeExistsError if one is in flight
        (as kafka-reassign-partitions does)."""
        self.client.create(paths.ADMIN_REASSIGN_PARTITIONS, reassignment.to_json(), makepath=True)

    def _merge_znode(self, path: str, merge: Callable[[bytes | None], bytes]) -> None:
        """Read-modify-write a znode that the controller also deletes, until it sticks
        (``merge`` gets the current data, None when the node is absent)."""
        while True:
            try:
                data, stat = self.client.get(path)
            except NoNodeError:
                try:
                    self.client.create(path, merge(None), makepath=True)
                    return
                except NodeExistsError:
                    continue
            try:
                self.client.set(path, merge(data), version=stat.version)
                return
            except (BadVersionError, NoNodeError):
                continue

    def merge_reassignment(self, targets: Mapping[tuple[str, int], tuple[int, ...]]) -> None:
        """Add ``targets`` to ``/admin/reassign_partitions`` (created if absent), replacing
        those partitions' earlier targets: how a move in flight is re-targeted or, with its
        original replicas, cancelled (KIP-455). Read-modify-write against the controller,
        which removes finished partitions and the node meanwhile. One writer for the
        Kafka API (AlterPartitionReassignments) and the operator; an unreadable node is
        replaced."""

        def merge(data: bytes | None) -> bytes:
            existing: dict[tuple[str, int], tuple[int, ...]] = {}
            if data:
                try:
                    existing = dict(PartitionReassignment.from_json(data).partitions)
                except (ValueError, ZkDataError):
                    existing = {}
            existing.update(targets)
            return PartitionReassignment(existing).to_json()

        self._merge_znode(paths.ADMIN_REASSIGN_PARTITIONS, merge)

    def merge_preferred_replica_election(self, partitions: Iterable[tuple[str, int]]) -> None:
        """Add ``partitions`` to ``/admin/preferred_replica_election`` (created if absent),
        keeping those already pending (ElectLeaders); an unreadable node is replaced."""
        to_elect = tuple(partitions)

        def merge(data: bytes | None) -> bytes:
            existing: tuple[tuple[str, int], ...] = ()
            if data:
                try:
                    existing = PreferredReplicaElection.from_json(data).partitions
                except (ValueError, ZkDataError):
                    existing = ()
            return PreferredReplicaElection(tuple(dict.fromkeys(existing + to_elect))).to_json()

        self._merge_znode(paths.ADMIN_PREFERRED_REPLICA_ELECTION, merge)

    def claim_producer_id_block(
        self, next_block: Callable[[ProducerIdBlock | None], ProducerIdBlock]
    ) -> ProducerIdBlock:
        """Claim the block after ``/latest_producer_id_block`` with a conditional write
        (Kafka's ``ZkProducerIdManager``); retries when another broker won."""
        path = paths.LATEST_PRODUCER_ID_BLOCK
        while True:
            try:
                data, stat = self.client.get(path)
            except NoNodeError:
                block = next_block(None)
                try:
                    self.client.create(path, block.to_json(), makepath=True)
                    return block
                except NodeExistsError:
                    continue
            block = next_block(ProducerIdBlock.from_json(data) if data else None)
            try:
                self.client.set(path, block.to_json(), version=stat.version)
                return block
            except BadVersionError:
                continue

    def list_broker_config_entities(self) -> set[int]:
        """Broker ids under ``/config/brokers`` (``<default>`` left out)."""
        try:
            children = self.client.get_children(paths.CONFIG_BROKERS)
        except NoNodeError:
            return set()
        return {int(name) for name in children if name.isdigit()}

    def remove_stale_registrations(self, broker_id: int) -> list[str]:
        """Delete ``/brokers/ids/<id>`` and (if it names this broker) ``/controller`` when
        an earlier session owns them: a killed process of this broker left them, and
        ZooKeeper would keep them until that session times out. Returns the paths removed.
        Only safe for a process that holds the broker's log dir locks."""
        session_id = self.client.client_id[0] if self.client.client_id else None
        stale = [paths.broker_path(broker_id)]
        controller = self.get_controller()
        if controller is not None and controller.broker_id == broker_id:
            stale.append(paths.CONTROLLER)
        removed = []
        for path in stale:
            stat = self.client.exists(path)
            if stat is not None and stat.ephemeralOwner not in (0, session_id):
                with contextlib.suppress(NoNodeError):
                    self.client.delete(path, version=stat.version)
                    removed.append(path)
        return removed

    def deregister_broker(self, broker_id: int) -> None:
        """Delete ``/brokers/ids/<id>`` (controlled shutdown); NoNodeError if absent."""
        self.client.delete(paths.broker_path(broker_id))

    def deregister_broker_async(self, broker_id: int) -> Any:
        """``deregister_broker`` sent now, its outcome (``.get()``) awaited later."""
        return self.client.delete_async(paths.broker_path(broker_id))

    def request_preferred_replica_election(self, partitions: Iterable[tuple[str, int]]) -> None:
        """Create ``/admin/preferred_replica_election``; NodeExistsError if one is pending."""
        self.client.create(
            paths.ADMIN_PREFERRED_REPLICA_ELECTION,
            PreferredReplicaElection(tuple(partitions)).to_json(),
            makepath=True,
        )

    def notify_log_dir_failure(self, broker_id: int, partitions: Iterable[tuple[str, int]]) -> str:
        """Create a ``/log_dir_event_notification/log_dir_event_<seq>`` for the controller:
        ``partitions`` of ``broker_id`` are offline (their log dir failed)."""
        return self.client.create(
            paths.LOG_DIR_EVENT_PREFIX,
            LogDirEventNotification(broker_id, tuple(partitions)).to_json(),
            sequence=True,
            makepath=True,
        )

    def notify_isr_change(self, partitions: Iterable[tuple[str, int]]) -> str:
        """Create an ``/isr_change_notification/isr_change_<seq>`` for the controller."""
        return self.client.create(
            paths.ISR_CHANGE_PREFIX,
            IsrChangeNotification(tuple(partitions)).to_json(),
            sequence=True,
            makepath=True,
        )
