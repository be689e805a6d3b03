"""Three brokers replicate a topic: followers copy, acks=all waits, the ISR is honest."""

from __future__ import annotations

import time

import confluent_kafka
import confluent_kafka.admin

from gregor_broker.devtools.zookeeper_server import free_port

from ..cluster_fixtures import every_broker_knows_the_others
from .broker_helpers import consume_values, create_topic, produce_values, scrape, wait_for


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


def test_followers_fetch_in_incremental_sessions(broker_factory) -> None:
    """Each follower keeps one fetch session (KIP-227) with each leader, holding every
    partition it follows there, as Kafka's fetchers do: after the first full fetch a
    round trip names only the partitions that moved."""
    metrics = {}
    brokers = []
    for broker_id in (1, 2, 3):
        metrics[broker_id] = free_port()
        brokers.append(broker_factory(broker_id, **{"metrics.port": str(metrics[broker_id])}))
    assert every_broker_knows_the_others(brokers), "brokers unknown to each other"
    bootstrap = ",".join(broker.bootstrap for broker in brokers)
    # Twelve partitions, four led by each broker and followed by the other two.
    assignment = [[1, 2, 3], [2, 3, 1], [3, 1, 2]] * 4
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    created = admin.create_topics(
        [confluent_kafka.admin.NewTopic("in-sessions", 12, replica_assignment=assignment)]
    )
    created["in-sessions"].result(30)
    values = [f"value-{i}".encode() for i in range(240)]
    produce_values(bootstrap, "in-sessions", values, acks="all")

    def sessions_held() -> dict[int, tuple[float, float]]:
        held = {}
        for broker_id, port in metrics.items():
            samples = scrape(port)
            held[broker_id] = (
                samples["gregor_fetch_sessions"],
                samples["gregor_fetch_session_partitions"],
            )
        return held

    # At each leader, two followers' sessions of the four partitions it leads.
    wanted = {broker_id: (2.0, 8.0) for broker_id in metrics}
    assert wait_for(lambda: sessions_held() == wanted, 20), (sessions_held(), wanted)
    assert sorted(consume_values(bootstrap, "in-sessions", 240, partitions=12)) == sorted(values)


def test_partitions_at_rest_stay_in_sync_and_are_copied_at_once_when_written(
    broker_factory,
) -> None:
    """A follower's session on the leader reads only the partitions that changed since
    they were last found quiet (``server/fetch_sessions.py``, FULL_PASS_MS): a write to a
    partition at rest wakes the follower's waiting fetch at once (with a 2.5 s
    ``replica.fetch.wait.max.ms``, a missed wake-up would hold the acks=all write about
    that long), and partitions at rest for longer than ``replica.lag.time.max.ms`` stay
    in their ISRs (their followers' fetch times are refreshed by the periodic full
    reads). Kafka wants the fetch wait below the lag time, as here."""
    properties = {"replica.fetch.wait.max.ms": "2500", "replica.lag.time.max.ms": "6000"}
    brokers = [broker_factory(broker_id, **properties) for broker_id in (1, 2, 3)]
    assert every_broker_knows_the_others(brokers), "brokers unknown to each other"
    bootstrap = ",".join(broker.bootstrap for broker in brokers)
    create_topic(
        bootstrap, "at-rest", partitions=12, replication_factor=3,
        config={"min.insync.replicas": "3"},
    )  # fmt: skip
    produce_values(bootstrap, "at-rest", [b"first"] * 24, acks="all")
    assert wait_for(
        lambda: all(len(isr) == 3 for _l, _r, isr in _describe(bootstrap, "at-rest").values()),
        30,
    ), _describe(bootstrap, "at-rest")
    time.sleep(7)  # longer at rest than replica.lag.time.max.ms
    described = _describe(bootstrap, "at-rest")
    assert all(sorted(isr) == [1, 2, 3] for _l, _r, isr in described.values()), described

    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0}
    )
    producer.list_topics("at-rest", timeout=10)  # connections and metadata first
    took = {}
    errors: list[object] = []
    for partition in range(12):
        started = time.monotonic()
        producer.produce(
            "at-rest", b"later", partition=partition, on_delivery=lambda e, _m: errors.append(e)
        )
        assert producer.flush(30) == 0
        took[partition] = time.monotonic() - started
        time.sleep(0.3)  # the partition is found quiet again before the next write
    assert errors == [None] * 12, errors
    # Each write waits for both followers (min.insync.replicas=3): a wake-up, not 2.5 s.
    assert max(took.values()) < 1.0, took
