"""Kafka's ZooKeeper layout (ZooKeeper mode, Kafka 2.x/3.x): every path Gregor reads or writes.

This module owns path names and the ``Sanitizer`` encoding of entity names in paths. It does
not own the JSON stored at those paths (``models``) nor any ZooKeeper I/O (``admin``).
"""

from __future__ import annotations

from urllib.parse import unquote_plus

CLUSTER_ID = "/cluster/id"
BROKERS = "/brokers"
BROKER_IDS = "/brokers/ids"
BROKER_TOPICS = "/brokers/topics"
BROKER_SEQUENCE_ID = "/brokers/seqid"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
CONFIG = "/config"
CONFIG_TOPICS = "/config/topics"
CONFIG_USERS = "/config/users"
CONFIG_CLIENTS = "/config/clients"
CONFIG_BROKERS = "/config/brokers"
CONFIG_IPS = "/config/ips"
CONFIG_CHANGES = "/config/changes"
CONFIG_CHANGE_PREFIX = "/config/changes/config_change_"
ADMIN = "/admin"
ADMIN_DELETE_TOPICS = "/admin/delete_topics"
ADMIN_REASSIGN_PARTITIONS = "/admin/reassign_partitions"
ADMIN_PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
ISR_CHANGE_PREFIX = "/isr_change_notification/isr_change_"
LATEST_PRODUCER_ID_BLOCK = "/latest_producer_id_block"
LOG_DIR_EVENT_NOTIFICATION = "/log_dir_event_notification"
LOG_DIR_EVENT_PREFIX = "/log_dir_event_notification/log_dir_event_"
CONSUMERS = "/consumers"

# The entity name Kafka uses for default quotas and default broker configs.
DEFAULT_ENTITY = "<default>"

# Persistent parents Kafka's KafkaZkClient.createTopLevelPaths() creates at broker start-up.
PERSISTENT_PATHS: tuple[str, ...] = (
    CONSUMERS,
    BROKER_IDS,
    BROKER_TOPICS,
    BROKER_SEQUENCE_ID,
    CONFIG_CHANGES,
    CONFIG_TOPICS,
    CONFIG_CLIENTS,
    CONFIG_USERS,
    CONFIG_BROKERS,
    CONFIG_IPS,
    ADMIN_DELETE_TOPICS,
    ISR_CHANGE_NOTIFICATION,
    LOG_DIR_EVENT_NOTIFICATION,
)


def broker_path(broker_id: int) -> str:
    """``/brokers/ids/<id>``, the ephemeral registration of a live broker."""
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    """``/brokers/topics/<topic>``, the topic's replica assignment."""
    return f"{BROKER_TOPICS}/{topic}"


def topic_partitions_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions"


def partition_path(topic: str, partition: int) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions/{partition}"


def partition_state_path(topic: str, partition: int) -> str:
    """``/brokers/topics/<t>/partitions/<p>/state``: leader, leader epoch, ISR."""
    return f"{BROKER_TOPICS}/{topic}/partitions/{partition}/state"


def topic_config_path(topic: str) -> str:
    """``/config/topics/<topic>``: the topic's config overrides."""
    return f"{CONFIG_TOPICS}/{topic}"


def broker_config_path(broker_id: int | str) -> str:
    """``/config/brokers/<id>`` (or ``<default>``): dynamic broker configs."""
    return f"{CONFIG_BROKERS}/{broker_id}"


def user_config_path(user: str) -> str:
    """``/config/users/<sanitized user>``; pass ``DEFAULT_ENTITY`` for the default quota."""
    return f"{CONFIG_USERS}/{_entity(user)}"


def client_config_path(client_id: str) -> str:
    """``/config/clients/<sanitized client id>``."""
    return f"{CONFIG_CLIENTS}/{_entity(client_id)}"


def user_client_config_path(user: str, client_id: str) -> str:
    """``/config/users/<user>/clients/<client id>``, both sanitized."""
    return f"{CONFIG_USERS}/{_entity(user)}/clients/{_entity(client_id)}"


def entity_config_path(entity_path: str) -> str:
    """``/config/<entity_path>`` for an already sanitized entity path like ``topics/orders``."""
    return f"{CONFIG}/{entity_path}"


def delete_topic_path(topic: str) -> str:
    """``/admin/delete_topics/<topic>``: a request for the controller to delete the topic."""
    return f"{ADMIN_DELETE_TOPICS}/{topic}"


def _entity(name: str) -> str:
    return name if name == DEFAULT_ENTITY else sanitize(name)


# java.net.URLEncoder leaves these bytes alone (and '*', which Kafka then escapes).
_UNRESERVED = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_")


def sanitize(name: str) -> str:
    """Encode a user principal or client id for a znode name, like Kafka's ``Sanitizer``.

    Matches Kafka: URL-encode as ``java.net.URLEncoder`` does (UTF-8, upper-case hex), then
    ``*`` becomes ``%2A`` (JMX treats it as a pattern) and ``+`` (an encoded space) ``%20``.
    """
    out: list[str] = []
    for byte in name.encode("utf-8"):
        if byte in _UNRESERVED:
            out.append(chr(byte))
        else:
            # Space would be '+' from URLEncoder, and '*' kept: Kafka rewrites both to %XX.
            out.append(f"%{byte:02X}")
    return "".join(out)


def desanitize(name: str) -> str:
    """Inverse of :func:`sanitize`, like Kafka's ``Sanitizer.desanitize`` (URLDecoder)."""
    return unquote_plus(name, encoding="utf-8", errors="strict")
