"""DescribeAcls (29), CreateAcls (30) and DeleteAcls (31), as Kafka's ``AclApis``.

DescribeAcls needs Describe on the cluster, the other two Alter (else the whole request
is CLUSTER_AUTHORIZATION_FAILED). Without an authorizer they answer SECURITY_DISABLED.
DescribeAcls reads this broker's cache; CreateAcls and DeleteAcls write ZooKeeper through
``cluster/acls.py`` (conditional updates, change notifications), off the event loop.
Filters take ANY and MATCH as Kafka's ``AclBindingFilter`` does.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kio.schema.errors import ErrorCode

from ...protocol.requests import CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest
from ...protocol.response import BodyResponse
from ...security.acl import (
    AclBinding,
    AclBindingFilter,
    AclEntry,
    AclEntryFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from ..authorizer import AclAuthorizer
from ..request_router import RequestContext
from ..services import BrokerServices

_NO_AUTHORIZER = "No Authorizer is configured on the broker"


def _enum(kind: Any, value: int) -> Any:
    try:
        return kind(value)
    except ValueError:
        return kind(0)  # UNKNOWN


def _binding_filter(item: Any) -> AclBindingFilter:
    return AclBindingFilter(
        ResourcePatternFilter(
            _enum(ResourceType, item.resource_type_filter),
            item.resource_name_filter,
            _enum(PatternType, item.pattern_type_filter),
        ),
        AclEntryFilter(
            item.principal_filter,
            item.host_filter,
            _enum(AclOperation, item.operation),
            _enum(AclPermissionType, item.permission_type),
        ),
    )


def _invalid_filter(binding_filter: AclBindingFilter) -> str | None:
    """Why a filter is refused (Kafka's request validation): UNKNOWN anywhere."""
    if binding_filter.pattern.resource_type == ResourceType.UNKNOWN:
        return "Resource type is UNKNOWN."
    if binding_filter.pattern.pattern_type == PatternType.UNKNOWN:
        return "Resource pattern type is UNKNOWN."
    return binding_filter.entry.indefinite()


def handle_describe_acls(
    broker: BrokerServices, context: RequestContext, request: DescribeAclsRequest
) -> BodyResponse:
    authorizer = broker.authorizer
    authorizer.require_cluster(context, AclOperation.DESCRIBE)
    if not isinstance(authorizer, AclAuthorizer):
        return context.respond(_describe_error(ErrorCode.security_disabled, _NO_AUTHORIZER))
    binding_filter = _binding_filter(request)
    invalid = _invalid_filter(binding_filter)
    if invalid is not None:
        return context.respond(_describe_error(ErrorCode.invalid_request, invalid))
    resources: dict[ResourcePattern, list[AclEntry]] = {}
    for binding in authorizer.acls(binding_filter):
        resources.setdefault(binding.pattern, []).append(binding.entry)
    body = {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "error_message": None,
        "resources": [
            {
                "resource_type": pattern.resource_type,
                "resource_name": pattern.name,
                "pattern_type": pattern.pattern_type,
                "acls": [
                    {
                        "principal": entry.principal,
                        "host": entry.host,
                        "operation": entry.operation,
                        "permission_type": entry.permission,
                    }
                    for entry in entries
                ],
            }
            for pattern, entries in resources.items()
        ],
    }
    return context.respond(body)


def _describe_error(code: ErrorCode, message: str) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": code, "error_message": message, "resources": []}


async def handle_create_acls(
    broker: BrokerServices, context: RequestContext, request: CreateAclsRequest
) -> BodyResponse:
    authorizer = broker.authorizer
    creations = request.creations
    refusal = _refusal(broker, context)
    if refusal is not None:
        body = {
            "throttle_time": 0,
            "results": [{"error_code": refusal[0], "error_message": refusal[1]} for _ in creations],
        }
        return context.respond(body)
    assert isinstance(authorizer, AclAuthorizer)
    bindings = [
        AclBinding(
            ResourcePattern(
                _enum(ResourceType, item.resource_type),
                item.resource_name,
                _enum(PatternType, item.resource_pattern_type),
            ),
            AclEntry(
                item.principal,
                item.host,
                _enum(AclOperation, item.operation),
                _enum(AclPermissionType, item.permission_type),
            ),
        )
        for item in creations
    ]
    outcomes = await asyncio.to_thread(authorizer.create_acls, bindings)
    return context.respond(
        {"throttle_time": 0, "results": [_result(outcome) for outcome in outcomes]}
    )


def _refusal(broker: BrokerServices, context: RequestContext) -> tuple[ErrorCode, str] | None:
    """CreateAcls and DeleteAcls need Alter on the cluster (Kafka answers every creation
    or filter with the refusal), and an authorizer."""
    if not broker.authorizer.authorize_cluster(context, AclOperation.ALTER):
        return ErrorCode.cluster_authorization_failed, "Cluster authorization failed."
    if not isinstance(broker.authorizer, AclAuthorizer):
        return ErrorCode.security_disabled, _NO_AUTHORIZER
    return None


def _result(outcome: Exception | None) -> dict[str, Any]:
    if outcome is None:
        return {"error_code": ErrorCode.none, "error_message": None}
    if isinstance(outcome, ValueError):
        return {"error_code": ErrorCode.invalid_request, "error_message": str(outcome)}
    return {"error_code": ErrorCode.unknown_server_error, "error_message": str(outcome)}


async def handle_delete_acls(
    broker: BrokerServices, context: RequestContext, request: DeleteAclsRequest
) -> BodyResponse:
    authorizer = broker.authorizer
    refusal = _refusal(broker, context)
    if refusal is not None:
        body = {
            "throttle_time": 0,
            "filter_results": [
                {"error_code": refusal[0], "error_message": refusal[1], "matching_acls": []}
                for _ in request.filters
            ],
        }
        return context.respond(body)
    assert isinstance(authorizer, AclAuthorizer)
    filters = [_binding_filter(item) for item in request.filters]
    valid = [i for i, f in enumerate(filters) if _invalid_filter(f) is None]
    deleted = await asyncio.to_thread(authorizer.delete_acls, [filters[i] for i in valid])
    by_index = dict(zip(valid, deleted, strict=True))
    results = []
    for index, binding_filter in enumerate(filters):
        invalid = _invalid_filter(binding_filter)
        if invalid is not None:
            results.append(
                {
                    "error_code": ErrorCode.invalid_request,
                    "error_message": invalid,
                    "matching_acls": [],
                }
            )
            continue
        results.append(
            {
                "error_code": ErrorCode.none,
                "error_message": None,
                "matching_acls": [_matching(binding, error) for binding, error in by_index[index]],
            }
        )
    return context.respond({"throttle_time": 0, "filter_results": results})


def _matching(binding: AclBinding, error: Exception | None) -> dict[str, Any]:
    pattern, entry = binding.pattern, binding.entry
    return {
        "error_code": ErrorCode.none if error is None else ErrorCode.unknown_server_error,
        "error_message": None if error is None else str(error),
        "resource_type": pattern.resource_type,
        "resource_name": pattern.name,
        "pattern_type": pattern.pattern_type,
        "principal": entry.principal,
        "host": entry.host,
        "operation": entry.operation,
        "permission_type": entry.permission,
    }
