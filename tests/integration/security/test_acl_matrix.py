"""The ACL matrix: for each resource type and the APIs that check it, a principal without
the ACL gets Kafka's *_AUTHORIZATION_FAILED, with it (literal, prefixed, wildcard) gets
through; DENY beats ALLOW; a super user needs no ACL. ACLs are written with
confluent-kafka's AdminClient (CreateAcls / DescribeAcls / DeleteAcls against Gregor),
answers read code by code from raw requests of a SASL PLAIN user, and real clients
(kafka-python, confluent-kafka) see the same refusals.

One broker serves the whole module: the cases add ACLs for principals of their own.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import confluent_kafka
import kafka
import kafka.errors
import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from kio.schema.errors import ErrorCode

from ..broker_helpers import create_topic, scrape, wait_for
from .acl_helpers import UserClient, librdkafka_login, start_acl_broker

TAF = ErrorCode.topic_authorization_failed
GAF = ErrorCode.group_authorization_failed
CAF = ErrorCode.cluster_authorization_failed
XAF = ErrorCode.transactional_id_authorization_failed
NONE = ErrorCode.none
TOPIC_CONFIG, BROKER_CONFIG = 2, 4


@pytest.fixture(scope="module")
def acl_env(tmp_path_factory: pytest.TempPathFactory, broker_launcher) -> Iterator[dict]:
    """A ZooKeeper and one broker for the module (the per-test fixtures are
    function-scoped, so this one builds its own from the same parts)."""
    from gregor_broker.devtools.local_cluster import BrokerProcess
    from gregor_broker.devtools.zookeeper_server import ZooKeeperServer

    zookeeper = ZooKeeperServer(tmp_path_factory.mktemp("acl-zk"))
    zookeeper.start()
    started: list[BrokerProcess] = []

    def factory(broker_id, *, port, timeout, **properties):
        broker = BrokerProcess(
            broker_id=broker_id or 1,
            directory=tmp_path_factory.mktemp("acl-broker-"),
            zookeeper_connect=f"{zookeeper.connect_string}/acl-matrix",
            port=port,
            rack=None,
            metrics_port=0,
            properties=properties,
            launcher=broker_launcher,
        )
        started.append(broker)
        broker.start()
        broker.wait_registered(timeout)
        return broker

    try:
        broker = start_acl_broker(factory)
        admin = AdminClient(
            {"bootstrap.servers": broker.sasl_bootstrap, **librdkafka_login("admin")}
        )
        for name in ("orders", "pay-eu", "secret", "other"):
            create_topic(broker.bootstrap, name)
        yield {"broker": broker, "admin": admin}
    finally:
        for broker in started:
            broker.stop()
        zookeeper.stop()


def _acl(
    principal: str,
    resource_type: ResourceType,
    name: str,
    operation: AclOperation,
    permission: AclPermissionType = AclPermissionType.ALLOW,
    pattern: ResourcePatternType = ResourcePatternType.LITERAL,
    host: str = "*",
) -> AclBinding:
    return AclBinding(resource_type, name, pattern, principal, host, operation, permission)


def add(admin: AdminClient, *bindings: AclBinding) -> None:
    for future in admin.create_acls(list(bindings), request_timeout=60).values():
        future.result(60)


def remove(admin: AdminClient, principal: str) -> None:
    everything = AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, principal, None,
        AclOperation.ANY, AclPermissionType.ANY,
    )  # fmt: skip
    for future in admin.delete_acls([everything], request_timeout=60).values():
        future.result(60)


def test_without_acls_everything_is_refused_with_kafkas_codes(acl_env: dict) -> None:
    broker = acl_env["broker"]
    with UserClient(broker.sasl_bootstrap, "admin") as admin:
        orders_id = admin.topic_ids(["orders"])["orders"]
    with UserClient(broker.sasl_bootstrap, "alice") as alice:
        # Asked for by id, the refusal carries the id but not the name.
        assert alice.metadata_by_id(orders_id) == (None, orders_id, TAF)
        # Metadata hides what alice may not describe, and refuses what she names.
        assert alice.metadata(None) == {}
        assert alice.metadata(["orders"]) == {"orders": TAF}
        assert alice.metadata(["orders", "nowhere"], auto_create=True) == {
            "orders": TAF,
            "nowhere": TAF,
        }
        assert alice.produce("orders") == TAF
        assert alice.fetch("orders") == TAF
        assert alice.list_offsets("orders") == TAF
        assert alice.create_topic("fresh") == TAF
        assert alice.delete_topic("orders") == TAF
        assert alice.create_partitions("orders", 2) == TAF
        assert alice.delete_records("orders") == TAF
        assert alice.describe_configs(TOPIC_CONFIG, "orders") == TAF
        assert alice.describe_configs(BROKER_CONFIG, "1") == CAF
        assert alice.alter_configs(TOPIC_CONFIG, "orders") == TAF
        assert alice.find_coordinator("g") == GAF
        assert alice.find_coordinator("tx", key_type=1) == XAF
        assert alice.join_group("g") == GAF
        assert alice.heartbeat("g") == GAF
        assert alice.offset_commit("g", "orders") == GAF
        assert alice.offset_fetch("g") == GAF
        assert alice.describe_group("g") == GAF
        assert alice.delete_group("g") == GAF
        assert alice.list_groups() == []
        assert alice.init_producer_id() == CAF
        assert alice.init_producer_id("tx") == XAF
        assert alice.produce("orders", transactional_id="tx") in (TAF, XAF)
        assert alice.describe_log_dirs() == CAF
        assert alice.describe_client_quotas() == CAF
        assert alice.describe_scram() == CAF
        assert alice.elect_leaders("orders") == CAF
        assert alice.describe_acls() == CAF
        assert alice.create_acl("orders") == CAF
    assert broker.is_running()


def test_super_user_needs_no_acl(acl_env: dict) -> None:
    broker = acl_env["broker"]
    with UserClient(broker.sasl_bootstrap, "admin") as admin:
        assert {"orders", "pay-eu", "secret"} <= set(admin.metadata(None))
        assert admin.produce("orders") == NONE
        assert admin.fetch("orders") == NONE
        assert admin.describe_configs(BROKER_CONFIG, "1") == NONE
        assert admin.describe_log_dirs() == NONE
        assert admin.describe_acls() == NONE
        assert admin.init_producer_id() == NONE


def test_topic_acls_literal_prefixed_wildcard_and_implied_describe(acl_env: dict) -> None:
    broker, admin = acl_env["broker"], acl_env["admin"]
    bob = "User:bob"
    add(
        admin,
        _acl(bob, ResourceType.TOPIC, "orders", AclOperation.READ),
        _acl(
            bob,
            ResourceType.TOPIC,
            "pay-",
            AclOperation.WRITE,
            pattern=ResourcePatternType.PREFIXED,
        ),
        _acl(bob, ResourceType.TOPIC, "*", AclOperation.DESCRIBE_CONFIGS),
    )
    try:
        with UserClient(broker.sasl_bootstrap, "bob") as client:
            # Read (and Write) imply Describe: Metadata shows exactly those topics.
            assert set(client.metadata(None)) == {"orders", "pay-eu"}
            assert client.metadata(["orders", "secret"]) == {"orders": NONE, "secret": TAF}
            assert client.fetch("orders") == NONE
            assert client.list_offsets("orders") == NONE
            assert client.produce("orders") == TAF  # Read is not Write
            assert client.produce("pay-eu") == NONE  # prefixed
            assert client.fetch("pay-eu") == TAF
            assert client.produce("payments") == TAF  # not under the prefix
            assert client.describe_configs(TOPIC_CONFIG, "secret") == NONE  # wildcard
            assert client.alter_configs(TOPIC_CONFIG, "secret") == TAF
            assert client.delete_topic("orders") == TAF
            # Write on a topic lets an idempotent producer get an id (KIP-679).
            assert client.init_producer_id() == NONE
    finally:
        remove(admin, bob)
    with UserClient(broker.sasl_bootstrap, "bob") as client:
        assert client.metadata(None) == {}
        assert client.produce("pay-eu") == TAF


def test_deny_overrides_allow_and_hosts(acl_env: dict) -> None:
    broker, admin = acl_env["broker"], acl_env["admin"]
    alice = "User:alice"
    add(
        admin,
        _acl(alice, ResourceType.TOPIC, "*", AclOperation.ALL),
        _acl(alice, ResourceType.TOPIC, "secret", AclOperation.READ, AclPermissionType.DENY),
        _acl(
            alice,
            ResourceType.TOPIC,
            "pay-",
            AclOperation.ALL,
            AclPermissionType.DENY,
            pattern=ResourcePatternType.PREFIXED,
            host="127.0.0.1",
        ),
    )
    try:
        with UserClient(broker.sasl_bootstrap, "alice") as client:
            assert client.fetch("orders") == NONE
            assert client.fetch("secret") == TAF
            assert client.produce("secret") == NONE  # only Read is denied
            # DENY from the client's own host: everything on pay-* refused.
            assert client.produce("pay-eu") == TAF
            assert "pay-eu" not in client.metadata(None)
            assert set(client.metadata(None)) >= {"orders", "secret", "other"}
    finally:
        remove(admin, alice)


def test_group_cluster_and_transactional_id_acls(acl_env: dict) -> None:
    broker, admin = acl_env["broker"], acl_env["admin"]
    bob = "User:bob"
    add(
        admin,
        _acl(
            bob, ResourceType.GROUP, "app-", AclOperation.READ, pattern=ResourcePatternType.PREFIXED
        ),
        _acl(bob, ResourceType.TOPIC, "orders", AclOperation.READ),
        _acl(bob, ResourceType.BROKER, "kafka-cluster", AclOperation.DESCRIBE),
        _acl(bob, ResourceType.BROKER, "kafka-cluster", AclOperation.CREATE),
        _acl(bob, ResourceType.TRANSACTIONAL_ID, "tx-bob", AclOperation.WRITE),
    )
    try:
        with UserClient(broker.sasl_bootstrap, "bob") as client:
            assert wait_for(lambda: client.find_coordinator("app-1") == NONE, 60)
            assert client.find_coordinator("other-group") == GAF
            # Read on the group: joins (v5 asks a new member to come back with its id).
            assert client.join_group("app-1") == ErrorCode.member_id_required
            assert client.join_group("other-group") == GAF
            assert client.offset_commit("app-1", "orders") == NONE
            assert client.offset_commit("app-1", "secret") == TAF
            assert client.offset_fetch("app-1") == NONE  # Describe implied by Read
            assert client.delete_group("app-1") == GAF  # Delete is not implied
            # Describe on the cluster: DescribeAcls, log dirs, every group listed.
            assert client.describe_acls() == NONE
            assert client.describe_log_dirs() == NONE
            assert "app-1" in client.list_groups()
            assert client.create_acl("orders") == CAF  # that needs Alter
            # Create on the cluster: any topic.
            assert client.create_topic("bob-created") == NONE
            assert client.elect_leaders("orders") == CAF
            # TransactionalId Write.
            assert client.find_coordinator("tx-bob", key_type=1) in (
                NONE,
                ErrorCode.coordinator_not_available,
            )
            assert client.init_producer_id("tx-other") == XAF
            assert wait_for(lambda: client.init_producer_id("tx-bob") == NONE, 60)
    finally:
        remove(admin, bob)


def test_acl_apis_through_the_admin_client(acl_env: dict) -> None:
    """confluent-kafka's describe_acls / delete_acls with ANY and MATCH filters."""
    admin = acl_env["admin"]
    carol = "User:carol"
    literal = _acl(carol, ResourceType.TOPIC, "orders", AclOperation.READ)
    prefixed = _acl(
        carol, ResourceType.TOPIC, "ord", AclOperation.WRITE, pattern=ResourcePatternType.PREFIXED
    )
    group = _acl(carol, ResourceType.GROUP, "g", AclOperation.READ, AclPermissionType.DENY)
    add(admin, literal, prefixed, group)
    try:
        match = AclBindingFilter(
            ResourceType.TOPIC, "orders", ResourcePatternType.MATCH, carol, None,
            AclOperation.ANY, AclPermissionType.ANY,
        )  # fmt: skip
        found = admin.describe_acls(match, request_timeout=60).result(60)
        assert sorted(found, key=str) == sorted([literal, prefixed], key=str)
        only_groups = AclBindingFilter(
            ResourceType.GROUP, None, ResourcePatternType.ANY, carol, None,
            AclOperation.ANY, AclPermissionType.DENY,
        )  # fmt: skip
        assert admin.describe_acls(only_groups, request_timeout=60).result(60) == [group]
        deleted = admin.delete_acls([match], request_timeout=60)[match].result(60)
        assert sorted(deleted, key=str) == sorted([literal, prefixed], key=str)
        everything = AclBindingFilter(
            ResourceType.ANY, None, ResourcePatternType.ANY, carol, None,
            AclOperation.ANY, AclPermissionType.ANY,
        )  # fmt: skip
        assert admin.describe_acls(everything, request_timeout=60).result(60) == [group]
        # Invalid bindings are refused one by one.
        bad = _acl(carol, ResourceType.BROKER, "not-the-cluster", AclOperation.ALTER)
        with pytest.raises(confluent_kafka.KafkaException):
            admin.create_acls([bad], request_timeout=60)[bad].result(60)
    finally:
        remove(admin, carol)


def test_real_clients_see_the_refusals(acl_env: dict) -> None:
    broker, admin = acl_env["broker"], acl_env["admin"]
    add(admin, _acl("User:alice", ResourceType.TOPIC, "orders", AclOperation.DESCRIBE))
    try:
        consumer = kafka.KafkaConsumer(
            bootstrap_servers=broker.sasl_bootstrap,
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="PLAIN",
            sasl_plain_username="alice",
            sasl_plain_password="alice-secret",
            consumer_timeout_ms=5000,
        )
        try:
            consumer.assign([kafka.TopicPartition("orders", 0)])
            consumer.seek(kafka.TopicPartition("orders", 0), 0)
            with pytest.raises(kafka.errors.TopicAuthorizationFailedError):
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline:
                    consumer.poll(1000)
        finally:
            consumer.close()
        delivered: list = []
        producer = confluent_kafka.Producer(
            {
                "bootstrap.servers": broker.sasl_bootstrap,
                **librdkafka_login("alice"),
                "message.timeout.ms": 30000,
            }
        )
        producer.produce("orders", b"x", on_delivery=lambda error, _m: delivered.append(error))
        producer.flush(60)
        assert (
            delivered
            and delivered[0].code() == confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED
        )
    finally:
        remove(admin, "User:alice")
    metrics = scrape(broker.metrics_port)
    assert metrics['gregor_authorization_denials_total{resource_type="Topic"}'] > 0


def test_transactional_producer_and_group_consumer_with_just_their_acls(acl_env: dict) -> None:
    """confluent-kafka's transactional producer and a group consumer, each with what
    kafka-acls --producer / --consumer grant, and nothing more."""
    broker, admin = acl_env["broker"], acl_env["admin"]
    bob = "User:bob"
    add(
        admin,
        _acl(
            bob,
            ResourceType.TOPIC,
            "pay-",
            AclOperation.WRITE,
            pattern=ResourcePatternType.PREFIXED,
        ),
        _acl(
            bob,
            ResourceType.TOPIC,
            "pay-",
            AclOperation.DESCRIBE,
            pattern=ResourcePatternType.PREFIXED,
        ),
        _acl(bob, ResourceType.TRANSACTIONAL_ID, "tx-pay", AclOperation.WRITE),
        _acl(bob, ResourceType.TOPIC, "pay-eu", AclOperation.READ),
        _acl(bob, ResourceType.GROUP, "payers", AclOperation.READ),
    )
    try:
        producer = confluent_kafka.Producer(
            {
                "bootstrap.servers": broker.sasl_bootstrap,
                **librdkafka_login("bob"),
                "transactional.id": "tx-pay",
            }
        )
        producer.init_transactions(60)
        producer.begin_transaction()
        for i in range(5):
            producer.produce("pay-eu", f"tx-{i}".encode())
        producer.commit_transaction(60)
        consumer = confluent_kafka.Consumer(
            {
                "bootstrap.servers": broker.sasl_bootstrap,
                **librdkafka_login("bob"),
                "group.id": "payers",
                "auto.offset.reset": "earliest",
                "isolation.level": "read_committed",
            }
        )
        try:
            consumer.subscribe(["pay-eu"])
            values: list[bytes] = []
            deadline = time.monotonic() + 90
            while (
                time.monotonic() < deadline and len([v for v in values if v.startswith(b"tx-")]) < 5
            ):
                message = consumer.poll(1.0)
                if message is not None and message.error() is None:
                    values.append(message.value())
            assert [v for v in values if v.startswith(b"tx-")] == [
                f"tx-{i}".encode() for i in range(5)
            ]
            consumer.commit(asynchronous=False)
        finally:
            consumer.close()
        # Another transactional id is refused.
        other = confluent_kafka.Producer(
            {
                "bootstrap.servers": broker.sasl_bootstrap,
                **librdkafka_login("bob"),
                "transactional.id": "tx-else",
            }
        )
        with pytest.raises(confluent_kafka.KafkaException) as refused:
            other.init_transactions(30)
        assert (
            refused.value.args[0].code()
            == confluent_kafka.KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        )
    finally:
        remove(admin, bob)
