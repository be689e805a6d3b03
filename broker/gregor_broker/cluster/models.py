"""The JSON stored in Kafka's ZooKeeper layout, as small frozen dataclasses.

Each model has one ``to_json() -> bytes`` / ``from_json(bytes)`` pair and lives next to
the path it is stored at (see ``zk_paths``). What Kafka brokers and Kafka's admin tools
wrote must parse here (older versions, missing optional fields); what we write uses
Kafka's field names and versions. No ZooKeeper I/O here: ``admin`` does that.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..config import parse_listener


class ZkDataError(ValueError):
    """A znode's content is not the JSON Kafka would have written there."""


def _now_ms() -> str:
    return str(int(time.time() * 1000))


def _dump(obj: Mapping[str, Any]) -> bytes:
    # Kafka's Json.encodeAsBytes writes compact JSON.
    return json.dumps(obj, separators=(",", ":")).encode("utf-8")


def _load(data: bytes | str | None, what: str) -> dict[str, Any]:
    if data is None or len(data) == 0:
        raise ZkDataError(f"{what}: empty znode, expected a JSON object")
    try:
        obj = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ZkDataError(f"{what}: not JSON ({exc}): {data!r:.200}") from exc
    if not isinstance(obj, dict):
        raise ZkDataError(f"{what}: expected a JSON object, got {data!r:.200}")
    return obj


def _require(obj: Mapping[str, Any], key: str, what: str) -> Any:
    try:
        return obj[key]
    except KeyError:
        raise ZkDataError(f"{what}: missing field {key!r} in {obj!r:.200}") from None


# --- Kafka's Uuid: 16 bytes, shown as URL-safe base64 without padding -------------------

ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"
METADATA_TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAQ"


def uuid_to_str(raw: bytes) -> str:
    """Kafka's ``Uuid.toString``: URL-safe base64 of the 16 bytes, no padding."""
    if len(raw) != 16:
        raise ValueError(f"a Kafka Uuid is 16 bytes, got {len(raw)}")
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def uuid_from_str(text: str) -> bytes:
    """Kafka's ``Uuid.fromString``; raises ValueError unless it decodes to 16 bytes."""
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if len(raw) != 16:
        raise ValueError(f"{text!r} is not a Kafka Uuid (decodes to {len(raw)} bytes, not 16)")
    return raw


def new_uuid() -> str:
    """A random id as Kafka's ``Uuid.randomUuid`` makes it (topic ids, cluster ids).

    Matches Kafka: never the zero or metadata-topic id, and never starting with '-', which
    command-line tools would take for an option.
    """
    while True:
        text = uuid_to_str(uuid.uuid4().bytes)
        if text not in (ZERO_UUID, METADATA_TOPIC_ID) and not text.startswith("-"):
            return text


# --- /cluster/id ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ClusterId:
    """``/cluster/id``: ``{"version":"1","id":"<base64 uuid>"}`` (version is a string)."""

    id: str

    def to_json(self) -> bytes:
        return _dump({"version": "1", "id": self.id})

    @classmethod
    def from_json(cls, data: bytes) -> ClusterId:
        obj = _load(data, "/cluster/id")
        return cls(id=str(_require(obj, "id", "/cluster/id")))


# --- /brokers/ids/<id> ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """``/brokers/ids/<id>`` (ephemeral), version 5 as Kafka 2.7+ writes it.

    ``host``/``port`` are the PLAINTEXT endpoint (None/-1 without one), as in Kafka.
    ``endpoints`` keeps Kafka's connection strings, ``"LISTENER://host:port"``.
    """

    host: str | None
    port: int
    endpoints: tuple[str, ...]
    listener_security_protocol_map: Mapping[str, str] = field(default_factory=dict)
    rack: str | None = None
    jmx_port: int = -1
    timestamp: str = field(default_factory=_now_ms)
    features: Mapping[str, Any] | None = None
    version: int = 5

    def endpoint_tuples(self) -> list[tuple[str, str, int]]:
        """``(listener name, host, port)`` for each endpoint."""
        return [parse_listener(e) for e in self.endpoints]

    def security_protocol(self, listener_name: str) -> str:
        return self.listener_security_protocol_map.get(listener_name, listener_name)

    def to_json(self) -> bytes:
        obj: dict[str, Any] = {
            "version": self.version,
            "host": self.host,
            "port": self.port,
            "endpoints": list(self.endpoints),
            "jmx_port": self.jmx_port,
            "timestamp": self.timestamp,
        }
        if self.rack is not None:
            obj["rack"] = self.rack
        if self.version >= 4:
            obj["listener_security_protocol_map"] = dict(self.listener_security_protocol_map)
        if self.version >= 5:
            obj["features"] = dict(self.features or {})
        return _dump(obj)

    @classmethod
    def from_json(cls, data: bytes) -> BrokerRegistration:
        what = "/brokers/ids/<id>"
        obj = _load(data, what)
        version = int(obj.get("version", 1))
        host = obj.get("host")
        port = int(obj.get("port", -1))
        endpoints = obj.get("endpoints")
        if endpoints is None:
            # Version 1 had only host and port, always PLAINTEXT.
            endpoints = [f"PLAINTEXT://{host}:{port}"] if host is not None else []
        timestamp = obj.get("timestamp")
        return cls(
            host=host,
            port=port,
            endpoints=tuple(str(e) for e in endpoints),
            listener_security_protocol_map=dict(obj.get("listener_security_protocol_map") or {}),
            rack=obj.get("rack"),
            jmx_port=int(obj.get("jmx_port", -1)),
            timestamp=str(timestamp) if timestamp is not None else "",
            features=obj.get("features"),
            version=version,
        )


# --- /brokers/topics/<topic> ------------------------------------------------------------


def _int_keyed(obj: Any, what: str) -> dict[int, tuple[int, ...]]:
    if obj is None:
        return {}
    if not isinstance(obj, dict):
        raise ZkDataError(f"{what}: expected an object of partition -> replicas, got {obj!r:.200}")
    try:
        return {int(p): tuple(int(r) for r in replicas) for p, replicas in obj.items()}
    except (TypeError, ValueError) as exc:
        raise ZkDataError(f"{what}: bad partition map {obj!r:.200}") from exc


def _str_keyed(obj: Mapping[int, tuple[int, ...]]) -> dict[str, list[int]]:
    return {str(p): list(obj[p]) for p in sorted(obj)}


@dataclass(frozen=True, slots=True)
class TopicAssignment:
    """``/brokers/topics/<topic>``: replicas per partition, and reassignment in flight (KIP-455).

    Version 3 carries ``topic_id``; versions 1 and 2 (older Kafka) have none and parse with
    ``topic_id=None``.
    """

    partitions: Mapping[int, tuple[int, ...]]
    topic_id: str | None = None
    adding_replicas: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    removing_replicas: Mapping[int, tuple[int, ...]] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        partitions: Mapping[int, list[int] | tuple[int, ...]],
        topic_id: str | None = None,
    ) -> TopicAssignment:
        return cls({int(p): tuple(r) for p, r in partitions.items()}, topic_id)

    def to_json(self) -> bytes:
        obj: dict[str, Any] = {
            "version": 3,
            "partitions": _str_keyed(self.partitions),
            "adding_replicas": _str_keyed(self.adding_replicas),
            "removing_replicas": _str_keyed(self.removing_replicas),
        }
        if self.topic_id is not None:
            obj["topic_id"] = self.topic_id
        return _dump(obj)

    @classmethod
    def from_json(cls, data: bytes) -> TopicAssignment:
        what = "/brokers/topics/<topic>"
        obj = _load(data, what)
        topic_id = obj.get("topic_id")
        return cls(
            partitions=_int_keyed(_require(obj, "partitions", what), what),
            topic_id=str(topic_id) if topic_id is not None else None,
            adding_replicas=_int_keyed(obj.get("adding_replicas"), what),
            removing_replicas=_int_keyed(obj.get("removing_replicas"), what),
        )


# --- /brokers/topics/<t>/partitions/<p>/state -------------------------------------------


@dataclass(frozen=True, slots=True)
class PartitionState:
    """``.../partitions/<p>/state``: the leader, its epoch and the in-sync replicas.

    ``leader`` is -1 when the partition has no leader. ``leader_recovery_state`` is
    Kafka 3.2+'s field (1 = RECOVERING after an unclean election); Kafka writes it only
    when it is not 0, and so do we.
    """

    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    leader_recovery_state: int = 0

    def to_json(self) -> bytes:
        obj: dict[str, Any] = {
            "version": 1,
            "leader": self.leader,
            "leader_epoch": self.leader_epoch,
            "controller_epoch": self.controller_epoch,
            "isr": list(self.isr),
        }
        if self.leader_recovery_state:
            obj["leader_recovery_state"] = self.leader_recovery_state
        return _dump(obj)

    @classmethod
    def from_json(cls, data: bytes) -> PartitionState:
        what = "partition state"
        obj = _load(data, what)
        return cls(
            controller_epoch=int(_require(obj, "controller_epoch", what)),
            leader=int(_require(obj, "leader", what)),
            leader_epoch=int(_require(obj, "leader_epoch", what)),
            isr=tuple(int(b) for b in _require(obj, "isr", what)),
            leader_recovery_state=int(obj.get("leader_recovery_state", 0)),
        )


# --- /controller and /controller_epoch --------------------------------------------------


@dataclass(frozen=True, slots=True)
class ControllerRegistration:
    """``/controller`` (ephemeral): ``{"version":1,"brokerid":1,"timestamp":"..."}``."""

    broker_id: int
    timestamp: str = field(default_factory=_now_ms)
    kraft_controller_epoch: int | None = None  # only during a Kafka ZK-to-KRaft migration

    def to_json(self) -> bytes:
        obj: dict[str, Any] = {
            "version": 1,
            "brokerid": self.broker_id,
            "timestamp": self.timestamp,
        }
        if self.kraft_controller_epoch is not None:
            obj["kraftControllerEpoch"] = self.kraft_controller_epoch
        return _dump(obj)

    @classmethod
    def from_json(cls, data: bytes) -> ControllerRegistration:
        obj = _load(data, "/controller")
        epoch = obj.get("kraftControllerEpoch")
        return cls(
            broker_id=int(_require(obj, "brokerid", "/controller")),
            timestamp=str(obj.get("timestamp", "")),
            kraft_controller_epoch=int(epoch) if epoch is not None else None,
        )


def encode_controller_epoch(epoch: int) -> bytes:
    """``/controller_epoch`` holds the bare decimal number, e.g. ``b"7"``."""
    return str(epoch).encode("ascii")


def decode_controller_epoch(data: bytes) -> int:
    try:
        return int(data.decode("ascii").strip())
    except (ValueError, UnicodeDecodeError) as exc:
        raise ZkDataError(f"/controller_epoch: expected a number, got {data!r:.100}") from exc


# --- /config/<entity type>/<entity> and /config/changes ---------------------------------


@dataclass(frozen=True, slots=True)
class EntityConfig:
    """``/config/topics/<t>``, ``/config/users/<u>``, ...: ``{"version":1,"config":{..}}``.

    Every value is a string, as Kafka stores them.
    """

    config: Mapping[str, str] = field(default_factory=dict)

    def to_json(self) -> bytes:
        return _dump({"version": 1, "config": {k: str(v) for k, v in self.config.items()}})

    @classmethod
    def from_json(cls, data: bytes | None) -> EntityConfig:
        if not data:
            return cls({})
        obj = _load(data, "entity config")
        config = obj.get("config") or {}
        if not isinstance(config, dict):
            raise ZkDataError(f"entity config: 'config' must be an object, got {config!r:.200}")
        return cls({str(k): str(v) for k, v in config.items()})


@dataclass(frozen=True, slots=True)
class ConfigChangeNotification:
    """``/config/changes/config_change_<seq>``: ``{"version":2,"entity_path":"topics/<t>"}``.

    Version 1 (``entity_type`` + ``entity_name``, Kafka before 1.1) parses too.
    """

    entity_path: str

    @property
    def entity_type(self) -> str:
        return self.entity_path.split("/", 1)[0]

    def to_json(self) -> bytes:
        return _dump({"version": 2, "entity_path": self.entity_path})

    @classmethod
    def from_json(cls, data: bytes) -> ConfigChangeNotification:
        what = "config change notification"
        obj = _load(data, what)
        if "entity_path" in obj:
            return cls(str(obj["entity_path"]))
        entity_type = _require(obj, "entity_type", what)
        entity_name = _require(obj, "entity_name", what)
        return cls(f"{entity_type}/{entity_name}")


# --- /admin/* and /isr_change_notification ----------------------------------------------

TopicPartition = tuple[str, int]


def _topic_partitions(obj: Mapping[str, Any], what: str) -> list[dict[str, Any]]:
    partitions = _require(obj, "partitions", what)
    if not isinstance(partitions, list):
        raise ZkDataError(f"{what}: 'partitions' must be a list, got {partitions!r:.200}")
    return partitions


@dataclass(frozen=True, slots=True)
class PartitionReassignment:
    """``/admin/reassign_partitions``: target replicas per partition.

    ``{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2,3]}]}``; the
    ``log_dirs`` field kafka-reassign-partitions accepts is ignored (Gregor has one log dir
    per broker).
    """

    partitions: Mapping[TopicPartition, tuple[int, ...]]

    def to_json(self) -> bytes:
        entries = [
            {"topic": t, "partition": p, "replicas": list(r)}
            for (t, p), r in sorted(self.partitions.items())
        ]
        return _dump({"version": 1, "partitions": entries})

    @classmethod
    def from_json(cls, data: bytes) -> PartitionReassignment:
        what = "/admin/reassign_partitions"
        obj = _load(data, what)
        result: dict[TopicPartition, tuple[int, ...]] = {}
        for entry in _topic_partitions(obj, what):
            key = (str(_require(entry, "topic", what)), int(_require(entry, "partition", what)))
            result[key] = tuple(int(b) for b in _require(entry, "replicas", what))
        return cls(result)


@dataclass(frozen=True, slots=True)
class TopicPartitionList:
    """``{"version":1,"partitions":[{"topic":"t","partition":0}]}``.

    The shape of ``/admin/preferred_replica_election`` and of
    ``/isr_change_notification/isr_change_<seq>``.
    """

    partitions: tuple[TopicPartition, ...]

    def to_json(self) -> bytes:
        entries = [{"topic": t, "partition": p} for t, p in self.partitions]
        return _dump({"version": 1, "partitions": entries})

    @classmethod
    def from_json(cls, data: bytes) -> TopicPartitionList:
        what = "topic partition list"
        obj = _load(data, what)
        return cls(
            tuple(
                (str(_require(e, "topic", what)), int(_require(e, "partition", what)))
                for e in _topic_partitions(obj, what)
            )
        )


class PreferredReplicaElection(TopicPartitionList):
    """``/admin/preferred_replica_election``."""

    __slots__ = ()


class IsrChangeNotification(TopicPartitionList):
    """``/isr_change_notification/isr_change_<seq>``."""

    __slots__ = ()


LOG_DIR_FAILURE_EVENT = 1  # Kafka's LogDirEventNotificationHandler.LogDirFailureEvent


@dataclass(frozen=True, slots=True)
class LogDirEventNotification:
    """``/log_dir_event_notification/log_dir_event_<seq>``: a broker's log dir failed.

    Kafka's shape is ``{"version":1,"broker":1,"event":1}``; Kafka's controller then asks
    the broker (LeaderAndIsr) which replicas are offline. Gregor has no LeaderAndIsr, so
    the broker lists them in ``partitions`` (an extra field Kafka's reader ignores).
    """

    broker: int
    partitions: tuple[TopicPartition, ...] = ()
    event: int = LOG_DIR_FAILURE_EVENT

    def to_json(self) -> bytes:
        entries = [{"topic": t, "partition": p} for t, p in self.partitions]
        return _dump(
            {"version": 1, "broker": self.broker, "event": self.event, "partitions": entries}
        )

    @classmethod
    def from_json(cls, data: bytes) -> LogDirEventNotification:
        what = "/log_dir_event_notification"
        obj = _load(data, what)
        entries = obj.get("partitions") or []
        if not isinstance(entries, list):
            raise ZkDataError(f"{what}: 'partitions' must be a list, got {entries!r:.200}")
        return cls(
            int(_require(obj, "broker", what)),
            tuple(
                (str(_require(e, "topic", what)), int(_require(e, "partition", what)))
                for e in entries
            ),
            int(obj.get("event", LOG_DIR_FAILURE_EVENT)),
        )


# --- /latest_producer_id_block ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProducerIdBlock:
    """``/latest_producer_id_block``: the last block of producer ids handed to a broker.

    Matches Kafka: ``block_start`` and ``block_end`` are written as strings (longs).
    """

    broker: int
    block_start: int
    block_end: int

    def to_json(self) -> bytes:
        return _dump(
            {
                "version": 1,
                "broker": self.broker,
                "block_start": str(self.block_start),
                "block_end": str(self.block_end),
            }
        )

    @classmethod
    def from_json(cls, data: bytes) -> ProducerIdBlock:
        what = "/latest_producer_id_block"
        obj = _load(data, what)
        return cls(
            broker=int(_require(obj, "broker", what)),
            block_start=int(_require(obj, "block_start", what)),
            block_end=int(_require(obj, "block_end", what)),
        )
