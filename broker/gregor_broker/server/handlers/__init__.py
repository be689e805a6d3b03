"""Request handlers, one module per area, and the table of implemented APIs.

The table is what ApiVersions advertises: a version range appears here only when the
handler implements every field of every version in it.
"""

from __future__ import annotations

from ..request_router import ApiSpec
from .cluster_info import handle_api_versions, handle_describe_cluster
from .configs import (
    handle_alter_configs,
    handle_describe_configs,
    handle_incremental_alter_configs,
)
from .fetch import handle_fetch
from .list_offsets import handle_list_offsets
from .metadata import handle_metadata
from .produce import handle_produce
from .records_admin import handle_delete_records
from .replication import handle_offset_for_leader_epoch
from .topics import handle_create_partitions, handle_create_topics, handle_delete_topics

API_TABLE: dict[int, ApiSpec] = {
    spec.key: spec
    for spec in [
        ApiSpec(0, "Produce", 3, 11, handle_produce),
        ApiSpec(1, "Fetch", 4, 16, handle_fetch),
        ApiSpec(2, "ListOffsets", 1, 10, handle_list_offsets),
        ApiSpec(3, "Metadata", 0, 13, handle_metadata),
        ApiSpec(18, "ApiVersions", 0, 4, handle_api_versions),
        ApiSpec(19, "CreateTopics", 2, 7, handle_create_topics),
        ApiSpec(20, "DeleteTopics", 1, 6, handle_delete_topics),
        ApiSpec(21, "DeleteRecords", 0, 2, handle_delete_records),
        ApiSpec(23, "OffsetForLeaderEpoch", 2, 4, handle_offset_for_leader_epoch),
        ApiSpec(32, "DescribeConfigs", 1, 4, handle_describe_configs),
        ApiSpec(33, "AlterConfigs", 0, 2, handle_alter_configs),
        ApiSpec(37, "CreatePartitions", 0, 3, handle_create_partitions),
        ApiSpec(44, "IncrementalAlterConfigs", 0, 1, handle_incremental_alter_configs),
        ApiSpec(60, "DescribeCluster", 0, 2, handle_describe_cluster),
    ]
}
