"""A broker with SASL PLAIN users and the ACL authorizer, and a raw client that logs in
as one of them and sends the requests whose answers the ACL tests check code by code."""

from __future__ import annotations

import time
import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from gregor_broker.devtools.zookeeper_server import free_port
from gregor_broker.protocol.record_batch import build_batch
from gregor_broker.protocol.records import Record, encode_record

from ..raw_requests import RawClient, request

AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    + " ".join(f'user_{user}="{password}"' for user, password in USERS.items())
    + ";"
)


def acl_broker_properties(plain_port: int, sasl_port: int, **extra: str) -> dict[str, str]:
    """PLAINTEXT for the broker's own traffic (User:ANONYMOUS, a super user, as Kafka
    needs the inter-broker principal to be), SASL_PLAINTEXT for the users."""
    listeners = f"PLAINTEXT://127.0.0.1:{plain_port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}"
    return {
        "listeners": listeners,
        "advertised.listeners": listeners,
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "authorizer.class.name": AUTHORIZER,
        "super.users": "User:admin;User:ANONYMOUS",
        "num.partitions": "1",
        "offsets.topic.replication.factor": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
        **extra,
    }


def start_acl_broker(broker_factory: Any, broker_id: int | None = None, **extra: str) -> Any:
    plain_port, sasl_port = free_port(), free_port()
    broker = broker_factory(
        broker_id,
        port=plain_port,
        timeout=120,
        **acl_broker_properties(plain_port, sasl_port, **extra),
    )
    broker.sasl_bootstrap = f"127.0.0.1:{sasl_port}"
    return broker


def librdkafka_login(user: str) -> dict[str, str]:
    return {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": USERS[user],
    }


def _batch() -> bytes:
    return build_batch(
        [encode_record(Record(0, 0, b"k", b"v"))], base_timestamp=int(time.time() * 1000)
    )


class UserClient(RawClient):
    """A raw connection logged in with SASL PLAIN; each method sends one request and
    returns what the ACL tests look at (error codes, names)."""

    def __init__(self, bootstrap: str, user: str) -> None:
        super().__init__(bootstrap)
        handshake = self.call(17, 1, request(17, 1, mechanism="PLAIN"))
        assert handshake.error_code == ErrorCode.none, handshake
        token = f"\0{user}\0{USERS[user]}".encode()
        answer = self.call(36, 2, request(36, 2, auth_bytes=token))
        assert answer.error_code == ErrorCode.none, answer

    # -- topics -----------------------------------------------------------------------------

    def metadata(
        self, topics: list[str] | None, *, auto_create: bool = False
    ) -> dict[str, ErrorCode]:
        body = request(
            3,
            12,
            topics=None
            if topics is None
            else [{"name": t, "topic_id": uuid.UUID(int=0)} for t in topics],
            allow_auto_topic_creation=auto_create,
            include_topic_authorized_operations=False,
        )
        return {t.name: t.error_code for t in self.call(3, 12, body).topics}

    def topic_ids(self, topics: list[str]) -> dict[str, uuid.UUID]:
        body = request(
            3,
            12,
            topics=[{"name": t, "topic_id": uuid.UUID(int=0)} for t in topics],
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
        return {t.name: t.topic_id for t in self.call(3, 12, body).topics}

    def metadata_by_id(self, topic_id: uuid.UUID) -> tuple[str | None, uuid.UUID, ErrorCode]:
        body = request(
            3,
            12,
            topics=[{"name": None, "topic_id": topic_id}],
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
        (topic,) = self.call(3, 12, body).topics
        return topic.name, topic.topic_id, topic.error_code

    def produce(self, topic: str, transactional_id: str | None = None) -> ErrorCode:
        body = request(
            0,
            9,
            transactional_id=transactional_id,
            acks=1,
            timeout=30000,
            topic_data=[{"name": topic, "partition_data": [{"index": 0, "records": _batch()}]}],
        )
        return self.call(0, 9, body).responses[0].partition_responses[0].error_code

    def fetch(self, topic: str) -> ErrorCode:
        body = request(
            1,
            12,
            replica_id=-1,
            max_wait=0,
            min_bytes=0,
            max_bytes=1 << 20,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=[
                {
                    "topic": topic,
                    "partitions": [
                        {
                            "partition": 0,
                            "current_leader_epoch": -1,
                            "fetch_offset": 0,
                            "last_fetched_epoch": -1,
                            "log_start_offset": -1,
                            "partition_max_bytes": 1 << 20,
                        }
                    ],
                }
            ],
            forgotten_topics_data=[],
            rack_id="",
        )
        response = self.call(1, 12, body)
        return response.responses[0].partitions[0].error_code

    def list_offsets(self, topic: str) -> ErrorCode:
        body = request(
            2,
            5,
            replica_id=-1,
            isolation_level=0,
            topics=[
                {
                    "name": topic,
                    "partitions": [
                        {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}
                    ],
                }
            ],
        )
        return self.call(2, 5, body).topics[0].partitions[0].error_code

    def create_topic(self, topic: str) -> ErrorCode:
        body = request(
            19,
            5,
            topics=[
                {
                    "name": topic,
                    "num_partitions": 1,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [],
                }
            ],
            timeout=30000,
            validate_only=False,
        )
        return self.call(19, 5, body).topics[0].error_code

    def delete_topic(self, topic: str) -> ErrorCode:
        body = request(20, 4, topic_names=[topic], timeout=30000)
        return self.call(20, 4, body).responses[0].error_code

    def create_partitions(self, topic: str, count: int) -> ErrorCode:
        body = request(
            37,
            1,
            topics=[{"name": topic, "count": count, "assignments": None}],
            timeout=30000,
            validate_only=True,
        )
        return self.call(37, 1, body).results[0].error_code

    def delete_records(self, topic: str) -> ErrorCode:
        body = request(
            21,
            1,
            topics=[{"name": topic, "partitions": [{"partition_index": 0, "offset": 0}]}],
            timeout=30000,
        )
        return self.call(21, 1, body).topics[0].partitions[0].error_code

    def describe_configs(self, resource_type: int, name: str) -> ErrorCode:
        body = request(
            32,
            1,
            resources=[
                {"resource_type": resource_type, "resource_name": name, "configuration_keys": None}
            ],
            include_synonyms=False,
        )
        return self.call(32, 1, body).results[0].error_code

    def alter_configs(self, resource_type: int, name: str) -> ErrorCode:
        body = request(
            44,
            0,
            resources=[
                {
                    "resource_type": resource_type,
                    "resource_name": name,
                    "configs": [
                        {"name": "retention.ms", "config_operation": 0, "value": "3600000"}
                    ],
                }
            ],
            validate_only=True,
        )
        return self.call(44, 0, body).responses[0].error_code

    # -- groups -----------------------------------------------------------------------------

    def find_coordinator(self, key: str, key_type: int = 0) -> ErrorCode:
        return self.call(10, 2, request(10, 2, key=key, key_type=key_type)).error_code

    def join_group(self, group: str) -> ErrorCode:
        body = request(
            11,
            5,
            group_id=group,
            session_timeout=10000,
            rebalance_timeout=10000,
            member_id="",
            group_instance_id=None,
            protocol_type="consumer",
            protocols=[{"name": "range", "metadata": b""}],
        )
        return self.call(11, 5, body).error_code

    def heartbeat(self, group: str) -> ErrorCode:
        body = request(
            12, 3, group_id=group, generation_id=1, member_id="m", group_instance_id=None
        )
        return self.call(12, 3, body).error_code

    def offset_commit(self, group: str, topic: str) -> ErrorCode:
        body = request(
            8,
            7,
            group_id=group,
            generation_id_or_member_epoch=-1,
            member_id="",
            group_instance_id=None,
            topics=[
                {
                    "name": topic,
                    "partitions": [
                        {
                            "partition_index": 0,
                            "committed_offset": 0,
                            "committed_leader_epoch": -1,
                            "committed_metadata": "",
                        }
                    ],
                }
            ],
        )
        return self.call(8, 7, body).topics[0].partitions[0].error_code

    def offset_fetch(self, group: str) -> ErrorCode:
        body = request(9, 7, group_id=group, topics=None, require_stable=False)
        return self.call(9, 7, body).error_code

    def describe_group(self, group: str) -> ErrorCode:
        body = request(15, 4, groups=[group], include_authorized_operations=False)
        return self.call(15, 4, body).groups[0].error_code

    def list_groups(self) -> list[str]:
        return [g.group_id for g in self.call(16, 3, request(16, 3)).groups]

    def delete_group(self, group: str) -> ErrorCode:
        return self.call(42, 1, request(42, 1, groups_names=[group])).results[0].error_code

    # -- cluster, transactions, ACLs ------------------------------------------------------------

    def init_producer_id(self, transactional_id: str | None = None) -> ErrorCode:
        body = request(22, 2, transactional_id=transactional_id, transaction_timeout=60000)
        return self.call(22, 2, body).error_code

    def describe_log_dirs(self) -> ErrorCode:
        return self.call(35, 3, request(35, 3, topics=None)).error_code

    def describe_client_quotas(self) -> ErrorCode:
        return self.call(48, 0, request(48, 0, components=[], strict=False)).error_code

    def describe_scram(self) -> ErrorCode:
        return self.call(50, 0, request(50, 0, users=None)).error_code

    def elect_leaders(self, topic: str) -> ErrorCode:
        body = request(
            43,
            1,
            election_type=0,
            topic_partitions=[{"topic": topic, "partitions": [0]}],
            timeout=30000,
        )
        return self.call(43, 1, body).error_code

    def describe_acls(self) -> ErrorCode:
        body = request(
            29,
            1,
            resource_type_filter=1,
            resource_name_filter=None,
            pattern_type_filter=1,
            principal_filter=None,
            host_filter=None,
            operation=1,
            permission_type=1,
        )
        return self.call(29, 1, body).error_code

    def create_acl(self, topic: str) -> ErrorCode:
        body = request(
            30,
            1,
            creations=[
                {
                    "resource_type": 2,
                    "resource_name": topic,
                    "resource_pattern_type": 3,
                    "principal": "User:bob",
                    "host": "*",
                    "operation": 3,
                    "permission_type": 3,
                }
            ],
        )
        response = self.call(30, 1, body)
        return response.results[0].error_code
