"""User resources against kmock's emulator, a real ZooKeeper and a real broker with a
SASL_PLAINTEXT listener and Kafka's AclAuthorizer: the SCRAM credential lets a real client
log in with the generated Secret's password (a wrong one fails), the quotas and ACLs land
in ZooKeeper in Kafka's format and the broker enforces the ACLs, a password Secret the user
manages can be rotated, and deleting the User removes everything it wrote."""

from __future__ import annotations

import base64
import json
import time
import uuid
from typing import Any

import confluent_kafka
import pytest

from gregor_broker.cluster.acls import read_acls
from gregor_broker.cluster.admin import ZkAdmin
from gregor_broker.devtools.local_cluster import zookeeper_client
from gregor_broker.devtools.zookeeper_server import ZooKeeperServer, free_port
from gregor_broker.protocol.acl_operations import PatternType
from gregor_broker.security.acl import AclEntry, ResourcePattern, ResourceType
from tests.integration.broker_helpers import create_topic
from tests.integration.security import clients
from tests.integration.security.clients import Security
from tests.integration.security.test_sasl_plaintext import _can_log_in

API = "gregor.dev/v1alpha1"
PROTECTED = "payroll"


def user(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "User",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    for entry in (obj.get("status") or {}).get("conditions") or ():
        if entry["type"] == kind:
            return entry
    return {}


def ready(client: Any, name: str) -> bool:
    found = client.find(API, "users", "default", name)
    return bool(found) and condition(found, "Ready").get("status") == "True"


def secret_password(client: Any, name: str, key: str = "password") -> str:
    secret = client.get("v1", "secrets", "default", name)
    return base64.b64decode(secret["data"][key]).decode()


def events(client: Any, reason: str) -> list[dict[str, Any]]:
    return [e for e in client.list("v1", "events", "default") if e.get("reason") == reason]


def wait_login(bootstrap: str, security: Security, expected: bool, timeout: float = 60) -> None:
    """Brokers learn credentials through /config/changes: wait until one works (or not)."""
    deadline = time.monotonic() + timeout
    while _can_log_in(bootstrap, security) != expected:
        assert time.monotonic() < deadline, f"login of {security.username} never became {expected}"
        time.sleep(0.5)


@pytest.fixture
def sasl_broker(broker_factory):
    plain, sasl = free_port(), free_port()
    listeners = f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}"
    broker = broker_factory(
        port=plain,
        timeout=120,
        **{
            "listeners": listeners,
            "advertised.listeners": listeners,
            "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            # The PLAINTEXT listener is the administrators' (and the brokers').
            "super.users": "User:ANONYMOUS",
            "num.partitions": "1",
        },
    )
    broker.sasl_bootstrap = f"127.0.0.1:{sasl}"
    return broker


def produce_one(
    bootstrap: str, security: Security, topic: str
) -> confluent_kafka.KafkaError | None:
    """Produce one record; the delivery error (None: delivered)."""
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "message.timeout.ms": 20000, **security.librdkafka()}
    )
    outcome: list[Any] = []
    producer.produce(topic, b"v", on_delivery=lambda error, _m: outcome.append(error))
    producer.flush(40)
    assert outcome, "no delivery report"
    return outcome[0]


def test_user_credentials_quotas_and_acls_are_written_enforced_and_removed(
    kube, run_operator, sasl_broker, zk_connect
):
    run_operator(zookeeper_connect=zk_connect)
    client = kube.client
    zk = zookeeper_client(zk_connect)
    admin = ZkAdmin(zk)
    bootstrap = sasl_broker.sasl_bootstrap
    orders = f"orders-{uuid.uuid4().hex[:6]}"
    for topic in (orders, PROTECTED):
        create_topic(sasl_broker.bootstrap, topic)
    prefixed = ResourcePattern(ResourceType.TOPIC, "orders-", PatternType.PREFIXED)
    # Another principal's ACL on the same pattern: the User never touches it.
    bob_acl = {"principal": "User:bob", "permissionType": "Allow", "operation": "Read",
               "host": "*"}  # fmt: skip
    zk.create(
        "/kafka-acl-extended/prefixed/Topic/orders-",
        json.dumps({"version": 1, "acls": [bob_acl]}).encode(),
        makepath=True,
    )
    try:
        client.create(
            user(
                "alice",
                quotas={"producerByteRate": 1048576, "requestPercentage": 50},
                authorization={
                    "acls": [
                        {"resource": {"type": "topic", "name": "orders-", "patternType": "prefix"},
                         "operations": ["Write", "Read", "Describe"]},
                        {"resource": {"type": "topic", "name": "*"}, "operations": ["Describe"]},
                        {"resource": {"type": "group", "name": "g-", "patternType": "prefix"},
                         "operations": ["Read"]},
                        {"resource": {"type": "topic", "name": PROTECTED},
                         "operations": ["All"], "type": "deny"},
                    ]
                },
            ),
            "users",
        )  # fmt: skip
        client.wait_for("User alice Ready", lambda: ready(client, "alice"), timeout=60)

        # The generated Secret: owned by the User, with the password and a JAAS line.
        secret = client.get("v1", "secrets", "default", "alice")
        owner = secret["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["name"]) == ("User", "alice")
        assert owner["uid"] == client.get(API, "users", "default", "alice")["metadata"]["uid"]
        password = secret_password(client, "alice")
        assert len(password) >= 24
        assert f'username="alice" password="{password}"' in secret_password(
            client, "alice", "sasl.jaas.config"
        )

        # /config/users/alice: the SCRAM-SHA-512 credential (never the password) and quotas.
        config = admin.get_entity_config("users/alice")
        assert set(config) == {"SCRAM-SHA-512", "producer_byte_rate", "request_percentage"}
        assert config["producer_byte_rate"] == "1048576"
        assert config["request_percentage"] == "50.0"
        assert password not in json.dumps(config)
        # Kafka's ACL layout; bob's entry kept next to alice's.
        stored = read_acls(zk, prefixed).acls
        assert AclEntry.from_json(bob_acl) in stored
        assert {e.operation.zk_name for e in stored if e.principal == "User:alice"} == {
            "Write", "Read", "Describe",
        }  # fmt: skip
        data, _ = zk.get(f"/kafka-acl/Topic/{PROTECTED}")
        assert json.loads(data)["acls"] == [
            {"principal": "User:alice", "permissionType": "Deny", "operation": "All", "host": "*"}
        ]

        # A real client logs in with the Secret's password and the broker applies the ACLs.
        good = Security("SASL_PLAINTEXT", "SCRAM-SHA-512", "alice", password)
        wait_login(bootstrap, good, True)
        got = clients.round_trip_confluent(bootstrap, good, orders)
        assert len(set(got)) == clients.MESSAGES
        denied = produce_one(bootstrap, good, PROTECTED)
        assert (
            denied is not None
            and denied.code() == confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED
        ), denied
        wrong = Security("SASL_PLAINTEXT", "SCRAM-SHA-512", "alice", "wrong-password")
        assert clients.login_error_confluent(bootstrap, wrong).code() == (
            confluent_kafka.KafkaError._AUTHENTICATION
        )
        # Only the mechanism the resource names.
        other = Security("SASL_PLAINTEXT", "SCRAM-SHA-256", "alice", password)
        assert not _can_log_in(bootstrap, other)

        # Update: the deny goes, the quotas change; the password stays.
        spec = client.get(API, "users", "default", "alice")["spec"]
        client.patch(API, "users", "default", "alice", {"spec": {
            "quotas": {"producerByteRate": None, "requestPercentage": None,
                       "consumerByteRate": 2097152},
            "authorization": {"acls": spec["authorization"]["acls"][:3]},
        }})  # fmt: skip
        client.wait_for(
            "the deny ACL removed", lambda: zk.exists(f"/kafka-acl/Topic/{PROTECTED}") is None
        )
        client.wait_for(
            "alice's new quotas",
            lambda: {k: v for k, v in admin.get_entity_config("users/alice").items()
                     if not k.startswith("SCRAM")} == {"consumer_byte_rate": "2097152"},
        )  # fmt: skip
        assert secret_password(client, "alice") == password

        # A password from a Secret the user manages; rotating it takes effect.
        client.create(
            {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "carol-pw",
             "namespace": "default"}, "data": {"pw": base64.b64encode(b"first").decode()}},
            "secrets",
        )  # fmt: skip
        client.create(
            user("carol", authentication={"type": "scram-sha-256", "password": {
                "valueFrom": {"secretKeyRef": {"name": "carol-pw", "key": "pw"}}}}),
            "users",
        )  # fmt: skip
        client.wait_for("User carol Ready", lambda: ready(client, "carol"), timeout=60)
        assert client.find("v1", "secrets", "default", "carol") is None  # none generated
        first = Security("SASL_PLAINTEXT", "SCRAM-SHA-256", "carol", "first")
        wait_login(bootstrap, first, True)
        client.patch("v1", "secrets", "default", "carol-pw",
                     {"data": {"pw": base64.b64encode(b"second").decode()}})  # fmt: skip
        wait_login(bootstrap, Security("SASL_PLAINTEXT", "SCRAM-SHA-256", "carol", "second"), True)
        assert not _can_log_in(bootstrap, first)

        # A spec the operator refuses says why in its conditions.
        client.create(
            user("broken", authorization={"acls": [
                {"resource": {"type": "cluster", "name": "other"}, "operations": ["Alter"]}]}),
            "users",
        )  # fmt: skip
        refused = client.wait_for(
            "User broken refused",
            lambda: condition(client.get(API, "users", "default", "broken"), "Error").get(
                "status"
            ) == "True" and client.get(API, "users", "default", "broken"),
        )  # fmt: skip
        error = condition(refused, "Error")
        assert error["reason"] == "Refused"
        assert "kafka-cluster" in error["message"] and "broken" in error["message"]
        assert condition(refused, "Ready")["status"] == "False"

        # Deleting removes the credential, the quotas and every ACL of the principal.
        for name in ("alice", "carol", "broken"):
            client.delete(API, "users", "default", name)
        for name in ("alice", "carol", "broken"):
            client.wait_for(
                f"User {name} gone", lambda name=name: client.find(API, "users", "default", name)
                is None,
            )  # fmt: skip
        assert admin.get_entity_config("users/alice") == {}
        assert admin.get_entity_config("users/carol") == {}
        assert read_acls(zk, prefixed).acls == {AclEntry.from_json(bob_acl)}
        assert zk.exists("/kafka-acl/Topic/*") is None
        assert zk.exists("/kafka-acl-extended/prefixed/Group/g-") is None
        wait_login(bootstrap, good, False)
    finally:
        zk.stop()
        zk.close()


def test_deleting_a_user_completes_when_zookeeper_is_gone(kube, run_operator, tmp_path):
    zookeeper = ZooKeeperServer(tmp_path / "zookeeper")
    zookeeper.start()
    try:
        run_operator(
            zookeeper_connect=zookeeper.connect_string, finalizer_retries=3, zookeeper_timeout=2.0
        )
        client = kube.client
        client.create(user("doomed", quotas={"consumerByteRate": 1024}), "users")
        client.wait_for("Ready", lambda: ready(client, "doomed"), timeout=60)
        zookeeper.stop()
        started = time.monotonic()
        client.delete(API, "users", "default", "doomed")
        client.wait_for(
            "the finalizer to be released",
            lambda: client.find(API, "users", "default", "doomed") is None,
            timeout=60,
        )
        elapsed = time.monotonic() - started
        released = client.wait_for(
            "the FinalizerReleased event", lambda: events(client, "FinalizerReleased")
        )
        assert "gregor users scram delete doomed" in released[0]["message"]
        assert elapsed < 30, elapsed
    finally:
        zookeeper.stop()
