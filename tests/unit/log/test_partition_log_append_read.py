"""Appends and reads: offsets, segment rolls, index use and fetch limits."""

from __future__ import annotations

from pathlib import Path

import pytest
from log_helpers import (
    FakeClock,
    batch,
    consume_offsets,
    produce,
    record_values,
    slice_bytes,
    slice_headers,
)

from gregor_broker.log import LogConfig, OffsetOutOfRange, PartitionLog, UnexpectedAppendOffset
from gregor_broker.log.segment import RECENT_BATCHES
from gregor_broker.protocol.record_batch import HEADER_SIZE, scan_batches
from gregor_broker.protocol.records import Record, make_batch


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def open_log(tmp_path: Path, clock: FakeClock, **config) -> PartitionLog:
    return PartitionLog.open(tmp_path / "orders-0", LogConfig(**config), now_ms=clock)


def test_topic_and_partition_come_from_the_directory_name(tmp_path, clock):
    log = PartitionLog.open(tmp_path / "my-topic-12", LogConfig(), now_ms=clock)
    assert (log.topic, log.partition) == ("my-topic", 12)


def test_directory_without_partition_number_is_rejected(tmp_path, clock):
    with pytest.raises(ValueError, match="<topic>-<partition>"):
        PartitionLog.open(tmp_path / "orders", LogConfig(), now_ms=clock)


def test_new_log_has_one_empty_segment_with_kafka_file_names(tmp_path, clock):
    log = open_log(tmp_path, clock)
    names = sorted(p.name for p in (tmp_path / "orders-0").iterdir())
    assert names == [
        "00000000000000000000.index",
        "00000000000000000000.log",
        "00000000000000000000.timeindex",
    ]
    assert (log.log_start_offset, log.log_end_offset, log.size_bytes) == (0, 0, 0)


def test_append_assigns_dense_offsets_and_rewrites_base_offsets_in_place(tmp_path, clock):
    log = open_log(tmp_path, clock)
    first = produce(log, batch(3), batch(2))
    second = produce(log, batch(1))
    assert (first.first_offset, first.last_offset) == (0, 4)
    assert (second.first_offset, second.last_offset) == (5, 5)
    assert first.log_append_time == -1
    assert log.log_end_offset == 6
    assert log.high_watermark == 6
    data = (tmp_path / "orders-0" / "00000000000000000000.log").read_bytes()
    assert [h.base_offset for h in scan_batches(data)] == [0, 3, 5]


def test_read_returns_whole_batches_from_the_batch_holding_the_offset(tmp_path, clock):
    log = open_log(tmp_path, clock)
    produce(log, batch(3), batch(3), batch(3))
    file_slice = log.read(4, 1 << 20)
    assert [h.base_offset for h in slice_headers(file_slice)] == [3, 6]
    assert record_values(slice_bytes(file_slice))[0][0] == 3


def test_read_at_log_end_returns_nothing(tmp_path, clock):
    log = open_log(tmp_path, clock)
    assert log.read(0, 1000) is None
    produce(log, batch(2))
    assert log.read(2, 1000) is None


def test_read_outside_the_log_raises_offset_out_of_range(tmp_path, clock):
    log = open_log(tmp_path, clock)
    produce(log, batch(2))
    with pytest.raises(OffsetOutOfRange):
        log.read(3, 1000)
    with pytest.raises(OffsetOutOfRange):
        log.read(-1, 1000)


def test_read_stops_before_batches_at_or_after_max_offset(tmp_path, clock):
    log = open_log(tmp_path, clock)
    produce(log, batch(2), batch(2), batch(2))
    assert [h.base_offset for h in slice_headers(log.read(0, 1 << 20, max_offset=4))] == [0, 2]
    assert [h.base_offset for h in slice_headers(log.read(0, 1 << 20, max_offset=3))] == [0, 2]
    assert log.read(4, 1 << 20, max_offset=4) is None


def test_read_respects_max_bytes_at_batch_boundaries(tmp_path, clock):
    log = open_log(tmp_path, clock)
    one = batch(1, value_size=100)
    produce(log, one, one, one, one)
    size = len(one)
    assert len(slice_headers(log.read(0, 2 * size))) == 2
    assert len(slice_headers(log.read(0, 2 * size + size - 1))) == 2
    assert len(slice_headers(log.read(1, 3 * size))) == 3


def test_read_returns_one_oversized_batch_unless_min_one_batch_is_off(tmp_path, clock):
    log = open_log(tmp_path, clock)
    big = batch(1, value_size=5000)
    produce(log, big, batch(1))
    assert [h.base_offset for h in slice_headers(log.read(0, 100))] == [0]
    assert log.read(0, 100, min_one_batch=False) is None


def test_read_never_crosses_a_segment(tmp_path, clock):
    one = batch(1, value_size=200)
    log = open_log(tmp_path, clock, segment_bytes=3 * len(one))
    for _ in range(7):
        produce(log, one)
    assert log.segment_base_offsets == [0, 3, 6]
    assert [h.base_offset for h in slice_headers(log.read(1, 1 << 20))] == [1, 2]
    assert [h.base_offset for h in slice_headers(log.read(3, 1 << 20))] == [3, 4, 5]


def test_segment_rolls_when_segment_bytes_would_be_exceeded(tmp_path, clock):
    one = batch(1, value_size=100)
    log = open_log(tmp_path, clock, segment_bytes=2 * len(one))
    for _ in range(5):
        produce(log, one)
    assert log.segment_base_offsets == [0, 2, 4]
    assert log.size_bytes == 5 * len(one)


def test_a_batch_larger_than_segment_bytes_still_goes_into_an_empty_segment(tmp_path, clock):
    log = open_log(tmp_path, clock, segment_bytes=100)
    produce(log, batch(1, value_size=500))
    produce(log, batch(1, value_size=500))
    assert log.segment_base_offsets == [0, 1]


def test_segment_rolls_on_append_after_segment_ms(tmp_path, clock):
    log = open_log(tmp_path, clock, segment_ms=1000)
    produce(log, batch(1))
    clock.advance(999)
    produce(log, batch(1))
    assert log.segment_base_offsets == [0]
    clock.advance(2)
    produce(log, batch(1))
    assert log.segment_base_offsets == [0, 2]


def test_maybe_roll_rolls_an_idle_non_empty_segment_only(tmp_path, clock):
    log = open_log(tmp_path, clock, segment_ms=1000)
    clock.advance(5000)
    log.maybe_roll()
    assert log.segment_base_offsets == [0]
    produce(log, batch(2))
    clock.advance(1001)
    log.maybe_roll()
    assert log.segment_base_offsets == [0, 2]
    assert consume_offsets(log) == [0, 1]


def test_segment_rolls_when_the_offset_index_is_full(tmp_path, clock):
    one = batch(1, value_size=100)
    # Room for 3 offset index entries; the first batch of a segment gets none (Kafka).
    log = open_log(tmp_path, clock, index_interval_bytes=1, segment_index_bytes=24)
    for _ in range(6):
        produce(log, one)
    assert log.segment_base_offsets == [0, 4]
    assert consume_offsets(log) == list(range(6))


def test_offset_index_gets_an_entry_every_index_interval_bytes(tmp_path, clock):
    one = batch(1, value_size=200)
    log = open_log(tmp_path, clock, index_interval_bytes=len(one) * 2)
    for _ in range(10):
        produce(log, one)
    log.flush()
    data = (tmp_path / "orders-0" / "00000000000000000000.index").read_bytes()
    entries = [
        (int.from_bytes(data[i : i + 4], "big"), int.from_bytes(data[i + 4 : i + 8], "big"))
        for i in range(0, len(data), 8)
    ]
    # Kafka: an entry once more than index.interval.bytes were written since the last.
    assert entries == [(3, 3 * len(one)), (6, 6 * len(one)), (9, 9 * len(one))]
    for offset in range(10):
        assert slice_headers(log.read(offset, 1))[0].base_offset == offset


def test_reads_use_the_index_and_are_exact_for_every_offset(tmp_path, clock):
    log = open_log(tmp_path, clock, index_interval_bytes=64, segment_bytes=4000)
    for i in range(60):
        produce(log, batch(1 + i % 4, value_size=30))
    offsets = consume_offsets(log)
    assert offsets == list(range(log.log_end_offset))
    for offset in range(log.log_end_offset):
        header = slice_headers(log.read(offset, 1))[0]
        assert header.base_offset <= offset < header.next_offset


def test_log_append_time_stamps_batches_and_is_returned(tmp_path, clock):
    log = open_log(tmp_path, clock, message_timestamp_type="LogAppendTime")
    result = produce(log, batch(2, timestamp=5))
    assert result.log_append_time == clock.now
    header = slice_headers(log.read(0, 1000))[0]
    assert header.uses_log_append_time
    assert header.max_timestamp == clock.now


def test_leader_epoch_is_stamped_and_recorded_when_new(tmp_path, clock):
    log = open_log(tmp_path, clock)
    produce(log, batch(2), leader_epoch=3)
    produce(log, batch(2), leader_epoch=3)
    produce(log, batch(1), leader_epoch=5)
    assert [h.partition_leader_epoch for h in slice_headers(log.read(0, 1 << 20))] == [3, 3, 5]
    assert log.leader_epoch_cache.entries() == [(3, 0), (5, 4)]
    text = (tmp_path / "orders-0" / "leader-epoch-checkpoint").read_text()
    assert text == "0\n2\n3 0\n5 4\n"


def test_a_deferred_first_epoch_reaches_disk_before_the_first_batch(tmp_path, clock):
    """A new leader of an empty log keeps its first epoch in memory (creating thousands
    of partitions); the checkpoint is written before the log's first append, so no
    batch is ever on disk without it."""
    log = open_log(tmp_path, clock)
    checkpoint = tmp_path / "orders-0" / "leader-epoch-checkpoint"
    log.leader_epoch_cache.assign(2, 0, sync=False, defer=True)
    assert not checkpoint.exists()
    assert log.leader_epoch_cache.end_offset_for(2) == (2, 0)  # answered from memory
    produce(log, batch(1), leader_epoch=2)
    assert checkpoint.read_text() == "0\n1\n2 0\n"
    log.leader_epoch_cache.assign(4, 1, sync=False, defer=True)
    log.flush()  # the log's flush writes (and syncs) a deferred epoch too
    assert checkpoint.read_text() == "0\n2\n2 0\n4 1\n"


def test_append_with_preassigned_offsets_keeps_them(tmp_path, clock):
    log = open_log(tmp_path, clock)
    buffer = bytearray(batch(2))
    headers = scan_batches(buffer)
    log.append(buffer, headers)
    follower = PartitionLog.open(tmp_path / "replica-0", LogConfig(), now_ms=clock)
    copied = bytearray(slice_bytes(log.read(0, 1000)))
    result = follower.append(copied, scan_batches(copied), assign_offsets=False)
    assert (result.first_offset, result.last_offset) == (0, 1)
    with pytest.raises(UnexpectedAppendOffset):
        follower.append(copied, scan_batches(copied), assign_offsets=False)


def test_append_with_preassigned_offsets_refuses_bytes_its_headers_do_not_cover(tmp_path, clock):
    """The whole buffer is written and only the headers indexed: a follower that passed
    the headers of some batches with the bytes of all (chaos seed 20261130) put offsets
    going backwards into its segment. Refused, and nothing is written."""
    leader = open_log(tmp_path, clock)
    for values in (2, 3, 1):
        produce(leader, batch(values))
    copied = bytearray(slice_bytes(leader.read(0, 10_000)))
    headers = scan_batches(copied)
    assert len(headers) == 3
    follower = PartitionLog.open(tmp_path / "replica-0", LogConfig(), now_ms=clock)
    for partial in (headers[:2], headers[1:], [headers[0], headers[2]]):
        with pytest.raises(UnexpectedAppendOffset, match="headers cover"):
            follower.append(copied, partial, assign_offsets=False)
        assert follower.log_end_offset == 0
        assert follower.size_bytes == 0
    result = follower.append(copied, headers, assign_offsets=False)
    assert (result.first_offset, result.last_offset) == (0, 5)


def test_follower_append_learns_leader_epochs_from_batches(tmp_path, clock):
    leader = open_log(tmp_path, clock)
    produce(leader, batch(2), leader_epoch=1)
    produce(leader, batch(2), leader_epoch=4)
    follower = PartitionLog.open(tmp_path / "replica-0", LogConfig(), now_ms=clock)
    copied = bytearray(slice_bytes(leader.read(0, 1 << 20)))
    follower.append(copied, scan_batches(copied), assign_offsets=False)
    assert follower.leader_epoch_cache.entries() == [(1, 0), (4, 2)]


def test_flush_messages_advances_the_recovery_point(tmp_path, clock):
    log = open_log(tmp_path, clock, flush_messages=3)
    produce(log, batch(2))
    assert log.recovery_point == 0
    produce(log, batch(1))
    assert log.recovery_point == 3


def test_flush_if_due_follows_flush_ms_and_rolled_segments(tmp_path, clock):
    one = batch(1, value_size=100)
    log = open_log(tmp_path, clock, flush_ms=1000, segment_bytes=len(one))
    produce(log, one)
    produce(log, one)
    log.flush_if_due()
    assert log.recovery_point == 1  # the rolled segment
    clock.advance(1000)
    log.flush_if_due()
    assert log.recovery_point == 2


def test_high_watermark_stays_put_when_replication_owns_it(tmp_path, clock):
    log = open_log(tmp_path, clock)
    log.stop_following_log_end()
    assert log.high_watermark == 0
    produce(log, batch(3))
    assert log.high_watermark == 0
    assert log.read(0, 1000, max_offset=log.high_watermark) is None


def test_update_config_changes_roll_policy(tmp_path, clock):
    one = batch(1, value_size=100)
    log = open_log(tmp_path, clock)
    produce(log, one)
    log.update_config(LogConfig(segment_bytes=len(one)))
    produce(log, one)
    assert log.segment_base_offsets == [0, 1]


def test_compressed_batches_are_stored_as_sent(tmp_path, clock):
    from gregor_broker.protocol.records import Compression

    log = open_log(tmp_path, clock)
    sent = batch(5, compression=Compression.GZIP)
    produce(log, sent)
    stored = slice_bytes(log.read(0, 1000))
    assert stored[HEADER_SIZE:] == sent[HEADER_SIZE:]
    assert [o for o, _ in record_values(stored)] == [0, 1, 2, 3, 4]


def test_follower_keeps_the_leaders_log_append_time(tmp_path, clock):
    """A follower copies the leader's batches byte for byte; it never stamps its own
    LogAppendTime (replicas would disagree on timestamps, and the CRC would change)."""
    leader = open_log(tmp_path, clock, message_timestamp_type="LogAppendTime")
    produce(leader, batch(2, timestamp=5))
    copied = bytes(slice_bytes(leader.read(0, 1000)))
    clock.advance(5000)
    follower = PartitionLog.open(
        tmp_path / "replica-0", LogConfig(message_timestamp_type="LogAppendTime"), now_ms=clock
    )
    buffer = bytearray(copied)
    follower.append(buffer, scan_batches(buffer), assign_offsets=False)
    assert bytes(slice_bytes(follower.read(0, 1000))) == copied


def _every_read(log: PartitionLog) -> list[tuple[int, int | None, object]]:
    """Each offset's read (position and size, or None), with and without a max offset."""
    reads: list[tuple[int, int | None, object]] = []
    for offset in range(log.log_start_offset, log.log_end_offset + 1):
        for max_offset in (None, offset + 1, offset + 3, log.log_end_offset):
            found = log.read(offset, 1 << 20, max_offset=max_offset)
            reads.append((offset, max_offset, found and (found.position, found.size)))
            found = log.read(offset, 1, max_offset=max_offset)
            reads.append((offset, max_offset, found and (found.position, found.size)))
    return reads


def _scanned(log: PartitionLog) -> list[tuple[int, int | None, object]]:
    """``_every_read`` with the segments' recent batches forgotten: from the offset index
    and the batch headers on disk only."""
    for segment in log._segments:
        segment._forget_recent_batches()
    return _every_read(log)


def test_reads_near_the_log_end_answer_from_memory_as_from_the_index(tmp_path, clock):
    """A segment remembers its last appended batches, so that readers just behind the log
    end (followers, caught-up consumers) skip stepping through batch headers on disk: the
    answers must be exactly those of the index and headers, gaps and cuts included."""
    log = open_log(tmp_path, clock, index_interval_bytes=100)
    for i in range(3 * RECENT_BATCHES):  # past the trimming of the recent batches
        produce(log, batch(1 + i % 3, value_size=20))
    from_memory = _every_read(log)
    assert from_memory == _scanned(log)

    # A follower copies compacted batches: offsets with gaps between the batches.
    follower = PartitionLog.open(tmp_path / "replica-0", LogConfig(), now_ms=clock)
    copied = bytearray()
    for base in (0, 3, 9, 12, 20, 22, 40):
        copied += make_batch([Record(0, 0, b"k", b"v"), Record(1, 0, b"k", b"w")], base_offset=base)
    follower.append(copied, scan_batches(copied), assign_offsets=False)
    assert _every_read(follower) == _scanned(follower)

    # Cut back, then appended again: what is remembered follows the file.
    produce(follower, batch(2))
    follower.truncate_to(21)
    produce(follower, batch(3))
    from_memory = _every_read(follower)
    assert from_memory == _scanned(follower)
