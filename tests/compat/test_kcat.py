"""kcat (Debian's binary, librdkafka 2.0.2) against Gregor.

kcat has no admin API, so topics here come from auto-creation: the broker runs with
``num.partitions=3`` and the first ``kcat -P`` to a new topic creates it. kcat cannot set a
message timestamp when producing (``-P`` has no timestamp option and no JSON input), so its
own round trip checks that every timestamp is a CreateTime taken while kcat ran; exact
timestamps, ``-Q`` and ``-o s@<ts>`` are tested on messages produced with explicit
timestamps by confluent-kafka in the same module.
"""

from __future__ import annotations

import json
import queue
import re
import shutil
import subprocess
import threading
from dataclasses import dataclass

import confluent_kafka
import pytest

from .expectations import (
    CODECS,
    MESSAGES_PER_PARTITION,
    PARTITIONS,
    Message,
    Received,
    assert_partition_round_trip,
    batches,
    by_partition,
    first_offset_at_or_after,
    kcat_input,
    message_set,
    now_ms,
    unique_topic,
)

KCAT = shutil.which("kcat")
pytestmark = pytest.mark.skipif(KCAT is None, reason="kcat is not installed (apt install kcat)")

TIMEOUT = 30
# Fail fast instead of librdkafka's 5-minute default delivery timeout.
COMMON = ["-m", "10", "-X", "message.timeout.ms=15000", "-X", "fetch.wait.max.ms=50"]


@pytest.fixture
def kcat_broker(broker_factory):
    """A broker whose auto-created topics have three partitions."""
    return broker_factory(**{"num.partitions": str(PARTITIONS)})


def kcat(bootstrap: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    command = [KCAT, "-b", bootstrap, *COMMON, *args]
    result = subprocess.run(
        command, input=stdin, capture_output=True, text=True, timeout=TIMEOUT, check=False
    )
    assert result.returncode == 0, (
        f"{' '.join(command)} exited {result.returncode}\n"
        f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    )
    return result


def produce(bootstrap: str, topic: str, messages: list[Message]) -> None:
    """One ``kcat -P`` per (codec, partition) batch: ``-z`` and ``-H`` apply to a whole run."""
    for (codec, partition), batch in batches(messages).items():
        headers = []
        for name, value in batch[0].headers:
            headers += ["-H", f"{name}={value.decode()}"]
        codec_args = [] if codec == "none" else ["-z", codec]
        kcat(
            bootstrap,
            "-P",
            "-t",
            topic,
            "-p",
            str(partition),
            "-K",
            "|",
            *codec_args,
            *headers,
            stdin=kcat_input(batch),
        )


def received(json_lines: str) -> list[Received]:
    """Records from ``kcat -C -J`` output (headers come as ``[name, value, name, ...]``)."""
    records = []
    for line in json_lines.splitlines():
        if not line.strip():
            continue
        record = json.loads(line)
        flat = record.get("headers") or []
        headers = tuple(
            (flat[i], flat[i + 1].encode() if flat[i + 1] is not None else None)
            for i in range(0, len(flat), 2)
        )
        key, payload = record["key"], record["payload"]
        records.append(
            Received(
                partition=record["partition"],
                offset=record["offset"],
                key=key.encode() if key is not None else None,
                value=payload.encode() if payload is not None else None,
                headers=headers,
                timestamp=record["ts"],
            )
        )
    return records


def consume(bootstrap: str, topic: str, *args: str) -> list[Received]:
    return received(kcat(bootstrap, "-C", "-t", topic, "-J", "-e", *args).stdout)


def produce_message_set(bootstrap: str, topic: str) -> tuple[list[Message], int, int]:
    """kcat-produce the message set; returns it with the wall-clock window around it."""
    messages = message_set()
    before = now_ms()
    produce(bootstrap, topic, messages)
    return messages, before, now_ms()


def stamped_while_producing(before: int, after: int):
    def check(_message: Message, record: Received) -> bool:
        return before <= record.timestamp <= after

    return check


def test_auto_created_topic_round_trips_keyed_messages_with_headers_under_every_codec(
    kcat_broker,
):
    topic = unique_topic("kcat-codecs")
    messages, before, after = produce_message_set(kcat_broker.bootstrap, topic)

    records = consume(kcat_broker.bootstrap, topic, "-o", "beginning")

    assert len(records) == PARTITIONS * MESSAGES_PER_PARTITION
    assert_partition_round_trip(
        by_partition(messages), records, timestamps=stamped_while_producing(before, after)
    )
    codecs_seen = {dict(record.headers)["codec"].decode() for record in records}
    assert codecs_seen == set(CODECS)


def test_consuming_from_a_middle_offset_returns_the_rest_of_the_partition(kcat_broker):
    topic = unique_topic("kcat-offset")
    messages, before, after = produce_message_set(kcat_broker.bootstrap, topic)
    middle = MESSAGES_PER_PARTITION // 2

    records = consume(kcat_broker.bootstrap, topic, "-p", "1", "-o", str(middle))

    assert [record.offset for record in records] == list(range(middle, MESSAGES_PER_PARTITION))
    assert_partition_round_trip(
        {1: by_partition(messages)[1]},
        records,
        start_offsets={1: middle},
        timestamps=stamped_while_producing(before, after),
    )


def test_negative_offset_returns_the_last_n_messages_and_beginning_returns_all(kcat_broker):
    topic = unique_topic("kcat-relative")
    messages, before, after = produce_message_set(kcat_broker.bootstrap, topic)
    expected = {2: by_partition(messages)[2]}
    stamped = stamped_while_producing(before, after)

    last_three = consume(kcat_broker.bootstrap, topic, "-p", "2", "-o", "-3")
    everything = consume(kcat_broker.bootstrap, topic, "-p", "2", "-o", "beginning")

    start = MESSAGES_PER_PARTITION - 3
    assert [record.offset for record in last_three] == [start, start + 1, start + 2]
    assert_partition_round_trip(expected, last_three, start_offsets={2: start}, timestamps=stamped)
    assert_partition_round_trip(expected, everything, timestamps=stamped)


def test_offset_end_with_exit_on_eof_prints_nothing_and_exits_zero(kcat_broker):
    topic = unique_topic("kcat-end-eof")
    produce_message_set(kcat_broker.bootstrap, topic)

    result = kcat(kcat_broker.bootstrap, "-C", "-t", topic, "-J", "-o", "end", "-e")

    assert result.stdout.strip() == ""
    for partition in range(PARTITIONS):
        assert (
            f"Reached end of topic {topic} [{partition}] at offset {MESSAGES_PER_PARTITION}"
            in result.stderr
        )


def test_offset_end_delivers_only_messages_produced_after_the_consumer_reached_the_end(
    kcat_broker,
):
    bootstrap = kcat_broker.bootstrap
    topic = unique_topic("kcat-end-tail")
    produce_message_set(bootstrap, topic)
    command = [KCAT, "-b", bootstrap, *COMMON, "-C", "-t", topic, "-p", "0", "-J"]
    command += ["-o", "end", "-c", "2"]
    consumer = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stderr_lines: queue.Queue[str] = queue.Queue()
    threading.Thread(
        target=lambda: [stderr_lines.put(line) for line in consumer.stderr], daemon=True
    ).start()
    try:
        at_end = f"Reached end of topic {topic} [0] at offset {MESSAGES_PER_PARTITION}"
        seen = []
        while not any(at_end in line for line in seen):
            try:
                seen.append(stderr_lines.get(timeout=TIMEOUT))
            except queue.Empty:
                pytest.fail(f"kcat never reported {at_end!r}; stderr so far: {seen}")
        kcat(bootstrap, "-P", "-t", topic, "-p", "0", "-K", "|", stdin="tail-1|a\ntail-2|b\n")
        stdout, _ = consumer.communicate(timeout=TIMEOUT)
    finally:
        if consumer.poll() is None:
            consumer.kill()
            consumer.wait()

    assert consumer.returncode == 0
    tail = received(stdout)
    assert [(r.offset, r.key, r.value) for r in tail] == [
        (MESSAGES_PER_PARTITION, b"tail-1", b"a"),
        (MESSAGES_PER_PARTITION + 1, b"tail-2", b"b"),
    ]


@dataclass
class ListedPartition:
    partition: int
    leader: int
    replicas: list[int]
    isrs: list[int]


def parse_metadata_listing(text: str):
    """``kcat -L`` output → (brokers {id: (address, is_controller)}, topics {name: [...]})."""
    brokers: dict[int, tuple[str, bool]] = {}
    topics: dict[str, list[ListedPartition]] = {}
    current = None
    for line in text.splitlines():
        if match := re.match(r"^\s+broker (\d+) at (\S+)( \(controller\))?$", line):
            brokers[int(match[1])] = (match[2], bool(match[3]))
        elif match := re.match(r'^\s+topic "(.+)" with (\d+) partitions:', line):
            current = topics.setdefault(match[1], [])
        elif match := re.match(
            r"^\s+partition (\d+), leader (-?\d+), replicas: ([\d,]*), isrs: ([\d,]*)", line
        ):
            assert current is not None, f"partition line outside a topic: {line!r}"
            current.append(
                ListedPartition(
                    partition=int(match[1]),
                    leader=int(match[2]),
                    replicas=[int(r) for r in match[3].split(",") if r],
                    isrs=[int(r) for r in match[4].split(",") if r],
                )
            )
    return brokers, topics


def test_metadata_listing_shows_the_broker_the_topic_its_partitions_and_leader(kcat_broker):
    bootstrap = kcat_broker.bootstrap
    broker_id = kcat_broker.broker_id
    topic = unique_topic("kcat-list")
    kcat(bootstrap, "-P", "-t", topic, "-p", "0", "-K", "|", stdin="k|v\n")

    everything = kcat(bootstrap, "-L").stdout
    one_topic = kcat(bootstrap, "-L", "-t", topic).stdout

    brokers, topics = parse_metadata_listing(everything)
    assert brokers == {broker_id: (bootstrap, True)}, everything
    assert topic in topics, everything
    for listing in (topics[topic], parse_metadata_listing(one_topic)[1][topic]):
        assert listing == [
            ListedPartition(partition=p, leader=broker_id, replicas=[broker_id], isrs=[broker_id])
            for p in range(PARTITIONS)
        ], one_topic
    assert f" 1 brokers:\n  broker {broker_id} at {bootstrap} (controller)" in one_topic


def produce_with_explicit_timestamps(bootstrap: str, topic: str) -> list[Message]:
    """kcat cannot set timestamps, so confluent-kafka writes the message set."""
    messages = message_set()
    errors: list = []

    def on_delivery(error, _message) -> None:
        if error is not None:
            errors.append(error)

    for codec in CODECS:
        producer = confluent_kafka.Producer(
            {
                "bootstrap.servers": bootstrap,
                "compression.type": codec,
                "linger.ms": 5,
                "message.timeout.ms": 15000,
            }
        )
        for message in (m for m in messages if m.codec == codec):
            producer.produce(
                topic,
                key=message.key,
                value=message.value,
                partition=message.partition,
                headers=list(message.headers),
                timestamp=message.timestamp,
                on_delivery=on_delivery,
            )
        assert producer.flush(TIMEOUT) == 0, f"{codec}: messages still undelivered"
        assert errors == [], f"{codec}: delivery failed: {errors}"
    return messages


def query_offset(bootstrap: str, topic: str, partition: int, timestamp: int) -> int:
    output = kcat(bootstrap, "-Q", "-t", f"{topic}:{partition}:{timestamp}").stdout
    match = re.search(rf"^{re.escape(topic)} \[{partition}\] offset (-?\d+)$", output, re.M)
    assert match, f"unexpected kcat -Q output: {output!r}"
    return int(match[1])


def test_query_by_timestamp_returns_the_first_offset_at_or_after_it(kcat_broker):
    bootstrap = kcat_broker.bootstrap
    topic = unique_topic("kcat-query")
    messages = produce_with_explicit_timestamps(bootstrap, topic)
    partition = 1
    log = by_partition(messages)[partition]
    middle = len(log) // 2
    cases = {
        "before every message": log[0].timestamp - 60_000,
        "exactly the first": log[0].timestamp,
        "exactly a middle one": log[middle].timestamp,
        "between two messages": log[middle].timestamp - 1,
        "just after a middle one": log[middle].timestamp + 1,
        "exactly the last": log[-1].timestamp,
    }

    answers = {case: query_offset(bootstrap, topic, partition, ts) for case, ts in cases.items()}
    after_last = query_offset(bootstrap, topic, partition, log[-1].timestamp + 1)

    assert answers == {case: first_offset_at_or_after(log, ts) for case, ts in cases.items()}
    assert answers["between two messages"] == middle
    assert answers["just after a middle one"] == middle + 1
    assert after_last == -1  # Kafka: no message at or after the timestamp


def test_consuming_from_a_timestamp_starts_at_the_first_message_at_or_after_it(kcat_broker):
    bootstrap = kcat_broker.bootstrap
    topic = unique_topic("kcat-from-ts")
    messages = produce_with_explicit_timestamps(bootstrap, topic)
    expected = by_partition(messages)
    partition = 0
    middle = len(expected[partition]) // 2
    start_timestamp = expected[partition][middle].timestamp - 1

    from_time = consume(bootstrap, topic, "-p", str(partition), "-o", f"s@{start_timestamp}")
    from_start = consume(bootstrap, topic, "-o", "beginning")

    assert_partition_round_trip(
        {partition: expected[partition]}, from_time, start_offsets={partition: middle}
    )
    # kcat shows the producer's explicit timestamps exactly, under every codec.
    assert_partition_round_trip(expected, from_start)
