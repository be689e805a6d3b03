"""The User planner: what a spec asks for, what it refuses, and which ACL patterns change."""

from __future__ import annotations

from gregor_broker.protocol.acl_operations import AclOperation, AclPermissionType, PatternType
from gregor_broker.security.acl import AclEntry, ResourcePattern, ResourceType
from gregor_broker.security.scram import credential_from_password
from gregor_operator.planners.users import (
    credential_matches,
    jaas_config,
    plan_user,
)

ORDERS = ResourcePattern(ResourceType.TOPIC, "orders-", PatternType.PREFIXED)


def entry(principal: str, operation: AclOperation, allow: bool = True) -> AclEntry:
    permission = AclPermissionType.ALLOW if allow else AclPermissionType.DENY
    return AclEntry(principal, "*", operation, permission)


def test_a_full_spec_becomes_a_credential_quotas_and_acls() -> None:
    plan = plan_user("ns", "alice", {
        "authentication": {"type": "scram-sha-256", "iterations": 8192},
        "quotas": {"producerByteRate": 1024, "requestPercentage": 12.5},
        "authorization": {"acls": [
            {"resource": {"type": "topic", "name": "orders-", "patternType": "prefix"},
             "operations": ["Read", "Write"]},
            {"resource": {"type": "cluster"}, "operations": ["IdempotentWrite"], "type": "deny",
             "host": "10.0.0.1"},
        ]},
    })  # fmt: skip
    assert plan.refused is None
    assert (plan.username, plan.mechanism, plan.iterations) == ("alice", "SCRAM-SHA-256", 8192)
    assert plan.generated_secret == "alice" and plan.password_ref is None
    assert plan.quotas == {
        "producer_byte_rate": 1024.0,
        "consumer_byte_rate": None,
        "request_percentage": 12.5,
    }
    assert plan.acls[ORDERS] == {
        entry("User:alice", AclOperation.READ),
        entry("User:alice", AclOperation.WRITE),
    }
    cluster = ResourcePattern(ResourceType.CLUSTER, "kafka-cluster")
    assert plan.acls[cluster] == {
        AclEntry("User:alice", "10.0.0.1", AclOperation.IDEMPOTENT_WRITE, AclPermissionType.DENY)
    }


def test_user_name_and_password_secret_come_from_the_spec() -> None:
    plan = plan_user("ns", "res", {"userName": "svc.orders", "authentication": {
        "password": {"valueFrom": {"secretKeyRef": {"name": "pw"}}}}})  # fmt: skip
    assert plan.username == "svc.orders" and plan.principal == "User:svc.orders"
    assert plan.password_ref == ("pw", "password") and plan.generated_secret is None
    assert plan.mechanism == "SCRAM-SHA-512"


def test_refusals_name_the_resource_and_the_field() -> None:
    cases = [
        ({"userName": "<default>"}, "reserved"),
        ({"authentication": {"type": "plain"}}, "spec.authentication.type"),
        ({"authentication": {"iterations": 100}}, "iterations"),
        ({"quotas": {"consumerByteRate": 0}}, "spec.quotas.consumerByteRate"),
        ({"authorization": {"acls": [{"resource": {"type": "broker"}, "operations": ["Read"]}]}},
         "acls[0].resource.type"),
        ({"authorization": {"acls": [{"resource": {"type": "topic", "name": "t"},
                                      "operations": ["Fly"]}]}}, "unknown operation"),
        ({"authorization": {"acls": [{"resource": {"type": "group", "name": "g"},
                                      "operations": ["Write"]}]}}, "not supported"),
        ({"authorization": {"acls": [{"resource": {"type": "cluster", "name": "c"},
                                      "operations": ["Alter"]}]}}, "kafka-cluster"),
    ]  # fmt: skip
    for spec, named in cases:
        refused = plan_user("ns", "bad", spec).refused
        assert refused is not None and named in refused and "User ns/bad" in refused, (
            spec,
            refused,
        )


def test_a_stored_credential_is_recognised_by_its_password() -> None:
    credential = credential_from_password("SCRAM-SHA-512", "s3cret", iterations=4096)
    assert credential_matches(credential, "SCRAM-SHA-512", "s3cret")
    assert not credential_matches(credential, "SCRAM-SHA-512", "other")
    assert not credential_matches(None, "SCRAM-SHA-512", "s3cret")
    assert jaas_config("a", 'p"w') == (
        'org.apache.kafka.common.security.scram.ScramLoginModule required username="a" '
        'password="p\\"w";'
    )


def test_cluster_security_renders_listeners_tls_from_a_secret_and_the_inter_broker_login() -> None:
    from gregor_operator.planners.cluster_objects import render

    spec = {
        "replicas": 3,
        "zookeeper": {"connect": "zk:2181"},
        "security": {
            "clientProtocol": "SASL_SSL",
            "interBrokerProtocol": "SASL_SSL",
            "tls": {"secretName": "gregor-tls"},
            "interBroker": {"credentialsSecret": "gregor-broker-login"},
        },
    }
    config_map, headless, client, _pdb, statefulset = render("g", "ns", spec, 3)
    properties = config_map["data"]["server.properties"]
    for line in (
        "listeners=CLIENT://0.0.0.0:9092,INTERNAL://0.0.0.0:9093",
        "listener.security.protocol.map=CLIENT:SASL_SSL,INTERNAL:SASL_SSL",
        "inter.broker.listener.name=INTERNAL",
        "sasl.enabled.mechanisms=SCRAM-SHA-512",
        "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512",
        "ssl.keystore.type=PEM",
    ):
        assert line in properties.splitlines(), line
    assert "BEGIN" not in properties and "password" not in properties  # secrets stay in env
    container = statefulset["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e for e in container["env"]}
    assert env["GREGOR_ADVERTISED_LISTENERS"]["value"] == (
        "CLIENT://$(POD_NAME).g-brokers.ns.svc:9092,INTERNAL://$(POD_NAME).g-brokers.ns.svc:9093"
    )
    for variable, key in (
        ("GREGOR_SSL_KEYSTORE_CERTIFICATE_CHAIN", "tls.crt"),
        ("GREGOR_SSL_KEYSTORE_KEY", "tls.key"),
        ("GREGOR_SSL_TRUSTSTORE_CERTIFICATES", "ca.crt"),
        ("BROKER_SASL_PASSWORD", "password"),
    ):
        reference = env[variable]["valueFrom"]["secretKeyRef"]
        assert reference["key"] == key
    names = [e["name"] for e in container["env"]]
    # $(VAR) expands only variables defined before it.
    assert names.index("BROKER_SASL_PASSWORD") < names.index("GREGOR_SASL_JAAS_CONFIG")
    assert 'password="$(BROKER_SASL_PASSWORD)"' in env["GREGOR_SASL_JAAS_CONFIG"]["value"]
    assert [p["port"] for p in headless["spec"]["ports"]] == [9092, 9093]
    assert [p["port"] for p in client["spec"]["ports"]] == [9092]


def test_cluster_security_refusals_and_the_plaintext_default() -> None:
    import pytest

    from gregor_operator.planners.cluster_objects import render
    from gregor_operator.planners.cluster_security import SecurityRefused

    base = {"replicas": 1, "zookeeper": {"connect": "zk:2181"}}
    plain = render("g", "ns", base, 1)
    assert "listeners=PLAINTEXT://0.0.0.0:9092" in plain[0]["data"]["server.properties"]
    for security, named in (
        ({"clientProtocol": "SSL"}, "tls.secretName"),
        ({"interBrokerProtocol": "SASL_PLAINTEXT"}, "credentialsSecret"),
        ({"clientProtocol": "TLS"}, "clientProtocol"),
    ):
        with pytest.raises(SecurityRefused, match=named):
            render("g", "ns", {**base, "security": security}, 1)
