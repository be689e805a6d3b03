"""``gregor ... --command-config FILE`` against a broker whose clients must use SASL_SSL.

The broker's client listener is SASL_SSL only (SCRAM-SHA-512 from ZooKeeper, the CA's
certificate); its PLAINTEXT listener is the inter-broker one and is not advertised to
anyone the tools talk to. The tools must log in for every command: topics create and
delete (AdminClient), groups list (AdminClient) and log-dirs describe (the raw one-request
client, ``wire_client``). A wrong password or no file fails with exit code 2.
"""

from __future__ import annotations

import json
import uuid

import confluent_kafka
import pytest

from gregor_broker.devtools.certificates import KEY_PASSWORD, make_certificates
from gregor_broker.devtools.zookeeper_server import free_port

from .clients import Security
from .test_sasl_plaintext import gregor, wait_for_login

PASSWORD = "cli-secret"


@pytest.fixture(scope="module")
def certificates(tmp_path_factory):
    return make_certificates(tmp_path_factory.mktemp("certificates"))


@pytest.fixture
def sasl_ssl_broker(broker_factory, zk_connect, certificates):
    plain, client = free_port(), free_port()
    listeners = f"PLAINTEXT://127.0.0.1:{plain},CLIENT://127.0.0.1:{client}"
    broker = broker_factory(
        port=plain,
        timeout=120,
        **{
            "listeners": listeners,
            "advertised.listeners": listeners,
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CLIENT:SASL_SSL",
            "inter.broker.listener.name": "PLAINTEXT",
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(certificates.broker_keystore),
            "ssl.key.password": KEY_PASSWORD,
            "num.partitions": "1",
        },
    )
    result = gregor("users", "scram", "set", "cli", "--password", PASSWORD,
                    "--mechanism", "SCRAM-SHA-512", "--zookeeper", zk_connect)  # fmt: skip
    assert result.returncode == 0, result.stderr
    broker.client_bootstrap = f"127.0.0.1:{client}"
    broker.security = Security(
        "SASL_SSL", "SCRAM-SHA-512", "cli", PASSWORD, ca=str(certificates.ca)
    )
    wait_for_login(broker.client_bootstrap, broker.security)
    return broker


def command_config(tmp_path, certificates, password: str) -> str:
    """A client properties file as one would write it for kafka-topics.sh."""
    path = tmp_path / f"client-{uuid.uuid4().hex[:6]}.properties"
    path.write_text(
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
        f'    username="cli" password="{password}";\n'
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={certificates.ca}\n"
    )
    return str(path)


def test_commands_log_in_with_command_config(sasl_ssl_broker, certificates, tmp_path):
    bootstrap = sasl_ssl_broker.client_bootstrap
    good = command_config(tmp_path, certificates, PASSWORD)
    topic = f"cli-{uuid.uuid4().hex[:6]}"

    created = gregor("topics", "create", "-b", bootstrap, "--command-config", good,
                     "--topic", topic, "--partitions", "2")  # fmt: skip
    assert created.returncode == 0, created.stderr
    assert f"Created topic {topic}" in created.stdout, created.stdout

    # A consumer group that committed offsets, for groups list.
    group = f"g-{uuid.uuid4().hex[:6]}"
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, **sasl_ssl_broker.security.librdkafka()}
    )
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
        consumer.commit(offsets=[confluent_kafka.TopicPartition(topic, 0, 0)], asynchronous=False)
    finally:
        consumer.close()
    listed = gregor("groups", "list", "-b", bootstrap, "--command-config", good, "-o", "json")
    assert listed.returncode == 0, listed.stderr
    assert group in {row["group"] for row in json.loads(listed.stdout)}, listed.stdout

    # The raw request path (DescribeLogDirs) logs in too.
    dirs = gregor("log-dirs", "describe", "-b", bootstrap, "--command-config", good,
                  "--topic-list", topic, "-o", "json")  # fmt: skip
    assert dirs.returncode == 0, dirs.stderr
    partitions = {p["partition"] for b in json.loads(dirs.stdout)["brokers"] for d in b["logDirs"]
                  for p in d["partitions"]}  # fmt: skip
    assert partitions == {f"{topic}-0", f"{topic}-1"}

    deleted = gregor("topics", "delete", "-b", bootstrap, "--command-config", good,
                     "--topic", topic)  # fmt: skip
    assert deleted.returncode == 0, deleted.stderr


def test_a_wrong_password_or_no_command_config_fails(sasl_ssl_broker, certificates, tmp_path):
    bootstrap = sasl_ssl_broker.client_bootstrap
    wrong = command_config(tmp_path, certificates, "not-the-password")
    for args in (
        ["groups", "list", "-b", bootstrap, "--command-config", wrong],
        ["log-dirs", "describe", "-b", bootstrap, "--command-config", wrong],
    ):
        result = gregor(*args)
        assert result.returncode in (1, 2), (args, result.stdout, result.stderr)
        assert "Authentication failed" in result.stderr or "SASL" in result.stderr, result.stderr

    missing = gregor("groups", "list", "-b", bootstrap, "--command-config", str(tmp_path / "nope"))
    assert missing.returncode == 2 and "--command-config" in missing.stderr, missing.stderr

    jks = tmp_path / "jks.properties"
    jks.write_text(
        "security.protocol=SSL\nssl.truststore.type=JKS\nssl.truststore.location=/etc/hosts\n"
    )
    refused = gregor("groups", "list", "-b", bootstrap, "--command-config", str(jks))
    assert refused.returncode == 2 and "PEM" in refused.stderr, refused.stderr
