"""Client quota configs in ZooKeeper: entity paths, Kafka's value formats, reads and writes.

Kafka keeps client quotas under ``/config/users/<u>``, ``/config/clients/<c>`` and
``/config/users/<u>/clients/<c>`` (names sanitized, ``<default>`` for the default entity)
and announces each change with a ``/config/changes`` notification. This module is the one
writer of those nodes: the AlterClientQuotas handler, ``gregor quotas``, ``gregor
configs`` (users/clients) and the operator's Quota planner all go through
``alter_quota_config`` / ``format_quota_value``, so the Kafka API and the CLI merge a
change into the existing node the same way. The brokers' quota enforcement
(``server/quotas.py``) reads what is written here.
"""

from __future__ import annotations

import math

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from .admin import ZkAdmin
from .zk_paths import DEFAULT_ENTITY, desanitize, sanitize

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
QUOTA_KEYS = (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE)
# Kafka stores the byte rates as longs and request_percentage as a double.
INTEGRAL_QUOTA_KEYS = frozenset({PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE})

UserName = str | None  # None: the entity has no user part
ClientName = str | None  # None: the entity has no client-id part
Entity = tuple[UserName, ClientName]


class InvalidQuotaRequest(ValueError):
    pass


# -- entity paths --------------------------------------------------------------------------


def entity_path(user: UserName, client_id: ClientName) -> str:
    """``users/<u>``, ``clients/<c>`` or ``users/<u>/clients/<c>`` (names sanitized,
    ``<default>`` kept), as under ``/config`` and in ``/config/changes`` notifications."""
    if user is None and client_id is None:
        raise ValueError("a quota entity needs a user, a client id, or both")
    parts = []
    if user is not None:
        parts.append(f"users/{_sanitize(user)}")
    if client_id is not None:
        parts.append(f"clients/{_sanitize(client_id)}")
    return "/".join(parts)


def parse_entity_path(path: str) -> Entity:
    """Inverse of :func:`entity_path`; ValueError for anything that is not a quota entity."""
    parts = path.strip("/").split("/")
    if len(parts) == 2 and parts[0] == "users":
        return _desanitize(parts[1]), None
    if len(parts) == 2 and parts[0] == "clients":
        return None, _desanitize(parts[1])
    if len(parts) == 4 and parts[0] == "users" and parts[2] == "clients":
        return _desanitize(parts[1]), _desanitize(parts[3])
    raise ValueError(f"not a client quota entity path: {path!r}")


def _sanitize(name: str) -> str:
    return name if name == DEFAULT_ENTITY else sanitize(name)


def _desanitize(name: str) -> str:
    return name if name == DEFAULT_ENTITY else desanitize(name)


def describe_entity(entity: Entity) -> str:
    """``user=alice, client-id=<default>``: how CLIs and logs name an entity."""
    user, client_id = entity
    parts = []
    if user is not None:
        parts.append(f"user={user}")
    if client_id is not None:
        parts.append(f"client-id={client_id}")
    return ", ".join(parts)


def read_all_quota_configs(zk_admin: ZkAdmin) -> dict[Entity, dict[str, float]]:
    """Every quota entity in ZooKeeper with its quota values (other keys ignored)."""
    client = zk_admin.client
    paths = []
    for user in _children(client, "/config/users"):
        paths.append(f"users/{user}")
        paths.extend(
            f"users/{user}/clients/{c}" for c in _children(client, f"/config/users/{user}/clients")
        )
    paths.extend(f"clients/{c}" for c in _children(client, "/config/clients"))
    found: dict[Entity, dict[str, float]] = {}
    for path in paths:
        values = {}
        for key, value in zk_admin.get_entity_config(path).items():
            if key in QUOTA_KEYS:
                try:
                    values[key] = float(value)
                except ValueError:
                    continue
        if values:
            found[parse_entity_path(path)] = values
    return found


def _children(client: KazooClient, path: str) -> list[str]:
    try:
        return sorted(client.get_children(path))
    except NoNodeError:
        return []


def alter_quota_config(
    zk_admin: ZkAdmin, entity: Entity, changes: dict[str, float | None]
) -> dict[str, str]:
    """Set (a float) or remove (None) quota keys of an entity; the node goes when empty.

    Writes the config node, then the change notification (``ZkAdmin.set_entity_config``).
    """
    path = entity_path(*entity)
    config = zk_admin.get_entity_config(path)
    for key, value in changes.items():
        if value is None:
            config.pop(key, None)
        else:
            config[key] = format_quota_value(key, value)
    zk_admin.set_entity_config(path, config)
    return config


def format_quota_value(key: str, value: float) -> str:
    """Kafka's strings: byte rates are longs ("1048576"), request_percentage a double."""
    if key in INTEGRAL_QUOTA_KEYS:
        return str(int(value))
    return repr(float(value))


def validate_quota_value(key: str, value: float) -> None:
    if not math.isfinite(value) or value <= 0:
        raise InvalidQuotaRequest(f"{key} must be a positive number, not {value}")
    if key in INTEGRAL_QUOTA_KEYS and value != int(value):
        raise InvalidQuotaRequest(f"{key} is a whole number of bytes per second, not {value}")
