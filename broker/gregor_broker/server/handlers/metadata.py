"""Metadata: brokers, controller, topics with leaders and replicas; auto-creation.

Matches Kafka: an unknown topic is created on first request when
``auto.create.topics.enable`` (and, from v4, the client's ``allow_auto_topic_creation``)
allow it; the response then says LEADER_NOT_AVAILABLE for it unless the new topic got
its leaders within a short wait, and the client retries. When either forbids creation, a
missing topic is UNKNOWN_TOPIC_OR_PARTITION (Kafka's KafkaApis.getTopicMetadata): librdkafka
takes LEADER_NOT_AVAILABLE as temporary and would ask again forever.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable
from dataclasses import dataclass, replace
from typing import Any

from kio.schema.errors import ErrorCode

from ...cluster.metadata_cache import TopicInfo
from ...cluster.topic_names import topic_name_error
from ...protocol.acl_operations import AclOperation, AclResourceType, authorized_operations
from ...protocol.error_response import RequestFailed
from ...protocol.metadata_response import (
    MetadataBroker,
    MetadataResponse,
    MetadataTopic,
    encode_topic,
)
from ...protocol.requests import MetadataRequest
from ...security.acl import CLUSTER_NAME
from ..request_router import RequestContext
from ..services import BrokerServices
from ..topic_admin import TopicAdminError

AUTO_CREATE_WAIT_S = 2.0
CONTROLLER_WAIT_S = 5.0
_NO_ID = uuid.UUID(int=0)


@dataclass(frozen=True, slots=True)
class _Operations:
    """The authorized-operations fields the client asked for (or Kafka's "not asked"),
    and the request's version (the encoding of a topic's cached entry depends on both),
    and the listener it came in on (whose endpoints the brokers are listed with)."""

    cluster: int
    topic: int
    version: int
    listener: str | None = None
    # With an authorizer and topic operations asked for: whose operations to compute.
    session: Any = None
    session_authorizer: Any = None


def handle_metadata(
    broker: BrokerServices, context: RequestContext, request: MetadataRequest
) -> MetadataResponse | Awaitable[MetadataResponse]:
    metadata = broker.metadata
    if metadata.controller_id < 0 or not metadata.brokers:
        # Just started (or between controllers): librdkafka does not ask again for a
        # controller it was told is -1, so wait briefly for the election to land.
        return _after_controller_known(broker, context, request)
    return _handle(broker, context, request)


async def _after_controller_known(
    broker: BrokerServices, context: RequestContext, request: Any
) -> MetadataResponse:
    metadata = broker.metadata
    await metadata.wait_for(
        lambda: metadata.controller_id >= 0 and bool(metadata.brokers), CONTROLLER_WAIT_S
    )
    result = _handle(broker, context, request)
    if isinstance(result, MetadataResponse):
        return result
    return await result


def _handle(
    broker: BrokerServices, context: RequestContext, request: Any
) -> MetadataResponse | Awaitable[MetadataResponse]:
    metadata = broker.metadata
    version = context.version
    authorizer = broker.authorizer
    want_cluster = bool(getattr(request, "include_cluster_authorized_operations", False))
    want_topics = bool(getattr(request, "include_topic_authorized_operations", False))
    operations = _Operations(
        cluster=authorized_operations(AclResourceType.CLUSTER, want_cluster),
        topic=authorized_operations(AclResourceType.TOPIC, want_topics),
        version=version,
        listener=context.listener,
        session=context if authorizer.enabled and want_topics else None,
        session_authorizer=authorizer,
    )
    if authorizer.enabled and want_cluster:
        operations = replace(
            operations,
            cluster=(
                authorizer.authorized_operations(context, AclResourceType.CLUSTER, CLUSTER_NAME)
                if authorizer.authorize_cluster(context, AclOperation.DESCRIBE)
                else 0
            ),
        )
    if request.topics is None or (version == 0 and not request.topics):
        topics = list(metadata.topics.values())
        if authorizer.enabled:
            # Matches Kafka: topics the client may not describe are left out, unlogged.
            describable = authorizer.filter_authorized(
                context,
                AclOperation.DESCRIBE,
                AclResourceType.TOPIC,
                metadata.topics,
                log_if_denied=False,
            )
            topics = [t for t in topics if t.name in describable]
        return _response(broker, operations, topics, [])
    names: list[str] = []
    unknown_ids: list[Any] = []
    by_id: dict[str, Any] = {}  # names of the topics asked for by id
    for topic in request.topics:
        name = topic.name
        if name is None and version < 12:
            # Matches Kafka: topic ids (and so null names) only exist from v12; before,
            # the request is invalid and answered INVALID_REQUEST for each topic.
            raise RequestFailed(
                ErrorCode.invalid_request, f"Topic name can not be null for version {version}"
            )
        if name is None:
            info = metadata.topic_by_uuid(getattr(topic, "topic_id", None))
            if info is None:
                unknown_ids.append(topic.topic_id)
                continue
            name = info.name
            by_id[name] = topic.topic_id
        names.append(name)
    refused: dict[str, ErrorCode] = {}
    if authorizer.enabled:
        describable = authorizer.filter_authorized(
            context, AclOperation.DESCRIBE, AclResourceType.TOPIC, names
        )
        # Not even whether they exist is disclosed: TOPIC_AUTHORIZATION_FAILED. A topic
        # asked for by id is answered with its id only (ids are not secret, names are).
        refused = {n: ErrorCode.topic_authorization_failed for n in names if n not in describable}
        for name in [n for n in by_id if n in refused]:
            del refused[name]
            names.remove(name)
            unknown_ids.append((by_id[name], ErrorCode.topic_authorization_failed))
    missing = [n for n in names if n not in metadata.topics and n not in refused]
    allow = broker.config.auto_create_topics_enable and getattr(
        request, "allow_auto_topic_creation", True
    )
    if (
        missing
        and allow
        and authorizer.enabled
        and not authorizer.authorize_cluster(context, AclOperation.CREATE, log_if_denied=False)
    ):
        creatable = authorizer.filter_authorized(
            context, AclOperation.CREATE, AclResourceType.TOPIC, missing
        )
        refused.update(
            (n, ErrorCode.topic_authorization_failed) for n in missing if n not in creatable
        )
        missing = [n for n in missing if n in creatable]
    if missing and allow:
        return _auto_create_then_respond(broker, operations, names, missing, unknown_ids, refused)
    return _response_for(broker, operations, names, refused, unknown_ids, creating=False)


async def _auto_create_then_respond(
    broker: BrokerServices,
    operations: _Operations,
    names: list[str],
    missing: list[str],
    unknown_ids: list[Any],
    refused: dict[str, ErrorCode],
) -> MetadataResponse:
    errors: dict[str, ErrorCode] = dict(refused)
    created = []
    for name in missing:
        if topic_name_error(name) is not None:
            errors[name] = ErrorCode.invalid_topic_exception
            continue
        try:
            plan = broker.topic_admin.plan_topic(name, -1, -1, None, {})
            await broker.topic_admin.create_topic(name, plan, {})
            created.append(name)
        except TopicAdminError as error:
            if error.error_code != ErrorCode.topic_already_exists:
                errors[name] = error.error_code
    if created:
        await broker.topic_admin.wait_for_leaders(created, AUTO_CREATE_WAIT_S)
    return _response_for(broker, operations, names, errors, unknown_ids, creating=True)


def _response_for(
    broker: BrokerServices,
    operations: _Operations,
    names: list[str],
    errors: dict[str, ErrorCode],
    unknown_ids: list[Any],
    *,
    creating: bool,
) -> MetadataResponse:
    metadata = broker.metadata
    known = []
    absent = []
    for name in dict.fromkeys(names):
        info = metadata.topics.get(name)
        if errors.get(name) == ErrorCode.topic_authorization_failed:
            absent.append(
                {"error_code": ErrorCode.topic_authorization_failed, "name": name, "partitions": []}
            )
        elif info is not None:
            known.append(info)
        else:
            if name in errors:
                error = errors[name]
            elif topic_name_error(name) is not None:
                error = ErrorCode.invalid_topic_exception
            elif creating:
                # Created just now, leaders not elected yet: the client asks again.
                error = ErrorCode.leader_not_available
            else:
                error = ErrorCode.unknown_topic_or_partition
            absent.append({"error_code": error, "name": name, "partitions": []})
    for unknown in unknown_ids:
        topic_id, error = unknown if isinstance(unknown, tuple) else (unknown, None)
        absent.append(
            {
                "error_code": error or ErrorCode.unknown_topic_id,
                "name": None,
                "topic_id": topic_id,
                "partitions": [],
            }
        )
    return _response(broker, operations, known, absent)


def _response(
    broker: BrokerServices,
    operations: _Operations,
    topics: list[TopicInfo],
    absent: list[dict[str, Any]],
) -> MetadataResponse:
    metadata = broker.metadata
    live = metadata.brokers
    listener = operations.listener
    brokers = []
    for b in sorted(live.values(), key=lambda b: b.broker_id):
        # Kafka lists each broker's endpoint on the listener the client connected to,
        # and leaves out brokers without one.
        endpoint = b.endpoint(listener)
        if endpoint is not None:
            brokers.append(MetadataBroker(b.broker_id, endpoint[0], endpoint[1], b.rack))
    return MetadataResponse(
        brokers=brokers,
        cluster_id=metadata.cluster_id,
        controller_id=metadata.controller_id,
        topics=[_encoded_topic(t, live, operations, metadata.brokers_generation) for t in topics]
        + [
            MetadataTopic(
                entry["error_code"], entry["name"], entry.get("topic_id") or _NO_ID, False, ()
            )
            for entry in absent
        ],
        cluster_authorized_operations=operations.cluster,
    )


def _encoded_topic(
    topic: TopicInfo, live: dict[int, Any], operations: _Operations, brokers_generation: int
) -> bytes:
    """The topic's entry, encoded once per change of the topic or the live brokers (a
    Metadata request for every topic of 10,000 partitions then mostly joins bytes)."""
    if operations.session is not None:  # the authorizer's answer for this principal
        authorizer = operations.session_authorizer
        assert authorizer is not None
        operations = replace(
            operations,
            topic=authorizer.authorized_operations(
                operations.session, AclResourceType.TOPIC, topic.name
            ),
        )
    key = (operations.version, operations.topic, brokers_generation, topic.generation)
    cached = topic.encoded
    if cached is not None and cached[0] == key:
        return cached[1]
    data = encode_topic(operations.version, _topic(topic, live, operations.topic))
    topic.encoded = (key, data)
    return data


def _topic(topic: TopicInfo, live: dict[int, Any], topic_operations: int) -> MetadataTopic:
    """Hot with thousands of partitions: tuples, and the common case (every replica
    live) without per-replica work."""
    partitions = []
    everyone_live = all(b in live for b in _replicas_of(topic))
    for index in sorted(topic.partitions):
        info = topic.partitions[index]
        state = info.state
        leader = state.leader if state is not None else -1
        replicas = info.replicas
        partitions.append(
            (
                ErrorCode.none.value
                if leader >= 0 and leader in live
                else ErrorCode.leader_not_available.value,
                index,
                leader,
                state.leader_epoch if state is not None else -1,
                replicas,
                state.isr if state is not None else (),
                () if everyone_live else tuple(r for r in replicas if r not in live),
            )
        )
    return MetadataTopic(
        ErrorCode.none.value,
        topic.name,
        topic.uuid,
        topic.internal,
        partitions,
        topic_authorized_operations=topic_operations,
    )


def _replicas_of(topic: TopicInfo) -> set[int]:
    replicas: set[int] = set()
    for info in topic.partitions.values():
        replicas.update(info.replicas)
    return replicas
