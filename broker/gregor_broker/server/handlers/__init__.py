"""Request handlers, one module per area, and the table of implemented APIs.

The table is what ApiVersions advertises: a version range appears here only when the
handler implements every field of every version in it.
"""

from __future__ import annotations

from ..request_router import ApiSpec
from .acls import handle_create_acls, handle_delete_acls, handle_describe_acls
from .client_quotas import handle_alter_client_quotas, handle_describe_client_quotas
from .cluster_info import handle_api_versions, handle_describe_cluster
from .configs import (
    handle_alter_configs,
    handle_describe_configs,
    handle_incremental_alter_configs,
)
from .describe_producers import handle_describe_producers
from .fetch import handle_fetch
from .groups import (
    handle_delete_groups,
    handle_describe_groups,
    handle_find_coordinator,
    handle_heartbeat,
    handle_join_group,
    handle_leave_group,
    handle_list_groups,
    handle_offset_commit,
    handle_offset_delete,
    handle_offset_fetch,
    handle_sync_group,
)
from .list_offsets import handle_list_offsets
from .log_dirs import handle_describe_log_dirs
from .metadata import handle_metadata
from .partition_admin import (
    handle_alter_partition_reassignments,
    handle_elect_leaders,
    handle_list_partition_reassignments,
)
from .produce import handle_produce
from .producer_ids import handle_init_producer_id
from .records_admin import handle_delete_records
from .replication import handle_offset_for_leader_epoch
from .security import (
    handle_alter_user_scram_credentials,
    handle_describe_user_scram_credentials,
    handle_sasl_authenticate,
    handle_sasl_handshake,
)
from .topics import handle_create_partitions, handle_create_topics, handle_delete_topics
from .transactions import (
    handle_add_offsets_to_txn,
    handle_add_partitions_to_txn,
    handle_describe_transactions,
    handle_end_txn,
    handle_list_transactions,
    handle_txn_offset_commit,
)
from .txn_markers import handle_write_txn_markers

API_TABLE: dict[int, ApiSpec] = {
    spec.key: spec
    for spec in [
        ApiSpec(0, "Produce", 3, 11, handle_produce),
        ApiSpec(1, "Fetch", 4, 16, handle_fetch),
        ApiSpec(2, "ListOffsets", 1, 10, handle_list_offsets),
        ApiSpec(3, "Metadata", 0, 13, handle_metadata),
        ApiSpec(8, "OffsetCommit", 2, 8, handle_offset_commit),
        ApiSpec(9, "OffsetFetch", 1, 8, handle_offset_fetch),
        ApiSpec(10, "FindCoordinator", 0, 6, handle_find_coordinator),
        ApiSpec(11, "JoinGroup", 0, 9, handle_join_group),
        ApiSpec(12, "Heartbeat", 0, 4, handle_heartbeat),
        ApiSpec(13, "LeaveGroup", 0, 5, handle_leave_group),
        ApiSpec(14, "SyncGroup", 0, 5, handle_sync_group),
        ApiSpec(15, "DescribeGroups", 0, 5, handle_describe_groups),
        ApiSpec(16, "ListGroups", 0, 5, handle_list_groups),
        ApiSpec(17, "SaslHandshake", 0, 1, handle_sasl_handshake),
        ApiSpec(18, "ApiVersions", 0, 4, handle_api_versions),
        ApiSpec(19, "CreateTopics", 2, 7, handle_create_topics),
        ApiSpec(20, "DeleteTopics", 1, 6, handle_delete_topics),
        ApiSpec(21, "DeleteRecords", 0, 2, handle_delete_records),
        ApiSpec(22, "InitProducerId", 0, 5, handle_init_producer_id),
        ApiSpec(23, "OffsetForLeaderEpoch", 2, 4, handle_offset_for_leader_epoch),
        ApiSpec(24, "AddPartitionsToTxn", 0, 4, handle_add_partitions_to_txn),
        ApiSpec(25, "AddOffsetsToTxn", 0, 3, handle_add_offsets_to_txn),
        ApiSpec(26, "EndTxn", 0, 3, handle_end_txn),
        ApiSpec(28, "TxnOffsetCommit", 0, 3, handle_txn_offset_commit),
        ApiSpec(27, "WriteTxnMarkers", 1, 2, handle_write_txn_markers),
        ApiSpec(29, "DescribeAcls", 1, 3, handle_describe_acls),
        ApiSpec(30, "CreateAcls", 1, 3, handle_create_acls),
        ApiSpec(31, "DeleteAcls", 1, 3, handle_delete_acls),
        ApiSpec(32, "DescribeConfigs", 1, 4, handle_describe_configs),
        ApiSpec(33, "AlterConfigs", 0, 2, handle_alter_configs),
        ApiSpec(35, "DescribeLogDirs", 1, 4, handle_describe_log_dirs),
        ApiSpec(36, "SaslAuthenticate", 0, 2, handle_sasl_authenticate),
        ApiSpec(37, "CreatePartitions", 0, 3, handle_create_partitions),
        ApiSpec(42, "DeleteGroups", 0, 2, handle_delete_groups),
        ApiSpec(43, "ElectLeaders", 0, 2, handle_elect_leaders),
        ApiSpec(44, "IncrementalAlterConfigs", 0, 1, handle_incremental_alter_configs),
        ApiSpec(45, "AlterPartitionReassignments", 0, 0, handle_alter_partition_reassignments),
        ApiSpec(46, "ListPartitionReassignments", 0, 0, handle_list_partition_reassignments),
        ApiSpec(47, "OffsetDelete", 0, 0, handle_offset_delete),
        ApiSpec(48, "DescribeClientQuotas", 0, 1, handle_describe_client_quotas),
        ApiSpec(49, "AlterClientQuotas", 0, 1, handle_alter_client_quotas),
        ApiSpec(50, "DescribeUserScramCredentials", 0, 0, handle_describe_user_scram_credentials),
        ApiSpec(51, "AlterUserScramCredentials", 0, 0, handle_alter_user_scram_credentials),
        ApiSpec(60, "DescribeCluster", 0, 2, handle_describe_cluster),
        ApiSpec(65, "DescribeTransactions", 0, 0, handle_describe_transactions),
        ApiSpec(66, "ListTransactions", 0, 1, handle_list_transactions),
        ApiSpec(61, "DescribeProducers", 0, 0, handle_describe_producers),
    ]
}
