"""A follower replication throttle never holds back a replica that is in the ISR.

Kafka's follower throttle (``follower.replication.throttled.replicas`` and
``.rate``) limits only replicas that are catching up (``shouldFollowerThrottle``: not in
sync, throttled, quota exceeded). An in-sync follower held to the throttled rate holds
the high watermark, and every acks=all write, with it: during a throttled reassignment
the new replica joins the ISR while its throttle is still set, and writes then crawled at
the throttled rate until the reassignment finished.

Here every follower of a partition is throttled to 2,000 bytes/s while all of them are
in the ISR: 200 KB written with acks=all must be acknowledged within seconds, not the
100 s the throttle would take.
"""

from __future__ import annotations

import time

import confluent_kafka

from gregor_broker.cluster.admin import ZkAdmin
from gregor_broker.devtools.local_cluster import zookeeper_client

from .broker_helpers import create_topic, wait_for

TOPIC = "throttled-in-sync"
RATE = 2000  # bytes/s: 200 KB would take 100 s at this rate
MESSAGES = 200


def _isr(admin: ZkAdmin) -> tuple[int, ...]:
    found = admin.get_partition_state(TOPIC, 0)
    assert found is not None
    return found[0].isr


def test_an_in_sync_follower_is_not_throttled(cluster_factory) -> None:
    # A long lag time, so the ISR cannot shrink (which would also let writes through).
    cluster = cluster_factory(brokers=3, racks=None, **{"replica.lag.time.max.ms": "60000"})
    bootstrap = cluster.bootstrap_servers
    create_topic(
        bootstrap, TOPIC, partitions=1, replication_factor=3, config={"min.insync.replicas": "3"}
    )
    client = zookeeper_client(cluster.zookeeper_connect)
    try:
        admin = ZkAdmin(client)
        assert wait_for(lambda: len(_isr(admin)) == 3, 30)
        config = admin.get_topic_config(TOPIC)
        config["follower.replication.throttled.replicas"] = "*"
        admin.set_topic_config(TOPIC, config)
        for broker in cluster.brokers:
            entity = f"brokers/{broker.broker_id}"
            broker_config = admin.get_entity_config(entity)
            broker_config["follower.replication.throttled.rate"] = str(RATE)
            admin.set_entity_config(entity, broker_config)
        time.sleep(2)  # the brokers apply config changes from their watches

        producer = confluent_kafka.Producer(
            {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5}
        )
        delivered: list[bool] = []
        started = time.monotonic()
        for n in range(MESSAGES):
            producer.produce(
                TOPIC,
                b"%04d" % n + b"x" * 996,
                partition=0,
                on_delivery=lambda error, _m: delivered.append(error is None),
            )
        producer.flush(30)
        elapsed = time.monotonic() - started
        producer.purge()  # what is left, so no client outlives the cluster
        del producer
        print(f"{sum(delivered)} of {MESSAGES} acknowledged in {elapsed:.1f} s, ISR {_isr(admin)}")
        assert sum(delivered) == MESSAGES, (
            f"{sum(delivered)} of {MESSAGES} acks=all writes acknowledged in {elapsed:.0f} s: "
            "in-sync followers were held to the follower throttle"
        )
        assert elapsed < 20
        assert len(_isr(admin)) == 3
    finally:
        client.stop()
        client.close()
