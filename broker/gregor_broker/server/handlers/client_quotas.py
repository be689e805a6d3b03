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
from typing import Any

from kio.schema.errors import ErrorCode

from ...cluster.client_quotas import (
    QUOTA_KEYS,
    Entity,
    InvalidQuotaRequest,
    alter_quota_config,
    read_all_quota_configs,
    validate_quota_value,
)
from ...cluster.zk_paths import DEFAULT_ENTITY
from ...protocol.requests import AlterClientQuotasRequest, DescribeClientQuotasRequest
from ...protocol.response import BodyResponse
from ...security.acl import AclOperation
from ..request_router import RequestContext
from ..services import BrokerServices

USER = "user"
CLIENT_ID = "client-id"
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2


# -- DescribeClientQuotas ------------------------------------------------------------------


async def handle_describe_client_quotas(
    broker: BrokerServices, context: RequestContext, request: DescribeClientQuotasRequest
) -> BodyResponse:
    broker.authorizer.require_cluster(context, AclOperation.DESCRIBE_CONFIGS)
    try:
        filters = _filters(request.components)
    except InvalidQuotaRequest as error:
        return context.respond(_describe_error(str(error)))
    try:
        configs = await asyncio.to_thread(read_all_quota_configs, broker.zk_admin)
    except Exception as error:  # ZooKeeper unreachable
        body = {
            "throttle_time": 0,
            "error_code": ErrorCode.unknown_server_error,
            "error_message": f"reading quotas from ZooKeeper failed: {error}",
            "entries": None,
        }
        return context.respond(body)
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
    body = {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "error_message": None,
        "entries": entries,
    }
    return context.respond(body)


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
    broker: BrokerServices, context: RequestContext, request: AlterClientQuotasRequest
) -> BodyResponse:
    broker.authorizer.require_cluster(context, AclOperation.ALTER_CONFIGS)
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
    return context.respond({"throttle_time": 0, "entries": results})


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
