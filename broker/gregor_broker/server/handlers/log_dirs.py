"""DescribeLogDirs (API 35): this broker's log dirs and the size of every partition replica
in them, what ``kafka-log-dirs.sh`` and rebalancers (gregor-operator's bytes to move and
bytes moved) read.

Matches Kafka's ``ReplicaManager.describeLogDirs``: every log dir is listed, an offline one
with KAFKA_STORAGE_ERROR and no partitions; ``topics: null`` asks for every partition;
``offset_lag`` is 0 (no future replicas: Gregor has no AlterReplicaLogDirs); v4 adds the
dir's total and usable bytes.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

if TYPE_CHECKING:
    from ..broker import Broker
    from ..request_router import RequestContext


def handle_describe_log_dirs(broker: Broker, context: RequestContext, request: Any) -> Any:
    logs = broker.logs
    wanted = (
        None
        if request.topics is None
        else {(t.topic, int(p)) for t in request.topics for p in t.partitions}
    )
    by_dir: dict[Path, dict[str, list[dict[str, Any]]]] = {d: {} for d in logs.log_dirs}
    for (topic, partition), log in sorted(logs.logs().items()):
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
        offline = log_dir in logs.offline_dirs
        try:
            usage = shutil.disk_usage(log_dir)
            total, usable = usage.total, usage.free
        except OSError:
            total = usable = -1
        results.append(
            {
                "error_code": ErrorCode.kafka_storage_error if offline else ErrorCode.none,
                "log_dir": str(log_dir),
                "topics": []
                if offline
                else [{"name": t, "partitions": p} for t, p in sorted(topics.items())],
                "total_bytes": total,
                "usable_bytes": usable,
            }
        )
    return {"throttle_time": 0, "error_code": ErrorCode.none, "results": results}
