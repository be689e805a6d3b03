"""Three brokers replicating over a SASL_SSL inter-broker listener with their own login.

Clients use a PLAINTEXT listener; followers fetch from leaders on INTERNAL (SASL_SSL,
SCRAM-SHA-512, the broker user's credential in ZooKeeper, its login in the listener's
JAAS config). acks=all with min.insync.replicas=3 succeeds only if every follower logs
in and replicates; a broker whose inter-broker password is wrong never catches up.
"""

from __future__ import annotations

import uuid

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from gregor_broker.devtools.certificates import KEY_PASSWORD, make_certificates
from gregor_broker.devtools.zookeeper_server import free_port

from ..broker_helpers import every_broker_knows_the_others
from .test_sasl_plaintext import gregor

BROKER_PASSWORD = "broker-secret"


def _properties(certificates, password: str) -> tuple[int, dict[str, str]]:
    client_port, internal_port = free_port(), free_port()
    listeners = f"CLIENT://127.0.0.1:{client_port},INTERNAL://127.0.0.1:{internal_port}"
    return client_port, {
        "listeners": listeners,
        "advertised.listeners": listeners,
        "listener.security.protocol.map": "CLIENT:PLAINTEXT,INTERNAL:SASL_SSL",
        "inter.broker.listener.name": "INTERNAL",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.internal.scram-sha-512.sasl.jaas.config": (
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="broker" password="{password}";'
        ),
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certificates.broker_keystore),
        "ssl.key.password": KEY_PASSWORD,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(certificates.ca),
        "min.insync.replicas": "3",
        "replica.lag.time.max.ms": "10000",
    }


@pytest.fixture
def certificates(tmp_path_factory):
    return make_certificates(tmp_path_factory.mktemp("certificates"))


def _produce(bootstrap: str, topic: str, count: int, timeout_ms: int) -> list[object]:
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": timeout_ms}
    )
    results: list[object] = []
    for index in range(count):
        producer.produce(topic, f"v{index}".encode(), on_delivery=lambda e, m: results.append(e))
    producer.flush(timeout_ms / 1000 + 30)
    return results


def test_replication_over_sasl_ssl_with_acks_all(broker_factory, zk_connect, certificates):
    result = gregor("users", "scram", "set", "broker", "--password", BROKER_PASSWORD,
                    "--mechanism", "SCRAM-SHA-512", "--zookeeper", zk_connect)  # fmt: skip
    assert result.returncode == 0, result.stderr
    brokers = []
    for broker_id in (1, 2, 3):
        client_port, properties = _properties(certificates, BROKER_PASSWORD)
        brokers.append(broker_factory(broker_id, port=client_port, timeout=120, **properties))
    # Three replicas: each broker must know the others first (they learn of a
    # registration through a ZooKeeper watch, a moment after it).
    assert every_broker_knows_the_others(brokers)
    bootstrap = ",".join(broker.bootstrap for broker in brokers)
    topic = f"replicated-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 3, 3)])[topic].result(60)
    results = _produce(bootstrap, topic, 300, 90000)
    assert results == [None] * 300, {str(e) for e in results if e is not None}


def test_a_follower_with_a_wrong_inter_broker_password_does_not_replicate(
    broker_factory, zk_connect, certificates
):
    result = gregor("users", "scram", "set", "broker", "--password", BROKER_PASSWORD,
                    "--mechanism", "SCRAM-SHA-512", "--zookeeper", zk_connect)  # fmt: skip
    assert result.returncode == 0, result.stderr
    brokers = []
    for broker_id, password in ((1, BROKER_PASSWORD), (2, "not-the-password")):
        client_port, properties = _properties(certificates, password)
        properties["min.insync.replicas"] = "2"
        broker = broker_factory(broker_id, port=client_port, timeout=120, **properties)
        brokers.append(broker)
    assert every_broker_knows_the_others(brokers)  # the assignment names both
    bootstrap = ",".join(broker.bootstrap for broker in brokers)
    topic = f"unreplicated-{uuid.uuid4().hex[:6]}"
    # Broker 1 leads; broker 2 must fetch from it and cannot log in.
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[[1, 2]])])[topic].result(60)
    results = _produce(bootstrap, topic, 5, 20000)
    assert results and all(e is not None for e in results), results
    assert "SASL login" in broker.log_path.read_text()
