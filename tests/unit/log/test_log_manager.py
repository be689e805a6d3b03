"""LogManager: loading log dirs, checkpoints, meta.properties, clean shutdown, deletion."""

from __future__ import annotations

import contextlib
import errno
import os
import resource
import threading

import pytest
from log_helpers import FakeClock, batch, consume_offsets, produce

from gregor_broker.log import InconsistentBrokerMetadata, LogConfig, LogManager, log_manager
from gregor_broker.log.log_manager import CLEAN_SHUTDOWN_FILE, LogDirOffline
from gregor_broker.log.partition_log import log_delete_dir_name

ONE = batch(1, value_size=100)
CONFIG = LogConfig(segment_bytes=3 * len(ONE))


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def manager(tmp_path, clock, dirs=("d1",)) -> LogManager:
    return LogManager([tmp_path / d for d in dirs], default_config=CONFIG, now_ms=clock)


def test_new_logs_go_to_the_log_dir_with_fewest_partitions(tmp_path, clock):
    logs = manager(tmp_path, clock, dirs=("d1", "d2"))
    for partition in range(4):
        logs.get_or_create("orders", partition, CONFIG)
    assert sorted(p.name for p in (tmp_path / "d1").iterdir()) == ["orders-0", "orders-2"]
    assert sorted(p.name for p in (tmp_path / "d2").iterdir()) == ["orders-1", "orders-3"]
    assert logs.get_or_create("orders", 0, CONFIG) is logs.get("orders", 0)
    assert logs.get("orders", 9) is None
    assert set(logs.logs()) == {("orders", p) for p in range(4)}


def test_checkpoint_writes_kafkas_three_files(tmp_path, clock):
    logs = manager(tmp_path, clock)
    log = logs.get_or_create("orders", 0, CONFIG)
    for _ in range(5):
        produce(log, ONE)
    log.flush(3)
    log.delete_records_before(1)
    logs.checkpoint()
    d1 = tmp_path / "d1"
    assert (d1 / "recovery-point-offset-checkpoint").read_text() == "0\n1\norders 0 3\n"
    assert (d1 / "log-start-offset-checkpoint").read_text() == "0\n1\norders 0 1\n"
    assert (d1 / "replication-offset-checkpoint").read_text() == "0\n1\norders 0 5\n"


def test_clean_close_writes_the_marker_and_restart_skips_recovery(tmp_path, clock):
    logs = manager(tmp_path, clock)
    log = logs.get_or_create("orders", 0, CONFIG)
    for _ in range(7):
        produce(log, ONE)
    log.delete_records_before(4)
    logs.close()
    assert (tmp_path / "d1" / ".kafka_cleanshutdown").exists()

    again = manager(tmp_path, clock)
    again.load(lambda topic: CONFIG)
    assert not (tmp_path / "d1" / ".kafka_cleanshutdown").exists()
    reopened = again.get("orders", 0)
    assert (reopened.log_start_offset, reopened.log_end_offset) == (4, 7)
    assert reopened.recovery_point == 7
    assert consume_offsets(reopened, 4) == [4, 5, 6]


def test_load_after_a_crash_recovers_from_the_checkpointed_recovery_point(tmp_path, clock):
    logs = manager(tmp_path, clock)
    log = logs.get_or_create("orders", 0, CONFIG)
    for _ in range(7):
        produce(log, ONE)
    log.flush()
    logs.checkpoint()
    with open(tmp_path / "d1" / "orders-0" / "00000000000000000006.log", "ab") as file:
        file.write(ONE[:30])  # torn write, no clean marker
    again = manager(tmp_path, clock)
    again.load(lambda topic: CONFIG)
    assert again.get("orders", 0).log_end_offset == 7
    assert again.get("orders", 0).high_watermark == 7


def test_load_ignores_foreign_directories_and_finishes_pending_deletes(tmp_path, clock):
    (tmp_path / "d1" / "orders-0.4f1c-delete").mkdir(parents=True)
    (tmp_path / "d1" / "lost+found").mkdir()
    logs = manager(tmp_path, clock)
    logs.load(lambda topic: CONFIG)
    assert logs.logs() == {}
    assert not (tmp_path / "d1" / "orders-0.4f1c-delete").exists()


def test_load_uses_the_topic_config(tmp_path, clock):
    (tmp_path / "d1" / "a-0").mkdir(parents=True)
    logs = manager(tmp_path, clock)
    special = LogConfig(retention_ms=5)
    logs.load(lambda topic: special)
    assert logs.get("a", 0).config is special


def test_meta_properties_is_written_in_kafkas_format(tmp_path, clock):
    logs = manager(tmp_path, clock, dirs=("d1", "d2"))
    logs.write_meta_properties(3, "abcDEF123")
    for d in ("d1", "d2"):
        text = (tmp_path / d / "meta.properties").read_text()
        lines = [line for line in text.splitlines() if not line.startswith("#")]
        assert lines == ["version=0", "broker.id=3", "cluster.id=abcDEF123"]
    logs.write_meta_properties(3, "abcDEF123")  # same identity: fine


def test_meta_properties_of_another_cluster_or_broker_is_refused(tmp_path, clock):
    manager(tmp_path, clock).write_meta_properties(3, "cluster-a")
    with pytest.raises(InconsistentBrokerMetadata, match=r"cluster\.id=cluster-a"):
        manager(tmp_path, clock).write_meta_properties(3, "cluster-b")
    with pytest.raises(InconsistentBrokerMetadata, match=r"broker\.id=3"):
        manager(tmp_path, clock).write_meta_properties(4, "cluster-a")


def test_load_writes_meta_properties_into_new_log_dirs_once_identity_is_known(tmp_path, clock):
    logs = manager(tmp_path, clock, dirs=("d1",))
    logs.write_meta_properties(1, "c")
    (tmp_path / "d1" / "meta.properties").unlink()
    logs.load(lambda topic: CONFIG)
    assert "broker.id=1" in (tmp_path / "d1" / "meta.properties").read_text()


def test_delete_log_removes_the_partition_and_reaps_descriptors_later(tmp_path, clock):
    logs = manager(tmp_path, clock)
    log = logs.get_or_create("orders", 0, LogConfig(file_delete_delay_ms=1000))
    produce(log, ONE)
    log.read(0, 1000)
    logs.delete_log("orders", 0)
    assert logs.get("orders", 0) is None
    logs.wait_for_removals()  # the rename happens on the remover thread
    assert not (tmp_path / "d1" / "orders-0").exists()
    clock.advance(1000)
    logs.run_retention()
    assert logs._deleted == []
    logs.close()  # waits for the remover thread
    assert [p.name for p in (tmp_path / "d1").iterdir() if p.is_dir()] == []


def test_a_249_character_topic_is_deletable_on_disk(tmp_path, clock):
    # Matches Kafka's logDeleteDirName: the topic part of the "-delete" name is cut so
    # the directory name stays within 255 bytes.
    topic = "t" * 249
    logs = manager(tmp_path, clock)
    log = logs.get_or_create(topic, 7, CONFIG)
    produce(log, ONE)
    logs.delete_log(topic, 7)
    logs.close()
    assert [p.name for p in (tmp_path / "d1").iterdir() if p.is_dir()] == []


def test_delete_dir_name_fits_in_255_bytes_and_keeps_the_partition():
    name = log_delete_dir_name("x" * 249, 123)
    assert len(name.encode()) == 255
    assert name.endswith("-delete") and "-123." in name
    assert log_delete_dir_name("orders", 0).startswith("orders-0.")


def test_run_retention_and_flush_due_cover_every_log(tmp_path, clock):
    logs = manager(tmp_path, clock)
    config = LogConfig(segment_bytes=len(ONE), retention_ms=1000, flush_ms=10)
    for partition in range(2):
        log = logs.get_or_create("t", partition, config)
        produce(log, batch(1, timestamp=clock.now - 10_000, value_size=100))
        produce(log, batch(1, timestamp=clock.now, value_size=100))
    assert logs.run_retention() == 2
    clock.advance(10)
    logs.flush_due()
    assert all(log.recovery_point == 2 for log in logs.logs().values())


@contextlib.contextmanager
def file_size_limit(limit: int):
    """A real write(2) failure: RLIMIT_FSIZE makes writes past ``limit`` bytes fail with
    EFBIG (CPython ignores SIGXFSZ). Only for the duration of the block."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))


def test_a_write_error_takes_the_whole_log_dir_offline(tmp_path, clock):
    logs = manager(tmp_path, clock, dirs=("d1", "d2"))
    failed: list[tuple[object, list[tuple[str, int]]]] = []
    logs.dir_failure_listeners.append(lambda d, keys: failed.append((d, keys)))
    log = logs.get_or_create("orders", 0, CONFIG)  # d1
    logs.get_or_create("orders", 1, CONFIG)  # d2
    logs.get_or_create("orders", 2, CONFIG)  # d1
    produce(log, ONE)
    size = log.active_segment.size
    with file_size_limit(size + len(ONE) // 2), pytest.raises(OSError) as error:
        produce(log, ONE)
    assert error.value.errno == errno.EFBIG
    assert log.active_segment.size == size  # the half-written batch was cut off
    logs.failed_on(("orders", 0), error.value)

    assert failed == [(tmp_path / "d1", [("orders", 0), ("orders", 2)])]
    assert logs.live_dirs == [tmp_path / "d2"]
    assert logs.is_offline(("orders", 0)) and logs.is_offline(("orders", 2))
    assert set(logs.logs()) == {("orders", 1)}
    with pytest.raises(LogDirOffline):
        logs.get_or_create("orders", 0, CONFIG)  # never recreated on the healthy dir
    logs.get_or_create("orders", 3, CONFIG)
    assert (tmp_path / "d2" / "orders-3").is_dir()
    logs.close()
    # The failed dir is not marked clean: the next start recovers it.
    assert not (tmp_path / "d1" / CLEAN_SHUTDOWN_FILE).exists()
    assert (tmp_path / "d2" / CLEAN_SHUTDOWN_FILE).exists()

    reopened = manager(tmp_path, clock, dirs=("d1", "d2"))
    reopened.load(lambda topic: CONFIG)
    assert consume_offsets(reopened.get("orders", 0)) == [0]
    reopened.close()


def test_with_every_log_dir_failed_nothing_can_be_created(tmp_path, clock):
    logs = manager(tmp_path, clock)
    logs.get_or_create("orders", 0, CONFIG)
    logs.log_dir_failed(tmp_path / "d1", OSError(errno.ENOSPC, "No space left on device"))
    assert logs.live_dirs == []
    with pytest.raises(LogDirOffline):
        logs.get_or_create("orders", 1, CONFIG)


@pytest.fixture
def slow_remover(monkeypatch):
    """The remover threads wait for ``open`` before doing the removal (a file system
    busy for seconds, as under heavy disk I/O), which then runs for real."""
    gate = threading.Event()
    real = log_manager.remove_partition_files

    def held(*args):
        assert gate.wait(30)
        real(*args)

    monkeypatch.setattr(log_manager, "remove_partition_files", held)
    yield gate
    gate.set()


def test_deleting_a_partition_does_not_wait_for_the_file_system(tmp_path, clock, slow_remover):
    # Under heavy disk I/O the rename alone held the broker's event loop for seconds
    # (the fuzz campaign's "another client waited 1-10 s" while topics were deleted).
    logs = manager(tmp_path, clock)
    produce(logs.get_or_create("orders", 0, CONFIG), ONE)
    logs.delete_log("orders", 0)
    assert logs.get("orders", 0) is None
    assert (tmp_path / "d1" / "orders-0").exists()  # the remover has not got to it
    slow_remover.set()
    logs.wait_for_removals()
    assert not (tmp_path / "d1" / "orders-0").exists()
    logs.close()
    assert [p.name for p in (tmp_path / "d1").iterdir() if p.is_dir()] == []


def test_a_partition_created_again_at_once_starts_empty(tmp_path, clock, slow_remover):
    logs = manager(tmp_path, clock)
    produce(logs.get_or_create("orders", 0, CONFIG), ONE)
    logs.delete_log("orders", 0)
    threading.Timer(0.2, slow_remover.set).start()
    again = logs.get_or_create("orders", 0, CONFIG)  # waits for the old directory to go
    assert again.log_end_offset == 0
    produce(again, ONE)
    logs.close()
    (left,) = [p.name for p in (tmp_path / "d1").iterdir() if p.is_dir()]
    assert left == "orders-0"


def test_a_failed_removal_takes_the_log_dir_offline_at_the_next_periodic_job(
    tmp_path, clock, monkeypatch
):
    def failing(directory, renamed, descriptors):
        for fd in descriptors:
            os.close(fd)
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(log_manager, "remove_partition_files", failing)
    logs = manager(tmp_path, clock)
    logs.get_or_create("orders", 0, CONFIG)
    logs.get_or_create("orders", 1, CONFIG)
    logs.delete_log("orders", 0)
    logs.wait_for_removals()
    assert logs.offline_dirs == {}  # the thread only recorded it
    logs.run_retention()
    assert tmp_path / "d1" in logs.offline_dirs
    assert logs.is_offline(("orders", 1))
    logs.close()
    assert not (tmp_path / "d1" / CLEAN_SHUTDOWN_FILE).exists()
