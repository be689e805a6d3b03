"""The gregor commands that replace Kafka's tools, checked through third-party clients.

Each test runs the real ``gregor`` command in a subprocess against a real broker and checks
the effect with kcat or confluent-kafka, never with Gregor's own code.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from ..compat.expectations import unique_topic

TIMEOUT = 30


def gregor(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    completed = subprocess.run(
        [sys.executable, "-m", "gregor_broker.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if check:
        assert completed.returncode == 0, (args, completed.stdout, completed.stderr)
    return completed


def kcat_partitions(bootstrap: str, topic: str) -> int:
    listing = subprocess.run(
        ["kcat", "-b", bootstrap, "-L", "-t", topic, "-J"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    (found,) = [t for t in json.loads(listing.stdout)["topics"] if t["topic"] == topic]
    return len(found["partitions"])


def topic_configs(bootstrap: str, topic: str) -> dict[str, str]:
    client = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.TOPIC, topic)
    entries = client.describe_configs([resource])[resource].result(TIMEOUT)
    return {name: entry.value for name, entry in entries.items()}


def produce(bootstrap: str, topic: str, count: int, partition: int = 0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(count):
        producer.produce(topic, value=f"v{i}".encode(), partition=partition)
    assert producer.flush(TIMEOUT) == 0


def test_topics_create_alter_delete_as_kcat_sees_them(broker):
    topic = unique_topic("cli-topic")
    bootstrap = broker.bootstrap

    created = gregor(
        "topics", "create", "-b", bootstrap, "--topic", topic, "--partitions", "3",
        "--replication-factor", "1", "--config", "retention.ms=3600000",
        "--config", "cleanup.policy=compact,delete",
    )  # fmt: skip
    assert f"Created topic {topic}" in created.stdout
    assert kcat_partitions(bootstrap, topic) == 3
    configs = topic_configs(bootstrap, topic)
    assert configs["retention.ms"] == "3600000"
    assert configs["cleanup.policy"] == "compact,delete"

    again = gregor("topics", "create", "-b", bootstrap, "--topic", topic, check=False)
    assert again.returncode == 1 and "already exists" in again.stderr.lower(), again.stderr
    gregor("topics", "create", "-b", bootstrap, "--topic", topic, "--if-not-exists")

    gregor("topics", "alter", "-b", bootstrap, "--topic", topic, "--partitions", "5")
    assert kcat_partitions(bootstrap, topic) == 5
    shrink = gregor(
        "topics", "alter", "-b", bootstrap, "--topic", topic, "--partitions", "2", check=False
    )
    assert shrink.returncode == 1 and topic in shrink.stderr

    bad = gregor(
        "topics", "create", "-b", bootstrap, "--topic", unique_topic("cli-bad"),
        "--config", "retention.ms=soon", check=False,
    )  # fmt: skip
    assert bad.returncode == 1 and "retention.ms" in bad.stderr

    gregor("topics", "delete", "-b", bootstrap, "--topic", topic)
    client = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + TIMEOUT
    while topic in client.list_topics(timeout=TIMEOUT).topics and time.monotonic() < deadline:
        time.sleep(0.2)
    assert topic not in client.list_topics(timeout=TIMEOUT).topics
    gregor("topics", "delete", "-b", bootstrap, "--topic", topic, "--if-exists")


def test_topics_describe_filters_and_json(broker, zk_connect):
    topic = unique_topic("cli-describe")
    gregor("topics", "create", "-b", broker.bootstrap, "--topic", topic, "--partitions", "2",
           "--config", "min.insync.replicas=1")  # fmt: skip

    described = gregor(
        "topics", "describe", "--zookeeper", zk_connect, "--topic", topic, "--output", "json"
    )
    rows = json.loads(described.stdout)
    assert [(r["partition"], r["replicas"], r["isr"]) for r in rows] == [
        (0, [broker.broker_id], [broker.broker_id]),
        (1, [broker.broker_id], [broker.broker_id]),
    ]
    with_overrides = gregor(
        "topics", "describe", "--zookeeper", zk_connect, "--topics-with-overrides",
        "--at-min-isr-partitions", "--topic", topic,
    )  # fmt: skip
    assert "min.insync.replicas=1" in with_overrides.stdout
    assert with_overrides.stdout.count("Partition:") == 2


def test_configs_alter_and_describe_topics_brokers_and_clients(broker, zk_connect):
    topic = unique_topic("cli-configs")
    bootstrap = broker.bootstrap
    gregor("topics", "create", "-b", bootstrap, "--topic", topic)

    gregor(
        "configs", "alter", "-b", bootstrap, "--entity-type", "topics", "--entity-name", topic,
        "--add-config", "retention.ms=7200000,max.message.bytes=2000000",
    )  # fmt: skip
    assert topic_configs(bootstrap, topic)["retention.ms"] == "7200000"
    gregor(
        "configs", "alter", "-b", bootstrap, "--entity-type", "topics", "--entity-name", topic,
        "--delete-config", "retention.ms",
    )  # fmt: skip
    configs = topic_configs(bootstrap, topic)
    assert configs["retention.ms"] == "604800000" and configs["max.message.bytes"] == "2000000"
    described = gregor(
        "configs", "describe", "-b", bootstrap, "--entity-type", "topics", "--entity-name",
        topic, "--output", "json",
    )  # fmt: skip
    assert [(r["name"], r["value"]) for r in json.loads(described.stdout)] == [
        ("max.message.bytes", "2000000")
    ]

    gregor(
        "configs", "alter", "-b", bootstrap, "--entity-type", "brokers", "--entity-name",
        str(broker.broker_id), "--add-config", "leader.replication.throttled.rate=1048576",
    )  # fmt: skip
    gregor(
        "configs", "alter", "--zookeeper", zk_connect, "--entity-type", "brokers",
        "--entity-default", "--add-config", "follower.replication.throttled.rate=2097152",
    )  # fmt: skip
    client = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.BROKER, str(broker.broker_id))

    def broker_configs() -> dict[str, str]:
        entries = client.describe_configs([resource])[resource].result(TIMEOUT)
        return {name: entry.value for name, entry in entries.items()}

    deadline = time.monotonic() + TIMEOUT
    while (
        broker_configs()["follower.replication.throttled.rate"] != "2097152"
        and time.monotonic() < deadline
    ):
        time.sleep(0.2)
    assert broker_configs()["leader.replication.throttled.rate"] == "1048576"
    assert broker_configs()["follower.replication.throttled.rate"] == "2097152"
    static = gregor(
        "configs", "alter", "-b", bootstrap, "--entity-type", "brokers", "--entity-name",
        str(broker.broker_id), "--add-config", "log.retention.hours=1", check=False,
    )  # fmt: skip
    assert static.returncode == 1 and "log.retention.hours" in static.stderr

    gregor(
        "configs", "alter", "--zookeeper", zk_connect, "--entity-type", "clients",
        "--entity-name", "bulk", "--add-config", "producer_byte_rate=1048576",
    )  # fmt: skip
    quotas = gregor(
        "configs", "describe", "--zookeeper", zk_connect, "--entity-type", "clients",
        "--entity-name", "bulk", "--output", "json",
    )  # fmt: skip
    assert [(r["name"], r["value"]) for r in json.loads(quotas.stdout)] == [
        ("producer_byte_rate", 1048576.0)
    ]


def test_offsets_get_and_records_delete_match_the_clients_watermarks(broker, tmp_path):
    topic = unique_topic("cli-offsets")
    bootstrap = broker.bootstrap
    gregor("topics", "create", "-b", bootstrap, "--topic", topic, "--partitions", "2")
    produce(bootstrap, topic, 10, partition=0)
    produce(bootstrap, topic, 4, partition=1)

    latest = gregor("offsets", "get", "-b", bootstrap, "--topic", topic)
    assert latest.stdout.split() == [f"{topic}:0:10", f"{topic}:1:4"]

    offsets_file = tmp_path / "delete.json"
    offsets_file.write_text(
        json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "offset": 6}]})
    )
    deleted = gregor(
        "records", "delete", "-b", bootstrap, "--offset-json-file", str(offsets_file),
        "--output", "json",
    )  # fmt: skip
    assert json.loads(deleted.stdout)[0]["low_watermark"] == 6

    from confluent_kafka import Consumer

    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": "cli-offsets-check"})
    try:
        assert reader.get_watermark_offsets(TopicPartition(topic, 0), TIMEOUT) == (6, 10)
    finally:
        reader.close()
    earliest = gregor(
        "offsets", "get", "-b", bootstrap, "--topic", topic, "--partitions", "0", "--time", "-2"
    )
    assert earliest.stdout.split() == [f"{topic}:0:6"]
    missing = gregor("offsets", "get", "-b", bootstrap, "--topic", unique_topic("nope"),
                     check=False)  # fmt: skip
    assert missing.returncode == 1


@pytest.mark.parametrize(
    "command",
    [
        ["topics", "create"],
        ["topics", "alter"],
        ["topics", "delete"],
        ["configs", "describe"],
        ["configs", "alter"],
        ["offsets", "get"],
        ["records", "delete"],
        ["groups", "describe"],
        ["groups", "delete-offsets"],
        ["groups", "reset-offsets"],
        ["log-dirs", "describe"],
        ["perf", "produce"],
        ["perf", "consume"],
        ["completion"],
    ],
)
def test_every_new_command_has_help_with_an_example(command):
    shown = gregor(*command, "--help")
    assert "example" in shown.stdout


def test_log_dirs_describe_matches_the_segment_files_on_disk(broker):
    """Partition sizes equal the bytes of the partition's segment files (stat, not Gregor),
    after a client produced to it; --topic-list filters; JSON is kafka-log-dirs.sh's."""
    topic, other = unique_topic("cli-logdirs"), unique_topic("cli-logdirs-other")
    gregor("topics", "create", "-b", broker.bootstrap, "--topic", topic, "--partitions", "2")
    gregor("topics", "create", "-b", broker.bootstrap, "--topic", other)
    produce(broker.bootstrap, topic, 50, partition=1)

    shown = gregor(
        "log-dirs", "describe", "-b", broker.bootstrap, "--topic-list", topic, "-o", "json"
    )
    document = json.loads(shown.stdout)
    assert document["version"] == 1
    (entry,) = document["brokers"]
    assert entry["broker"] == broker.broker_id
    (log_dir,) = entry["logDirs"]
    assert log_dir["error"] is None and log_dir["usableBytes"] > 0
    sizes = {p["partition"]: p["size"] for p in log_dir["partitions"]}
    assert set(sizes) == {f"{topic}-0", f"{topic}-1"}  # the other topic is filtered out
    on_disk = {
        name: sum(f.stat().st_size for f in (Path(log_dir["logDir"]) / name).glob("*.log"))
        for name in sizes
    }
    assert sizes == on_disk and sizes[f"{topic}-1"] > 50 and sizes[f"{topic}-0"] == 0

    table = gregor("log-dirs", "describe", "-b", broker.bootstrap).stdout
    assert f"{other}-0" in table and "(total)" in table
    missing = gregor(
        "log-dirs", "describe", "-b", broker.bootstrap, "--broker-list", "99", check=False
    )
    assert missing.returncode == 1 and "[99] are not in the cluster" in missing.stderr


def test_perf_produce_then_consume_prints_kafkas_lines(broker):
    """The producer's records reach the topic (the clients' watermark says so) and both
    tools print the summary lines of Kafka's perf tools."""
    topic = unique_topic("cli-perf")
    gregor("topics", "create", "-b", broker.bootstrap, "--topic", topic)
    produced = gregor(
        "perf", "produce", "-b", broker.bootstrap, "--topic", topic, "--num-records", "2000",
        "--record-size", "64", "--throughput", "-1", "--acks", "all",
        "--producer-props", "linger.ms=5",
    )  # fmt: skip
    summary = produced.stdout.strip().splitlines()[-1]
    assert re.fullmatch(
        r"2000 records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg latency, "
        r"[\d.]+ ms max latency, \d+ ms 50th, \d+ ms 95th, \d+ ms 99th, \d+ ms 99.9th\.",
        summary,
    ), summary
    assert produced.stderr == ""  # no librdkafka log lines
    client = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "perf-check"})
    try:
        assert client.get_watermark_offsets(TopicPartition(topic, 0), TIMEOUT) == (0, 2000)
    finally:
        client.close()

    consumed = gregor(
        "perf", "consume", "-b", broker.bootstrap, "--topic", topic, "--messages", "2000"
    )
    header, line = consumed.stdout.strip().splitlines()
    assert header.startswith("start.time, end.time, data.consumed.in.MB, MB.sec")
    fields = [field.strip() for field in line.split(",")]
    assert len(fields) == 10 and fields[4] == "2000"
    assert float(fields[2]) == pytest.approx(2000 * 64 / 1024 / 1024, abs=1e-4)
    as_json = gregor(
        "perf", "consume", "-b", broker.bootstrap, "--topic", topic, "--messages", "2000",
        "-o", "json",
    )  # fmt: skip
    assert json.loads(as_json.stdout)["data.consumed.in.nMsg"] == 2000

    short = gregor(
        "perf", "consume", "-b", broker.bootstrap, "--topic", topic, "--messages", "3000",
        "--timeout", "2000", check=False,
    )  # fmt: skip
    assert short.returncode == 1 and "only 2000 of 3000" in short.stderr
    more = gregor(
        "perf", "produce", "-b", broker.bootstrap, "--topic", topic, "--num-records", "100",
        "--record-size", "10", "--throughput", "200", "-o", "json",
    )  # fmt: skip
    totals = json.loads(more.stdout)
    assert totals["records"] == 100 and totals["records_per_sec"] <= 200 * 1.1
    assert totals["p50_ms"] <= totals["p99_ms"] <= totals["max_latency_ms"] + 1
    client = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "perf-check"})
    try:
        assert client.get_watermark_offsets(TopicPartition(topic, 0), TIMEOUT) == (0, 2100)
    finally:
        client.close()
    refused = gregor(
        "perf", "produce", "-b", broker.bootstrap, "--topic", topic, "--num-records", "1",
        "--producer-props", "no.such.setting=1", check=False,
    )  # fmt: skip
    assert refused.returncode == 2 and "no.such.setting" in refused.stderr


@pytest.mark.parametrize("shell", ["bash"])
def test_completion_script_completes_commands_and_options(shell):
    """Run by a real bash: the generated function completes subcommands and options."""
    script = gregor("completion", shell).stdout

    def complete(*words: str) -> list[str]:
        line = " ".join(["gregor", *words])
        driver = (
            f"{script}\nCOMP_WORDS=({line}); COMP_CWORD={len(words)}; "
            '_gregor_complete; printf "%s\\n" "${COMPREPLY[@]}"'
        )
        done = subprocess.run(
            ["bash", "-c", driver], capture_output=True, text=True, timeout=30, check=True
        )
        return done.stdout.split()

    assert "log-dirs" in complete("lo") and "local" in complete("lo")
    assert complete("groups", "delete-") == ["delete-offsets"]
    assert complete("groups", "reset-offsets", "billing", "--to-e") == ["--to-earliest"]
    assert set(complete("perf", "")) == {"--help", "produce", "consume"}
