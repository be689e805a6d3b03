"""ACLs change live on every broker: written by ``gregor acls`` into ZooKeeper, or through
one broker's CreateAcls/DeleteAcls, the change notifications reach the other broker,
whose answers change without a restart."""

from __future__ import annotations

import json
import subprocess
import sys

import confluent_kafka
import confluent_kafka.admin
from kazoo.client import KazooClient
from kio.schema.errors import ErrorCode

from ..broker_helpers import create_topic, every_broker_knows_the_others, wait_for
from .acl_helpers import USERS, UserClient, librdkafka_login, start_acl_broker

TIMEOUT = 60


def gregor(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gregor_broker.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_cli_and_api_changes_reach_both_brokers(broker_factory, zk_connect, tmp_path) -> None:
    first = start_acl_broker(broker_factory, 1)
    second = start_acl_broker(broker_factory, 2)
    create_topic(first.bootstrap, "orders")
    clients = [UserClient(b.sasl_bootstrap, "bob") for b in (first, second)]
    try:

        def fetches(expected: ErrorCode) -> bool:
            # Only the leader serves a fetch; the other broker answers
            # NOT_LEADER_OR_FOLLOWER once authorized, TOPIC_AUTHORIZATION_FAILED before.
            codes = [client.fetch("orders") for client in clients]
            if expected == ErrorCode.none:
                return ErrorCode.topic_authorization_failed not in codes and ErrorCode.none in codes
            return codes == [expected, expected]

        assert fetches(ErrorCode.topic_authorization_failed)
        added = gregor(
            "acls", "add", "--zookeeper", zk_connect,
            "--allow-principal", "User:bob", "--operation", "Read", "--topic", "ord",
            "--resource-pattern-type", "prefixed",
        )  # fmt: skip
        assert added.returncode == 0, added.stderr
        assert "ResourcePattern(resourceType=TOPIC, name=ord, patternType=PREFIXED)" in added.stdout
        assert "(principal=User:bob, host=*, operation=READ, permissionType=ALLOW)" in added.stdout
        assert wait_for(lambda: fetches(ErrorCode.none), TIMEOUT)
        listed = gregor("acls", "list", "--zookeeper", zk_connect, "--principal", "User:bob")
        assert listed.returncode == 0 and "operation=READ" in listed.stdout
        matched = gregor(
            "acls", "list", "--zookeeper", zk_connect, "--topic", "orders",
            "--resource-pattern-type", "match",
        )  # fmt: skip
        assert "name=ord, patternType=PREFIXED" in matched.stdout
        removed = gregor(
            "acls", "remove", "--zookeeper", zk_connect, "--topic", "ord",
            "--resource-pattern-type", "prefixed",
        )  # fmt: skip
        assert removed.returncode == 0, removed.stderr
        assert "operation=READ" in removed.stdout
        assert wait_for(lambda: fetches(ErrorCode.topic_authorization_failed), TIMEOUT)

        # Through the first broker's CreateAcls (as the admin): the second learns of it.
        config = tmp_path / "admin.properties"
        config.write_text(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
            f"sasl.username=admin\nsasl.password={USERS['admin']}\n"
        )
        via_api = gregor(
            "acls", "add", "-b", first.sasl_bootstrap, "--command-config", str(config),
            "--allow-principal", "User:bob", "--operation", "Read", "--topic", "orders",
        )  # fmt: skip
        assert via_api.returncode == 0, via_api.stderr
        assert wait_for(lambda: fetches(ErrorCode.none), TIMEOUT)
        listed = gregor(
            "acls", "list", "-b", second.sasl_bootstrap, "--command-config", str(config)
        )
        assert "name=orders, patternType=LITERAL" in listed.stdout, listed.stdout + listed.stderr
        removed = gregor(
            "acls", "remove", "-b", second.sasl_bootstrap, "--command-config", str(config),
            "--allow-principal", "User:bob", "--operation", "Read", "--topic", "orders",
        )  # fmt: skip
        assert removed.returncode == 0 and "operation=READ" in removed.stdout, removed.stderr
        assert wait_for(lambda: fetches(ErrorCode.topic_authorization_failed), TIMEOUT)
        # A user without Alter on the cluster may not change ACLs.
        config.write_text(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
            f"sasl.username=bob\nsasl.password={USERS['bob']}\n"
        )
        refused = gregor(
            "acls", "add", "-b", first.sasl_bootstrap, "--command-config", str(config),
            "--allow-principal", "User:bob", "--operation", "All", "--topic", "*",
        )  # fmt: skip
        assert refused.returncode == 1
        assert "authoriz" in refused.stderr.lower(), refused.stderr
    finally:
        for client in clients:
            client.close()


def test_followers_need_cluster_action(broker_factory, zk_connect) -> None:
    """The brokers' own principal (User:ANONYMOUS on their PLAINTEXT listener) is no super
    user here: followers' fetches are refused and the ISR shrinks to the leader, until
    an ACL grants ClusterAction on the cluster; then the follower catches up and rejoins."""
    options = {"super.users": "User:admin", "replica.lag.time.max.ms": "4000"}
    brokers = [start_acl_broker(broker_factory, i, **options) for i in (1, 2)]
    assert every_broker_knows_the_others(brokers)  # two replicas
    admin = confluent_kafka.admin.AdminClient(
        {"bootstrap.servers": brokers[0].sasl_bootstrap, **librdkafka_login("admin")}
    )
    new = confluent_kafka.admin.NewTopic("replicated", 1, 2)
    for future in admin.create_topics([new], operation_timeout=60).values():
        future.result(90)
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": brokers[0].sasl_bootstrap, **librdkafka_login("admin"), "acks": 1}
    )
    producer.produce("replicated", b"x")
    assert producer.flush(60) == 0
    zk = KazooClient(hosts=zk_connect, timeout=10)
    zk.start(timeout=15)
    try:

        def isr() -> list[int]:
            data, _ = zk.get("/brokers/topics/replicated/partitions/0/state")
            return json.loads(data)["isr"]

        assert wait_for(lambda: len(isr()) == 1, TIMEOUT), isr()
        added = gregor(
            "acls", "add", "--zookeeper", zk_connect, "--allow-principal", "User:ANONYMOUS",
            "--operation", "ClusterAction", "--cluster",
        )  # fmt: skip
        assert added.returncode == 0, added.stderr
        assert wait_for(lambda: sorted(isr()) == [1, 2], TIMEOUT), isr()
    finally:
        zk.stop()
        zk.close()
