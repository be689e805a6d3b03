"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs.

Topic configs live in ``/config/topics/<t>`` and change through Kafka's
``/config/changes`` notifications, so every broker (and Kafka's own tools) sees them.
Broker configs are described with their sources. The dynamic ones (Kafka's
``DynamicConfig.Broker`` keys Gregor applies live: the replication throttle rates) change
per broker (resource name ``"<id>"``) in ``/config/brokers/<id>`` or cluster-wide (resource
name ``""``) in ``/config/brokers/<default>``, with the same notification; any other broker
key is refused with INVALID_CONFIG naming it, never stored and ignored.
"""

from __future__ import annotations

import asyncio
import collections
import struct
import typing
from collections.abc import Awaitable
from dataclasses import dataclass
from functools import cache
from typing import Any

from kio.schema.errors import ErrorCode

from ...cluster import zk_paths
from ...cluster.topic_names import topic_name_error
from ...config import (
    InvalidConfig,
    describe_broker_configs,
    describe_dynamic_broker_configs,
    describe_topic_configs,
    validate_dynamic_broker_configs,
    validate_topic_configs,
)
from ...protocol import entities
from ...protocol.requests import (
    AlterConfigsRequest,
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
)
from ...protocol.response import BodyResponse
from ...protocol.wire import encode_array_length, frame, response_header
from ...security.acl import AclOperation, ResourceType
from ..request_router import RequestContext
from ..services import BrokerServices

TOPIC = 2
BROKER = 4
BROKER_LOGGER = 8
GROUP = 32


def config_refusal(
    broker: BrokerServices, context: RequestContext, resource: Any, operation: AclOperation
) -> ErrorCode | None:
    """Kafka's check of one config resource (``ConfigHelper``, ``AlterConfigs``): broker
    configs need ``operation`` on the cluster, a topic's on the topic, a group's on the
    group; the error names what was refused. None: allowed."""
    authorizer = broker.authorizer
    if not authorizer.enabled:
        return None
    kind = resource.resource_type
    if kind in (BROKER, BROKER_LOGGER):
        allowed = authorizer.authorize_cluster(context, operation)
        error = ErrorCode.cluster_authorization_failed
    elif kind == TOPIC:
        allowed = authorizer.authorize(
            context, operation, ResourceType.TOPIC, resource.resource_name
        )
        error = ErrorCode.topic_authorization_failed
    elif kind == GROUP:
        allowed = authorizer.authorize(
            context, operation, ResourceType.GROUP, resource.resource_name
        )
        error = ErrorCode.group_authorization_failed
    else:
        return None  # answered INVALID_REQUEST by the handler
    return None if allowed else error


DESCRIBE_CONFIGS_KEY = 32
_INT32 = struct.Struct(">i")
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


# Encoded results of recent describes, by what they depend on: a client (or a hostile
# one) asking the same again costs a dictionary lookup, not ~10 ms of encoding.
DESCRIBE_CACHE_SIZE = 512
_described: collections.OrderedDict[tuple[Any, ...], bytes] = collections.OrderedDict()


@dataclass(slots=True)
class DescribeConfigsResponse:
    """A DescribeConfigs response whose results are already encoded, one by one."""

    results: list[bytes]
    throttle_time: int = 0

    def encode_frame(self, version: int, correlation_id: int) -> bytes:
        flexible = version >= 4
        body = b"".join(
            [
                _INT32.pack(self.throttle_time),
                encode_array_length(len(self.results), flexible),
                *self.results,
                b"\x00" if flexible else b"",
            ]
        )
        return frame(response_header(correlation_id, flexible), body)


def handle_describe_configs(
    broker: BrokerServices, context: RequestContext, request: DescribeConfigsRequest
) -> DescribeConfigsResponse | Awaitable[DescribeConfigsResponse]:
    """Describe each resource into its own encoded result. A request naming many
    resources is worked through a few at a time, giving the event loop back in
    between, so that describing thousands cannot stall every other client."""
    if len(request.resources) <= 1:
        return DescribeConfigsResponse(
            [_describe(broker, context, request, r) for r in request.resources]
        )
    return _describe_many(broker, context, request)


async def _describe_many(
    broker: BrokerServices, context: RequestContext, request: Any
) -> DescribeConfigsResponse:
    results = []
    for number, resource in enumerate(request.resources):
        if number:
            await asyncio.sleep(0)
        results.append(_describe(broker, context, request, resource))
    return DescribeConfigsResponse(results)


def _describe(
    broker: BrokerServices, context: RequestContext, request: Any, resource: Any
) -> bytes:
    version = context.version
    refused = config_refusal(broker, context, resource, AclOperation.DESCRIBE_CONFIGS)
    if refused is not None:
        return entities.encode_answer(
            _result_class(version),
            {
                "error_code": refused,
                "error_message": None,
                "resource_type": resource.resource_type,
                "resource_name": resource.resource_name,
                "configs": [],
            },
        )
    topic_config = None
    if resource.resource_type == TOPIC:
        topic = broker.metadata.topics.get(resource.resource_name)
        if topic is not None:
            topic_config = tuple(sorted((topic.config or {}).items()))
    elif resource.resource_type == BROKER:
        # Dynamic broker configs change what a broker describes.
        broker_configs = broker.metadata.broker_configs
        topic_config = tuple(
            tuple(sorted(broker_configs.get(entity, {}).items()))
            for entity in (str(broker.config.broker_id), zk_paths.DEFAULT_ENTITY)
        )
    key = (
        version,
        id(broker.config),
        resource.resource_type,
        resource.resource_name,
        resource.configuration_keys,
        request.include_synonyms,
        getattr(request, "include_documentation", False),
        topic_config,
    )
    encoded = _described.get(key)
    if encoded is not None:
        _described.move_to_end(key)
        return encoded
    result = _describe_result(broker, request, resource)
    cls = _result_class(version)
    encoded = entities.encode_answer(cls, result)
    if topic_config is not None or result["error_code"] == ErrorCode.none:
        _described[key] = encoded
        if len(_described) > DESCRIBE_CACHE_SIZE:
            _described.popitem(last=False)
    return encoded


@cache
def _result_class(version: int) -> type:
    response = entities.payload_class(DESCRIBE_CONFIGS_KEY, version, "response")
    nested, _sequence = entities.nested_entity_class(typing.get_type_hints(response)["results"])
    assert nested is not None
    return nested


def _describe_result(broker: BrokerServices, request: Any, resource: Any) -> dict[str, Any]:
    result: dict[str, Any] = {
        "error_code": ErrorCode.none,
        "error_message": None,
        "resource_type": resource.resource_type,
        "resource_name": resource.resource_name,
        "configs": [],
    }
    if resource.resource_type == TOPIC:
        topic = broker.metadata.topics.get(resource.resource_name)
        if topic is None and (illegal := topic_name_error(resource.resource_name)):
            # Kafka's ConfigHelper validates the name first (Topic.validate).
            result.update(error_code=ErrorCode.invalid_topic_exception, error_message=illegal)
            return result
        if topic is None:
            result.update(
                error_code=ErrorCode.unknown_topic_or_partition,
                error_message=f"unknown topic {resource.resource_name!r}",
            )
            return result
        entries = describe_topic_configs(broker.config, topic.config)
    elif resource.resource_type == BROKER:
        if resource.resource_name not in ("", str(broker.config.broker_id)):
            result.update(
                error_code=ErrorCode.invalid_request,
                error_message=f"this is broker {broker.config.broker_id}, "
                f"not {resource.resource_name}",
            )
            return result
        broker_configs = broker.metadata.broker_configs
        entries = sorted(
            describe_broker_configs(broker.config)
            + describe_dynamic_broker_configs(
                broker_configs.get(str(broker.config.broker_id), {}),
                broker_configs.get(zk_paths.DEFAULT_ENTITY, {}),
            ),
            key=lambda entry: entry.name,
        )
    else:
        result.update(
            error_code=ErrorCode.invalid_request,
            error_message=f"resource type {resource.resource_type} is not supported",
        )
        return result
    wanted = set(resource.configuration_keys) if resource.configuration_keys else None
    result["configs"] = [
        {
            **entry.response_fields(),
            "synonyms": [
                {"name": name, "value": value, "source": int(source)}
                for name, value, source in entry.synonyms
            ]
            if request.include_synonyms
            else [],
            "config_type": int(entry.config_type),
            "documentation": entry.documentation
            if getattr(request, "include_documentation", False)
            else None,
        }
        for entry in entries
        if wanted is None or entry.name in wanted
    ]
    return result


async def handle_alter_configs(
    broker: BrokerServices, context: RequestContext, request: AlterConfigsRequest
) -> BodyResponse:
    responses = []
    for resource in request.resources:
        new = {c.name: c.value for c in resource.configs if c.value is not None}
        responses.append(
            _refused_alter(broker, context, resource)
            or await _alter(broker, resource, lambda _old, new=new: new, request.validate_only)
        )
    return context.respond({"responses": responses, "throttle_time": 0})


async def handle_incremental_alter_configs(
    broker: BrokerServices, context: RequestContext, request: IncrementalAlterConfigsRequest
) -> BodyResponse:
    responses = []
    for resource in request.resources:

        def apply(old: dict[str, str], resource: Any = resource) -> dict[str, str]:
            config = dict(old)
            for change in resource.configs:
                op = change.config_operation
                if op == SET:
                    config[change.name] = change.value or ""
                elif op == DELETE:
                    config.pop(change.name, None)
                elif op in (APPEND, SUBTRACT):
                    items = [i for i in config.get(change.name, "").split(",") if i]
                    values = [v for v in (change.value or "").split(",") if v]
                    if op == APPEND:
                        items += [v for v in values if v not in items]
                    else:
                        items = [i for i in items if i not in values]
                    config[change.name] = ",".join(items)
                else:
                    raise InvalidConfig(f"unknown config operation {op} for {change.name}")
            return config

        responses.append(
            _refused_alter(broker, context, resource)
            or await _alter(broker, resource, apply, request.validate_only)
        )
    return context.respond({"responses": responses, "throttle_time": 0})


def _refused_alter(
    broker: BrokerServices, context: RequestContext, resource: Any
) -> dict[str, Any] | None:
    refused = config_refusal(broker, context, resource, AclOperation.ALTER_CONFIGS)
    if refused is None:
        return None
    return {
        "error_code": refused,
        "error_message": None,
        "resource_type": resource.resource_type,
        "resource_name": resource.resource_name,
    }


async def _alter(broker: BrokerServices, resource: Any, change: Any, validate_only: bool) -> dict:
    response: dict[str, Any] = {
        "error_code": ErrorCode.none,
        "error_message": None,
        "resource_type": resource.resource_type,
        "resource_name": resource.resource_name,
    }
    if resource.resource_type == BROKER:
        return await _alter_broker(broker, resource, change, validate_only, response)
    if resource.resource_type != TOPIC:
        response.update(
            error_code=ErrorCode.invalid_request,
            error_message=f"resource type {resource.resource_type} cannot be altered here; "
            "client quotas change through AlterClientQuotas",
        )
        return response
    name = resource.resource_name
    topic = broker.metadata.topics.get(name)
    if topic is None:
        response.update(
            error_code=ErrorCode.unknown_topic_or_partition, error_message=f"unknown topic {name!r}"
        )
        return response
    try:
        new = change(dict(topic.config))
        validate_topic_configs(new)
    except InvalidConfig as error:
        response.update(error_code=ErrorCode.invalid_config, error_message=str(error))
        return response
    if not validate_only:
        await asyncio.to_thread(broker.zk_admin.set_topic_config, name, new)
        # Read-your-writes for the client that changed it.
        broker.metadata.set_topic_config(name, new)
    return response


async def _alter_broker(
    broker: BrokerServices, resource: Any, change: Any, validate_only: bool, response: dict
) -> dict:
    """Dynamic broker configs: ``""`` is the cluster-wide default, ``"<id>"`` one broker."""
    name = resource.resource_name
    if name == "":
        entity = zk_paths.DEFAULT_ENTITY
    elif name.isdigit():
        entity = str(int(name))
    else:
        response.update(
            error_code=ErrorCode.invalid_request,
            error_message=f'broker resource name {name!r} is neither a broker id nor "" '
            "(the cluster-wide default)",
        )
        return response
    try:
        new = change(dict(broker.metadata.broker_configs.get(entity, {})))
        validate_dynamic_broker_configs(new)
    except InvalidConfig as error:
        response.update(
            error_code=ErrorCode.invalid_config,
            error_message=f"Invalid config value for resource broker {name!r}: {error}",
        )
        return response
    if not validate_only:
        await asyncio.to_thread(broker.zk_admin.set_entity_config, f"brokers/{entity}", new)
        broker.metadata.set_broker_config(entity, new)
    return response
