"""Several listeners at once, registered and answered as Kafka does.

Kafka registers every advertised listener in ``/brokers/ids/<id>`` (``endpoints`` and
``listener_security_protocol_map``; ``host``/``port`` are the PLAINTEXT endpoint), answers
Metadata and FindCoordinator with the endpoints of the listener the client connected to,
and replicates over ``inter.broker.listener.name``.
"""

from __future__ import annotations

import json

import confluent_kafka
from confluent_kafka.admin import AdminClient, NewTopic

from gregor_broker.devtools.local_cluster import zookeeper_client
from gregor_broker.devtools.zookeeper_server import free_port

from .broker_helpers import every_broker_knows_the_others

MAP = "CLIENT:PLAINTEXT,INTERNAL:PLAINTEXT"


def _two_listener_properties(client_port: int, internal_port: int) -> dict[str, str]:
    return {
        "listeners": f"CLIENT://127.0.0.1:{client_port},INTERNAL://127.0.0.1:{internal_port}",
        # The internal endpoint is advertised under another address (localhost), so that
        # which listener answered is visible in Metadata.
        "advertised.listeners": (
            f"CLIENT://127.0.0.1:{client_port},INTERNAL://localhost:{internal_port}"
        ),
        "listener.security.protocol.map": MAP,
        "inter.broker.listener.name": "INTERNAL",
    }


def _metadata_brokers(bootstrap: str) -> dict[int, tuple[str, int]]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    metadata = admin.list_topics(timeout=30)
    return {b.id: (b.host, b.port) for b in metadata.brokers.values()}


def test_every_listener_is_registered_and_answers_with_its_own_endpoints(
    broker_factory, zk_connect
) -> None:
    client_port, internal_port = free_port(), free_port()
    broker = broker_factory(
        port=client_port, timeout=120, **_two_listener_properties(client_port, internal_port)
    )
    zk = zookeeper_client(zk_connect)
    try:
        data, _ = zk.get(f"/brokers/ids/{broker.broker_id}")
    finally:
        zk.stop()
        zk.close()
    registration = json.loads(data)
    assert registration["endpoints"] == [
        f"CLIENT://127.0.0.1:{client_port}",
        f"INTERNAL://localhost:{internal_port}",
    ]
    assert registration["listener_security_protocol_map"] == {
        "CLIENT": "PLAINTEXT",
        "INTERNAL": "PLAINTEXT",
    }
    # No listener is named PLAINTEXT, but the first PLAINTEXT-protocol endpoint is.
    assert (registration["host"], registration["port"]) == ("127.0.0.1", client_port)

    assert _metadata_brokers(f"127.0.0.1:{client_port}") == {1: ("127.0.0.1", client_port)}
    assert _metadata_brokers(f"127.0.0.1:{internal_port}") == {1: ("localhost", internal_port)}


def test_followers_replicate_over_the_inter_broker_listener(broker_factory) -> None:
    brokers = []
    for broker_id in (1, 2):
        client_port, internal_port = free_port(), free_port()
        brokers.append(
            broker_factory(
                broker_id,
                port=client_port,
                timeout=120,
                **_two_listener_properties(client_port, internal_port),
                **{"min.insync.replicas": "2"},
            )
        )
    assert every_broker_knows_the_others(brokers)  # two replicas
    bootstrap = brokers[0].bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic("replicated", 1, 2)])
    futures["replicated"].result(30)
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 60000}
    )
    delivered = []
    for index in range(100):
        producer.produce(
            "replicated", f"v{index}".encode(), on_delivery=lambda e, m: delivered.append(e)
        )
    assert producer.flush(60) == 0
    assert delivered == [None] * 100
