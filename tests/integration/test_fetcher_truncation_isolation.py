"""One partition a follower cannot find its truncation point for does not stop the others.

Found in the chaos campaign (seed 202): a leader had not seen its own election for one
partition, so it answered that partition's OffsetForLeaderEpoch with an error, over and
over. Both followers' fetchers for that leader retried the truncation and never fetched
anything else: every partition the broker led lost its followers from the ISR, acks=all
writes stalled for minutes, and the idempotent producers, their messages timing out,
bumped their epochs hundreds of times and re-sent what was already stored (33,652
duplicates in a 10-minute run). Kafka's fetcher threads truncate the partitions that need
it and fetch the rest in the same round.

Here the state znode of partition ``stuck-0`` (replicas 2 and 3) is made to name broker 1,
which does not host it, as leader: brokers 2 and 3 follow broker 1 for it and can never
truncate it. Broker 2 also follows broker 1 for ``healthy-0``, where acks=all writes need
it (min.insync.replicas=2).
"""

from __future__ import annotations

import time

import confluent_kafka
import confluent_kafka.admin

from gregor_broker.cluster.admin import ZkAdmin
from gregor_broker.cluster.models import PartitionState
from gregor_broker.devtools.local_cluster import zookeeper_client

from .broker_helpers import wait_for


def _create(bootstrap: str, name: str, replicas: list[int], config: dict[str, str]) -> None:
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    topic = confluent_kafka.admin.NewTopic(name, 1, replica_assignment=[replicas], config=config)
    for future in admin.create_topics([topic], operation_timeout=30).values():
        future.result(60)


def test_a_partition_stuck_in_truncation_does_not_stop_the_others(cluster_factory) -> None:
    cluster = cluster_factory(**{"replica.lag.time.max.ms": "3000"})
    bootstrap = cluster.bootstrap_servers
    _create(bootstrap, "healthy", [1, 2], {"min.insync.replicas": "2"})
    _create(bootstrap, "stuck", [2, 3], {})
    zk = zookeeper_client(cluster.zookeeper_connect)
    try:
        admin = ZkAdmin(zk)

        def state(topic: str) -> PartitionState:
            found = admin.get_partition_state(topic, 0)
            assert found is not None
            return found[0]

        assert wait_for(lambda: state("healthy").leader == 1, 30)
        assert wait_for(lambda: sorted(state("healthy").isr) == [1, 2], 30)
        assert wait_for(lambda: state("stuck").leader in (2, 3), 30)
        current, version = admin.get_partition_state("stuck", 0) or (None, -1)
        assert current is not None
        admin.set_partition_state(
            "stuck",
            0,
            PartitionState(current.controller_epoch, 1, current.leader_epoch + 1, (2, 3)),
            version,
        )

        producer = confluent_kafka.Producer(
            {"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 8000}
        )
        outcomes: list[str] = []

        def delivered(error, _message) -> None:
            outcomes.append("ok" if error is None else error.name())

        # Over twice replica.lag.time.max.ms: a starved follower would leave the ISR.
        for i in range(16):
            producer.produce("healthy", f"v{i}".encode(), on_delivery=delivered)
            producer.poll(0)
            time.sleep(0.5)
        producer.flush(20)
        assert outcomes == ["ok"] * 16, outcomes
        assert sorted(state("healthy").isr) == [1, 2]
    finally:
        zk.stop()
        zk.close()
