"""The replication promise under faults: nothing acknowledged with acks=all is lost.

Seed 000 ("可用性和耐久性保证"): a committed message survives while one in-sync replica
lives. Three brokers on racks a, b, c hold a topic with replication factor 3 and
min.insync.replicas=2; a producer writes numbered messages with acks=all while the
partition leader is killed with SIGKILL again and again (and restarted). Afterwards,
every message the producer saw acknowledged must be in the log at the offset it was
acknowledged with.
"""

from __future__ import annotations

import confluent_kafka.admin

from .broker_helpers import create_topic, wait_for
from .durability import NumberedProducer, lost_messages

TOPIC = "durable"


def _leader(bootstrap: str, topic: str, partition: int = 0) -> int:
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    return admin.list_topics(topic, timeout=10).topics[topic].partitions[partition].leader


def test_no_acknowledged_write_is_lost_while_leaders_are_killed(cluster_factory) -> None:
    cluster = cluster_factory(
        **{"zookeeper.session.timeout.ms": "4000", "replica.lag.time.max.ms": "5000"}
    )
    bootstrap = cluster.bootstrap_servers
    create_topic(
        bootstrap, TOPIC, partitions=1, replication_factor=3, config={"min.insync.replicas": "2"}
    )
    kills = 0
    with NumberedProducer(bootstrap, TOPIC, message_timeout_ms=20000) as producer:
        for _round in range(3):
            assert producer.wait_for_progress(500, 60), f"no progress after {kills} kills"
            leader_id = _leader(bootstrap, TOPIC)
            victim = cluster.broker(leader_id)
            victim.kill()
            kills += 1
            # A new leader is elected from the ISR once the old one's session is gone.
            assert wait_for(lambda v=leader_id: _leader(bootstrap, TOPIC) not in (v, -1), 30)
            victim.start()
            victim.wait_registered(30)
        assert producer.wait_for_progress(500, 60)
    lost = lost_messages(producer.acknowledged, bootstrap, TOPIC)
    print(
        f"kills={kills} sent={producer.sent} acknowledged={producer.acked()} "
        f"failed={producer.failures} lost={len(lost)}"
    )
    assert kills == 3
    assert lost == [], f"{len(lost)} acknowledged messages lost, e.g. {lost[:5]}"
