"""Start-up: restart keeps offsets; recovery cuts torn or corrupt tails and rebuilds indexes."""

from __future__ import annotations

import os

import pytest
from log_helpers import FakeClock, batch, consume_offsets, produce, slice_headers

from gregor_broker.log import LogConfig, PartitionLog

ONE = batch(1, value_size=100)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def config(**overrides) -> LogConfig:
    overrides.setdefault("segment_bytes", 3 * len(ONE))
    overrides.setdefault("index_interval_bytes", 1)
    return LogConfig(**overrides)


def crash(log: PartitionLog) -> None:
    """Drop the log as SIGKILL would: no flush, no close (the page cache survives)."""
    for segment in log._segments:
        segment.close_fd()


def reopen(tmp_path, clock, **kwargs) -> PartitionLog:
    return PartitionLog.open(tmp_path / "t-0", config(), now_ms=clock, **kwargs)


def fill(tmp_path, clock, count: int) -> PartitionLog:
    log = PartitionLog.open(tmp_path / "t-0", config(), now_ms=clock)
    for _ in range(count):
        produce(log, ONE)
    return log


def segment_path(tmp_path, base: int, suffix: str = ".log"):
    return tmp_path / "t-0" / f"{base:020d}{suffix}"


def test_clean_restart_preserves_offsets_and_segments(tmp_path, clock):
    log = fill(tmp_path, clock, 8)
    log.close()
    reopened = reopen(tmp_path, clock, had_clean_shutdown=True, recovery_point=8)
    assert reopened.segment_base_offsets == [0, 3, 6]
    assert reopened.log_end_offset == 8
    assert consume_offsets(reopened) == list(range(8))
    assert produce(reopened, ONE).first_offset == 8


def test_restart_after_a_crash_keeps_every_complete_batch(tmp_path, clock):
    log = fill(tmp_path, clock, 8)
    crash(log)
    reopened = reopen(tmp_path, clock)
    assert reopened.log_end_offset == 8
    assert consume_offsets(reopened) == list(range(8))


def test_torn_last_batch_is_truncated_on_recovery(tmp_path, clock):
    log = fill(tmp_path, clock, 5)
    crash(log)
    path = segment_path(tmp_path, 3)
    with open(path, "ab") as file:
        file.write(ONE[: len(ONE) // 2])  # a write cut short by the kill
    reopened = reopen(tmp_path, clock, recovery_point=3)
    assert reopened.log_end_offset == 5
    assert path.stat().st_size == 2 * len(ONE)
    assert produce(reopened, ONE).first_offset == 5
    assert consume_offsets(reopened) == list(range(6))


def test_torn_batch_header_is_truncated_on_recovery(tmp_path, clock):
    log = fill(tmp_path, clock, 4)
    crash(log)
    with open(segment_path(tmp_path, 3), "ab") as file:
        file.write(ONE[:20])
    assert reopen(tmp_path, clock).log_end_offset == 4


def test_garbage_tail_is_truncated_on_recovery(tmp_path, clock):
    log = fill(tmp_path, clock, 4)
    crash(log)
    with open(segment_path(tmp_path, 3), "ab") as file:
        file.write(os.urandom(500))
    reopened = reopen(tmp_path, clock)
    assert reopened.log_end_offset == 4
    assert segment_path(tmp_path, 3).stat().st_size == len(ONE)


def test_zero_filled_tail_is_truncated_on_recovery(tmp_path, clock):
    log = fill(tmp_path, clock, 2)
    crash(log)
    with open(segment_path(tmp_path, 0), "ab") as file:
        file.write(bytes(4096))  # what a filesystem shows for unwritten blocks
    assert reopen(tmp_path, clock).log_end_offset == 2


def test_corrupt_batch_truncates_its_segment_and_deletes_later_segments(tmp_path, clock):
    log = fill(tmp_path, clock, 8)
    crash(log)
    path = segment_path(tmp_path, 3)
    data = bytearray(path.read_bytes())
    data[len(ONE) + 70] ^= 0xFF  # inside the CRC-covered body of offset 4
    path.write_bytes(bytes(data))
    reopened = reopen(tmp_path, clock, recovery_point=2)
    assert reopened.log_end_offset == 4
    assert reopened.segment_base_offsets == [0, 3]
    assert not segment_path(tmp_path, 6).exists()
    assert not segment_path(tmp_path, 6, ".index").exists()
    assert consume_offsets(reopened) == [0, 1, 2, 3]


def test_segments_below_the_recovery_point_are_not_rescanned(tmp_path, clock):
    log = fill(tmp_path, clock, 8)
    crash(log)
    path = segment_path(tmp_path, 0)
    data = bytearray(path.read_bytes())
    data[70] ^= 0xFF  # corruption recovery will not look at
    path.write_bytes(bytes(data))
    reopened = reopen(tmp_path, clock, recovery_point=6)
    assert reopened.log_end_offset == 8
    assert reopened.segment_base_offsets == [0, 3, 6]


def test_missing_index_files_are_rebuilt(tmp_path, clock):
    log = fill(tmp_path, clock, 8)
    log.close()
    segment_path(tmp_path, 0, ".index").unlink()
    segment_path(tmp_path, 3, ".timeindex").unlink()
    segment_path(tmp_path, 6, ".index").unlink()
    reopened = reopen(tmp_path, clock, had_clean_shutdown=True)
    assert reopened.log_end_offset == 8
    for offset in range(8):
        assert slice_headers(reopened.read(offset, 1))[0].base_offset == offset
    assert reopened.offset_for_timestamp(0) == (0, 1000)
    assert segment_path(tmp_path, 0, ".index").stat().st_size > 0


def test_corrupt_index_file_is_rebuilt(tmp_path, clock):
    log = fill(tmp_path, clock, 8)
    log.close()
    segment_path(tmp_path, 0, ".index").write_bytes(b"\x00\x00\x00\x09\x7f\x00\x00\x00")
    segment_path(tmp_path, 3, ".index").write_bytes(b"\x01\x02\x03")  # not whole entries
    reopened = reopen(tmp_path, clock, had_clean_shutdown=True)
    for offset in range(8):
        assert slice_headers(reopened.read(offset, 1))[0].base_offset == offset


def test_stale_index_entries_beyond_a_truncated_log_are_dropped(tmp_path, clock):
    log = fill(tmp_path, clock, 3)
    log.flush()
    crash(log)
    os.truncate(segment_path(tmp_path, 0), len(ONE) + 10)
    reopened = reopen(tmp_path, clock)
    assert reopened.log_end_offset == 1
    assert produce(reopened, ONE).first_offset == 1
    assert consume_offsets(reopened) == [0, 1]


def test_clean_marker_with_a_torn_tail_still_recovers(tmp_path, clock):
    log = fill(tmp_path, clock, 2)
    log.close()
    with open(segment_path(tmp_path, 0), "ab") as file:
        file.write(ONE[:80])
    reopened = reopen(tmp_path, clock, had_clean_shutdown=True)
    assert reopened.log_end_offset == 2


def test_leftover_files_of_interrupted_operations_are_removed(tmp_path, clock):
    log = fill(tmp_path, clock, 1)
    log.close()
    (tmp_path / "t-0" / "00000000000000000000.log.deleted").write_bytes(b"x")
    (tmp_path / "t-0" / "00000000000000000099.index").write_bytes(b"")
    reopen(tmp_path, clock, had_clean_shutdown=True)
    names = sorted(p.name for p in (tmp_path / "t-0").iterdir())
    assert names == [
        "00000000000000000000.index",
        "00000000000000000000.log",
        "00000000000000000000.timeindex",
    ]


def test_log_start_offset_is_restored_from_the_checkpoint(tmp_path, clock):
    log = fill(tmp_path, clock, 5)
    log.delete_records_before(4)
    log.close()
    reopened = reopen(tmp_path, clock, had_clean_shutdown=True, log_start_offset=4)
    assert reopened.log_start_offset == 4
    assert consume_offsets(reopened, 4) == [4]


def test_leader_epochs_beyond_the_recovered_end_are_dropped(tmp_path, clock):
    log = PartitionLog.open(tmp_path / "t-0", config(), now_ms=clock)
    produce(log, ONE, leader_epoch=1)
    produce(log, ONE, leader_epoch=2)
    crash(log)
    os.truncate(segment_path(tmp_path, 0), len(ONE) + 5)
    reopened = reopen(tmp_path, clock)
    assert reopened.leader_epoch_cache.entries() == [(1, 0)]
    assert reopened.leader_epoch_cache.end_offset_for(1) == (1, 1)


def test_a_log_in_a_new_directory_starts_as_an_empty_loaded_one(tmp_path, clock) -> None:
    """A brand-new directory skips the recovery scans (topic creation at scale); the log
    must be the same as one loaded from an existing empty directory, and work alike."""
    (tmp_path / "old-0").mkdir()
    loaded = PartitionLog.open(tmp_path / "old-0", config(), now_ms=clock)
    fresh = PartitionLog.open(tmp_path / "new-0", config(), now_ms=clock)
    for log in (loaded, fresh):
        assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (0, 0, 0)
        assert log.recovery_point == 0
        assert sorted(p.name for p in log.directory.iterdir()) == [
            "00000000000000000000.index",
            "00000000000000000000.log",
            "00000000000000000000.timeindex",
        ]
        produce(log, ONE)
        produce(log, ONE)
        assert consume_offsets(log, 0) == [0, 1]
    crash(fresh)
    reopened = PartitionLog.open(tmp_path / "new-0", config(), now_ms=clock)
    assert consume_offsets(reopened, 0) == [0, 1]
