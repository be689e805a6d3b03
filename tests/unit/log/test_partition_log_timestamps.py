"""ListOffsets support: first record at or after a timestamp, and the max timestamp."""

from __future__ import annotations

import pytest
from log_helpers import FakeClock, batch, produce

from gregor_broker.log import LogConfig, PartitionLog


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def open_log(tmp_path, clock, **config) -> PartitionLog:
    return PartitionLog.open(tmp_path / "events-0", LogConfig(**config), now_ms=clock)


def test_timestamp_lookup_finds_the_first_record_at_or_after_the_target(tmp_path, clock):
    log = open_log(tmp_path, clock)
    produce(log, batch(3, timestamp=100, timestamp_deltas=[0, 10, 20]))  # 0..2: 100,110,120
    produce(log, batch(2, timestamp=200, timestamp_deltas=[0, 5]))  # 3..4: 200,205
    assert log.offset_for_timestamp(0) == (0, 100)
    assert log.offset_for_timestamp(100) == (0, 100)
    assert log.offset_for_timestamp(105) == (1, 110)
    assert log.offset_for_timestamp(120) == (2, 120)
    assert log.offset_for_timestamp(121) == (3, 200)
    assert log.offset_for_timestamp(205) == (4, 205)
    assert log.offset_for_timestamp(206) is None


def test_timestamp_lookup_returns_the_first_offset_when_timestamps_go_backwards(tmp_path, clock):
    log = open_log(tmp_path, clock)
    produce(log, batch(1, timestamp=500))
    produce(log, batch(1, timestamp=100))
    produce(log, batch(1, timestamp=600))
    assert log.offset_for_timestamp(50) == (0, 500)
    assert log.offset_for_timestamp(550) == (2, 600)


def test_timestamp_lookup_works_across_segments_with_sparse_time_index(tmp_path, clock):
    one = batch(1, value_size=100)
    log = open_log(tmp_path, clock, segment_bytes=5 * len(one), index_interval_bytes=1)
    for i in range(23):
        produce(log, batch(2, timestamp=1000 + 10 * i, timestamp_deltas=[0, 3], value_size=100))
    assert len(log.segment_base_offsets) > 3
    for i in range(23):
        assert log.offset_for_timestamp(1000 + 10 * i) == (2 * i, 1000 + 10 * i)
        assert log.offset_for_timestamp(1000 + 10 * i + 1) == (2 * i + 1, 1000 + 10 * i + 3)
    assert log.offset_for_timestamp(10**9) is None


def test_timestamp_lookup_never_returns_an_offset_below_log_start(tmp_path, clock):
    log = open_log(tmp_path, clock)
    produce(log, batch(4, timestamp=100, timestamp_deltas=[0, 1, 2, 3]))
    log.delete_records_before(2)
    assert log.offset_for_timestamp(0) == (2, 102)


def test_timestamp_lookup_in_log_append_time_batches_uses_the_append_time(tmp_path, clock):
    log = open_log(tmp_path, clock, message_timestamp_type="LogAppendTime")
    produce(log, batch(3, timestamp=5))
    clock.advance(100)
    produce(log, batch(3, timestamp=5))
    assert log.offset_for_timestamp(0) == (0, clock.now - 100)
    assert log.offset_for_timestamp(clock.now - 50) == (3, clock.now)


def test_max_timestamp_offset_is_the_record_with_the_largest_timestamp(tmp_path, clock):
    log = open_log(tmp_path, clock, segment_bytes=300)
    assert log.max_timestamp_offset() is None
    produce(log, batch(3, timestamp=100, timestamp_deltas=[0, 50, 7]))  # max 150 at offset 1
    produce(log, batch(2, timestamp=120, timestamp_deltas=[0, 1]))
    assert log.max_timestamp_offset() == (1, 150)
    produce(log, batch(2, timestamp=150, timestamp_deltas=[0, 0]))  # ties keep the first
    assert log.max_timestamp_offset() == (1, 150)
    produce(log, batch(2, timestamp=900, timestamp_deltas=[1, 0]))
    assert log.max_timestamp_offset() == (7, 901)


def test_timestamp_lookups_survive_a_restart(tmp_path, clock):
    log = open_log(tmp_path, clock, segment_bytes=400, index_interval_bytes=1)
    for i in range(12):
        produce(log, batch(1, timestamp=100 * i, value_size=50))
    log.close()
    reopened = open_log(tmp_path, clock, segment_bytes=400, index_interval_bytes=1)
    assert reopened.offset_for_timestamp(550) == (6, 600)
    assert reopened.max_timestamp_offset() == (11, 1100)
