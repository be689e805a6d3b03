"""kio's request classes for the versions Gregor serves, one alias per API.

A handler's ``request`` is typed with these (``handle_produce(..., request: ProduceRequest)``)
instead of ``Any``: the union of kio's generated dataclasses for exactly the versions in
``server/handlers/__init__.py``'s ``API_TABLE``; ``REQUEST_VERSIONS`` maps each API key to
them, and a unit test keeps the two in step. Fields a version lacks are read with
``getattr`` in the handlers.
"""

from __future__ import annotations

from typing import TypeAlias

from kio.schema.add_offsets_to_txn.v0.request import (
    AddOffsetsToTxnRequest as AddOffsetsToTxnRequestV0,
)
from kio.schema.add_offsets_to_txn.v1.request import (
    AddOffsetsToTxnRequest as AddOffsetsToTxnRequestV1,
)
from kio.schema.add_offsets_to_txn.v2.request import (
    AddOffsetsToTxnRequest as AddOffsetsToTxnRequestV2,
)
from kio.schema.add_offsets_to_txn.v3.request import (
    AddOffsetsToTxnRequest as AddOffsetsToTxnRequestV3,
)
from kio.schema.add_partitions_to_txn.v0.request import (
    AddPartitionsToTxnRequest as AddPartitionsToTxnRequestV0,
)
from kio.schema.add_partitions_to_txn.v1.request import (
    AddPartitionsToTxnRequest as AddPartitionsToTxnRequestV1,
)
from kio.schema.add_partitions_to_txn.v2.request import (
    AddPartitionsToTxnRequest as AddPartitionsToTxnRequestV2,
)
from kio.schema.add_partitions_to_txn.v3.request import (
    AddPartitionsToTxnRequest as AddPartitionsToTxnRequestV3,
)
from kio.schema.add_partitions_to_txn.v4.request import (
    AddPartitionsToTxnRequest as AddPartitionsToTxnRequestV4,
)
from kio.schema.alter_client_quotas.v0.request import (
    AlterClientQuotasRequest as AlterClientQuotasRequestV0,
)
from kio.schema.alter_client_quotas.v1.request import (
    AlterClientQuotasRequest as AlterClientQuotasRequestV1,
)
from kio.schema.alter_configs.v0.request import AlterConfigsRequest as AlterConfigsRequestV0
from kio.schema.alter_configs.v1.request import AlterConfigsRequest as AlterConfigsRequestV1
from kio.schema.alter_configs.v2.request import AlterConfigsRequest as AlterConfigsRequestV2
from kio.schema.alter_partition_reassignments.v0.request import (
    AlterPartitionReassignmentsRequest as AlterPartitionReassignmentsRequestV0,
)
from kio.schema.alter_user_scram_credentials.v0.request import (
    AlterUserScramCredentialsRequest as AlterUserScramCredentialsRequestV0,
)
from kio.schema.api_versions.v0.request import ApiVersionsRequest as ApiVersionsRequestV0
from kio.schema.api_versions.v1.request import ApiVersionsRequest as ApiVersionsRequestV1
from kio.schema.api_versions.v2.request import ApiVersionsRequest as ApiVersionsRequestV2
from kio.schema.api_versions.v3.request import ApiVersionsRequest as ApiVersionsRequestV3
from kio.schema.api_versions.v4.request import ApiVersionsRequest as ApiVersionsRequestV4
from kio.schema.create_acls.v1.request import (
    CreateAclsRequest as CreateAclsRequestV1,
)
from kio.schema.create_acls.v2.request import (
    CreateAclsRequest as CreateAclsRequestV2,
)
from kio.schema.create_acls.v3.request import (
    CreateAclsRequest as CreateAclsRequestV3,
)
from kio.schema.create_partitions.v0.request import (
    CreatePartitionsRequest as CreatePartitionsRequestV0,
)
from kio.schema.create_partitions.v1.request import (
    CreatePartitionsRequest as CreatePartitionsRequestV1,
)
from kio.schema.create_partitions.v2.request import (
    CreatePartitionsRequest as CreatePartitionsRequestV2,
)
from kio.schema.create_partitions.v3.request import (
    CreatePartitionsRequest as CreatePartitionsRequestV3,
)
from kio.schema.create_topics.v2.request import CreateTopicsRequest as CreateTopicsRequestV2
from kio.schema.create_topics.v3.request import CreateTopicsRequest as CreateTopicsRequestV3
from kio.schema.create_topics.v4.request import CreateTopicsRequest as CreateTopicsRequestV4
from kio.schema.create_topics.v5.request import CreateTopicsRequest as CreateTopicsRequestV5
from kio.schema.create_topics.v6.request import CreateTopicsRequest as CreateTopicsRequestV6
from kio.schema.create_topics.v7.request import CreateTopicsRequest as CreateTopicsRequestV7
from kio.schema.delete_acls.v1.request import (
    DeleteAclsRequest as DeleteAclsRequestV1,
)
from kio.schema.delete_acls.v2.request import (
    DeleteAclsRequest as DeleteAclsRequestV2,
)
from kio.schema.delete_acls.v3.request import (
    DeleteAclsRequest as DeleteAclsRequestV3,
)
from kio.schema.delete_groups.v0.request import DeleteGroupsRequest as DeleteGroupsRequestV0
from kio.schema.delete_groups.v1.request import DeleteGroupsRequest as DeleteGroupsRequestV1
from kio.schema.delete_groups.v2.request import DeleteGroupsRequest as DeleteGroupsRequestV2
from kio.schema.delete_records.v0.request import DeleteRecordsRequest as DeleteRecordsRequestV0
from kio.schema.delete_records.v1.request import DeleteRecordsRequest as DeleteRecordsRequestV1
from kio.schema.delete_records.v2.request import DeleteRecordsRequest as DeleteRecordsRequestV2
from kio.schema.delete_topics.v1.request import DeleteTopicsRequest as DeleteTopicsRequestV1
from kio.schema.delete_topics.v2.request import DeleteTopicsRequest as DeleteTopicsRequestV2
from kio.schema.delete_topics.v3.request import DeleteTopicsRequest as DeleteTopicsRequestV3
from kio.schema.delete_topics.v4.request import DeleteTopicsRequest as DeleteTopicsRequestV4
from kio.schema.delete_topics.v5.request import DeleteTopicsRequest as DeleteTopicsRequestV5
from kio.schema.delete_topics.v6.request import DeleteTopicsRequest as DeleteTopicsRequestV6
from kio.schema.describe_acls.v1.request import (
    DescribeAclsRequest as DescribeAclsRequestV1,
)
from kio.schema.describe_acls.v2.request import (
    DescribeAclsRequest as DescribeAclsRequestV2,
)
from kio.schema.describe_acls.v3.request import (
    DescribeAclsRequest as DescribeAclsRequestV3,
)
from kio.schema.describe_client_quotas.v0.request import (
    DescribeClientQuotasRequest as DescribeClientQuotasRequestV0,
)
from kio.schema.describe_client_quotas.v1.request import (
    DescribeClientQuotasRequest as DescribeClientQuotasRequestV1,
)
from kio.schema.describe_cluster.v0.request import (
    DescribeClusterRequest as DescribeClusterRequestV0,
)
from kio.schema.describe_cluster.v1.request import (
    DescribeClusterRequest as DescribeClusterRequestV1,
)
from kio.schema.describe_cluster.v2.request import (
    DescribeClusterRequest as DescribeClusterRequestV2,
)
from kio.schema.describe_configs.v1.request import (
    DescribeConfigsRequest as DescribeConfigsRequestV1,
)
from kio.schema.describe_configs.v2.request import (
    DescribeConfigsRequest as DescribeConfigsRequestV2,
)
from kio.schema.describe_configs.v3.request import (
    DescribeConfigsRequest as DescribeConfigsRequestV3,
)
from kio.schema.describe_configs.v4.request import (
    DescribeConfigsRequest as DescribeConfigsRequestV4,
)
from kio.schema.describe_groups.v0.request import DescribeGroupsRequest as DescribeGroupsRequestV0
from kio.schema.describe_groups.v1.request import DescribeGroupsRequest as DescribeGroupsRequestV1
from kio.schema.describe_groups.v2.request import DescribeGroupsRequest as DescribeGroupsRequestV2
from kio.schema.describe_groups.v3.request import DescribeGroupsRequest as DescribeGroupsRequestV3
from kio.schema.describe_groups.v4.request import DescribeGroupsRequest as DescribeGroupsRequestV4
from kio.schema.describe_groups.v5.request import DescribeGroupsRequest as DescribeGroupsRequestV5
from kio.schema.describe_log_dirs.v1.request import (
    DescribeLogDirsRequest as DescribeLogDirsRequestV1,
)
from kio.schema.describe_log_dirs.v2.request import (
    DescribeLogDirsRequest as DescribeLogDirsRequestV2,
)
from kio.schema.describe_log_dirs.v3.request import (
    DescribeLogDirsRequest as DescribeLogDirsRequestV3,
)
from kio.schema.describe_log_dirs.v4.request import (
    DescribeLogDirsRequest as DescribeLogDirsRequestV4,
)
from kio.schema.describe_producers.v0.request import (
    DescribeProducersRequest as DescribeProducersRequestV0,
)
from kio.schema.describe_transactions.v0.request import (
    DescribeTransactionsRequest as DescribeTransactionsRequestV0,
)
from kio.schema.describe_user_scram_credentials.v0.request import (
    DescribeUserScramCredentialsRequest as DescribeUserScramCredentialsRequestV0,
)
from kio.schema.elect_leaders.v0.request import ElectLeadersRequest as ElectLeadersRequestV0
from kio.schema.elect_leaders.v1.request import ElectLeadersRequest as ElectLeadersRequestV1
from kio.schema.elect_leaders.v2.request import ElectLeadersRequest as ElectLeadersRequestV2
from kio.schema.end_txn.v0.request import EndTxnRequest as EndTxnRequestV0
from kio.schema.end_txn.v1.request import EndTxnRequest as EndTxnRequestV1
from kio.schema.end_txn.v2.request import EndTxnRequest as EndTxnRequestV2
from kio.schema.end_txn.v3.request import EndTxnRequest as EndTxnRequestV3
from kio.schema.fetch.v4.request import FetchRequest as FetchRequestV4
from kio.schema.fetch.v5.request import FetchRequest as FetchRequestV5
from kio.schema.fetch.v6.request import FetchRequest as FetchRequestV6
from kio.schema.fetch.v7.request import FetchRequest as FetchRequestV7
from kio.schema.fetch.v8.request import FetchRequest as FetchRequestV8
from kio.schema.fetch.v9.request import FetchRequest as FetchRequestV9
from kio.schema.fetch.v10.request import FetchRequest as FetchRequestV10
from kio.schema.fetch.v11.request import FetchRequest as FetchRequestV11
from kio.schema.fetch.v12.request import FetchRequest as FetchRequestV12
from kio.schema.fetch.v13.request import FetchRequest as FetchRequestV13
from kio.schema.fetch.v14.request import FetchRequest as FetchRequestV14
from kio.schema.fetch.v15.request import FetchRequest as FetchRequestV15
from kio.schema.fetch.v16.request import FetchRequest as FetchRequestV16
from kio.schema.find_coordinator.v0.request import (
    FindCoordinatorRequest as FindCoordinatorRequestV0,
)
from kio.schema.find_coordinator.v1.request import (
    FindCoordinatorRequest as FindCoordinatorRequestV1,
)
from kio.schema.find_coordinator.v2.request import (
    FindCoordinatorRequest as FindCoordinatorRequestV2,
)
from kio.schema.find_coordinator.v3.request import (
    FindCoordinatorRequest as FindCoordinatorRequestV3,
)
from kio.schema.find_coordinator.v4.request import (
    FindCoordinatorRequest as FindCoordinatorRequestV4,
)
from kio.schema.find_coordinator.v5.request import (
    FindCoordinatorRequest as FindCoordinatorRequestV5,
)
from kio.schema.find_coordinator.v6.request import (
    FindCoordinatorRequest as FindCoordinatorRequestV6,
)
from kio.schema.heartbeat.v0.request import HeartbeatRequest as HeartbeatRequestV0
from kio.schema.heartbeat.v1.request import HeartbeatRequest as HeartbeatRequestV1
from kio.schema.heartbeat.v2.request import HeartbeatRequest as HeartbeatRequestV2
from kio.schema.heartbeat.v3.request import HeartbeatRequest as HeartbeatRequestV3
from kio.schema.heartbeat.v4.request import HeartbeatRequest as HeartbeatRequestV4
from kio.schema.incremental_alter_configs.v0.request import (
    IncrementalAlterConfigsRequest as IncrementalAlterConfigsRequestV0,
)
from kio.schema.incremental_alter_configs.v1.request import (
    IncrementalAlterConfigsRequest as IncrementalAlterConfigsRequestV1,
)
from kio.schema.init_producer_id.v0.request import InitProducerIdRequest as InitProducerIdRequestV0
from kio.schema.init_producer_id.v1.request import InitProducerIdRequest as InitProducerIdRequestV1
from kio.schema.init_producer_id.v2.request import InitProducerIdRequest as InitProducerIdRequestV2
from kio.schema.init_producer_id.v3.request import InitProducerIdRequest as InitProducerIdRequestV3
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest as InitProducerIdRequestV4
from kio.schema.init_producer_id.v5.request import InitProducerIdRequest as InitProducerIdRequestV5
from kio.schema.join_group.v0.request import JoinGroupRequest as JoinGroupRequestV0
from kio.schema.join_group.v1.request import JoinGroupRequest as JoinGroupRequestV1
from kio.schema.join_group.v2.request import JoinGroupRequest as JoinGroupRequestV2
from kio.schema.join_group.v3.request import JoinGroupRequest as JoinGroupRequestV3
from kio.schema.join_group.v4.request import JoinGroupRequest as JoinGroupRequestV4
from kio.schema.join_group.v5.request import JoinGroupRequest as JoinGroupRequestV5
from kio.schema.join_group.v6.request import JoinGroupRequest as JoinGroupRequestV6
from kio.schema.join_group.v7.request import JoinGroupRequest as JoinGroupRequestV7
from kio.schema.join_group.v8.request import JoinGroupRequest as JoinGroupRequestV8
from kio.schema.join_group.v9.request import JoinGroupRequest as JoinGroupRequestV9
from kio.schema.leave_group.v0.request import LeaveGroupRequest as LeaveGroupRequestV0
from kio.schema.leave_group.v1.request import LeaveGroupRequest as LeaveGroupRequestV1
from kio.schema.leave_group.v2.request import LeaveGroupRequest as LeaveGroupRequestV2
from kio.schema.leave_group.v3.request import LeaveGroupRequest as LeaveGroupRequestV3
from kio.schema.leave_group.v4.request import LeaveGroupRequest as LeaveGroupRequestV4
from kio.schema.leave_group.v5.request import LeaveGroupRequest as LeaveGroupRequestV5
from kio.schema.list_groups.v0.request import ListGroupsRequest as ListGroupsRequestV0
from kio.schema.list_groups.v1.request import ListGroupsRequest as ListGroupsRequestV1
from kio.schema.list_groups.v2.request import ListGroupsRequest as ListGroupsRequestV2
from kio.schema.list_groups.v3.request import ListGroupsRequest as ListGroupsRequestV3
from kio.schema.list_groups.v4.request import ListGroupsRequest as ListGroupsRequestV4
from kio.schema.list_groups.v5.request import ListGroupsRequest as ListGroupsRequestV5
from kio.schema.list_offsets.v1.request import ListOffsetsRequest as ListOffsetsRequestV1
from kio.schema.list_offsets.v2.request import ListOffsetsRequest as ListOffsetsRequestV2
from kio.schema.list_offsets.v3.request import ListOffsetsRequest as ListOffsetsRequestV3
from kio.schema.list_offsets.v4.request import ListOffsetsRequest as ListOffsetsRequestV4
from kio.schema.list_offsets.v5.request import ListOffsetsRequest as ListOffsetsRequestV5
from kio.schema.list_offsets.v6.request import ListOffsetsRequest as ListOffsetsRequestV6
from kio.schema.list_offsets.v7.request import ListOffsetsRequest as ListOffsetsRequestV7
from kio.schema.list_offsets.v8.request import ListOffsetsRequest as ListOffsetsRequestV8
from kio.schema.list_offsets.v9.request import ListOffsetsRequest as ListOffsetsRequestV9
from kio.schema.list_offsets.v10.request import ListOffsetsRequest as ListOffsetsRequestV10
from kio.schema.list_partition_reassignments.v0.request import (
    ListPartitionReassignmentsRequest as ListPartitionReassignmentsRequestV0,
)
from kio.schema.list_transactions.v0.request import (
    ListTransactionsRequest as ListTransactionsRequestV0,
)
from kio.schema.list_transactions.v1.request import (
    ListTransactionsRequest as ListTransactionsRequestV1,
)
from kio.schema.metadata.v0.request import MetadataRequest as MetadataRequestV0
from kio.schema.metadata.v1.request import MetadataRequest as MetadataRequestV1
from kio.schema.metadata.v2.request import MetadataRequest as MetadataRequestV2
from kio.schema.metadata.v3.request import MetadataRequest as MetadataRequestV3
from kio.schema.metadata.v4.request import MetadataRequest as MetadataRequestV4
from kio.schema.metadata.v5.request import MetadataRequest as MetadataRequestV5
from kio.schema.metadata.v6.request import MetadataRequest as MetadataRequestV6
from kio.schema.metadata.v7.request import MetadataRequest as MetadataRequestV7
from kio.schema.metadata.v8.request import MetadataRequest as MetadataRequestV8
from kio.schema.metadata.v9.request import MetadataRequest as MetadataRequestV9
from kio.schema.metadata.v10.request import MetadataRequest as MetadataRequestV10
from kio.schema.metadata.v11.request import MetadataRequest as MetadataRequestV11
from kio.schema.metadata.v12.request import MetadataRequest as MetadataRequestV12
from kio.schema.metadata.v13.request import MetadataRequest as MetadataRequestV13
from kio.schema.offset_commit.v2.request import OffsetCommitRequest as OffsetCommitRequestV2
from kio.schema.offset_commit.v3.request import OffsetCommitRequest as OffsetCommitRequestV3
from kio.schema.offset_commit.v4.request import OffsetCommitRequest as OffsetCommitRequestV4
from kio.schema.offset_commit.v5.request import OffsetCommitRequest as OffsetCommitRequestV5
from kio.schema.offset_commit.v6.request import OffsetCommitRequest as OffsetCommitRequestV6
from kio.schema.offset_commit.v7.request import OffsetCommitRequest as OffsetCommitRequestV7
from kio.schema.offset_commit.v8.request import OffsetCommitRequest as OffsetCommitRequestV8
from kio.schema.offset_delete.v0.request import OffsetDeleteRequest as OffsetDeleteRequestV0
from kio.schema.offset_fetch.v1.request import OffsetFetchRequest as OffsetFetchRequestV1
from kio.schema.offset_fetch.v2.request import OffsetFetchRequest as OffsetFetchRequestV2
from kio.schema.offset_fetch.v3.request import OffsetFetchRequest as OffsetFetchRequestV3
from kio.schema.offset_fetch.v4.request import OffsetFetchRequest as OffsetFetchRequestV4
from kio.schema.offset_fetch.v5.request import OffsetFetchRequest as OffsetFetchRequestV5
from kio.schema.offset_fetch.v6.request import OffsetFetchRequest as OffsetFetchRequestV6
from kio.schema.offset_fetch.v7.request import OffsetFetchRequest as OffsetFetchRequestV7
from kio.schema.offset_fetch.v8.request import OffsetFetchRequest as OffsetFetchRequestV8
from kio.schema.offset_for_leader_epoch.v2.request import (
    OffsetForLeaderEpochRequest as OffsetForLeaderEpochRequestV2,
)
from kio.schema.offset_for_leader_epoch.v3.request import (
    OffsetForLeaderEpochRequest as OffsetForLeaderEpochRequestV3,
)
from kio.schema.offset_for_leader_epoch.v4.request import (
    OffsetForLeaderEpochRequest as OffsetForLeaderEpochRequestV4,
)
from kio.schema.produce.v3.request import ProduceRequest as ProduceRequestV3
from kio.schema.produce.v4.request import ProduceRequest as ProduceRequestV4
from kio.schema.produce.v5.request import ProduceRequest as ProduceRequestV5
from kio.schema.produce.v6.request import ProduceRequest as ProduceRequestV6
from kio.schema.produce.v7.request import ProduceRequest as ProduceRequestV7
from kio.schema.produce.v8.request import ProduceRequest as ProduceRequestV8
from kio.schema.produce.v9.request import ProduceRequest as ProduceRequestV9
from kio.schema.produce.v10.request import ProduceRequest as ProduceRequestV10
from kio.schema.produce.v11.request import ProduceRequest as ProduceRequestV11
from kio.schema.sasl_authenticate.v0.request import (
    SaslAuthenticateRequest as SaslAuthenticateRequestV0,
)
from kio.schema.sasl_authenticate.v1.request import (
    SaslAuthenticateRequest as SaslAuthenticateRequestV1,
)
from kio.schema.sasl_authenticate.v2.request import (
    SaslAuthenticateRequest as SaslAuthenticateRequestV2,
)
from kio.schema.sasl_handshake.v0.request import SaslHandshakeRequest as SaslHandshakeRequestV0
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest as SaslHandshakeRequestV1
from kio.schema.sync_group.v0.request import SyncGroupRequest as SyncGroupRequestV0
from kio.schema.sync_group.v1.request import SyncGroupRequest as SyncGroupRequestV1
from kio.schema.sync_group.v2.request import SyncGroupRequest as SyncGroupRequestV2
from kio.schema.sync_group.v3.request import SyncGroupRequest as SyncGroupRequestV3
from kio.schema.sync_group.v4.request import SyncGroupRequest as SyncGroupRequestV4
from kio.schema.sync_group.v5.request import SyncGroupRequest as SyncGroupRequestV5
from kio.schema.txn_offset_commit.v0.request import (
    TxnOffsetCommitRequest as TxnOffsetCommitRequestV0,
)
from kio.schema.txn_offset_commit.v1.request import (
    TxnOffsetCommitRequest as TxnOffsetCommitRequestV1,
)
from kio.schema.txn_offset_commit.v2.request import (
    TxnOffsetCommitRequest as TxnOffsetCommitRequestV2,
)
from kio.schema.txn_offset_commit.v3.request import (
    TxnOffsetCommitRequest as TxnOffsetCommitRequestV3,
)
from kio.schema.write_txn_markers.v1.request import (
    WriteTxnMarkersRequest as WriteTxnMarkersRequestV1,
)
from kio.schema.write_txn_markers.v2.request import (
    WriteTxnMarkersRequest as WriteTxnMarkersRequestV2,
)

ProduceRequest: TypeAlias = (
    ProduceRequestV3
    | ProduceRequestV4
    | ProduceRequestV5
    | ProduceRequestV6
    | ProduceRequestV7
    | ProduceRequestV8
    | ProduceRequestV9
    | ProduceRequestV10
    | ProduceRequestV11
)
FetchRequest: TypeAlias = (
    FetchRequestV4
    | FetchRequestV5
    | FetchRequestV6
    | FetchRequestV7
    | FetchRequestV8
    | FetchRequestV9
    | FetchRequestV10
    | FetchRequestV11
    | FetchRequestV12
    | FetchRequestV13
    | FetchRequestV14
    | FetchRequestV15
    | FetchRequestV16
)
ListOffsetsRequest: TypeAlias = (
    ListOffsetsRequestV1
    | ListOffsetsRequestV2
    | ListOffsetsRequestV3
    | ListOffsetsRequestV4
    | ListOffsetsRequestV5
    | ListOffsetsRequestV6
    | ListOffsetsRequestV7
    | ListOffsetsRequestV8
    | ListOffsetsRequestV9
    | ListOffsetsRequestV10
)
MetadataRequest: TypeAlias = (
    MetadataRequestV0
    | MetadataRequestV1
    | MetadataRequestV2
    | MetadataRequestV3
    | MetadataRequestV4
    | MetadataRequestV5
    | MetadataRequestV6
    | MetadataRequestV7
    | MetadataRequestV8
    | MetadataRequestV9
    | MetadataRequestV10
    | MetadataRequestV11
    | MetadataRequestV12
    | MetadataRequestV13
)
OffsetCommitRequest: TypeAlias = (
    OffsetCommitRequestV2
    | OffsetCommitRequestV3
    | OffsetCommitRequestV4
    | OffsetCommitRequestV5
    | OffsetCommitRequestV6
    | OffsetCommitRequestV7
    | OffsetCommitRequestV8
)
OffsetFetchRequest: TypeAlias = (
    OffsetFetchRequestV1
    | OffsetFetchRequestV2
    | OffsetFetchRequestV3
    | OffsetFetchRequestV4
    | OffsetFetchRequestV5
    | OffsetFetchRequestV6
    | OffsetFetchRequestV7
    | OffsetFetchRequestV8
)
FindCoordinatorRequest: TypeAlias = (
    FindCoordinatorRequestV0
    | FindCoordinatorRequestV1
    | FindCoordinatorRequestV2
    | FindCoordinatorRequestV3
    | FindCoordinatorRequestV4
    | FindCoordinatorRequestV5
    | FindCoordinatorRequestV6
)
JoinGroupRequest: TypeAlias = (
    JoinGroupRequestV0
    | JoinGroupRequestV1
    | JoinGroupRequestV2
    | JoinGroupRequestV3
    | JoinGroupRequestV4
    | JoinGroupRequestV5
    | JoinGroupRequestV6
    | JoinGroupRequestV7
    | JoinGroupRequestV8
    | JoinGroupRequestV9
)
HeartbeatRequest: TypeAlias = (
    HeartbeatRequestV0
    | HeartbeatRequestV1
    | HeartbeatRequestV2
    | HeartbeatRequestV3
    | HeartbeatRequestV4
)
LeaveGroupRequest: TypeAlias = (
    LeaveGroupRequestV0
    | LeaveGroupRequestV1
    | LeaveGroupRequestV2
    | LeaveGroupRequestV3
    | LeaveGroupRequestV4
    | LeaveGroupRequestV5
)
SyncGroupRequest: TypeAlias = (
    SyncGroupRequestV0
    | SyncGroupRequestV1
    | SyncGroupRequestV2
    | SyncGroupRequestV3
    | SyncGroupRequestV4
    | SyncGroupRequestV5
)
DescribeGroupsRequest: TypeAlias = (
    DescribeGroupsRequestV0
    | DescribeGroupsRequestV1
    | DescribeGroupsRequestV2
    | DescribeGroupsRequestV3
    | DescribeGroupsRequestV4
    | DescribeGroupsRequestV5
)
ListGroupsRequest: TypeAlias = (
    ListGroupsRequestV0
    | ListGroupsRequestV1
    | ListGroupsRequestV2
    | ListGroupsRequestV3
    | ListGroupsRequestV4
    | ListGroupsRequestV5
)
ApiVersionsRequest: TypeAlias = (
    ApiVersionsRequestV0
    | ApiVersionsRequestV1
    | ApiVersionsRequestV2
    | ApiVersionsRequestV3
    | ApiVersionsRequestV4
)
CreateTopicsRequest: TypeAlias = (
    CreateTopicsRequestV2
    | CreateTopicsRequestV3
    | CreateTopicsRequestV4
    | CreateTopicsRequestV5
    | CreateTopicsRequestV6
    | CreateTopicsRequestV7
)
DeleteTopicsRequest: TypeAlias = (
    DeleteTopicsRequestV1
    | DeleteTopicsRequestV2
    | DeleteTopicsRequestV3
    | DeleteTopicsRequestV4
    | DeleteTopicsRequestV5
    | DeleteTopicsRequestV6
)
DeleteRecordsRequest: TypeAlias = (
    DeleteRecordsRequestV0 | DeleteRecordsRequestV1 | DeleteRecordsRequestV2
)
InitProducerIdRequest: TypeAlias = (
    InitProducerIdRequestV0
    | InitProducerIdRequestV1
    | InitProducerIdRequestV2
    | InitProducerIdRequestV3
    | InitProducerIdRequestV4
    | InitProducerIdRequestV5
)
AddPartitionsToTxnRequest: TypeAlias = (
    AddPartitionsToTxnRequestV0
    | AddPartitionsToTxnRequestV1
    | AddPartitionsToTxnRequestV2
    | AddPartitionsToTxnRequestV3
    | AddPartitionsToTxnRequestV4
)
AddOffsetsToTxnRequest: TypeAlias = (
    AddOffsetsToTxnRequestV0
    | AddOffsetsToTxnRequestV1
    | AddOffsetsToTxnRequestV2
    | AddOffsetsToTxnRequestV3
)
EndTxnRequest: TypeAlias = EndTxnRequestV0 | EndTxnRequestV1 | EndTxnRequestV2 | EndTxnRequestV3
TxnOffsetCommitRequest: TypeAlias = (
    TxnOffsetCommitRequestV0
    | TxnOffsetCommitRequestV1
    | TxnOffsetCommitRequestV2
    | TxnOffsetCommitRequestV3
)
DescribeTransactionsRequest: TypeAlias = DescribeTransactionsRequestV0
ListTransactionsRequest: TypeAlias = ListTransactionsRequestV0 | ListTransactionsRequestV1
OffsetForLeaderEpochRequest: TypeAlias = (
    OffsetForLeaderEpochRequestV2 | OffsetForLeaderEpochRequestV3 | OffsetForLeaderEpochRequestV4
)
DescribeConfigsRequest: TypeAlias = (
    DescribeConfigsRequestV1
    | DescribeConfigsRequestV2
    | DescribeConfigsRequestV3
    | DescribeConfigsRequestV4
)
AlterConfigsRequest: TypeAlias = (
    AlterConfigsRequestV0 | AlterConfigsRequestV1 | AlterConfigsRequestV2
)
DescribeLogDirsRequest: TypeAlias = (
    DescribeLogDirsRequestV1
    | DescribeLogDirsRequestV2
    | DescribeLogDirsRequestV3
    | DescribeLogDirsRequestV4
)
CreatePartitionsRequest: TypeAlias = (
    CreatePartitionsRequestV0
    | CreatePartitionsRequestV1
    | CreatePartitionsRequestV2
    | CreatePartitionsRequestV3
)
DeleteGroupsRequest: TypeAlias = (
    DeleteGroupsRequestV0 | DeleteGroupsRequestV1 | DeleteGroupsRequestV2
)
ElectLeadersRequest: TypeAlias = (
    ElectLeadersRequestV0 | ElectLeadersRequestV1 | ElectLeadersRequestV2
)
IncrementalAlterConfigsRequest: TypeAlias = (
    IncrementalAlterConfigsRequestV0 | IncrementalAlterConfigsRequestV1
)
AlterPartitionReassignmentsRequest: TypeAlias = AlterPartitionReassignmentsRequestV0
ListPartitionReassignmentsRequest: TypeAlias = ListPartitionReassignmentsRequestV0
OffsetDeleteRequest: TypeAlias = OffsetDeleteRequestV0
DescribeClientQuotasRequest: TypeAlias = (
    DescribeClientQuotasRequestV0 | DescribeClientQuotasRequestV1
)
AlterClientQuotasRequest: TypeAlias = AlterClientQuotasRequestV0 | AlterClientQuotasRequestV1
DescribeClusterRequest: TypeAlias = (
    DescribeClusterRequestV0 | DescribeClusterRequestV1 | DescribeClusterRequestV2
)
WriteTxnMarkersRequest: TypeAlias = WriteTxnMarkersRequestV1 | WriteTxnMarkersRequestV2
DescribeProducersRequest: TypeAlias = DescribeProducersRequestV0

# API key -> {version: kio request class}, for the versions served.
SaslHandshakeRequest: TypeAlias = SaslHandshakeRequestV0 | SaslHandshakeRequestV1
SaslAuthenticateRequest: TypeAlias = (
    SaslAuthenticateRequestV0 | SaslAuthenticateRequestV1 | SaslAuthenticateRequestV2
)
DescribeUserScramCredentialsRequest: TypeAlias = DescribeUserScramCredentialsRequestV0
AlterUserScramCredentialsRequest: TypeAlias = AlterUserScramCredentialsRequestV0

DescribeAclsRequest: TypeAlias = (
    DescribeAclsRequestV1 | DescribeAclsRequestV2 | DescribeAclsRequestV3
)
CreateAclsRequest: TypeAlias = CreateAclsRequestV1 | CreateAclsRequestV2 | CreateAclsRequestV3
DeleteAclsRequest: TypeAlias = DeleteAclsRequestV1 | DeleteAclsRequestV2 | DeleteAclsRequestV3

REQUEST_VERSIONS: dict[int, dict[int, type]] = {
    29: {1: DescribeAclsRequestV1, 2: DescribeAclsRequestV2, 3: DescribeAclsRequestV3},
    30: {1: CreateAclsRequestV1, 2: CreateAclsRequestV2, 3: CreateAclsRequestV3},
    31: {1: DeleteAclsRequestV1, 2: DeleteAclsRequestV2, 3: DeleteAclsRequestV3},
    17: {0: SaslHandshakeRequestV0, 1: SaslHandshakeRequestV1},
    36: {0: SaslAuthenticateRequestV0, 1: SaslAuthenticateRequestV1, 2: SaslAuthenticateRequestV2},
    50: {0: DescribeUserScramCredentialsRequestV0},
    51: {0: AlterUserScramCredentialsRequestV0},
    0: {
        3: ProduceRequestV3,
        4: ProduceRequestV4,
        5: ProduceRequestV5,
        6: ProduceRequestV6,
        7: ProduceRequestV7,
        8: ProduceRequestV8,
        9: ProduceRequestV9,
        10: ProduceRequestV10,
        11: ProduceRequestV11,
    },
    1: {
        4: FetchRequestV4,
        5: FetchRequestV5,
        6: FetchRequestV6,
        7: FetchRequestV7,
        8: FetchRequestV8,
        9: FetchRequestV9,
        10: FetchRequestV10,
        11: FetchRequestV11,
        12: FetchRequestV12,
        13: FetchRequestV13,
        14: FetchRequestV14,
        15: FetchRequestV15,
        16: FetchRequestV16,
    },
    2: {
        1: ListOffsetsRequestV1,
        2: ListOffsetsRequestV2,
        3: ListOffsetsRequestV3,
        4: ListOffsetsRequestV4,
        5: ListOffsetsRequestV5,
        6: ListOffsetsRequestV6,
        7: ListOffsetsRequestV7,
        8: ListOffsetsRequestV8,
        9: ListOffsetsRequestV9,
        10: ListOffsetsRequestV10,
    },
    3: {
        0: MetadataRequestV0,
        1: MetadataRequestV1,
        2: MetadataRequestV2,
        3: MetadataRequestV3,
        4: MetadataRequestV4,
        5: MetadataRequestV5,
        6: MetadataRequestV6,
        7: MetadataRequestV7,
        8: MetadataRequestV8,
        9: MetadataRequestV9,
        10: MetadataRequestV10,
        11: MetadataRequestV11,
        12: MetadataRequestV12,
        13: MetadataRequestV13,
    },
    8: {
        2: OffsetCommitRequestV2,
        3: OffsetCommitRequestV3,
        4: OffsetCommitRequestV4,
        5: OffsetCommitRequestV5,
        6: OffsetCommitRequestV6,
        7: OffsetCommitRequestV7,
        8: OffsetCommitRequestV8,
    },
    9: {
        1: OffsetFetchRequestV1,
        2: OffsetFetchRequestV2,
        3: OffsetFetchRequestV3,
        4: OffsetFetchRequestV4,
        5: OffsetFetchRequestV5,
        6: OffsetFetchRequestV6,
        7: OffsetFetchRequestV7,
        8: OffsetFetchRequestV8,
    },
    10: {
        0: FindCoordinatorRequestV0,
        1: FindCoordinatorRequestV1,
        2: FindCoordinatorRequestV2,
        3: FindCoordinatorRequestV3,
        4: FindCoordinatorRequestV4,
        5: FindCoordinatorRequestV5,
        6: FindCoordinatorRequestV6,
    },
    11: {
        0: JoinGroupRequestV0,
        1: JoinGroupRequestV1,
        2: JoinGroupRequestV2,
        3: JoinGroupRequestV3,
        4: JoinGroupRequestV4,
        5: JoinGroupRequestV5,
        6: JoinGroupRequestV6,
        7: JoinGroupRequestV7,
        8: JoinGroupRequestV8,
        9: JoinGroupRequestV9,
    },
    12: {
        0: HeartbeatRequestV0,
        1: HeartbeatRequestV1,
        2: HeartbeatRequestV2,
        3: HeartbeatRequestV3,
        4: HeartbeatRequestV4,
    },
    13: {
        0: LeaveGroupRequestV0,
        1: LeaveGroupRequestV1,
        2: LeaveGroupRequestV2,
        3: LeaveGroupRequestV3,
        4: LeaveGroupRequestV4,
        5: LeaveGroupRequestV5,
    },
    14: {
        0: SyncGroupRequestV0,
        1: SyncGroupRequestV1,
        2: SyncGroupRequestV2,
        3: SyncGroupRequestV3,
        4: SyncGroupRequestV4,
        5: SyncGroupRequestV5,
    },
    15: {
        0: DescribeGroupsRequestV0,
        1: DescribeGroupsRequestV1,
        2: DescribeGroupsRequestV2,
        3: DescribeGroupsRequestV3,
        4: DescribeGroupsRequestV4,
        5: DescribeGroupsRequestV5,
    },
    16: {
        0: ListGroupsRequestV0,
        1: ListGroupsRequestV1,
        2: ListGroupsRequestV2,
        3: ListGroupsRequestV3,
        4: ListGroupsRequestV4,
        5: ListGroupsRequestV5,
    },
    18: {
        0: ApiVersionsRequestV0,
        1: ApiVersionsRequestV1,
        2: ApiVersionsRequestV2,
        3: ApiVersionsRequestV3,
        4: ApiVersionsRequestV4,
    },
    19: {
        2: CreateTopicsRequestV2,
        3: CreateTopicsRequestV3,
        4: CreateTopicsRequestV4,
        5: CreateTopicsRequestV5,
        6: CreateTopicsRequestV6,
        7: CreateTopicsRequestV7,
    },
    20: {
        1: DeleteTopicsRequestV1,
        2: DeleteTopicsRequestV2,
        3: DeleteTopicsRequestV3,
        4: DeleteTopicsRequestV4,
        5: DeleteTopicsRequestV5,
        6: DeleteTopicsRequestV6,
    },
    21: {0: DeleteRecordsRequestV0, 1: DeleteRecordsRequestV1, 2: DeleteRecordsRequestV2},
    22: {
        0: InitProducerIdRequestV0,
        1: InitProducerIdRequestV1,
        2: InitProducerIdRequestV2,
        3: InitProducerIdRequestV3,
        4: InitProducerIdRequestV4,
        5: InitProducerIdRequestV5,
    },
    23: {
        2: OffsetForLeaderEpochRequestV2,
        3: OffsetForLeaderEpochRequestV3,
        4: OffsetForLeaderEpochRequestV4,
    },
    27: {1: WriteTxnMarkersRequestV1, 2: WriteTxnMarkersRequestV2},
    32: {
        1: DescribeConfigsRequestV1,
        2: DescribeConfigsRequestV2,
        3: DescribeConfigsRequestV3,
        4: DescribeConfigsRequestV4,
    },
    33: {0: AlterConfigsRequestV0, 1: AlterConfigsRequestV1, 2: AlterConfigsRequestV2},
    35: {
        1: DescribeLogDirsRequestV1,
        2: DescribeLogDirsRequestV2,
        3: DescribeLogDirsRequestV3,
        4: DescribeLogDirsRequestV4,
    },
    37: {
        0: CreatePartitionsRequestV0,
        1: CreatePartitionsRequestV1,
        2: CreatePartitionsRequestV2,
        3: CreatePartitionsRequestV3,
    },
    42: {0: DeleteGroupsRequestV0, 1: DeleteGroupsRequestV1, 2: DeleteGroupsRequestV2},
    43: {0: ElectLeadersRequestV0, 1: ElectLeadersRequestV1, 2: ElectLeadersRequestV2},
    44: {0: IncrementalAlterConfigsRequestV0, 1: IncrementalAlterConfigsRequestV1},
    45: {0: AlterPartitionReassignmentsRequestV0},
    46: {0: ListPartitionReassignmentsRequestV0},
    47: {0: OffsetDeleteRequestV0},
    48: {0: DescribeClientQuotasRequestV0, 1: DescribeClientQuotasRequestV1},
    49: {0: AlterClientQuotasRequestV0, 1: AlterClientQuotasRequestV1},
    60: {0: DescribeClusterRequestV0, 1: DescribeClusterRequestV1, 2: DescribeClusterRequestV2},
    24: {
        0: AddPartitionsToTxnRequestV0,
        1: AddPartitionsToTxnRequestV1,
        2: AddPartitionsToTxnRequestV2,
        3: AddPartitionsToTxnRequestV3,
        4: AddPartitionsToTxnRequestV4,
    },
    25: {
        0: AddOffsetsToTxnRequestV0,
        1: AddOffsetsToTxnRequestV1,
        2: AddOffsetsToTxnRequestV2,
        3: AddOffsetsToTxnRequestV3,
    },
    26: {0: EndTxnRequestV0, 1: EndTxnRequestV1, 2: EndTxnRequestV2, 3: EndTxnRequestV3},
    28: {
        0: TxnOffsetCommitRequestV0,
        1: TxnOffsetCommitRequestV1,
        2: TxnOffsetCommitRequestV2,
        3: TxnOffsetCommitRequestV3,
    },
    65: {0: DescribeTransactionsRequestV0},
    66: {0: ListTransactionsRequestV0, 1: ListTransactionsRequestV1},
    61: {0: DescribeProducersRequestV0},
}
