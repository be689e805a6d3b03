"""ApiVersions and DescribeCluster."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from ...protocol import entities
from ...protocol.acl_operations import (
    NOT_REQUESTED,
    AclOperation,
    AclResourceType,
    authorized_operations,
)
from ...protocol.requests import ApiVersionsRequest, DescribeClusterRequest
from ...protocol.response import BodyResponse
from ...protocol.wire import API_VERSIONS_KEY, frame, response_header
from ...security.acl import CLUSTER_NAME
from ..request_router import RequestContext
from ..services import BrokerServices


@dataclass(slots=True)
class ApiVersionsResponse:
    """The supported versions, encoded once per ApiVersions version: the answer never
    changes, and encoding it (31 entries) cost ~80 us, the whole of a request's work."""

    api_keys: tuple[tuple[int, int, int], ...]
    throttle_time: int = 0

    def encode_frame(self, version: int, correlation_id: int) -> bytes:
        body = _api_versions_body(version, self.api_keys, self.throttle_time)
        # ApiVersions answers with header v0 whatever its version (KIP-511).
        return frame(response_header(correlation_id, False), body)


_bodies: dict[tuple[int, tuple[tuple[int, int, int], ...], int], bytes] = {}


def _api_versions_body(
    version: int, api_keys: tuple[tuple[int, int, int], ...], throttle_time: int
) -> bytes:
    key = (version, api_keys, throttle_time)
    body = _bodies.get(key)
    if body is None:
        body = entities.encode_response(
            API_VERSIONS_KEY,
            version,
            {
                "error_code": ErrorCode.none,
                "api_keys": [
                    {"api_key": k, "min_version": low, "max_version": high}
                    for k, low, high in api_keys
                ],
                "throttle_time": throttle_time,
            },
        )
        if not throttle_time:
            _bodies[key] = body
    return body


def handle_api_versions(
    broker: BrokerServices, context: RequestContext, request: ApiVersionsRequest
) -> ApiVersionsResponse:
    # Exactly what the dispatch table implements, no more (ARCHITECTURE.md).
    return ApiVersionsResponse(
        tuple(
            (a["api_key"], a["min_version"], a["max_version"]) for a in broker.router.advertised()
        )
    )


def handle_describe_cluster(
    broker: BrokerServices, context: RequestContext, request: DescribeClusterRequest
) -> BodyResponse:
    metadata = broker.metadata
    if getattr(request, "endpoint_type", 1) != 1:
        body = {
            "error_code": ErrorCode.unsupported_endpoint_type,
            "error_message": "only broker endpoints exist in a ZooKeeper-mode cluster",
            "cluster_id": metadata.cluster_id or "",
            "controller_id": -1,
            "brokers": [],
            "throttle_time": 0,
            "endpoint_type": request.endpoint_type,
            "cluster_authorized_operations": NOT_REQUESTED,
        }
        return context.respond(body)
    body = {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "cluster_id": metadata.cluster_id or "",
        "controller_id": metadata.controller_id,
        "endpoint_type": 1,
        "brokers": [
            {
                "broker_id": b.broker_id,
                "host": endpoint[0],
                "port": endpoint[1],
                "rack": b.rack,
                "is_fenced": False,
            }
            for b in sorted(metadata.brokers.values(), key=lambda b: b.broker_id)
            if (endpoint := b.endpoint(context.listener)) is not None
        ],
        "cluster_authorized_operations": _cluster_operations(broker, context, request),
    }
    return context.respond(body)


def _cluster_operations(broker: BrokerServices, context: RequestContext, request: Any) -> int:
    """Kafka: the operations the client may perform on the cluster when it asked (0
    without Describe)."""
    requested = bool(getattr(request, "include_cluster_authorized_operations", False))
    authorizer = broker.authorizer
    if not requested or not authorizer.enabled:
        return authorized_operations(AclResourceType.CLUSTER, requested)
    if not authorizer.authorize_cluster(context, AclOperation.DESCRIBE):
        return 0
    return authorizer.authorized_operations(context, AclResourceType.CLUSTER, CLUSTER_NAME)
