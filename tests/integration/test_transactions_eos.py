"""Exactly-once consume-transform-produce (issue 15's acceptance): a loop in its own
process (``txn_eos_loop.py``: read_committed consumer, transactional producer,
``send_offsets_to_transaction``) processes an input topic while it is SIGKILLed at random
moments and started again; afterwards a read_committed consumer of the output sees every
input record exactly once.

make test runs it once (about 40 s); ``GREGOR_LONG_TESTS=1`` (``make test-long``) runs it
with 5 more seeds (kill moments). Figures: docs/transactions.md.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import confluent_kafka
import pytest

from .broker_helpers import create_topic
from .txn_client_helpers import SINGLE_BROKER_PROPERTIES, read_all

LOOP = Path(__file__).with_name("txn_eos_loop.py")
PARTITIONS = 3


def _produce_input(bootstrap: str, topic: str, count: int) -> set[bytes]:
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 20}
    )
    values = set()
    for i in range(count):
        value = f"in-{i:06d}".encode()
        values.add(value)
        while True:
            try:
                producer.produce(topic, value, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(120) == 0
    return values


def _group_offsets(bootstrap: str, topic: str) -> int:
    """How many input records the loop's group has committed (sum of its offsets)."""
    # read_uncommitted: no require_stable, so pending offsets of a killed incarnation's
    # open transaction do not hold the answer back (the last committed ones come).
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "eos-loop-group",
            "enable.auto.commit": False,
            "isolation.level": "read_uncommitted",
        }
    )
    try:
        found = consumer.committed(
            [confluent_kafka.TopicPartition(topic, p) for p in range(PARTITIONS)], 30
        )
    finally:
        consumer.close()
    return sum(max(tp.offset, 0) for tp in found)


def _start_loop(bootstrap: str, log: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(LOOP), bootstrap, "eos-in", "eos-out", str(PARTITIONS)],
        stdout=subprocess.PIPE,
        stderr=log.open("ab"),
        text=True,
    )


def _run(broker_factory, tmp_path: Path, records: int, kills: int, seed: int) -> None:
    rng = random.Random(seed)
    broker = broker_factory(timeout=90, **SINGLE_BROKER_PROPERTIES)
    bootstrap = broker.bootstrap
    create_topic(bootstrap, "eos-in", partitions=PARTITIONS)
    create_topic(bootstrap, "eos-out", partitions=PARTITIONS)
    expected = {b"out:" + value for value in _produce_input(bootstrap, "eos-in", records)}
    log = tmp_path / "loop.stderr"
    killed = 0
    crashed: list[int] = []
    started = time.monotonic()
    while killed < kills:
        process = _start_loop(bootstrap, log)
        assert process.stdout is not None
        # Kill after a random number of commits of this incarnation, a random moment
        # later: mid-transaction, mid-commit or between transactions.
        commits_before_kill = rng.randint(1, 25)
        commits = 0
        try:
            for line in process.stdout:
                if line.startswith("committed"):
                    commits += 1
                    if commits >= commits_before_kill:
                        break
            if process.poll() is None:
                time.sleep(rng.uniform(0.0, 0.3))
                process.send_signal(signal.SIGKILL)
                killed += 1
            else:
                crashed.append(process.returncode)
        finally:
            process.kill()
            process.wait()
        done = _group_offsets(bootstrap, "eos-in")
        assert done < records, f"all input processed after {killed} kills: use more records"
        assert len(crashed) <= 3, f"the loop crashed: {crashed}; {log.read_text()[-3000:]}"
    # The last incarnation runs to the end of the input.
    process = _start_loop(bootstrap, log)
    try:
        deadline = time.monotonic() + 600
        while _group_offsets(bootstrap, "eos-in") < records:
            assert process.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, "the loop did not finish the input"
            time.sleep(1.0)
    finally:
        process.kill()
        process.wait()
    elapsed = time.monotonic() - started
    seen = read_all(bootstrap, "eos-out", PARTITIONS, settle_s=5.0, timeout=300)
    values = [value for partition in seen.values() for value in partition]
    print(f"eos: {records} records, {killed} kills, {len(crashed)} crashes, {elapsed:.1f} s")
    assert killed == kills
    assert len(values) == records, (len(values), len(set(values)))
    assert set(values) == expected
    # Each output partition holds its input partition's records in input order.
    for partition, partition_values in seen.items():
        numbers = [int(value.split(b"-")[1]) for value in partition_values]
        assert numbers == sorted(numbers), partition
        assert all(n % PARTITIONS == partition for n in numbers)
    assert _group_offsets(bootstrap, "eos-in") == records


def test_consume_transform_produce_100k_exactly_once_across_5_kills(broker_factory, tmp_path):
    _run(broker_factory, tmp_path, records=100_000, kills=5, seed=100)


@pytest.mark.long
@pytest.mark.parametrize("seed", range(5))
def test_consume_transform_produce_exactly_once_more_kill_moments(broker_factory, tmp_path, seed):
    _run(broker_factory, tmp_path, records=100_000, kills=5, seed=seed)
