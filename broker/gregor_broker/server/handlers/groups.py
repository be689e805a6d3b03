"""Consumer group APIs: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
OffsetCommit, OffsetFetch, ListGroups, DescribeGroups, DeleteGroups, OffsetDelete.

Thin translations between kio requests and ``coordinator.group_coordinator``; the
rules live there. JoinGroup and SyncGroup wait (as Kafka's purgatory does) until the
coordinator calls back with the outcome of the rebalance.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from ...coordinator.group_coordinator import JoinRequest, JoinResult, SyncResult
from ...coordinator.records import OffsetAndMetadata, hash_is_cheap, java_string_hashcode
from ...coordinator.service import CoordinatorUnavailable, now_ms
from ...coordinator.transaction_coordinator import TransactionCoordinatorUnavailable
from ...protocol.acl_operations import AclOperation, AclResourceType, authorized_operations
from ...protocol.requests import (
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    FindCoordinatorRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    ListGroupsRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)
from ...protocol.response import BodyResponse, Response
from ..request_router import HandlerResult, RequestContext
from ..services import BrokerServices

Handler = Callable[..., HandlerResult]
GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1


def _group_ids(request: Any) -> list[str]:
    """The group ids, transactional ids (coordinator keys) a group or transaction request
    names: each is hashed to find its coordinator's partition."""
    ids: list[str] = []
    for name in ("group_id", "key", "transactional_id", "v3_and_below_transactional_id"):
        value = getattr(request, name, None)
        if isinstance(value, str):
            ids.append(value)
    for name in ("coordinator_keys", "groups_names", "transactional_ids"):
        ids.extend(getattr(request, name, None) or ())
    for transaction in getattr(request, "transactions", None) or ():
        ids.append(transaction.transactional_id)
    for group in getattr(request, "groups", None) or ():
        ids.append(group if isinstance(group, str) else group.group_id)
    return ids


def hashes_group_ids_off_loop(handler: Handler) -> Handler:
    """Run ``handler`` once the ``__consumer_offsets`` partitions of its group ids are
    known. A flexible request may carry a group id of megabytes, whose Java hashCode
    would take seconds of the event loop: such ids are hashed on the preparation thread
    first (one at a time, the hash kept), every other connection keeps being served."""

    @functools.wraps(handler)
    def wrapped(broker: BrokerServices, context: RequestContext, request: Any) -> HandlerResult:
        if all(hash_is_cheap(group_id) for group_id in _group_ids(request)):
            return handler(broker, context, request)
        return _after_hashing(handler, broker, context, request)

    return wrapped


async def _after_hashing(
    handler: Handler, broker: BrokerServices, context: RequestContext, request: Any
) -> Response:
    for group_id in _group_ids(request):
        if not hash_is_cheap(group_id):
            await broker.router.preparer.run_off_loop(java_string_hashcode, group_id)
    result = handler(broker, context, request)
    return await result if inspect.isawaitable(result) else result


def _ms(value: Any) -> int:
    return int(value.total_seconds() * 1000) if hasattr(value, "total_seconds") else int(value)


def _client_host(context: RequestContext) -> str:
    peer = getattr(context.connection, "peer", "")
    host = peer.rsplit(":", 1)[0] if ":" in peer else peer
    return f"/{host}" if host else ""


# -- FindCoordinator -------------------------------------------------------------------


@hashes_group_ids_off_loop
async def handle_find_coordinator(
    broker: BrokerServices, context: RequestContext, request: FindCoordinatorRequest
) -> BodyResponse:
    if context.version >= 4:
        key_type = request.key_type
        coordinators = [
            {"key": key, **(await _find_one(broker, context, key_type, key))}
            for key in request.coordinator_keys
        ]
        return context.respond({"throttle_time": 0, "coordinators": coordinators})
    key_type = getattr(request, "key_type", GROUP_KEY_TYPE)
    return context.respond(
        {"throttle_time": 0, **(await _find_one(broker, context, key_type, request.key))}
    )


async def _find_one(
    broker: BrokerServices, context: RequestContext, key_type: int, key: str
) -> dict[str, Any]:
    def failed(code: ErrorCode, message: str) -> dict[str, Any]:
        return {"error_code": code, "error_message": message, "node_id": -1, "host": "", "port": -1}

    service = broker.coordinator
    authorizer = broker.authorizer
    if key_type == GROUP_KEY_TYPE and not authorizer.authorize(
        context, AclOperation.DESCRIBE, AclResourceType.GROUP, key
    ):
        return failed(ErrorCode.group_authorization_failed, "")
    if key_type == TRANSACTION_KEY_TYPE and not authorizer.authorize(
        context, AclOperation.DESCRIBE, AclResourceType.TRANSACTIONAL_ID, key
    ):
        return failed(ErrorCode.transactional_id_authorization_failed, "")
    if key_type == TRANSACTION_KEY_TYPE:
        if not key:
            return failed(ErrorCode.invalid_request, "the transactional id is empty")
        transactions = service.transactions
        try:
            if not await transactions.ensure_state_topic():
                return failed(
                    ErrorCode.coordinator_not_available, "__transaction_state has no leaders yet"
                )
            node = transactions.coordinator_for(key)
        except TransactionCoordinatorUnavailable as error:
            return failed(ErrorCode.coordinator_not_available, str(error))
    elif key_type != GROUP_KEY_TYPE:
        return failed(ErrorCode.invalid_request, f"unknown coordinator key type {key_type}")
    elif not key:
        return failed(ErrorCode.invalid_group_id, "the group id is empty")
    else:
        try:
            if not await service.ensure_offsets_topic():
                return failed(
                    ErrorCode.coordinator_not_available, "__consumer_offsets has no leaders yet"
                )
            node = service.coordinator_for_group(key)
        except CoordinatorUnavailable as error:
            return failed(ErrorCode.coordinator_not_available, str(error))
    endpoint = node.endpoint(context.listener)
    if endpoint is None:  # Kafka: the coordinator has no endpoint on this listener
        return failed(
            ErrorCode.coordinator_not_available,
            f"broker {node.broker_id} has no {context.listener} listener",
        )
    return {
        "error_code": ErrorCode.none,
        "error_message": None,
        "node_id": node.broker_id,
        "host": endpoint[0],
        "port": endpoint[1],
    }


# -- JoinGroup / SyncGroup / Heartbeat / LeaveGroup --------------------------------------------


@hashes_group_ids_off_loop
async def handle_join_group(
    broker: BrokerServices, context: RequestContext, request: JoinGroupRequest
) -> BodyResponse:
    version = context.version
    session_timeout_ms = _ms(request.session_timeout)
    rebalance = getattr(request, "rebalance_timeout", None)
    rebalance_timeout_ms = _ms(rebalance) if rebalance is not None and version >= 1 else -1
    if rebalance_timeout_ms < 0:
        rebalance_timeout_ms = session_timeout_ms
    if not request.group_id:
        result = JoinResult(ErrorCode.invalid_group_id, request.member_id)
    elif not _may_read_group(broker, context, request.group_id):
        result = JoinResult(ErrorCode.group_authorization_failed, request.member_id)
    else:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[JoinResult] = loop.create_future()

        def respond(outcome: JoinResult) -> None:
            if not future.done():
                future.set_result(outcome)

        broker.coordinator.groups.join(
            JoinRequest(
                group_id=request.group_id,
                member_id=request.member_id,
                group_instance_id=getattr(request, "group_instance_id", None),
                protocol_type=request.protocol_type,
                protocols=[(p.name, bytes(p.metadata)) for p in request.protocols],
                session_timeout_ms=session_timeout_ms,
                rebalance_timeout_ms=rebalance_timeout_ms,
                client_id=context.header.client_id or "",
                client_host=_client_host(context),
                require_known_member_id=version >= 4,
            ),
            now_ms(),
            respond,
        )
        result = await future
    protocol_name = result.protocol_name
    if protocol_name is None and version < 7:
        protocol_name = ""
    body = {
        "throttle_time": 0,
        "error_code": result.error,
        "generation_id": result.generation_id,
        "protocol_type": result.protocol_type,
        "protocol_name": protocol_name,
        "leader": result.leader_id,
        "skip_assignment": result.skip_assignment,
        "member_id": result.member_id,
        "members": [
            {"member_id": member_id, "group_instance_id": instance_id, "metadata": metadata}
            for member_id, instance_id, metadata in result.members
        ],
    }
    return context.respond(body)


@hashes_group_ids_off_loop
async def handle_sync_group(
    broker: BrokerServices, context: RequestContext, request: SyncGroupRequest
) -> BodyResponse:
    if not request.group_id:
        result = SyncResult(ErrorCode.invalid_group_id)
    elif not _may_read_group(broker, context, request.group_id):
        result = SyncResult(ErrorCode.group_authorization_failed)
    else:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[SyncResult] = loop.create_future()

        def respond(outcome: SyncResult) -> None:
            if not future.done():
                future.set_result(outcome)

        broker.coordinator.groups.sync(
            request.group_id,
            request.generation_id,
            request.member_id,
            getattr(request, "group_instance_id", None),
            getattr(request, "protocol_type", None),
            getattr(request, "protocol_name", None),
            {a.member_id: bytes(a.assignment) for a in request.assignments},
            now_ms(),
            respond,
        )
        result = await future
    body = {
        "throttle_time": 0,
        "error_code": result.error,
        "protocol_type": result.protocol_type,
        "protocol_name": result.protocol_name,
        "assignment": result.assignment,
    }
    return context.respond(body)


@hashes_group_ids_off_loop
def handle_heartbeat(
    broker: BrokerServices, context: RequestContext, request: HeartbeatRequest
) -> BodyResponse:
    if not request.group_id:
        error = ErrorCode.invalid_group_id
    elif not _may_read_group(broker, context, request.group_id):
        error = ErrorCode.group_authorization_failed
    else:
        error = broker.coordinator.groups.heartbeat(
            request.group_id,
            request.generation_id,
            request.member_id,
            getattr(request, "group_instance_id", None),
            now_ms(),
        )
    return context.respond({"throttle_time": 0, "error_code": error})


@hashes_group_ids_off_loop
def handle_leave_group(
    broker: BrokerServices, context: RequestContext, request: LeaveGroupRequest
) -> BodyResponse:
    if context.version >= 3:
        identities = [(m.member_id, m.group_instance_id) for m in request.members]
    else:
        identities = [(request.member_id, None)]
    if not request.group_id:
        top, errors = ErrorCode.invalid_group_id, [ErrorCode.invalid_group_id] * len(identities)
    elif not _may_read_group(broker, context, request.group_id):
        # Kafka: the whole request fails (its error response has no members).
        return context.respond(_leave_refused(context.version))
    else:
        top, errors = broker.coordinator.groups.leave(request.group_id, identities, now_ms())
    if context.version < 3:
        return context.respond(
            {"throttle_time": 0, "error_code": errors[0] if top is ErrorCode.none else top}
        )
    body = {
        "throttle_time": 0,
        "error_code": top,
        "members": [
            {"member_id": member_id, "group_instance_id": instance_id, "error_code": error}
            for (member_id, instance_id), error in zip(identities, errors, strict=True)
        ],
    }
    return context.respond(body)


def _may_read_group(broker: BrokerServices, context: RequestContext, group_id: str) -> bool:
    """Kafka: Join, Sync, Heartbeat, Leave, OffsetCommit need Read on the group."""
    return broker.authorizer.authorize(context, AclOperation.READ, AclResourceType.GROUP, group_id)


def _leave_refused(version: int) -> dict[str, Any]:
    if version < 3:
        return {"throttle_time": 0, "error_code": ErrorCode.group_authorization_failed}
    return {"throttle_time": 0, "error_code": ErrorCode.group_authorization_failed, "members": []}


def _refused_topics(
    broker: BrokerServices, context: RequestContext, operation: AclOperation, names: Any
) -> set[str]:
    """The topics among ``names`` the client may not ``operation`` (none without an
    authorizer)."""
    authorizer = broker.authorizer
    if not authorizer.enabled:
        return set()
    wanted = set(names)
    return wanted - authorizer.filter_authorized(context, operation, AclResourceType.TOPIC, wanted)


# -- offsets ---------------------------------------------------------------------------


def offsets_to_commit(
    broker: BrokerServices, topics: Any, now: int, expire: int = -1
) -> tuple[dict[tuple[str, int], ErrorCode], dict[tuple[str, int], OffsetAndMetadata]]:
    """(UNKNOWN_TOPIC_OR_PARTITION for partitions that do not exist, the offsets of the
    others) from an OffsetCommit's or TxnOffsetCommit's topics."""
    errors: dict[tuple[str, int], ErrorCode] = {}
    offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
    for topic in topics:
        known = broker.metadata.topics.get(topic.name)
        for partition in topic.partitions:
            key = (topic.name, partition.partition_index)
            if known is None or partition.partition_index not in known.partitions:
                errors[key] = ErrorCode.unknown_topic_or_partition
                continue
            offsets[key] = OffsetAndMetadata(
                offset=partition.committed_offset,
                leader_epoch=getattr(partition, "committed_leader_epoch", -1),
                metadata=partition.committed_metadata or "",
                commit_timestamp=now,
                expire_timestamp=expire,
            )
    return errors, offsets


@hashes_group_ids_off_loop
async def handle_offset_commit(
    broker: BrokerServices, context: RequestContext, request: OffsetCommitRequest
) -> BodyResponse:
    now = now_ms()
    retention = getattr(request, "retention_time", None)
    retention_ms = _ms(retention) if retention is not None else -1
    expire = now + retention_ms if retention_ms >= 0 else -1
    if request.group_id and not _may_read_group(broker, context, request.group_id):
        return context.respond(
            commit_response(
                {
                    (t.name, p.partition_index): ErrorCode.group_authorization_failed
                    for t in request.topics
                    for p in t.partitions
                }
            )
        )
    refused = _refused_topics(broker, context, AclOperation.READ, (t.name for t in request.topics))
    errors, offsets = offsets_to_commit(
        broker, [t for t in request.topics if t.name not in refused], now, expire
    )
    errors.update(
        ((t.name, p.partition_index), ErrorCode.topic_authorization_failed)
        for t in request.topics
        if t.name in refused
        for p in t.partitions
    )
    if not request.group_id:
        errors.update(dict.fromkeys(offsets, ErrorCode.invalid_group_id))
    elif offsets:
        service = broker.coordinator
        outcome = service.groups.commit_offsets(
            request.group_id,
            request.generation_id_or_member_epoch,
            request.member_id,
            getattr(request, "group_instance_id", None),
            offsets,
            now,
        )
        results = outcome.errors
        pending = outcome.pending
        if pending is not None:
            # Visible to OffsetFetch only once replicated; dropped otherwise.
            results = await replicated_commit(
                broker,
                request.group_id,
                results,
                lambda error: service.groups.complete_offset_commit(pending, error),
            )
        errors.update(results)
    return context.respond(commit_response(errors))


async def replicated_commit(
    broker: BrokerServices,
    group_id: str,
    results: dict[tuple[str, int], ErrorCode],
    complete: Callable[[ErrorCode], ErrorCode],
) -> dict[tuple[str, int], ErrorCode]:
    """Wait for the replication of an (Txn)OffsetCommit's append and report it to the
    coordinator through ``complete`` (which maps the outcome for the client), also when
    the wait is cancelled (the connection closed); ``results`` with the accepted
    partitions' error replaced by a failed write's."""
    replicated = ErrorCode.unknown_server_error
    try:
        replicated = await broker.coordinator.wait_for_replication(group_id)
    finally:
        replicated = complete(replicated)
    if replicated is ErrorCode.none:
        return results
    return {k: (replicated if v is ErrorCode.none else v) for k, v in results.items()}


def commit_response(errors: dict[tuple[str, int], Any]) -> dict[str, Any]:
    """An OffsetCommit / TxnOffsetCommit body: each partition's error, grouped by topic."""
    topics: dict[str, list[dict[str, Any]]] = {}
    for (name, index), code in errors.items():
        topics.setdefault(name, []).append({"partition_index": index, "error_code": code})
    return {
        "throttle_time": 0,
        "topics": [{"name": name, "partitions": parts} for name, parts in topics.items()],
    }


@hashes_group_ids_off_loop
def handle_offset_fetch(
    broker: BrokerServices, context: RequestContext, request: OffsetFetchRequest
) -> BodyResponse:
    version = context.version
    # KIP-447 (v7+): a client reading with isolation.level=read_committed asks for stable
    # offsets only.
    require_stable = bool(getattr(request, "require_stable", False))
    if version >= 8:
        groups = [
            _fetch_group(broker, context, group.group_id, group.topics, require_stable)
            for group in request.groups
        ]
        return context.respond({"throttle_time": 0, "groups": groups})
    result = _fetch_group(broker, context, request.group_id, request.topics, require_stable)
    return context.respond(
        {"throttle_time": 0, "error_code": result["error_code"], "topics": result["topics"]}
    )


def _fetch_group(
    broker: BrokerServices,
    context: RequestContext,
    group_id: str,
    topics: Any,
    require_stable: bool,
) -> dict[str, Any]:
    version = context.version
    requested = (
        None
        if topics is None
        else [(t.name, index) for t in topics for index in t.partition_indexes]
    )
    if not broker.authorizer.authorize(
        context, AclOperation.DESCRIBE, AclResourceType.GROUP, group_id
    ):
        return _fetch_refused(version, group_id, requested)
    groups = broker.coordinator.groups
    # Kafka: offsets of topics the client may not describe are not shown; asked for by
    # name they answer TOPIC_AUTHORIZATION_FAILED.
    refused = _refused_topics(
        broker,
        context,
        AclOperation.DESCRIBE,
        (name for name, _ in requested)
        if requested is not None
        else groups_topics(groups, group_id),
    )
    if refused and requested is not None:
        denied = [key for key in requested if key[0] in refused]
        requested = [key for key in requested if key[0] not in refused]
    else:
        denied = []
    error, offsets = groups.fetch_offsets(group_id, requested)
    if refused:
        offsets = {key: value for key, value in offsets.items() if key[0] not in refused}
    if error is not ErrorCode.none and version < 2:
        # v1 has no top-level error: every partition carries it.
        offsets = dict.fromkeys(requested or [], None)
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for key, value in offsets.items():
        partition_error = error if version < 2 else ErrorCode.none
        if (
            require_stable
            and requested is not None
            and error is ErrorCode.none
            # A write awaits replication, or an open transaction holds an offset here.
            and groups.has_pending_offset_commit(group_id, key)
        ):
            # Matches Kafka's GroupMetadataManager.getOffsets: the client retries.
            partition_error, value = ErrorCode.unstable_offset_commit, None
        name, index = key
        by_topic.setdefault(name, []).append(
            {
                "partition_index": index,
                "committed_offset": value.offset if value is not None else -1,
                "committed_leader_epoch": value.leader_epoch if value is not None else -1,
                "metadata": value.metadata if value is not None else "",
                "error_code": partition_error,
            }
        )
    for name, index in denied:
        by_topic.setdefault(name, []).append(
            {
                "partition_index": index,
                "committed_offset": -1,
                "committed_leader_epoch": -1,
                "metadata": "",
                "error_code": ErrorCode.topic_authorization_failed,
            }
        )
    return {
        "group_id": group_id,
        "error_code": error,
        "topics": [{"name": name, "partitions": parts} for name, parts in by_topic.items()],
    }


def groups_topics(groups: Any, group_id: str) -> set[str]:
    """The topics a group has offsets for (to filter a fetch of all of them)."""
    _error, offsets = groups.fetch_offsets(group_id, None)
    return {name for name, _ in offsets}


def _fetch_refused(
    version: int, group_id: str, requested: list[tuple[str, int]] | None
) -> dict[str, Any]:
    """GROUP_AUTHORIZATION_FAILED: top-level from v2, on each partition in v1."""
    by_topic: dict[str, list[dict[str, Any]]] = {}
    if version < 2:
        for name, index in requested or []:
            by_topic.setdefault(name, []).append(
                {
                    "partition_index": index,
                    "committed_offset": -1,
                    "committed_leader_epoch": -1,
                    "metadata": "",
                    "error_code": ErrorCode.group_authorization_failed,
                }
            )
    return {
        "group_id": group_id,
        "error_code": ErrorCode.group_authorization_failed,
        "topics": [{"name": name, "partitions": parts} for name, parts in by_topic.items()],
    }


@hashes_group_ids_off_loop
async def handle_offset_delete(
    broker: BrokerServices, context: RequestContext, request: OffsetDeleteRequest
) -> BodyResponse:
    if not broker.authorizer.authorize(
        context, AclOperation.DELETE, AclResourceType.GROUP, request.group_id
    ):
        body = {
            "throttle_time": 0,
            "error_code": ErrorCode.group_authorization_failed,
            "topics": [],
        }
        return context.respond(body)
    refused = _refused_topics(broker, context, AclOperation.READ, (t.name for t in request.topics))
    partitions = [
        (t.name, p.partition_index)
        for t in request.topics
        if t.name not in refused
        for p in t.partitions
    ]
    unknown = {
        key
        for key in partitions
        if key[0] not in broker.metadata.topics
        or key[1] not in broker.metadata.topics[key[0]].partitions
    }
    future: asyncio.Future[tuple[ErrorCode, dict[tuple[str, int], ErrorCode]]] = (
        asyncio.get_running_loop().create_future()
    )

    def respond(error: ErrorCode, results: dict[tuple[str, int], ErrorCode]) -> None:
        if not future.done():
            future.set_result((error, results))

    # Answered once the tombstones are replicated.
    broker.coordinator.groups.delete_offsets(
        request.group_id, [key for key in partitions if key not in unknown], respond
    )
    error, results = await future
    results.update(dict.fromkeys(unknown, ErrorCode.unknown_topic_or_partition))
    results.update(
        ((t.name, p.partition_index), ErrorCode.topic_authorization_failed)
        for t in request.topics
        if t.name in refused
        for p in t.partitions
    )
    by_topic: dict[str, list[dict[str, Any]]] = {}
    if error is ErrorCode.none:
        for (name, index), code in results.items():
            by_topic.setdefault(name, []).append({"partition_index": index, "error_code": code})
    body = {
        "throttle_time": 0,
        "error_code": error,
        "topics": [{"name": name, "partitions": parts} for name, parts in by_topic.items()],
    }
    return context.respond(body)


# -- group administration ------------------------------------------------------------------


def handle_list_groups(
    broker: BrokerServices, context: RequestContext, request: ListGroupsRequest
) -> BodyResponse:
    states = {s.lower() for s in getattr(request, "states_filter", ())}
    types = {t.lower() for t in getattr(request, "types_filter", ())}
    authorizer = broker.authorizer
    # Kafka: Describe on the cluster lists every group, else those the client may describe.
    everything = not authorizer.enabled or authorizer.authorize_cluster(
        context, AclOperation.DESCRIBE, log_if_denied=False
    )
    groups = []
    for group in broker.coordinator.groups.list_groups():
        if not everything and not authorizer.authorize(
            context,
            AclOperation.DESCRIBE,
            AclResourceType.GROUP,
            group.group_id,
            log_if_denied=False,
        ):
            continue
        if states and group.state.value.lower() not in states:
            continue
        if types and "classic" not in types:
            continue
        groups.append(
            {
                "group_id": group.group_id,
                "protocol_type": group.protocol_type or "",
                "group_state": group.state.value,
                "group_type": "classic",
            }
        )
    return context.respond({"throttle_time": 0, "error_code": ErrorCode.none, "groups": groups})


@hashes_group_ids_off_loop
def handle_describe_groups(
    broker: BrokerServices, context: RequestContext, request: DescribeGroupsRequest
) -> BodyResponse:
    include_operations = getattr(request, "include_authorized_operations", False)
    described = []
    authorizer = broker.authorizer
    for group_id in request.groups:
        if not authorizer.authorize(
            context, AclOperation.DESCRIBE, AclResourceType.GROUP, group_id
        ):
            error, summary = ErrorCode.group_authorization_failed, None
        else:
            error, summary = broker.coordinator.groups.describe(group_id)
        entry: dict[str, Any] = {
            "error_code": error,
            "group_id": group_id,
            "group_state": "",
            "protocol_type": "",
            "protocol_data": "",
            "members": [],
            "authorized_operations": (
                authorizer.authorized_operations(context, AclResourceType.GROUP, group_id)
                if authorizer.enabled and include_operations and summary is not None
                else authorized_operations(AclResourceType.GROUP, include_operations)
            ),
        }
        if summary is not None:
            entry.update(
                group_state=summary.state.value,
                protocol_type=summary.protocol_type,
                protocol_data=summary.protocol_name,
                members=[
                    {
                        "member_id": member_id,
                        "group_instance_id": instance_id,
                        "client_id": client_id,
                        "client_host": client_host,
                        "member_metadata": metadata,
                        "member_assignment": assignment,
                    }
                    for member_id, instance_id, client_id, client_host, metadata, assignment in (
                        summary.members
                    )
                ],
            )
        described.append(entry)
    return context.respond({"throttle_time": 0, "groups": described})


@hashes_group_ids_off_loop
async def handle_delete_groups(
    broker: BrokerServices, context: RequestContext, request: DeleteGroupsRequest
) -> BodyResponse:
    now = now_ms()
    loop = asyncio.get_running_loop()
    outcomes: list[asyncio.Future[ErrorCode]] = []
    for group_id in request.groups_names:
        future: asyncio.Future[ErrorCode] = loop.create_future()
        outcomes.append(future)
        if not broker.authorizer.authorize(
            context, AclOperation.DELETE, AclResourceType.GROUP, group_id
        ):
            future.set_result(ErrorCode.group_authorization_failed)
            continue
        # Answered once the group's tombstones are replicated; all groups at once.
        broker.coordinator.groups.delete_group(
            group_id, now, lambda error, f=future: f.done() or f.set_result(error)
        )
    errors = await asyncio.gather(*outcomes)
    body = {
        "throttle_time": 0,
        "results": [
            {"group_id": group_id, "error_code": error}
            for group_id, error in zip(request.groups_names, errors, strict=True)
        ],
    }
    return context.respond(body)
