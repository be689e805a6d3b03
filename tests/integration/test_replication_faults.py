"""The replication promise under faults: nothing acknowledged with acks=all is lost.

Seed 000 ("可用性和耐久性保证"): a committed message survives while one in-sync replica
lives. Three brokers on racks a, b, c hold a topic with replication factor 3 and
min.insync.replicas=2; a producer writes numbered messages with acks=all while the
partition leader is killed with SIGKILL again and again (and restarted). Afterwards,
every message the producer saw acknowledged must be in the log at the offset it was
acknowledged with.

It runs twice: over PLAINTEXT, and with SASL_SSL everywhere (issue 17): clients log in with
SCRAM-SHA-512 over TLS, and followers fetch from leaders on a SASL_SSL inter-broker listener
with the brokers' own SCRAM login, so every replicated byte crosses TLS.
"""

from __future__ import annotations

from collections.abc import Callable

import confluent_kafka.admin
import pytest

from gregor_broker.devtools.certificates import KEY_PASSWORD, make_certificates
from gregor_broker.devtools.local_cluster import BrokerProcess
from gregor_broker.devtools.zookeeper_server import free_port

from .broker_helpers import create_topic, every_broker_knows_the_others, wait_for
from .durability import NumberedProducer, lost_messages
from .security.test_sasl_plaintext import gregor

TOPIC = "durable"
FAULT_SETTINGS = {"zookeeper.session.timeout.ms": "4000", "replica.lag.time.max.ms": "5000"}


def _leader(bootstrap: str, topic: str, client_config: dict[str, str]) -> int:
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap, **client_config})
    return admin.list_topics(topic, timeout=10).topics[topic].partitions[0].leader


def _sasl_ssl_cluster(
    broker_factory, zk_connect: str, directory
) -> tuple[str, Callable[[int], BrokerProcess], dict[str, str]]:
    """Three brokers whose only listeners are SASL_SSL (clients and replication), SCRAM
    users "broker" (inter-broker) and "alice" (the test's clients)."""
    certificates = make_certificates(directory)
    for user in ("broker", "alice"):
        result = gregor("users", "scram", "set", user, "--password", f"{user}-secret",
                        "--mechanism", "SCRAM-SHA-512", "--zookeeper", zk_connect)  # fmt: skip
        assert result.returncode == 0, result.stderr
    brokers, addresses = {}, []
    for broker_id in (1, 2, 3):
        client, internal = free_port(), free_port()
        listeners = f"CLIENT://127.0.0.1:{client},INTERNAL://127.0.0.1:{internal}"
        brokers[broker_id] = broker_factory(broker_id, port=client, timeout=120, **{
            "listeners": listeners,
            "advertised.listeners": listeners,
            "listener.security.protocol.map": "CLIENT:SASL_SSL,INTERNAL:SASL_SSL",
            "inter.broker.listener.name": "INTERNAL",
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
            "listener.name.internal.scram-sha-512.sasl.jaas.config": (
                "org.apache.kafka.common.security.scram.ScramLoginModule required "
                'username="broker" password="broker-secret";'
            ),
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(certificates.broker_keystore),
            "ssl.key.password": KEY_PASSWORD,
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(certificates.ca),
            **FAULT_SETTINGS,
        })  # fmt: skip
        addresses.append(f"127.0.0.1:{client}")
    client_config = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "alice",
        "sasl.password": "alice-secret",
        "ssl.ca.location": str(certificates.ca),
    }
    # Three replicas: each broker must know the others first (cluster_factory waits so).
    assert every_broker_knows_the_others(brokers.values(), client_config=client_config)
    return ",".join(addresses), brokers.__getitem__, client_config


@pytest.mark.parametrize("security", ["plaintext", "sasl_ssl"])
def test_no_acknowledged_write_is_lost_while_leaders_are_killed(
    security, cluster_factory, broker_factory, zk_connect, tmp_path
) -> None:
    if security == "plaintext":
        cluster = cluster_factory(**FAULT_SETTINGS)
        bootstrap, broker, client_config = cluster.bootstrap_servers, cluster.broker, {}
    else:
        bootstrap, broker, client_config = _sasl_ssl_cluster(
            broker_factory, zk_connect, tmp_path / "certificates"
        )
    create_topic(
        bootstrap, TOPIC, partitions=1, replication_factor=3,
        config={"min.insync.replicas": "2"}, client_config=client_config,
    )  # fmt: skip
    kills = 0
    producer_config = {key.replace(".", "_"): value for key, value in client_config.items()}
    with NumberedProducer(
        bootstrap, TOPIC, message_timeout_ms=20000, **producer_config
    ) as producer:
        for _round in range(3):
            assert producer.wait_for_progress(500, 60), f"no progress after {kills} kills"
            leader_id = _leader(bootstrap, TOPIC, client_config)
            victim = broker(leader_id)
            victim.kill()
            kills += 1
            # A new leader is elected from the ISR once the old one's session is gone.
            assert wait_for(
                lambda v=leader_id: _leader(bootstrap, TOPIC, client_config) not in (v, -1), 30
            )
            victim.start()
            victim.wait_registered(30)
        assert producer.wait_for_progress(500, 60)
    lost = lost_messages(producer.acknowledged, bootstrap, TOPIC, client_config)
    print(
        f"{security}: kills={kills} sent={producer.sent} acknowledged={producer.acked()} "
        f"failed={producer.failures} lost={len(lost)}"
    )
    assert kills == 3
    assert lost == [], f"{len(lost)} acknowledged messages lost, e.g. {lost[:5]}"
