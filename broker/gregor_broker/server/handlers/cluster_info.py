"""ApiVersions and DescribeCluster."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from ...protocol.acl_operations import NOT_REQUESTED, AclResourceType, authorized_operations

if TYPE_CHECKING:
    from ..broker import Broker
    from ..request_router import RequestContext


def handle_api_versions(broker: Broker, context: RequestContext, request: Any) -> Any:
    # Exactly what the dispatch table implements, no more (ARCHITECTURE.md).
    return {
        "error_code": ErrorCode.none,
        "api_keys": broker.router.advertised(),
        "throttle_time": 0,
    }


def handle_describe_cluster(broker: Broker, context: RequestContext, request: Any) -> Any:
    metadata = broker.metadata
    if getattr(request, "endpoint_type", 1) != 1:
        return {
            "error_code": ErrorCode.unsupported_endpoint_type,
            "error_message": "only broker endpoints exist in a ZooKeeper-mode cluster",
            "cluster_id": metadata.cluster_id or "",
            "controller_id": -1,
            "brokers": [],
            "throttle_time": 0,
            "endpoint_type": request.endpoint_type,
            "cluster_authorized_operations": NOT_REQUESTED,
        }
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "cluster_id": metadata.cluster_id or "",
        "controller_id": metadata.controller_id,
        "endpoint_type": 1,
        "brokers": [
            {
                "broker_id": b.broker_id,
                "host": b.host,
                "port": b.port,
                "rack": b.rack,
                "is_fenced": False,
            }
            for b in sorted(metadata.brokers.values(), key=lambda b: b.broker_id)
        ],
        "cluster_authorized_operations": authorized_operations(
            AclResourceType.CLUSTER,
            bool(getattr(request, "include_cluster_authorized_operations", False)),
        ),
    }
