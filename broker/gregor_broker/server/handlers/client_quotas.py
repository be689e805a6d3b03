"""DescribeClientQuotas (48) and AlterClientQuotas (49): client quotas through the Kafka API.

Quotas live in ZooKeeper (``/config/users/...``, ``/config/clients/...``) and change with a
``/config/changes`` notification, exactly as ``kafka-configs.sh`` wrote them; every broker
picks the change up from there (see ``server/quotas.py``). Both APIs read and write
ZooKeeper directly, so Kafka's admin clients, ``gregor quotas`` and the operator agree.
Entity types are ``user`` and ``client-id``; ``ip`` quotas are not implemented and get
INVALID_REQUEST.
"""

from __future__ import annotations

import asyncio
import math
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from ...cluster.zk_paths import DEFAULT_ENTITY
from ..quotas import INTEGRAL_QUOTA_KEYS, QUOTA_KEYS, Entity, entity_path, parse_entity_path

if TYPE_CHECKING:
    from ...cluster.admin import ZkAdmin
    from ..broker import Broker
    from ..request_router import RequestContext

USER = "user"
CLIENT_ID = "client-id"
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2


class InvalidQuotaRequest(ValueError):
    pass


# -- DescribeClientQuotas ------------------------------------------------------------------


async def handle_describe_client_quotas(
    broker: Broker, context: RequestContext, request: Any
) -> dict[str, Any]:
    try:
        filters = _filters(request.components)
    except InvalidQuotaRequest as error:
        return _describe_error(str(error))
    try:
        configs = await asyncio.to_thread(read_all_quota_configs, broker.zk_admin)
    except Exception as error:  # ZooKeeper unreachable
        return {
            "throttle_time": 0,
            "error_code": ErrorCode.unknown_server_error,
            "error_message": f"reading quotas from ZooKeeper failed: {error}",
            "entries": None,
        }
    entries = []
    for entity, values in sorted(configs.items(), key=lambda item: _sort_key(item[0])):
        if not _matches(entity, filters, request.strict):
            continue
        entries.append(
            {
                "entity": _entity_data(entity),
                "values": [{"key": key, "value": value} for key, value in sorted(values.items())],
            }
        )
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "error_message": None,
        "entries": entries,
    }


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


def _children(client: Any, path: str) -> list[str]:
    from kazoo.exceptions import NoNodeError

    try:
        return sorted(client.get_children(path))
    except NoNodeError:
        return []


def _filters(components: Any) -> dict[str, tuple[int, str | None]]:
    filters: dict[str, tuple[int, str | None]] = {}
    for component in components:
        entity_type = component.entity_type
        if entity_type not in (USER, CLIENT_ID):
            raise InvalidQuotaRequest(
                f"entity type {entity_type!r} is not supported (user and client-id are)"
            )
        if entity_type in filters:
            raise InvalidQuotaRequest(f"entity type {entity_type!r} appears twice in the filter")
        if component.match_type == MATCH_EXACT and component.match is None:
            raise InvalidQuotaRequest(f"an exact match on {entity_type} needs a name")
        if component.match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED):
            raise InvalidQuotaRequest(f"unknown match type {component.match_type}")
        filters[entity_type] = (component.match_type, component.match)
    return filters


def _matches(entity: Entity, filters: dict[str, tuple[int, str | None]], strict: bool) -> bool:
    """Matches Kafka's ZooKeeper-mode describeClientQuotas filter."""
    for entity_type, name in ((USER, entity[0]), (CLIENT_ID, entity[1])):
        component = filters.get(entity_type)
        if component is None:
            if strict and name is not None:
                return False
            continue
        match_type, match = component
        if name is None:
            return False
        if match_type == MATCH_EXACT and name != match:
            return False
        if match_type == MATCH_DEFAULT and name != DEFAULT_ENTITY:
            return False
    return True


def _entity_data(entity: Entity) -> list[dict[str, Any]]:
    data = []
    for entity_type, name in ((USER, entity[0]), (CLIENT_ID, entity[1])):
        if name is not None:
            data.append(
                {
                    "entity_type": entity_type,
                    "entity_name": None if name == DEFAULT_ENTITY else name,
                }
            )
    return data


def _sort_key(entity: Entity) -> tuple[str, str]:
    return (entity[0] or "", entity[1] or "")


def _describe_error(message: str) -> dict[str, Any]:
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.invalid_request,
        "error_message": message,
        "entries": None,
    }


# -- AlterClientQuotas ---------------------------------------------------------------------


async def handle_alter_client_quotas(
    broker: Broker, context: RequestContext, request: Any
) -> dict[str, Any]:
    results = []
    for entry in request.entries:
        result: dict[str, Any] = {
            "error_code": ErrorCode.none,
            "error_message": None,
            "entity": [
                {"entity_type": e.entity_type, "entity_name": e.entity_name} for e in entry.entity
            ],
        }
        results.append(result)
        try:
            entity = _entity(entry.entity)
            changes = _changes(entry.ops)
        except InvalidQuotaRequest as error:
            result.update(error_code=ErrorCode.invalid_request, error_message=str(error))
            continue
        if request.validate_only:
            continue
        try:
            await asyncio.to_thread(alter_quota_config, broker.zk_admin, entity, changes)
        except Exception as error:  # ZooKeeper unreachable
            result.update(
                error_code=ErrorCode.unknown_server_error,
                error_message=f"writing the quota to ZooKeeper failed: {error}",
            )
    return {"throttle_time": 0, "entries": results}


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


def _entity(components: Any) -> Entity:
    user: str | None = None
    client_id: str | None = None
    seen = set()
    for component in components:
        entity_type = component.entity_type
        if entity_type in seen:
            raise InvalidQuotaRequest(f"entity type {entity_type!r} appears twice")
        seen.add(entity_type)
        name = DEFAULT_ENTITY if component.entity_name is None else component.entity_name
        if entity_type == USER:
            user = name
        elif entity_type == CLIENT_ID:
            client_id = name
        else:
            raise InvalidQuotaRequest(
                f"entity type {entity_type!r} is not supported (user and client-id are)"
            )
        if name == "":
            raise InvalidQuotaRequest(f"empty {entity_type} name (null means the default)")
    if user is None and client_id is None:
        raise InvalidQuotaRequest("the entity names neither a user nor a client-id")
    return user, client_id


def _changes(ops: Any) -> dict[str, float | None]:
    changes: dict[str, float | None] = {}
    for op in ops:
        key = op.key
        if key not in QUOTA_KEYS:
            raise InvalidQuotaRequest(f"unknown quota key {key!r} (known: {', '.join(QUOTA_KEYS)})")
        if key in changes:
            raise InvalidQuotaRequest(f"quota key {key!r} appears twice")
        if op.remove:
            changes[key] = None
            continue
        value = float(op.value)
        validate_quota_value(key, value)
        changes[key] = value
    return changes


def validate_quota_value(key: str, value: float) -> None:
    if not math.isfinite(value) or value <= 0:
        raise InvalidQuotaRequest(f"{key} must be a positive number, not {value}")
    if key in INTEGRAL_QUOTA_KEYS and value != int(value):
        raise InvalidQuotaRequest(f"{key} is a whole number of bytes per second, not {value}")
