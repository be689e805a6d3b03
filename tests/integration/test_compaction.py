"""Log compaction on a real broker: real producers (confluent-kafka and kcat) write
updates and tombstones to a compacted topic with small segments; the cleaner shrinks the
partition to about one record a key, and consumers of three client families
(librdkafka, kafka-python, aiokafka) read every key's last value across the gaps."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

import confluent_kafka
import pytest

from gregor_broker.devtools.local_cluster import free_port

from .broker_helpers import create_topic, scrape, wait_for

TOPIC = "accounts"
KEYS = 1000
UPDATES = 100_000
KCAT_UPDATES = 10_000


def _value(key: int, update: int) -> bytes | None:
    """The last update of every tenth key is a tombstone."""
    if key % 10 == 0 and update >= UPDATES - KEYS:
        return None
    return b"value-%d-%d-%s" % (key, update, os.urandom(16).hex().encode())


def _size_of_logs(partition_dir: Path) -> int:
    """Bytes of the partition's segment files (one the cleaner swaps out meanwhile counts 0)."""
    total = 0
    for path in partition_dir.glob("*.log"):
        with contextlib.suppress(FileNotFoundError):
            total += path.stat().st_size
    return total


def _log_bytes(log_dir: Path) -> int:
    return _size_of_logs(log_dir / f"{TOPIC}-0")


def _read_with_librdkafka(
    bootstrap: str, end: int, topic: str = TOPIC
) -> list[tuple[int, bytes, bytes | None]]:
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False}
    )
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
    out: list[tuple[int, bytes, bytes | None]] = []
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline and (not out or out[-1][0] < end - 1):
            for message in consumer.consume(10_000, 0.5):
                assert message.error() is None, message.error()
                out.append((message.offset(), message.key(), message.value()))
    finally:
        consumer.close()
    return out


def _read_with_kafka_python(bootstrap: str, end: int) -> list[tuple[int, bytes, bytes | None]]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    partition = TopicPartition(TOPIC, 0)
    consumer.assign([partition])
    consumer.seek(partition, 0)
    out: list[tuple[int, bytes, bytes | None]] = []
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline and (not out or out[-1][0] < end - 1):
            for records in consumer.poll(timeout_ms=500).values():
                out += [(r.offset, r.key, r.value) for r in records]
    finally:
        consumer.close()
    return out


def _read_with_aiokafka(bootstrap: str, end: int) -> list[tuple[int, bytes, bytes | None]]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def read() -> list[tuple[int, bytes, bytes | None]]:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
        await consumer.start()
        partition = TopicPartition(TOPIC, 0)
        consumer.assign([partition])
        consumer.seek(partition, 0)
        out: list[tuple[int, bytes, bytes | None]] = []
        deadline = time.monotonic() + 60
        try:
            while time.monotonic() < deadline and (not out or out[-1][0] < end - 1):
                batches = await consumer.getmany(timeout_ms=500)
                for records in batches.values():
                    out += [(r.offset, r.key, r.value) for r in records]
        finally:
            await consumer.stop()
        return out

    return asyncio.run(read())


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
def test_a_compacted_topic_keeps_every_keys_last_value_and_shrinks(broker_factory) -> None:
    metrics_port = free_port()
    broker = broker_factory(**{"log.cleaner.backoff.ms": "200", "metrics.port": str(metrics_port)})
    started = time.monotonic()
    bootstrap = broker.bootstrap
    create_topic(
        bootstrap,
        TOPIC,
        config={
            "cleanup.policy": "compact",
            "segment.bytes": "65536",
            "segment.ms": "2000",
            "min.cleanable.dirty.ratio": "0.01",
        },
    )
    # confluent-kafka writes the first updates, in compressed batches...
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 20, "compression.type": "lz4"}
    )
    latest: dict[bytes, tuple[int, bytes | None]] = {}
    confluent_updates = UPDATES - KCAT_UPDATES
    for update in range(confluent_updates):
        key = update % KEYS
        value = _value(key, update)
        producer.produce(TOPIC, value, b"key-%d" % key)
        latest[b"key-%d" % key] = (update, value)
        if update % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0
    # ... and kcat the rest, tombstones included (-Z: an empty value is a null).
    lines = []
    for update in range(confluent_updates, UPDATES):
        key = update % KEYS
        value = _value(key, update)
        lines.append(b"key-%d|%s" % (key, value or b""))
        latest[b"key-%d" % key] = (update, value)
    subprocess.run(
        ["kcat", "-P", "-b", bootstrap, "-t", TOPIC, "-K", "|", "-Z", "-z", "gzip"],
        input=b"\n".join(lines) + b"\n",
        check=True,
        timeout=120,
    )
    end = UPDATES
    produced = time.monotonic()
    log_dir = broker.log_dir
    # What the producers wrote (the cleaner already works while they write).
    written = scrape(metrics_port)["gregor_bytes_in_total"]

    def cleaned() -> bool:
        """segment.ms rolled the last data out of the active segment, and the cleaner
        has nothing dirty left."""
        metrics = scrape(metrics_port)
        segments = sorted((log_dir / f"{TOPIC}-0").glob("*.log"))
        return (
            metrics.get("gregor_log_cleaner_passes_total", 0) > 0
            and metrics.get("gregor_log_cleaner_max_dirty_percent", 100) == 0
            and segments[-1].stat().st_size == 0
        )

    assert wait_for(cleaned, timeout=120, interval=1), (written, _log_bytes(log_dir))
    after = _log_bytes(log_dir)
    compacted = time.monotonic()
    # 100,000 records of about 80 bytes down to about 1,000.
    assert after < written / 20, (written, after)

    expected = {key: value for key, (_, value) in latest.items()}
    for read in (_read_with_librdkafka, _read_with_kafka_python, _read_with_aiokafka):
        records = read(bootstrap, end)
        assert records, read.__name__
        assert records[-1][0] == end - 1, read.__name__
        # About one record a key (each key's last, tombstones kept for delete.retention.ms).
        assert KEYS <= len(records) <= KEYS + 100, (read.__name__, len(records))
        seen = {key: value for _, key, value in records}
        assert seen == expected, read.__name__
        offsets = [offset for offset, _, _ in records]
        assert offsets == sorted(set(offsets)), read.__name__
    print(
        f"log bytes: {written} written, {after} after cleaning; produce "
        f"{produced - started:.1f} s, cleaned {compacted - produced:.1f} s later, "
        f"read by three clients in {time.monotonic() - compacted:.1f} s"
    )


def _offsets_log_bytes(log_dir: Path) -> int:
    return _size_of_logs(log_dir / "__consumer_offsets-0")


def test_consumer_offsets_stay_bounded_under_a_committing_group_and_reload(broker_factory):
    """``__consumer_offsets`` is compacted: a group committing in a loop keeps it near a
    few segments, and the coordinator reloads the last commit from the cleaned log.
    ``GREGOR_COMMIT_LOOP_S`` sets the loop's length (the acceptance run: 600)."""
    seconds = float(os.environ.get("GREGOR_COMMIT_LOOP_S", "20"))
    segment_bytes = 8192
    broker = broker_factory(
        **{
            "log.cleaner.backoff.ms": "200",
            "offsets.topic.num.partitions": "1",
            "offsets.topic.segment.bytes": str(segment_bytes),
            "group.initial.rebalance.delay.ms": "0",
        }
    )
    bootstrap = broker.bootstrap
    create_topic(bootstrap, "ledger")
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "auditors", "enable.auto.commit": False}
    )
    commits = 0
    sizes: list[int] = []  # sampled every 200 commits once the cleaner is in its stride
    started = time.monotonic()
    try:
        # At least ``seconds``, and enough commits to fill many segments (a loaded machine
        # commits slowly) and to sample the cleaner in its stride six times (its worker
        # process takes 15-30 s to start at load 20: the commits alone could end the loop
        # before its second pass), at most three minutes.
        while time.monotonic() - started < seconds or (
            (commits < 4000 or len(sizes) < 6) and time.monotonic() - started < 180
        ):
            commits += 1
            consumer.commit(
                offsets=[confluent_kafka.TopicPartition("ledger", 0, commits)],
                asynchronous=False,
            )
            # The cleaner's first pass also starts its worker process (seconds on a
            # loaded machine) and the second cleans what piled up meanwhile; from then on
            # the partition must not grow with the number of commits.
            if commits % 200 == 0 and (
                broker.log_path.read_text().count("cleaned __consumer_offsets-0") >= 2
            ):
                sizes.append(_offsets_log_bytes(broker.log_dir))
    finally:
        consumer.close()
    elapsed = time.monotonic() - started
    written = commits * 100  # about 100 bytes a commit record
    assert written > 3 * 16 * segment_bytes and len(sizes) >= 6, (commits, len(sizes))
    largest = max(sizes)
    # Bounded: what the cleaner has not reached yet depends on the commit rate, not on how
    # many commits there were: the last third of the run holds no more than the rest did
    # (with some slack for the cleaner's timing), and all of it is a small share of what
    # was written.
    third = len(sizes) // 3
    assert max(sizes[-third:]) <= 2 * max(sizes[:-third]) + 4 * segment_bytes, sizes
    assert largest < max(written / 10, 16 * segment_bytes), (commits, largest)
    # Once the commits stop, the cleaner brings the partition down to a few segments.
    assert wait_for(lambda: _offsets_log_bytes(broker.log_dir) < 4 * segment_bytes, 60), (
        _offsets_log_bytes(broker.log_dir)
    )
    settled = _offsets_log_bytes(broker.log_dir)
    # Nor do the files of the partition pile up: a producer snapshot a roll went with the
    # segments the cleaner merged (there were hundreds of rolls).
    partition_dir = broker.log_dir / "__consumer_offsets-0"
    rolls = commits * 100 // segment_bytes
    snapshots = len(list(partition_dir.glob("*.snapshot")))
    assert snapshots < 20, (snapshots, rolls)

    broker.stop()
    broker.start()
    broker.wait_registered(30)
    checker = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "auditors"})
    try:
        [committed] = checker.committed([confluent_kafka.TopicPartition("ledger", 0)], 30)
    finally:
        checker.close()
    assert committed.offset == commits
    print(
        f"{commits} commits in {elapsed:.0f} s (about {written} bytes written); "
        f"__consumer_offsets-0: {sizes[0]} bytes at the first sample, at most {largest} "
        f"(first two thirds {max(sizes[:-third])}, last third {max(sizes[-third:])}), "
        f"{sizes[-1]} at the last sample, {settled} once the commits stopped; "
        f"{snapshots} producer snapshots after about {rolls} rolls"
    )


def _produce_updates(bootstrap: str, run: int, count: int, keys: int) -> dict[int, tuple]:
    """``count`` updates over ``keys`` keys; offset -> (key, value) as acknowledged."""
    # Small batches: a pass then has many pieces and swaps for a kill to land in.
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 4096}
    )
    acknowledged: dict[int, tuple] = {}
    errors = []

    def delivered(error, message) -> None:
        if error is not None:
            errors.append(error)
        else:
            acknowledged[message.offset()] = (message.key(), message.value())

    for update in range(count):
        key = b"key-%d" % (update % keys)
        value = None if update % 97 == 0 else b"run-%d-update-%d-%s" % (run, update, b"x" * 40)
        producer.produce("crashing", value, key, on_delivery=delivered)
        if update % 1000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0
    assert errors == []
    return acknowledged


def _cleaning_files(partition_dir: Path) -> set[str]:
    """The suffixes of a pass under way on disk: ``.cleaned`` (copying) or ``.swap``."""
    found = set()
    with contextlib.suppress(FileNotFoundError):
        for path in partition_dir.iterdir():
            found |= {suffix for suffix in (".cleaned", ".swap") if path.name.endswith(suffix)}
    return found


def test_a_broker_killed_while_cleaning_keeps_a_consistent_log(broker_factory) -> None:
    """SIGKILL at random moments while the cleaner works; after each restart the log reads
    as an unkilled one would: records only at their original offsets with their original
    values, each key's last value there, the log end unchanged. Two kills in three wait
    for the copy to start (a ``.cleaned`` file) and land a random moment after it (in the
    copy, a swap, or after the pass; the first at once); the third waits for a pass to
    complete and lands after it. The throttle makes a pass last a second or more.
    ``GREGOR_CLEANER_CRASH_RUNS`` sets the number of kills (the acceptance run: 20)."""
    runs = int(os.environ.get("GREGOR_CLEANER_CRASH_RUNS", "3"))
    rng = random.Random(int(os.environ.get("GREGOR_CLEANER_CRASH_SEED", "14")))
    properties = {
        "log.cleaner.backoff.ms": "100",
        "log.cleaner.io.max.bytes.per.second": "300000",
        "zookeeper.session.timeout.ms": "4000",
    }
    broker = broker_factory(**properties)
    bootstrap = broker.bootstrap
    create_topic(
        bootstrap,
        "crashing",
        config={
            "cleanup.policy": "compact",
            "segment.bytes": "8192",
            "segment.ms": "500",
            "min.cleanable.dirty.ratio": "0.01",
        },
    )
    written: dict[int, tuple] = {}
    landed = {"copy": 0, "swap": 0, "other": 0}
    partition_dir = broker.log_dir / "crashing-0"

    def check_consistent(run: int) -> None:
        end = max(written) + 1
        records = _read_with_librdkafka(bootstrap, end, "crashing")
        offsets = [offset for offset, _, _ in records]
        assert offsets == sorted(set(offsets)), run
        assert offsets[-1] == end - 1, run
        for offset, key, value in records:
            assert written[offset] == (key, value), (run, offset)
        last: dict[bytes, tuple] = {}
        for offset in sorted(written):
            last[written[offset][0]] = (offset, written[offset][1])
        # Every key's last record, tombstones included (delete.retention.ms is a day).
        assert {key: (offset, value) for offset, key, value in records} == last, run

    def passes() -> int:
        return broker.log_path.read_text().count("cleaned crashing-0")

    for run in range(runs):
        passes_before = passes()
        written.update(_produce_updates(bootstrap, run, 4000, 100))
        if run % 3 == 2:
            # A pass completes (the checkpoint moves, so later passes stay short); the kill
            # lands after it, in the next pass or while the cleaner waits.
            wait_for(lambda before=passes_before: passes() > before, timeout=90, interval=0.05)
            time.sleep(rng.uniform(0, 0.5))
        elif wait_for(
            lambda: ".cleaned" in _cleaning_files(partition_dir), timeout=60, interval=0.02
        ):
            # In the copy, a swap, or just after the pass (the first kill at once: mid-copy).
            time.sleep(rng.uniform(0, 1.5) if run else 0)
        broker.kill()
        on_disk = _cleaning_files(partition_dir)
        landed["swap" if ".swap" in on_disk else "copy" if on_disk else "other"] += 1
        broker.start()
        broker.wait_registered(60)
        check_consistent(run)
    passes_between_kills = passes()
    # Left alone (and unthrottled), the cleaner finishes: the log holds one record a key.
    broker.stop()
    del broker.properties["log.cleaner.io.max.bytes.per.second"]
    broker.start()
    broker.wait_registered(60)
    assert wait_for(lambda: passes() > passes_between_kills, 60)
    end = max(written) + 1
    assert wait_for(lambda: len(_read_with_librdkafka(bootstrap, end, "crashing")) == 100, 60)
    check_consistent(runs)
    print(
        f"{runs} kills: {landed['copy']} with a copy under way, {landed['swap']} in a swap, "
        f"{landed['other']} elsewhere; {passes_between_kills} passes completed between kills"
    )
    # The kills did land while the cleaner was writing its copy.
    assert landed["copy"] + landed["swap"] > 0, landed


def _describe(zk_connect: str, topic: str, *options: str) -> subprocess.CompletedProcess[str]:
    described = subprocess.run(
        [sys.executable, "-m", "gregor_broker.cli.main", "topics", "describe",
         "--zookeeper", zk_connect, "--topic", topic, *options],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert described.returncode == 0, (described.stdout, described.stderr)
    return described


def test_topics_describe_shows_the_dirty_ratio_falling_after_cleaning(
    broker_factory, zk_connect
) -> None:
    """``gregor topics describe`` reads the leader's ``gregor_log_cleaner_dirty_ratio``
    (no Kafka API carries it). Updates pile up on a cleaned log while
    ``min.cleanable.dirty.ratio`` (0.95) holds the cleaner back: the column shows a high
    ratio; once the topic allows cleaning (0.01) the cleaner runs and the column falls.

    The first batch is cleaned at 0.01, not at 0.95 with "no checkpoint yet, everything
    dirty": under load the cleaner's first pass came while that batch was still being
    produced (one segment closed), and what followed (0.80 dirty) stayed below 0.95 (CI)."""
    metrics_port = free_port()
    broker = broker_factory(**{"log.cleaner.backoff.ms": "200", "metrics.port": str(metrics_port)})
    topic = f"dirty-{os.urandom(4).hex()}"
    create_topic(
        broker.bootstrap,
        topic,
        config={
            "cleanup.policy": "compact",
            "segment.bytes": "16384",
            "min.cleanable.dirty.ratio": "0.01",
        },
    )
    # Small batches, so that segments roll every 16 KiB (a batch is never split).
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "batch.num.messages": 10}
    )

    def produce(count: int) -> None:
        for update in range(count):
            producer.produce(topic, b"v" * 200, b"key-%d" % (update % 100))
            if update % 500 == 0:
                producer.poll(0)
        assert producer.flush(60) == 0

    seen: list[float | None] = []

    def ratio() -> float | None:
        """The column's value now (also appended to ``seen``)."""
        rows = json.loads(
            _describe(
                zk_connect, topic, "--metrics-port", str(metrics_port), "--output", "json"
            ).stdout
        )
        seen.append(rows[0]["dirty_ratio"])
        return seen[-1]

    def set_min_cleanable_dirty_ratio(value: str) -> None:
        subprocess.run(
            [sys.executable, "-m", "gregor_broker.cli.main", "configs", "alter", "-b",
             broker.bootstrap, "--entity-type", "topics", "--entity-name", topic,
             "--add-config", f"min.cleanable.dirty.ratio={value}"],
            check=True, timeout=120,
        )  # fmt: skip

    # A first batch, cleaned down to about a record a key.
    produce(400)
    assert wait_for(
        lambda: (
            scrape(metrics_port).get("gregor_log_cleaner_passes_total", 0) >= 1
            and (r := ratio()) is not None
            and r < 0.5
        ),
        timeout=120,
    ), seen[-5:]
    # Then about five times that clean part in updates: dirty (at most 6/7), below 0.95,
    # left alone.
    set_min_cleanable_dirty_ratio("0.95")
    produce(600)
    assert wait_for(lambda: (r := ratio()) is not None and r >= 0.5, timeout=60), seen[-5:]
    high = seen[-1]
    text = _describe(zk_connect, topic, "--metrics-port", str(metrics_port)).stdout
    assert "DirtyRatio: " in text, text
    passes = scrape(metrics_port)["gregor_log_cleaner_passes_total"]
    # The topic now allows cleaning at 1% dirty: the cleaner cleans, the ratio falls.
    set_min_cleanable_dirty_ratio("0.01")
    assert wait_for(lambda: (r := ratio()) is not None and r < 0.2, timeout=120), seen[-5:]
    low = seen[-1]
    assert scrape(metrics_port)["gregor_log_cleaner_passes_total"] > passes
    print(f"dirty ratio {high:.2f} before cleaning, {low:.2f} after")
    # Without the brokers' endpoints there is no column (and no error).
    plain = _describe(zk_connect, topic, "--data-dir", "/nonexistent").stdout
    assert "DirtyRatio" not in plain, plain


def _children(pid: int) -> list[int]:
    """The processes ``pid`` started (its threads' children lists)."""
    found: list[int] = []
    with contextlib.suppress(FileNotFoundError, ProcessLookupError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(FileNotFoundError, ProcessLookupError):
                found += [int(child) for child in (task / "children").read_text().split()]
    return found


def _alive(pid: int) -> bool:
    """Running, as opposed to gone or a zombie nobody reaped yet."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _cleaner_worker(broker_pid: int) -> int | None:
    for child in _children(broker_pid):
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):
            if b"spawn_main" in Path(f"/proc/{child}/cmdline").read_bytes():
                return child
    return None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_cleaner_worker_is_background_work_and_dies_with_a_killed_broker(
    broker_factory,
) -> None:
    """With ``log.cleaner.worker.nice`` the worker process runs niced under SCHED_BATCH,
    and a SIGKILLed broker takes it along: it does not finish its pass (here throttled to
    a minute or more) on a core of its own after the broker is gone."""
    broker = broker_factory(
        **{
            "log.cleaner.backoff.ms": "100",
            "log.cleaner.io.max.bytes.per.second": "4000",
            "log.cleaner.worker.nice": "19",
        }
    )
    create_topic(
        broker.bootstrap,
        "crashing",
        config={"cleanup.policy": "compact", "segment.bytes": "8192", "segment.ms": "500",
                "min.cleanable.dirty.ratio": "0.01"},
    )  # fmt: skip
    _produce_updates(broker.bootstrap, 0, 3000, 100)
    # The pool starts its worker for the first pass, which the throttle makes long.
    assert broker.pid is not None
    assert wait_for(lambda: _cleaner_worker(broker.pid) is not None, timeout=60)
    worker = _cleaner_worker(broker.pid)
    assert worker is not None
    assert wait_for(lambda: os.getpriority(os.PRIO_PROCESS, worker) == 19, timeout=30)
    assert os.sched_getscheduler(worker) == os.SCHED_BATCH
    assert "cleaned crashing-0" not in broker.log_path.read_text()  # still mid-pass
    others = [pid for pid in _children(broker.pid) if pid != worker]

    broker.kill()
    assert wait_for(lambda: not _alive(worker), timeout=15), "the worker outlived the broker"
    # The resource tracker the spawn context started goes once the worker has.
    assert wait_for(lambda: not any(_alive(pid) for pid in others), timeout=15), others
