"""Checkpoint file formats and the leader epoch cache (Kafka's LeaderEpochFileCache)."""

from __future__ import annotations

import pytest

from gregor_broker.log.checkpoints import (
    CorruptCheckpoint,
    LeaderEpochCache,
    read_offset_checkpoint,
    write_offset_checkpoint,
)
from gregor_broker.log.index import OffsetIndex, TimeIndex


def test_offset_checkpoint_has_kafkas_exact_text_format(tmp_path):
    path = tmp_path / "recovery-point-offset-checkpoint"
    write_offset_checkpoint(path, {("orders", 0): 42, ("my-topic", 12): 7})
    assert path.read_text() == "0\n2\norders 0 42\nmy-topic 12 7\n"
    assert read_offset_checkpoint(path) == {("orders", 0): 42, ("my-topic", 12): 7}
    assert not (tmp_path / "recovery-point-offset-checkpoint.tmp").exists()


def test_empty_offset_checkpoint_round_trips(tmp_path):
    path = tmp_path / "replication-offset-checkpoint"
    write_offset_checkpoint(path, {})
    assert path.read_text() == "0\n0\n"
    assert read_offset_checkpoint(path) == {}


def test_missing_offset_checkpoint_reads_as_empty(tmp_path):
    assert read_offset_checkpoint(tmp_path / "nope") == {}


@pytest.mark.parametrize(
    "text", ["", "1\n0\n", "0\n2\norders 0 1\n", "0\n1\norders zero 1\n", "0\nx\n"]
)
def test_malformed_offset_checkpoint_is_reported(tmp_path, text):
    path = tmp_path / "log-start-offset-checkpoint"
    path.write_text(text)
    with pytest.raises(CorruptCheckpoint):
        read_offset_checkpoint(path)


def make_cache(tmp_path, log_end_offset: int = 100) -> LeaderEpochCache:
    return LeaderEpochCache(tmp_path / "leader-epoch-checkpoint", lambda: log_end_offset)


def test_epoch_cache_answers_offset_for_leader_epoch_like_kafka(tmp_path):
    cache = make_cache(tmp_path)
    assert cache.end_offset_for(0) == (-1, -1)
    cache.assign(2, 10)
    cache.assign(4, 30)
    cache.assign(5, 50)
    assert cache.latest_epoch() == 5
    assert cache.end_offset_for(5) == (5, 100)  # latest epoch ends at the log end
    assert cache.end_offset_for(4) == (4, 50)
    assert cache.end_offset_for(3) == (2, 30)  # unknown epoch: the largest below it
    assert cache.end_offset_for(1) == (1, 10)  # before the first epoch
    assert cache.end_offset_for(6) == (-1, -1)
    assert cache.end_offset_for(-1) == (-1, -1)


def test_epoch_cache_file_round_trips_in_kafka_format(tmp_path):
    cache = make_cache(tmp_path)
    cache.assign(0, 0)
    cache.assign(3, 17)
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n2\n0 0\n3 17\n"
    assert make_cache(tmp_path).entries() == [(0, 0), (3, 17)]


def test_epoch_cache_assign_removes_contradicted_entries(tmp_path):
    cache = make_cache(tmp_path)
    cache.assign(1, 0)
    cache.assign(2, 10)
    cache.assign(3, 20)
    cache.assign(3, 25)  # same epoch, later start: ignored
    assert cache.entries() == [(1, 0), (2, 10), (3, 20)]
    cache.assign(4, 15)  # starts before epoch 3 did: epoch 3 is gone
    assert cache.entries() == [(1, 0), (2, 10), (4, 15)]


def test_epoch_cache_truncation_from_both_ends(tmp_path):
    cache = make_cache(tmp_path)
    for epoch, start in [(1, 0), (2, 10), (3, 20)]:
        cache.assign(epoch, start)
    cache.truncate_from_end(20)
    assert cache.entries() == [(1, 0), (2, 10)]
    cache.truncate_from_start(15)
    assert cache.entries() == [(2, 15)]
    cache.truncate_from_start(5)
    assert cache.entries() == [(2, 15)]


def test_offset_index_file_is_big_endian_relative_offset_and_position(tmp_path):
    index = OffsetIndex(tmp_path / "00000000000000000100.index", 100, 1024)
    index.append(105, 4096)
    index.append(110, 8192)
    index.write_pending()
    assert (tmp_path / "00000000000000000100.index").read_bytes() == (
        b"\x00\x00\x00\x05\x00\x00\x10\x00\x00\x00\x00\x0a\x00\x00\x20\x00"
    )
    loaded = OffsetIndex(tmp_path / "00000000000000000100.index", 100, 1024)
    assert loaded.load(10_000, None)
    assert loaded.lookup(104) == (100, 0)
    assert loaded.lookup(107) == (105, 4096)
    assert loaded.lookup(500) == (110, 8192)
    assert not loaded.load(5000, None)  # a position beyond the log fails the sanity check


def test_time_index_file_is_big_endian_timestamp_and_relative_offset(tmp_path):
    path = tmp_path / "00000000000000000100.timeindex"
    index = TimeIndex(path, 100, 1024)
    index.maybe_append(1_000, 103)
    index.maybe_append(999, 104)  # not larger: skipped
    index.maybe_append(2_000, 108)
    index.write_pending()
    assert path.read_bytes() == (
        (1000).to_bytes(8, "big")
        + (3).to_bytes(4, "big")
        + (2000).to_bytes(8, "big")
        + (8).to_bytes(4, "big")
    )
    loaded = TimeIndex(path, 100, 1024)
    assert loaded.load(None)
    assert loaded.last_entry() == (2000, 108)
    assert loaded.last_offset_before(1000) is None
    assert loaded.last_offset_before(1001) == 103
    loaded.truncate_to_offset(105)
    assert loaded.last_entry() == (1000, 103)
    assert path.stat().st_size == 12


def test_index_files_with_entries_out_of_order_fail_the_sanity_check(tmp_path):
    offsets = tmp_path / "00000000000000000000.index"
    offsets.write_bytes(
        (5).to_bytes(4, "big")
        + (100).to_bytes(4, "big")
        + (3).to_bytes(4, "big")
        + (200).to_bytes(4, "big")
    )
    assert not OffsetIndex(offsets, 0, 1024).load(10_000, None)
    times = tmp_path / "00000000000000000000.timeindex"
    times.write_bytes(
        (9).to_bytes(8, "big")
        + (1).to_bytes(4, "big")
        + (8).to_bytes(8, "big")
        + (2).to_bytes(4, "big")
    )
    assert not TimeIndex(times, 0, 1024).load(None)
