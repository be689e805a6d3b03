"""CreateTopics, DeleteTopics, CreatePartitions."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from ...cluster.models import uuid_from_str
from ...config import describe_topic_configs
from ...protocol.requests import CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest
from ...protocol.response import BodyResponse
from ...security.acl import AclOperation, ResourceType
from ..request_router import RequestContext
from ..services import BrokerServices
from ..topic_admin import TopicAdminError

log = logging.getLogger(__name__)


def _timeout_s(request: Any) -> float:
    return max(request.timeout.total_seconds(), 0.0)


def _answer_timed_out(
    results: list[dict[str, Any]],
    late: set[str],
    request: str,
    timeout_s: float,
    why: Callable[[str], str],
) -> None:
    """Kafka's delayed admin operations (``DelayedCreatePartitions``,
    ``DelayedDeleteTopics``): a topic whose change this broker does not see done within
    the request's timeout answers REQUEST_TIMED_OUT. The change is made (it is in
    ZooKeeper) and completes later; the client learns it did not see it finish, instead
    of a success it could not act on at once. Logged: a wait that long is news."""
    for result in results:
        name = result["name"]
        if name in late and result["error_code"] == ErrorCode.none:
            reason = why(name)
            log.warning("%s of %s not done after %.1f s: %s", request, name, timeout_s, reason)
            result.update(
                error_code=ErrorCode.request_timed_out,
                error_message=f"not done within the request's timeout: {reason}",
            )


async def handle_create_topics(
    broker: BrokerServices, context: RequestContext, request: CreateTopicsRequest
) -> BodyResponse:
    results = []
    seen: set[str] = set()
    # Partitions this request creates so far: max.partitions.per.request bounds the sum.
    added = 0
    planned: list[tuple[dict[str, Any], dict[int, list[int]], dict[str, str | None]]] = []
    authorizer = broker.authorizer
    # Kafka: Create on the cluster, else on each topic; the configs in the answer need
    # DescribeConfigs on the topic.
    creatable = (
        None
        if authorizer.authorize_cluster(context, AclOperation.CREATE, log_if_denied=False)
        else authorizer.filter_authorized(
            context, AclOperation.CREATE, ResourceType.TOPIC, (t.name for t in request.topics)
        )
    )
    for topic in request.topics:
        result: dict[str, Any] = {"name": topic.name, "error_code": ErrorCode.none}
        results.append(result)
        if topic.name in seen:
            result.update(
                error_code=ErrorCode.invalid_request,
                error_message=f"topic {topic.name!r} appears twice in the request",
            )
            continue
        seen.add(topic.name)
        if creatable is not None and topic.name not in creatable:
            result.update(
                error_code=ErrorCode.topic_authorization_failed,
                error_message="Authorization failed.",
            )
            continue
        configs = {c.name: c.value for c in topic.configs}
        assignments = {a.partition_index: list(a.broker_ids) for a in topic.assignments}
        try:
            plan = await broker.topic_admin.plan_topic_off_loop(
                topic.name,
                topic.num_partitions,
                topic.replication_factor,
                assignments,
                configs,
                already_added=added,
            )
        except TopicAdminError as error:
            result.update(error_code=error.error_code, error_message=error.message)
            continue
        added += len(plan)
        planned.append((result, plan, configs))
    created: list[str] = []
    if planned and not request.validate_only:
        # One pipelined ZooKeeper batch for every topic of the request.
        outcome = await broker.topic_admin.create_topics(
            [(result["name"], plan, configs) for result, plan, configs in planned]
        )
        for result, _, _ in planned:
            created_or_error = outcome[result["name"]]
            if isinstance(created_or_error, TopicAdminError):
                result.update(
                    error_code=created_or_error.error_code,
                    error_message=created_or_error.message,
                )
            else:
                result["topic_id"] = created_or_error
                created.append(result["name"])
    # Topics created together mostly share their overrides (often none): describe each
    # set once (describing them per topic was a fifth of the loop's time while a request
    # created 250 topics).
    described: dict[frozenset[tuple[str, str]], list[dict[str, Any]]] = {}
    for result, plan, configs in planned:
        if result["error_code"] != ErrorCode.none:
            continue
        result["num_partitions"] = len(plan)
        result["replication_factor"] = len(plan[0])
        if not authorizer.authorize(
            context,
            AclOperation.DESCRIBE_CONFIGS,
            ResourceType.TOPIC,
            result["name"],
            log_if_denied=False,
        ):
            result["topic_config_error_code"] = ErrorCode.topic_authorization_failed
            continue
        overrides = {k: v for k, v in configs.items() if v is not None}
        key = frozenset(overrides.items())
        if key not in described:
            described[key] = [
                entry.response_fields()
                for entry in describe_topic_configs(broker.config, overrides)
            ]
        result["configs"] = described[key]
    if created and _timeout_s(request) > 0:
        # Matches Kafka: the response waits (up to the timeout) until the new
        # partitions have leaders, so clients can use the topic at once.
        topic_admin = broker.topic_admin
        if not await topic_admin.wait_for_leaders(created, _timeout_s(request)):
            late = {name for name in created if not topic_admin.ready(name)}
            _answer_timed_out(
                results, late, "CreateTopics", _timeout_s(request), topic_admin.not_ready_because
            )
    for result in results:
        if "topic_id" in result:
            result["topic_id"] = uuid.UUID(bytes=uuid_from_str(result["topic_id"]))
    return context.respond({"topics": results, "throttle_time": 0})


async def handle_delete_topics(
    broker: BrokerServices, context: RequestContext, request: DeleteTopicsRequest
) -> BodyResponse:
    if context.version >= 6:
        names = []
        for topic in request.topics:
            if topic.name is not None:
                names.append((topic.name, topic.topic_id))
            else:
                info = broker.metadata.topic_by_uuid(topic.topic_id)
                names.append((info.name if info else None, topic.topic_id))
    else:
        names = [(name, None) for name in request.topic_names]
    responses = []
    seen: set[str] = set()
    unique: list[str] = []
    authorizer = broker.authorizer
    named = [name for name, _ in names if name is not None]
    deletable = authorizer.filter_authorized(
        context, AclOperation.DELETE, ResourceType.TOPIC, named
    )
    describable = (
        authorizer.filter_authorized(context, AclOperation.DESCRIBE, ResourceType.TOPIC, named)
        if authorizer.enabled
        else set(named)
    )
    for name, topic_id in names:
        response: dict[str, Any] = {"name": name, "topic_id": topic_id, "error_code": 0}
        responses.append(response)
        if name is None:
            response["error_code"] = ErrorCode.unknown_topic_id
        elif topic_id is not None and topic_id.int != 0 and name not in describable:
            # Kafka: the name of a topic asked for by id is not disclosed.
            response.update(name=None, error_code=ErrorCode.topic_authorization_failed)
        elif name not in deletable:
            response["error_code"] = ErrorCode.topic_authorization_failed
        elif name in seen:
            # Matches Kafka (and CreateTopics here): a topic named twice is an invalid
            # request for the repeat; the first mention is handled as usual.
            response.update(
                error_code=ErrorCode.invalid_request, error_message="Duplicate topic name."
            )
        else:
            seen.add(name)
            unique.append(name)
    # One pipelined ZooKeeper batch for the whole request (2,000 topics: milliseconds).
    # A topic deleted by someone else meanwhile answers UNKNOWN_TOPIC_OR_PARTITION, one
    # already marked for deletion succeeds (Kafka's ZooKeeper mode).
    outcome = await broker.topic_admin.delete_topics(unique)
    deleted = []
    for response in responses:
        name = response["name"]
        if name is None or response["error_code"]:
            continue
        error = outcome.get(name)
        if error is None:
            deleted.append(name)
        else:
            response.update(error_code=error.error_code, error_message=error.message)
    if deleted and _timeout_s(request) > 0:
        metadata = broker.metadata
        if not await metadata.wait_for(
            lambda: not any(n in metadata.topics for n in deleted), _timeout_s(request)
        ):
            _answer_timed_out(
                responses,
                {name for name in deleted if name in metadata.topics},
                "DeleteTopics",
                _timeout_s(request),
                lambda _: "still in this broker's metadata",
            )
    return context.respond({"responses": responses, "throttle_time": 0})


async def handle_create_partitions(
    broker: BrokerServices, context: RequestContext, request: CreatePartitionsRequest
) -> BodyResponse:
    results = []
    grown = []
    added = 0  # partitions this request adds so far (max.partitions.per.request)
    alterable = broker.authorizer.filter_authorized(
        context, AclOperation.ALTER, ResourceType.TOPIC, (t.name for t in request.topics)
    )
    for topic in request.topics:
        result: dict[str, Any] = {"name": topic.name, "error_code": ErrorCode.none}
        results.append(result)
        if topic.name not in alterable:
            result.update(
                error_code=ErrorCode.topic_authorization_failed,
                error_message="The topic authorization is failed.",
            )
            continue
        assignments = [list(a.broker_ids) for a in topic.assignments] if topic.assignments else None
        try:
            added += await broker.topic_admin.create_partitions(
                topic.name, topic.count, assignments, request.validate_only, already_added=added
            )
            if not request.validate_only:
                grown.append((topic.name, topic.count))
        except TopicAdminError as error:
            result.update(error_code=error.error_code, error_message=error.message)
    if grown and _timeout_s(request) > 0:
        metadata = broker.metadata
        topic_admin = broker.topic_admin

        def partitions_seen(name: str) -> int:
            topic = metadata.topics.get(name)
            return 0 if topic is None else len(topic.partitions)

        def done(name: str, count: int) -> bool:
            return partitions_seen(name) >= count and topic_admin.ready(name)

        if not await metadata.wait_for(
            lambda: all(done(n, count) for n, count in grown), _timeout_s(request)
        ):
            counts = dict(grown)

            def why(name: str) -> str:
                seen = partitions_seen(name)
                if seen < counts[name]:
                    return f"{seen} of {counts[name]} partitions in this broker's metadata"
                return topic_admin.not_ready_because(name)

            late = {name for name, count in grown if not done(name, count)}
            _answer_timed_out(results, late, "CreatePartitions", _timeout_s(request), why)
    return context.respond({"results": results, "throttle_time": 0})
