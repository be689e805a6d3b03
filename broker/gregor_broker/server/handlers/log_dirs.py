"""DescribeLogDirs: each log directory of this broker with the size of every partition in
it, and the disk's total and usable bytes (v4), for ``gregor log-dirs describe`` (Kafka's
kafka-log-dirs.sh) and any admin client.

Sizes are the bytes of the partition's segments. Gregor moves no replica between
directories (no AlterReplicaLogDirs), so ``offset_lag`` is 0 and ``is_future_key`` false.
An offline directory answers KAFKA_STORAGE_ERROR with no topics, as Kafka's does.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode

from ...protocol.requests import DescribeLogDirsRequest
from ...protocol.response import BodyResponse
from ...security.acl import AclOperation
from ..request_router import RequestContext
from ..services import BrokerServices

UNKNOWN_SPACE = -1  # Kafka's "not known" for total_bytes / usable_bytes


def handle_describe_log_dirs(
    broker: BrokerServices, context: RequestContext, request: DescribeLogDirsRequest
) -> BodyResponse:
    if not broker.authorizer.authorize_cluster(context, AclOperation.DESCRIBE):
        # Kafka: no log dirs, and (v3+) CLUSTER_AUTHORIZATION_FAILED.
        body = {
            "throttle_time": 0,
            "error_code": ErrorCode.cluster_authorization_failed,
            "results": [],
        }
        return context.respond(body)
    # A null topics list asks for every partition; otherwise only the named ones.
    wanted = (
        None
        if request.topics is None
        else {(t.topic, p) for t in request.topics for p in t.partitions}
    )
    by_dir: dict[Path, dict[str, list[dict[str, Any]]]] = {
        log_dir: {} for log_dir in broker.logs.live_dirs
    }
    for (topic, partition), log in sorted(broker.logs.logs().items()):
        if wanted is not None and (topic, partition) not in wanted:
            continue
        topics = by_dir.setdefault(Path(log.directory).parent, {})
        topics.setdefault(topic, []).append(
            {
                "partition_index": partition,
                "partition_size": log.size_bytes,
                "offset_lag": 0,
                "is_future_key": False,
            }
        )
    results = []
    for log_dir, topics in by_dir.items():
        try:
            usage = shutil.disk_usage(log_dir)
            total, usable = usage.total, usage.free
        except OSError:
            total = usable = UNKNOWN_SPACE
        results.append(
            {
                "error_code": ErrorCode.none,
                "log_dir": str(log_dir),
                "topics": [{"name": name, "partitions": parts} for name, parts in topics.items()],
                "total_bytes": total,
                "usable_bytes": usable,
            }
        )
    for log_dir in broker.logs.offline_dirs:
        results.append(
            {
                "error_code": ErrorCode.kafka_storage_error,
                "log_dir": str(log_dir),
                "topics": [],
                "total_bytes": UNKNOWN_SPACE,
                "usable_bytes": UNKNOWN_SPACE,
            }
        )
    return context.respond({"throttle_time": 0, "error_code": ErrorCode.none, "results": results})
