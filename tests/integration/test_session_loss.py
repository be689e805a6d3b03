"""A leader that loses its ZooKeeper session cannot commit writes as a second leader.

SIGSTOP freezes the partition leader longer than its session timeout; the controller
elects another leader. When the old leader wakes up it still believes, for a moment,
that it leads. Writes it takes then must never be acknowledged with acks=all (its
followers have moved on, and its ISR changes are fenced by the znode version), and
every acknowledged write of the whole run must be in the final log.
"""

from __future__ import annotations

import signal

import confluent_kafka.admin

from .broker_helpers import create_topic, wait_for
from .durability import NumberedProducer, lost_messages

TOPIC = "fenced"


def _leader(bootstrap: str) -> int:
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    return admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions[0].leader


def test_a_frozen_leader_is_fenced_when_it_wakes(cluster_factory) -> None:
    cluster = cluster_factory(**{"zookeeper.session.timeout.ms": "3000"})
    bootstrap = cluster.bootstrap_servers
    create_topic(bootstrap, TOPIC, replication_factor=3, config={"min.insync.replicas": "2"})
    with NumberedProducer(bootstrap, TOPIC, prefix="main", message_timeout_ms=30000) as main:
        assert main.wait_for_progress(1000, 30)
        old_leader_id = _leader(bootstrap)
        old_leader = cluster.broker(old_leader_id)
        old_leader.signal(signal.SIGSTOP)
        others = ",".join(b.bootstrap for b in cluster.brokers if b is not old_leader)
        assert wait_for(lambda: _leader(others) not in (old_leader_id, -1), 30)
        # A producer that only knows the frozen leader, writing the moment it wakes.
        stale = NumberedProducer(
            old_leader.bootstrap,
            TOPIC,
            prefix="stale",
            message_timeout_ms=8000,
            topic_metadata_refresh_interval_ms=100000,
        )
        old_leader.signal(signal.SIGCONT)
        with stale:
            stale.wait_for_progress(200, 10)
        assert main.wait_for_progress(1000, 30)
    acknowledged = {**main.acknowledged, **stale.acknowledged}
    lost = lost_messages(acknowledged, bootstrap, TOPIC)
    print(
        f"main acked={main.acked()} stale acked={stale.acked()} "
        f"stale failed={stale.failures} lost={len(lost)}"
    )
    assert lost == []
