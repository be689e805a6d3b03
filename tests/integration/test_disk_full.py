"""A full disk: producers get KAFKA_STORAGE_ERROR, the log dir goes offline, leadership moves.

Issue 9, F8: ENOSPC on append closed the producer's connection, so clients saw transport
errors and timeouts. Kafka answers KAFKA_STORAGE_ERROR for the partition, takes the log
dir offline (its partitions' leadership moves to healthy replicas) and shuts the broker
down when no log dir is left.

The disk really fills: broker 1's log dir is a small tmpfs mounted for the test. Where
mounting is not allowed (no CAP_SYS_ADMIN), the broker runs under ``prlimit --fsize``
instead, so a segment file that grows past the limit gets a real EFBIG from write(2)
(CPython ignores SIGXFSZ): the same OSError path, injected at the OS boundary.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import confluent_kafka
import confluent_kafka.admin
import pytest

from .broker_helpers import every_broker_knows_the_others, wait_for
from .durability import lost_messages

DISK_BYTES = 3 * 1024 * 1024
SEGMENT_BYTES = 1024 * 1024
# The fallback limits each file, so it must be below a segment's size to be reached.
FILE_SIZE_LIMIT = SEGMENT_BYTES // 2
VALUE_BYTES = 32 * 1024
TOPIC = "full"


@dataclass
class SmallDisk:
    """A log dir that fills after about ``DISK_BYTES``."""

    path: Path
    command_prefix: tuple[str, ...]
    how: str


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[SmallDisk]:
    path = tmp_path / "small-disk"
    path.mkdir()
    # GREGOR_TEST_SMALL_DISK=rlimit checks the fallback on a machine that could mount.
    if os.environ.get("GREGOR_TEST_SMALL_DISK") == "rlimit":
        mounted = subprocess.CompletedProcess([], 1, b"", b"tmpfs not wanted")
    else:
        mounted = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={DISK_BYTES}", "tmpfs", str(path)],
            capture_output=True,
            check=False,
        )
    if mounted.returncode == 0:
        try:
            yield SmallDisk(path, (), "tmpfs")
        finally:
            subprocess.run(["umount", "-l", str(path)], check=False)
        return
    if shutil.which("prlimit") is None:
        pytest.skip(
            f"cannot mount a tmpfs ({mounted.stderr.decode().strip()}) and no prlimit "
            "to limit file sizes: no way to fill a disk here"
        )
    yield SmallDisk(path, ("prlimit", f"--fsize={FILE_SIZE_LIMIT}", "--"), "RLIMIT_FSIZE")


def _create_topic(bootstrap: str, partitions: int) -> None:
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    topic = confluent_kafka.admin.NewTopic(
        TOPIC,
        partitions,
        replica_assignment=[[1, 2, 3]] * partitions,
        config={"min.insync.replicas": "2", "segment.bytes": str(SEGMENT_BYTES)},
    )
    for future in admin.create_topics([topic], operation_timeout=30).values():
        future.result(60)


def _leader(bootstrap: str, partition: int) -> tuple[int, list[int]]:
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    metadata = admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions[partition]
    return metadata.leader, sorted(metadata.isrs)


class FillingProducer:
    """Writes big numbered values to one partition (acks=all, no retries, so a broker's
    error reaches the application as it is) until KAFKA_STORAGE_ERROR comes back."""

    def __init__(self, bootstrap: str, partition: int) -> None:
        self.partition = partition
        self.acknowledged: dict[bytes, tuple[int, int]] = {}
        self.errors: list[confluent_kafka.KafkaError] = []
        self.producer = confluent_kafka.Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "message.send.max.retries": 0,
                "enable.idempotence": False,
                "linger.ms": 5,
                "message.timeout.ms": 30000,
            }
        )

    def _delivered(self, error, message) -> None:
        if error is None:
            self.acknowledged[message.value()] = (message.partition(), message.offset())
        else:
            self.errors.append(error)

    def storage_error_seen(self) -> bool:
        return any(e.code() == confluent_kafka.KafkaError.KAFKA_STORAGE_ERROR for e in self.errors)

    def fill(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        sent = 0
        while not self.storage_error_seen() and time.monotonic() < deadline:
            value = f"{self.partition}-{sent:06d}-".encode().ljust(VALUE_BYTES, b"x")
            self.producer.produce(
                TOPIC, value, partition=self.partition, on_delivery=self._delivered
            )
            sent += 1
            self.producer.poll(0.02)
        self.producer.flush(30)


def _assert_nothing_lost(bootstrap: str, acknowledged: dict[bytes, tuple[int, int]]) -> None:
    assert acknowledged, "nothing was acknowledged before the disk filled"
    assert lost_messages(acknowledged, bootstrap, TOPIC) == []


def _broker_log(broker) -> str:
    return broker.log_path.read_text(errors="replace")


def test_a_full_disk_answers_storage_error_and_the_broker_hands_over_and_stops(
    broker_factory, small_disk
) -> None:
    full = broker_factory(
        1, command_prefix=small_disk.command_prefix, **{"log.dirs": str(small_disk.path)}
    )
    others = [broker_factory(2), broker_factory(3)]
    assert every_broker_knows_the_others((full, *others))
    bootstrap = ",".join(b.bootstrap for b in (full, *others))
    healthy = ",".join(b.bootstrap for b in others)
    _create_topic(bootstrap, partitions=1)
    assert wait_for(lambda: _leader(bootstrap, 0) == (1, [1, 2, 3]), 30)

    producer = FillingProducer(bootstrap, 0)
    producer.fill(timeout=90)
    assert producer.storage_error_seen(), (small_disk.how, producer.errors[:5])
    # Only the storage error or errors of a broker going away; never a corrupt answer.
    assert len(producer.acknowledged) > 10

    # Its only log dir failed: broker 1 hands its leadership over and exits with status 1.
    assert wait_for(lambda: not full.is_running(), 60), "broker 1 kept running without a log dir"
    assert full.process.returncode == 1
    assert "every log dir has failed" in _broker_log(full)
    assert wait_for(lambda: _leader(healthy, 0)[0] in (2, 3), 30)
    _assert_nothing_lost(healthy, producer.acknowledged)


def test_a_failed_log_dir_moves_its_partitions_and_the_broker_keeps_the_others(
    broker_factory, small_disk, tmp_path
) -> None:
    roomy = tmp_path / "roomy-disk"
    full = broker_factory(
        1,
        command_prefix=small_disk.command_prefix,
        **{"log.dirs": f"{small_disk.path},{roomy}"},
    )
    others = [broker_factory(2), broker_factory(3)]
    assert every_broker_knows_the_others((full, *others))
    bootstrap = ",".join(b.bootstrap for b in (full, *others))
    _create_topic(bootstrap, partitions=2)
    assert wait_for(lambda: all(_leader(bootstrap, p) == (1, [1, 2, 3]) for p in (0, 1)), 30)
    on_small = [p for p in (0, 1) if (small_disk.path / f"{TOPIC}-{p}").is_dir()]
    assert len(on_small) == 1, "one partition per log dir (the one holding fewer)"
    failing, surviving = on_small[0], 1 - on_small[0]

    producer = FillingProducer(bootstrap, failing)
    producer.fill(timeout=90)
    assert producer.storage_error_seen(), (small_disk.how, producer.errors[:5])

    # The failed dir's partition gets another leader and loses broker 1 from its ISR ...
    def moved() -> bool:
        leader, isr = _leader(bootstrap, failing)
        return leader in (2, 3) and 1 not in isr

    assert wait_for(moved, 30), _leader(bootstrap, failing)
    # ... while broker 1 keeps running and leading the partition on its healthy dir.
    assert full.is_running()
    assert _leader(bootstrap, surviving) == (1, [1, 2, 3])
    survivor = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    delivered: list[tuple[object, int]] = []
    for i in range(20):
        survivor.produce(
            TOPIC,
            f"survivor-{i}".encode(),
            partition=surviving,
            on_delivery=lambda e, m: delivered.append((e, m.offset())),
        )
    assert survivor.flush(30) == 0
    assert [e for e, _ in delivered if e is not None] == []
    # Writes to the moved partition go to its new leader and are acknowledged.
    mover = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    moved_acks: dict[bytes, tuple[int, int]] = {}

    def record(error, message) -> None:
        assert error is None, error
        moved_acks[message.value()] = (message.partition(), message.offset())

    for i in range(20):
        mover.produce(TOPIC, f"after-{i}".encode(), partition=failing, on_delivery=record)
    assert mover.flush(30) == 0
    assert len(moved_acks) == 20
    _assert_nothing_lost(bootstrap, {**producer.acknowledged, **moved_acks})
    with contextlib.suppress(Exception):
        assert "is offline after" in _broker_log(full)
