"""Retention, DeleteRecords, truncation and the sendfile-safe deletion rule."""

from __future__ import annotations

import os

import pytest
from log_helpers import FakeClock, batch, consume_offsets, produce, slice_bytes, slice_headers

from gregor_broker.log import LogConfig, OffsetOutOfRange, PartitionLog


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


ONE = batch(1, value_size=100)


def open_log(tmp_path, clock, **config) -> PartitionLog:
    config.setdefault("segment_bytes", 2 * len(ONE))
    return PartitionLog.open(tmp_path / "logs-0", LogConfig(**config), now_ms=clock)


def produce_at(log, clock, timestamp_ms: int, count: int = 1) -> None:
    for _ in range(count):
        produce(log, batch(1, timestamp=timestamp_ms, value_size=100))


def test_retention_ms_deletes_segments_whose_largest_timestamp_is_too_old(tmp_path, clock):
    log = open_log(tmp_path, clock, retention_ms=1000)
    produce_at(log, clock, clock.now - 5000, 2)  # segment 0
    produce_at(log, clock, clock.now - 5000)  # segment 2 ...
    produce_at(log, clock, clock.now)  # ... whose largest timestamp is recent
    produce_at(log, clock, clock.now)
    assert log.segment_base_offsets == [0, 2, 4]
    assert log.apply_retention() == 1
    assert log.segment_base_offsets == [2, 4]
    assert log.log_start_offset == 2
    assert not (tmp_path / "logs-0" / "00000000000000000000.log").exists()
    with pytest.raises(OffsetOutOfRange):
        log.read(0, 1000)
    assert consume_offsets(log, 2) == [2, 3, 4]


def test_retention_ms_rolls_and_deletes_the_active_segment_when_everything_expired(tmp_path, clock):
    log = open_log(tmp_path, clock, retention_ms=1000)
    produce_at(log, clock, clock.now - 5000, 3)
    assert log.apply_retention() == 2
    assert log.segment_base_offsets == [3]
    assert (log.log_start_offset, log.log_end_offset, log.size_bytes) == (3, 3, 0)
    assert log.apply_retention() == 0  # the empty active segment stays


def test_retention_never_deletes_data_above_the_high_watermark(tmp_path, clock):
    log = open_log(tmp_path, clock, retention_ms=1000)
    log.stop_following_log_end()
    produce_at(log, clock, clock.now - 5000, 3)
    log.maybe_increment_high_watermark(1)
    assert log.apply_retention() == 0
    log.maybe_increment_high_watermark(2)
    assert log.apply_retention() == 1
    assert log.log_start_offset == 2


def test_retention_bytes_deletes_oldest_segments_while_the_log_stays_over_the_limit(
    tmp_path, clock
):
    log = open_log(tmp_path, clock, retention_bytes=3 * len(ONE))
    produce_at(log, clock, clock.now, 7)  # segments of 2,2,2,1 batches
    assert log.apply_retention() == 2
    assert log.segment_base_offsets == [4, 6]
    assert log.size_bytes == 3 * len(ONE)
    assert log.log_start_offset == 4


def test_retention_is_off_for_compacted_topics(tmp_path, clock):
    log = open_log(tmp_path, clock, retention_ms=0, cleanup_policy="compact")
    produce_at(log, clock, 0, 5)
    assert log.apply_retention() == 0
    assert log.log_start_offset == 0


def test_delete_records_before_moves_log_start_and_deletes_whole_segments(tmp_path, clock):
    log = open_log(tmp_path, clock)
    produce_at(log, clock, 0, 7)
    assert log.delete_records_before(3) == 3
    assert log.segment_base_offsets == [2, 4, 6]
    assert log.log_start_offset == 3
    with pytest.raises(OffsetOutOfRange):
        log.read(2, 1000)
    # The batch holding the log start may begin below it, as in Kafka.
    assert slice_headers(log.read(3, 1000))[0].base_offset == 3
    assert log.delete_records_before(1) == 3  # never moves backwards


def test_delete_records_beyond_the_high_watermark_is_rejected(tmp_path, clock):
    log = open_log(tmp_path, clock)
    log.stop_following_log_end()
    produce_at(log, clock, 0, 4)
    log.maybe_increment_high_watermark(2)
    with pytest.raises(OffsetOutOfRange):
        log.delete_records_before(3)
    assert log.delete_records_before(2) == 2


def test_delete_records_moves_the_leader_epoch_cache_start(tmp_path, clock):
    log = open_log(tmp_path, clock)
    produce(log, ONE, leader_epoch=1)
    produce(log, ONE, leader_epoch=2)
    produce(log, ONE, ONE, leader_epoch=2)
    log.delete_records_before(3)
    assert log.leader_epoch_cache.entries() == [(2, 3)]


def test_truncate_to_drops_offsets_at_and_after_the_target(tmp_path, clock):
    log = open_log(tmp_path, clock, index_interval_bytes=1)
    produce(log, ONE, leader_epoch=1)
    produce_at(log, clock, 0, 3)
    produce(log, ONE, leader_epoch=2)
    produce_at(log, clock, 0, 2)
    assert log.segment_base_offsets == [0, 2, 4, 6]
    log.truncate_to(3)
    assert log.log_end_offset == 3
    assert log.segment_base_offsets == [0, 2]
    assert log.high_watermark == 3
    assert consume_offsets(log) == [0, 1, 2]
    assert log.leader_epoch_cache.entries() == [(1, 0)]
    result = produce(log, ONE)
    assert result.first_offset == 3
    assert consume_offsets(log) == [0, 1, 2, 3]


def test_truncate_to_inside_a_batch_drops_the_whole_batch(tmp_path, clock):
    log = PartitionLog.open(tmp_path / "logs-0", LogConfig(), now_ms=clock)
    produce(log, batch(3), batch(3))
    log.truncate_to(4)
    assert log.log_end_offset == 3


def test_truncate_below_log_start_empties_the_log_and_starts_there(tmp_path, clock):
    log = open_log(tmp_path, clock)
    produce_at(log, clock, 0, 6)
    log.delete_records_before(4)
    log.truncate_to(2)
    assert (log.log_start_offset, log.log_end_offset, log.segment_base_offsets) == (2, 2, [2])


def test_a_slice_stays_readable_after_its_segment_is_deleted(tmp_path, clock):
    log = open_log(tmp_path, clock, retention_ms=1000, file_delete_delay_ms=60_000)
    produce_at(log, clock, clock.now - 5000, 3)
    file_slice = log.read(0, 1 << 20)
    expected = slice_bytes(file_slice)
    assert log.apply_retention() == 2
    assert not any((tmp_path / "logs-0").glob("00000000000000000000.*"))
    assert slice_bytes(file_slice) == expected  # sendfile would still work
    clock.advance(59_999)
    log.apply_retention()
    assert os.pread(file_slice.fd, 10, 0)  # still open
    clock.advance(1)
    log.apply_retention()
    with pytest.raises(OSError):
        os.fstat(file_slice.fd)


def test_delete_removes_the_directory_but_keeps_slices_valid_until_the_delay(tmp_path, clock):
    log = open_log(tmp_path, clock)
    produce_at(log, clock, 0, 3)
    file_slice = log.read(0, 1 << 20)
    expected = slice_bytes(file_slice)
    log.delete()
    assert not (tmp_path / "logs-0").exists()
    assert list(tmp_path.iterdir()) == []
    assert slice_bytes(file_slice) == expected
    clock.advance(60_000)
    assert log.close_deleted_segments() == 0
    with pytest.raises(OSError):
        os.fstat(file_slice.fd)
