"""DescribeLogDirs (API 35) through kafka-python's admin client: every replica of a topic
is reported in its broker's log dir with the size its segment files have on disk, and
only the partitions asked for when some are named."""

from __future__ import annotations

import time

import confluent_kafka
from kafka.admin import KafkaAdminClient

from gregor_broker.cluster.admin import ZkAdmin
from gregor_broker.devtools.local_cluster import zookeeper_client

ASSIGNMENT = {0: [1, 2], 1: [2, 3], 2: [3, 1]}


def on_disk(cluster, broker_id: int, topic: str, partition: int) -> int:
    broker = next(b for b in cluster.brokers if b.broker_id == broker_id)
    directory = broker.log_dir / f"{topic}-{partition}"
    return sum(f.stat().st_size for f in directory.glob("*.log"))


def test_describe_log_dirs_reports_every_replica_with_its_size_on_disk(cluster):
    zk = zookeeper_client(cluster.zookeeper_connect)
    admin = ZkAdmin(zk)
    try:
        admin.create_topic("sized", ASSIGNMENT, {})
        producer = confluent_kafka.Producer(
            {"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"}
        )
        for partition in ASSIGNMENT:
            for i in range(50 * (partition + 1)):
                producer.produce("sized", b"v" * 500, key=str(i).encode(), partition=partition)
        assert producer.flush(60) == 0
        # acks=all: every replica in the ISR holds the records; wait for the files to agree.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            sizes = {
                (b, p): on_disk(cluster, b, "sized", p) for p, rs in ASSIGNMENT.items() for b in rs
            }
            if all(sizes[(r[0], p)] == sizes[(b, p)] for p, r in ASSIGNMENT.items() for b in r):
                break
            time.sleep(0.2)
        client = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
        try:
            reported = {}
            for response in client.describe_log_dirs():
                for result in response["log_dirs"]:
                    assert result["error_code"] == 0, result
                    for topic in result["topics"]:
                        for p in topic["partitions"]:
                            if topic["name"] == "sized":
                                reported[(response["broker"], p["partition_index"])] = p
            assert set(reported) == set(sizes), reported
            for key, entry in reported.items():
                assert entry["partition_size"] == sizes[key] > 0, (key, entry, sizes)
                assert entry["offset_lag"] == 0 and entry["is_future_key"] is False
            # Partition 1 grew three times partition 0's records: sizes say so.
            assert sizes[(2, 1)] > sizes[(1, 0)]
            # Only the partitions asked for.
            named = client.describe_log_dirs({"sized": [1]}, brokers=[2])
            (only,) = named
            listed = [
                (t["name"], p["partition_index"])
                for result in only["log_dirs"]
                for t in result["topics"]
                for p in t["partitions"]
            ]
            assert listed == [("sized", 1)], listed
        finally:
            client.close()
    finally:
        zk.stop()
        zk.close()
