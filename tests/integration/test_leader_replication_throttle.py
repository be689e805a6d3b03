"""The leader half of the replication throttle, alone, against real brokers.

Broker 1 leads two partitions holding 8 MB each; both get a new replica on broker 2.
Only the leader side is throttled (``leader.replication.throttled.rate`` on broker 1 and
``leader.replication.throttled.replicas`` on one topic; no follower throttle anywhere),
so any limit on the copy comes from the leader answering broker 2's fetches. The
throttled copy runs at the configured rate; the unthrottled partition, copied by the same
fetcher in the same fetches, and a consumer reading the throttled partition meanwhile go
at full speed. ``gregor reassign execute --throttle`` / ``verify`` set and clear all four
throttle configs as kafka-reassign-partitions does.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import confluent_kafka.admin
from confluent_kafka.admin import NewTopic

from gregor_broker.cli.main import main as gregor
from gregor_broker.cluster.admin import ZkAdmin
from gregor_broker.cluster.models import TopicAssignment
from gregor_broker.devtools.zookeeper_server import free_port
from gregor_broker.replication.throttle import (
    FOLLOWER_RATE,
    FOLLOWER_REPLICAS,
    LEADER_RATE,
    LEADER_REPLICAS,
)

from .broker_helpers import consume_values, produce_values, scrape, wait_for
from .quota_helpers import zk_admin

RATE = 1_000_000  # bytes/s
MESSAGES = 8000  # of 1000 bytes: 8 MB per partition
FETCH = 1 << 20  # replica.fetch.max.bytes: the most one fetch may overshoot the rate


def _log_bytes(directory: Path) -> int:
    return sum(path.stat().st_size for path in directory.glob("*.log"))


def _plan(tmp_path: Path, moves: dict[tuple[str, int], list[int]]) -> Path:
    plan = tmp_path / "plan.json"
    partitions = [{"topic": t, "partition": p, "replicas": r} for (t, p), r in moves.items()]
    plan.write_text(json.dumps({"version": 1, "partitions": partitions}))
    return plan


def test_leader_throttle_alone_limits_the_copy_and_nothing_else(
    broker_factory, zk_connect, tmp_path
) -> None:
    metrics_port = free_port()
    leader = broker_factory(**{"metrics.port": str(metrics_port)})
    follower = broker_factory()
    bootstrap = leader.bootstrap
    admin_client = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    topics = [NewTopic(t, 1, replica_assignment=[[1]]) for t in ("throttled", "free")]
    for future in admin_client.create_topics(topics).values():
        future.result(30)
    with zk_admin(zk_connect) as admin:
        # Throttle first: seeding below gives the config notifications time to land.
        admin.set_entity_config("brokers/1", {LEADER_RATE: str(RATE)})
        admin.set_topic_config("throttled", {LEADER_REPLICAS: "0:1"})
    for topic in ("throttled", "free"):
        produce_values(bootstrap, topic, [b"x" * 1000] * MESSAGES, acks=1)
    # Each partition's own size: the producer's batching makes the two logs differ a little.
    sizes = {topic: _log_bytes(leader.log_dir / f"{topic}-0") for topic in ("throttled", "free")}
    size = sizes["throttled"]
    assert size > 8_000_000
    before = scrape(metrics_port)

    consumed: dict[str, float] = {}

    def consume() -> None:
        started = time.monotonic()
        values = consume_values(bootstrap, "throttled", MESSAGES)
        consumed["count"] = len(values)
        consumed["seconds"] = time.monotonic() - started

    plan = _plan(tmp_path, {("throttled", 0): [1, 2], ("free", 0): [1, 2]})
    assert gregor(["reassign", "execute", "--zookeeper", zk_connect, "--plan", str(plan)]) == 0
    started = time.monotonic()
    consumer = threading.Thread(target=consume)
    consumer.start()
    # (seconds since the move started, bytes broker 2 has) for each partition.
    progress: dict[str, list[tuple[float, int]]] = {"throttled": [], "free": []}
    deadline = started + 40
    while time.monotonic() < deadline:
        for topic, samples in progress.items():
            directory = follower.log_dir / f"{topic}-0"
            copied = _log_bytes(directory) if directory.exists() else 0
            # Stamped after the read: a test process descheduled between stamping and
            # reading would otherwise credit bytes to an earlier moment (a false burst).
            samples.append((time.monotonic() - started, copied))
        if all(samples[-1][1] >= sizes[topic] for topic, samples in progress.items()):
            break
        time.sleep(0.05)
    consumer.join(60)

    def reached(topic: str, wanted: int) -> float:
        at = next((t for t, copied in progress[topic] if copied >= wanted), None)
        assert at is not None, f"{topic}: {progress[topic][-1][1]} of {wanted} bytes copied in 40 s"
        return at

    copy_s = reached("throttled", size)
    # Bytes copied beyond the limit (plus 10%) over any stretch of a second or more.
    samples = progress["throttled"]
    overshoot = max(
        c2 - c1 - 1.1 * RATE * (t2 - t1) for t1, c1 in samples for t2, c2 in samples if t2 - t1 >= 1
    )
    free_s = reached("free", sizes["free"])
    throttled_when_free_done = max(c for t, c in progress["throttled"] if t <= free_s)
    print(
        f"throttled copy: {size} bytes in {copy_s:.2f} s ({size / copy_s / 1e6:.2f} MB/s "
        f"overall, limit {RATE / 1e6:.2f} MB/s, overshoot {max(overshoot, 0) / 1e6:.2f} MB); "
        f"free copy: {free_s:.2f} s; consumer: {consumed.get('seconds', -1):.2f} s"
    )

    # The rate held: the copy took at least as long as the limit allows for its bytes
    # less one fetch, no stretch of a second or more went over the limit by more than
    # two fetches (a batch is never split, and the rate is a sampled average as in
    # Kafka; an unthrottled copy would overshoot by the whole 8 MB), and the copy was
    # not starved either (held-back fetches retry as soon as the quota allows).
    assert copy_s >= 0.9 * (size - FETCH) / RATE
    assert overshoot <= 2 * FETCH
    assert 0.75 * RATE <= size / copy_s <= 1.25 * RATE
    # The unthrottled partition, in the same fetches, finished while the throttled one
    # had not copied half its bytes.
    assert throttled_when_free_done < size / 2
    # A consumer of the throttled partition read everything at many times the limit.
    assert consumed.get("count") == MESSAGES
    assert consumed["seconds"] < copy_s / 2

    after = scrape(metrics_port)
    sent = after["gregor_leader_replication_throttled_bytes_total"] - before.get(
        "gregor_leader_replication_throttled_bytes_total", 0.0
    )
    assert size <= sent < size + FETCH  # the throttled copy, and nothing of "free"
    assert after["gregor_leader_replication_held_back_partitions_total"] > 0

    with zk_admin(zk_connect) as admin:
        assert wait_for(lambda: _moved(admin, "throttled") and _moved(admin, "free"), 30)
        # Only the leader side was configured.
        assert FOLLOWER_RATE not in admin.get_entity_config("brokers/2")
        assert FOLLOWER_REPLICAS not in admin.get_topic_config("throttled")


def _moved(admin: ZkAdmin, topic: str) -> bool:
    assignment = admin.get_topic(topic)
    return (
        assignment is not None
        and tuple(assignment.partitions[0]) == (1, 2)
        and not assignment.adding_replicas
    )


def test_reassign_execute_sets_both_throttles_and_verify_clears_them(
    zk_connect, tmp_path, capsys
) -> None:
    """Against ZooKeeper alone: the tool's writes are Kafka's, whoever carries out the move.
    Broker 9 is not registered (down) and still gets its throttle cleared."""
    with zk_admin(zk_connect) as admin:
        admin.ensure_paths()
        admin.create_topic("orders", {0: [1, 2, 3], 1: [2, 3, 9]}, {"retention.ms": "1000"})
    plan = _plan(tmp_path, {("orders", 0): [2, 3, 4], ("orders", 1): [2, 3, 9]})
    zk = ["--zookeeper", zk_connect, "--plan", str(plan)]
    assert gregor(["reassign", "execute", *zk, "--throttle", "5000000"]) == 0
    with zk_admin(zk_connect) as admin:
        config = admin.get_topic_config("orders")
        assert config[LEADER_REPLICAS] == "0:1,0:2,0:3"  # where the copy may come from
        assert config[FOLLOWER_REPLICAS] == "0:4"  # where it goes
        assert config["retention.ms"] == "1000"  # other overrides kept
        for broker in (1, 2, 3, 4, 9):
            rates = admin.get_entity_config(f"brokers/{broker}")
            assert rates == {LEADER_RATE: "5000000", FOLLOWER_RATE: "5000000"}, broker
        assert admin.get_reassignment() is not None
        # Nothing carries the move out here: finish it the way the controller would.
        admin.client.delete("/admin/reassign_partitions")
        assignment, version = admin.get_topic_with_version("orders")
        done = TopicAssignment.of({0: [2, 3, 4], 1: [2, 3, 9]}, assignment.topic_id)
        admin.set_topic_assignment("orders", done, version)
    capsys.readouterr()
    assert gregor(["reassign", "verify", *zk]) == 0
    assert "Throttles removed" in capsys.readouterr().out
    with zk_admin(zk_connect) as admin:
        assert admin.get_topic_config("orders") == {"retention.ms": "1000"}
        for broker in (1, 2, 3, 4, 9):
            assert admin.get_entity_config(f"brokers/{broker}") == {}, broker
