"""Three brokers replicate a topic: followers copy, acks=all waits, the ISR is honest."""

from __future__ import annotations

import time

import confluent_kafka
import confluent_kafka.admin

from .broker_helpers import consume_values, create_topic, produce_values, wait_for


def _describe(bootstrap: str, topic: str) -> dict[int, tuple[int, list[int], list[int]]]:
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    metadata = admin.list_topics(topic, timeout=10)
    return {
        p.id: (p.leader, list(p.replicas), list(p.isrs))
        for p in metadata.topics[topic].partitions.values()
    }


def test_followers_copy_the_leader_and_join_the_isr(cluster) -> None:
    bootstrap = cluster.bootstrap_servers
    create_topic(
        bootstrap,
        "replicated",
        partitions=3,
        replication_factor=3,
        config={"min.insync.replicas": "2"},
    )
    values = [f"value-{i}".encode() for i in range(300)]
    produce_values(bootstrap, "replicated", values, acks="all")
    described = _describe(bootstrap, "replicated")
    assert all(sorted(isr) == [1, 2, 3] for _leader, _replicas, isr in described.values())
    # Leaders are spread over the brokers (rack-aware placement, one rack each).
    assert sorted(leader for leader, _r, _i in described.values()) == [1, 2, 3]

    def followers_caught_up() -> bool:
        ends = {}
        for broker in cluster.brokers:
            for partition in range(3):
                segment_dir = broker.log_dir / f"replicated-{partition}"
                ends[(broker.broker_id, partition)] = sum(
                    f.stat().st_size for f in segment_dir.glob("*.log")
                )
        return all(len({ends[(b.broker_id, p)] for b in cluster.brokers}) == 1 for p in range(3))

    assert wait_for(followers_caught_up, 20), "follower logs differ from the leader's"
    assert sorted(consume_values(bootstrap, "replicated", 300, partitions=3)) == sorted(values)


def test_acks_all_fails_with_not_enough_replicas_below_min_insync(cluster_factory) -> None:
    cluster = cluster_factory(**{"zookeeper.session.timeout.ms": "4000"})
    bootstrap = cluster.bootstrap_servers
    create_topic(
        bootstrap, "strict", partitions=1, replication_factor=3, config={"min.insync.replicas": "3"}
    )
    produce_values(bootstrap, "strict", [b"before"], acks="all")
    leader = _describe(bootstrap, "strict")[0][0]
    follower = next(b for b in cluster.brokers if b.broker_id != leader)
    follower.kill()
    # The controller drops the dead follower from the ISR once its session is gone.
    assert wait_for(lambda: len(_describe(bootstrap, "strict")[0][2]) == 2, 30)
    errors = []
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 5000, "retries": 0}
    )
    producer.produce("strict", b"refused", on_delivery=lambda e, m: errors.append(e))
    producer.flush(15)
    assert len(errors) == 1 and errors[0] is not None
    assert errors[0].code() == confluent_kafka.KafkaError.NOT_ENOUGH_REPLICAS
    # acks=1 still works: min.insync.replicas only constrains acks=all.
    produce_values(bootstrap, "strict", [b"acks-one"], acks=1)
    started = time.monotonic()
    follower.start()
    follower.wait_registered(30)
    # The returning follower catches up and rejoins the ISR.
    assert wait_for(lambda: len(_describe(bootstrap, "strict")[0][2]) == 3, 30), (
        f"ISR did not expand within {time.monotonic() - started:.1f} s"
    )
    produce_values(bootstrap, "strict", [b"after"], acks="all")
