"""Log compaction of one partition log (``log/cleaner.py``): Kafka's semantics, checked
on real segment files."""

from __future__ import annotations

import os
import time
from dataclasses import replace
from pathlib import Path

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from log_helpers import FakeClock, produce

from gregor_broker.log.cleaner import (
    CLEANED_SUFFIX,
    SWAP_SUFFIX,
    CleanerStats,
    OffsetMap,
    PassResult,
    clean,
    clean_group,
    cleanable_range,
    delete_horizon_ms,
    group_segments,
    producer_last_offsets,
)
from gregor_broker.log.log_config import LogConfig
from gregor_broker.log.partition_log import PartitionLog
from gregor_broker.log.producer_state import ProducerStateManager, snapshot_offsets
from gregor_broker.protocol.record_batch import Compression, scan_batches
from gregor_broker.protocol.records import Record, iter_batch_records, make_batch

COMPACT = LogConfig(cleanup_policy="compact", segment_bytes=600)
Entry = tuple[bytes, bytes | None]  # key, value (None: a tombstone)


def keyed_batch(
    entries: list[Entry],
    *,
    compression: Compression = Compression.NONE,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
) -> bytes:
    records = [Record(i, i, key, value) for i, (key, value) in enumerate(entries)]
    return make_batch(
        records,
        base_timestamp=1_000,
        compression=compression,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
    )


def open_log(directory: Path, config: LogConfig = COMPACT, clock: FakeClock | None = None):
    return PartitionLog.open(directory / "t-0", config, now_ms=clock or FakeClock())


def run_pass(log: PartitionLog, checkpoint: int | None = None, *, buffer: int = 1 << 20):
    """Drive one pass to its end; return its result."""
    gen = clean(log, checkpoint, offset_map=OffsetMap(buffer), now_ms=log._now_ms())
    try:
        while True:
            next(gen)
    except StopIteration as stop:
        return stop.value


def read_all(log: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record a consumer reads from the log start."""
    out = []
    position = log.log_start_offset
    while position < log.log_end_offset:
        found = log.read(position, 1 << 20)
        if found is None:
            break
        data = os.pread(found.fd, found.size, found.position)
        for header in scan_batches(data, dense=False):
            for record in iter_batch_records(data, header):
                offset = header.base_offset + record.offset_delta
                if offset >= position:
                    out.append((offset, record.key, record.value))
            position = max(position, header.next_offset)
    return out


def roll(log: PartitionLog) -> None:
    log._roll(log.log_end_offset)


def expected_after_cleaning(
    written: list[tuple[int, bytes, bytes | None]], end: int, *, keep_tombstones: bool
) -> list[tuple[int, bytes, bytes | None]]:
    """Kafka's rule: below ``end`` only each key's latest record stays (a tombstone only
    while retained); at or past ``end`` everything stays."""
    latest = {}
    for offset, key, _ in written:
        if offset < end:
            latest[key] = offset
    out = []
    for offset, key, value in written:
        latest_kept = latest.get(key) == offset and (value is not None or keep_tombstones)
        if offset >= end or latest_kept:
            out.append((offset, key, value))
    return out


batches_strategy = st.lists(
    st.lists(
        st.tuples(
            st.sampled_from([b"a", b"b", b"c", b"d", b"e", b"f"]),
            st.one_of(st.none(), st.binary(min_size=1, max_size=30)),
        ),
        min_size=1,
        max_size=6,
    ),
    min_size=1,
    max_size=25,
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    batches=batches_strategy,
    compression=st.sampled_from([Compression.NONE, Compression.GZIP, Compression.ZSTD]),
    segment_bytes=st.integers(min_value=150, max_value=2000),
    uncleaned_tail=st.integers(min_value=0, max_value=5),
)
def test_each_key_keeps_its_last_value_at_its_original_offset(
    tmp_path_factory, batches, compression, segment_bytes, uncleaned_tail
):
    directory = tmp_path_factory.mktemp("log")
    log = open_log(directory, replace(COMPACT, segment_bytes=segment_bytes))
    written: list[tuple[int, bytes, bytes | None]] = []
    for i, entries in enumerate(batches):
        if i == len(batches) - uncleaned_tail:
            roll(log)  # what follows stays in the active segment, never cleaned
        result = produce(log, keyed_batch(entries, compression=compression))
        written += [(result.first_offset + k, key, value) for k, (key, value) in enumerate(entries)]
    first_uncleanable = log.active_segment.base_offset
    before = read_all(log)

    result = run_pass(log)

    after = read_all(log)
    if first_uncleanable == 0:
        assert result is None and after == before
        return
    assert isinstance(result, PassResult) and result.end == first_uncleanable
    # Tombstones stay: no segment is older than delete.retention.ms (one day).
    assert after == expected_after_cleaning(written, first_uncleanable, keep_tombstones=True)
    # Nothing newer than the cleaner's point is touched.
    assert [r for r in after if r[0] >= first_uncleanable] == [
        r for r in before if r[0] >= first_uncleanable
    ]
    # The log reads the same after a restart (recovery accepts the cleaned batches).
    log.close()
    reopened = open_log(directory, replace(COMPACT, segment_bytes=segment_bytes))
    assert read_all(reopened) == after
    assert reopened.log_end_offset == written[-1][0] + 1


RETENTION_MS = 60_000


def _age_segments(log: PartitionLog, gaps: list[int]) -> dict[int, int]:
    """Give the closed segments modification times ``gaps`` apart (oldest first, a minute
    ago at the newest); return base offset -> mtime in ms."""
    closed = log.segments[:-1]
    now_ms = int(time.time() * 1000) - 60_000
    times: list[int] = []
    for i in range(len(closed)):
        times.append(now_ms - sum(gaps[j % len(gaps)] for j in range(i, len(closed))))
    for segment, mtime_ms in zip(closed, times, strict=True):
        os.utime(segment.log_path, ns=(mtime_ms * 1_000_000, mtime_ms * 1_000_000))
    return {segment.base_offset: mtime for segment, mtime in zip(closed, times, strict=True)}


def _segment_of(bases: list[int], offset: int) -> int:
    return max(base for base in bases if base <= offset)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    batches=batches_strategy.filter(lambda batches: len(batches) >= 8),
    # Small: cleaned groups stay apart, so a tombstone can be older than the last one.
    segment_bytes=st.integers(min_value=150, max_value=600),
    # After each batch: no pass (None), or a pass after rolling the active segment or not.
    passes=st.lists(st.sampled_from([True, None, False]), min_size=25, max_size=25),
    # Times between segments: none, some, just under and just over delete.retention.ms.
    gaps=st.lists(
        st.sampled_from([RETENTION_MS + 1_000, 0, RETENTION_MS - 1_000, 1_000]),
        min_size=1,
        max_size=10,
    ),
)
def test_passes_at_random_points_keep_kafkas_view_and_drop_tombstones_only_past_retention(
    tmp_path_factory, batches, segment_bytes, passes, gaps
):
    """Several passes, each after a random batch (rolling the active segment or not), each
    from the checkpoint the last one left, with segments of random ages. After every pass
    the log holds exactly Kafka's view: below the pass's end each key's latest record, a
    tombstone only while its segment is newer than the delete horizon (the last cleaned
    segment's time minus ``delete.retention.ms``); at or past it, everything written."""
    directory = tmp_path_factory.mktemp("log")
    config = replace(COMPACT, segment_bytes=segment_bytes, delete_retention_ms=RETENTION_MS)
    log = open_log(directory, config)
    model: list[tuple[int, bytes, bytes | None]] = []  # what a consumer must read
    written: list[tuple[int, bytes, bytes | None]] = []
    checkpoint: int | None = None
    tombstones_dropped = 0
    effective = 0
    for i, entries in enumerate(batches):
        result = produce(log, keyed_batch(entries))
        records = [(result.first_offset + k, key, value) for k, (key, value) in enumerate(entries)]
        written += records
        model += records
        if (rolls := passes[i]) is not None:
            if rolls:
                roll(log)
            mtimes = _age_segments(log, gaps)
            bases = sorted(mtimes)
            first_dirty = log.log_start_offset if checkpoint is None else checkpoint
            uppers = [*bases, log.active_segment.base_offset][1:]
            below = [
                base for base, upper in zip(bases, uppers, strict=True) if upper <= first_dirty
            ]
            horizon = mtimes[below[-1]] - RETENTION_MS if below else 0
            outcome = run_pass(log, checkpoint)
            if outcome is None:
                assert read_all(log) == model
                continue
            end = outcome.end
            assert first_dirty < end == log.active_segment.base_offset  # the map holds all keys
            latest = {key: offset for offset, key, _ in written if offset < end}
            kept = []
            for offset, key, value in model:
                if offset >= end:
                    kept.append((offset, key, value))  # newer than the cleaner's point
                elif latest[key] == offset and (
                    value is not None or mtimes[_segment_of(bases, offset)] > horizon
                ):
                    kept.append((offset, key, value))
                elif latest[key] == offset:
                    tombstones_dropped += 1
            model = kept
            assert read_all(log) == model, (first_dirty, end, horizon)
            checkpoint = end
            effective += 1
    log.close()
    reopened = open_log(directory, config)
    assert read_all(reopened) == model
    assert reopened.log_end_offset == written[-1][0] + 1
    event(f"tombstones dropped: {min(tombstones_dropped, 3)}")
    event(f"passes: {min(effective, 4)}")


def test_a_key_map_too_small_cleans_what_it_covers_and_the_next_pass_goes_on(tmp_path):
    log = open_log(tmp_path, replace(COMPACT, segment_bytes=10**6))
    written = []
    for round_ in range(3):
        for key in (b"a", b"b", b"c", b"d"):
            result = produce(log, keyed_batch([(key, b"v%d" % round_)]))
            written.append((result.first_offset, key, b"v%d" % round_))
    roll(log)
    buffer = 2 * 24  # one slot at load factor 0.9: one key per pass
    first = run_pass(log, buffer=buffer)
    assert first.end == 1  # offset 1 holds the first key the map could not take
    assert read_all(log) == expected_after_cleaning(written, 1, keep_tombstones=True)
    checkpoint = first.end
    for _ in range(20):  # keys alternate, so each pass covers one more offset
        result = run_pass(log, checkpoint, buffer=buffer)
        if result is None:
            break
        checkpoint = result.end
    assert checkpoint == 12
    # Each pass's map held one key: only offsets of that key below the pass end went.
    # After all passes every key's latest value is there, and nothing is lost.
    assert {key: value for _, key, value in read_all(log)} == {
        b"a": b"v2",
        b"b": b"v2",
        b"c": b"v2",
        b"d": b"v2",
    }


def test_tombstones_go_only_after_delete_retention_past_the_last_cleaned_segment(tmp_path):
    # segment.bytes so small that every batch has a segment (and a group) of its own.
    config = replace(COMPACT, segment_bytes=100, delete_retention_ms=60_000)
    log = open_log(tmp_path, config)
    produce(log, keyed_batch([(b"a", b"1"), (b"b", b"1")]))
    produce(log, keyed_batch([(b"a", None)]))  # offset 2: a tombstone
    produce(log, keyed_batch([(b"c", b"1")]))
    roll(log)
    first = run_pass(log)
    # Nothing was cleaned before: the horizon is 0 and the tombstone stays.
    assert read_all(log) == [(1, b"b", b"1"), (2, b"a", None), (3, b"c", b"1")]

    def age_tombstone_segment(seconds: float) -> None:
        """Make the tombstone's segment older than the last cleaned segment."""
        segments = log.segments
        last_clean = max(s.last_modified_ms() for s in segments[:-1]) / 1000
        tombstone = next(s for s in segments if s.base_offset == 2)
        os.utime(tombstone.log_path, (last_clean - seconds, last_clean - seconds))

    produce(log, keyed_batch([(b"d", b"1")]))
    roll(log)
    age_tombstone_segment(30)  # within delete.retention.ms of the last cleaned segment
    second = run_pass(log, first.end)
    assert (2, b"a", None) in read_all(log)

    produce(log, keyed_batch([(b"e", b"1")]))
    roll(log)
    # Past it, with room: the horizon counts from the last segment below the second
    # pass's end, written before 'e' was (a second's margin failed under CI's load).
    age_tombstone_segment(120)
    run_pass(log, second.end)
    assert read_all(log) == [(1, b"b", b"1"), (3, b"c", b"1"), (4, b"d", b"1"), (5, b"e", b"1")]


def test_delete_horizon_is_zero_before_anything_was_cleaned(tmp_path):
    log = open_log(tmp_path)
    produce(log, keyed_batch([(b"a", None)]))
    roll(log)
    assert delete_horizon_ms(log, 0) == 0


def test_a_producers_last_batch_stays_as_an_empty_batch_and_its_state_survives(tmp_path):
    log = open_log(tmp_path, replace(COMPACT, segment_bytes=10**6))
    produce(log, keyed_batch([(b"a", b"1")], producer_id=7, producer_epoch=2, base_sequence=0))
    produce(log, keyed_batch([(b"b", b"1")], producer_id=8, producer_epoch=0, base_sequence=0))
    produce(log, keyed_batch([(b"a", b"2")], producer_id=8, producer_epoch=0, base_sequence=1))
    roll(log)
    run_pass(log)
    assert read_all(log) == [(1, b"b", b"1"), (2, b"a", b"2")]
    data = os.pread(log.segments[0].fd, log.segments[0].size, 0)
    headers = scan_batches(data, dense=False)
    # Producer 7 wrote only the record that went: its batch stays, empty, with its
    # producer id, epoch, sequence and offsets.
    assert [(h.base_offset, h.records_count, h.producer_id) for h in headers] == [
        (0, 0, 7),
        (1, 1, 8),
        (2, 1, 8),
    ]
    assert headers[0].producer_epoch == 2 and headers[0].base_sequence == 0
    state = ProducerStateManager(log).state()  # rebuilt from the log alone
    assert state.entries[7].last_sequence == 0 and state.entries[7].producer_epoch == 2
    assert state.entries[8].last_sequence == 1


def test_segments_merged_by_a_pass_take_their_producer_snapshots_along(tmp_path):
    """Each roll writes a producer snapshot; when a pass merges segments into the first of
    their group, the others' snapshots go (Kafka's ``replaceSegments``), so a compacted
    log that keeps rolling, like ``__consumer_offsets``, does not gather a file a roll."""
    log = open_log(tmp_path, replace(COMPACT, segment_bytes=10**6))
    log.producer_state.state()  # built, as an idempotent producer's first write builds it
    for sequence in range(30):
        entries = [(b"key-%d" % (sequence % 3), b"v%d" % sequence)]
        produce(log, keyed_batch(entries, producer_id=4, producer_epoch=0, base_sequence=sequence))
        roll(log)
    assert len(snapshot_offsets(log.directory)) == 30
    checkpoint = run_pass(log).end
    bases = {segment.base_offset for segment in log.segments}
    assert len(bases) <= 3
    assert set(snapshot_offsets(log.directory)) <= bases
    for sequence in range(30, 40):  # a second pass merges the new segments into the first
        entries = [(b"key-%d" % (sequence % 3), b"v%d" % sequence)]
        produce(log, keyed_batch(entries, producer_id=4, producer_epoch=0, base_sequence=sequence))
        roll(log)
    run_pass(log, checkpoint)
    assert set(snapshot_offsets(log.directory)) <= {s.base_offset for s in log.segments}
    # The producer's state still loads: its sequence goes on from the last batch.
    log.close()
    reopened = open_log(tmp_path, replace(COMPACT, segment_bytes=10**6))
    assert reopened.producer_state.state().entries[4].last_sequence == 39


def test_a_batch_that_loses_records_keeps_its_offsets_codec_and_producer_fields(tmp_path):
    log = open_log(tmp_path, replace(COMPACT, segment_bytes=10**6))
    entries = [(b"a", b"1"), (b"b", b"1"), (b"c", b"1")]
    produce(
        log,
        keyed_batch(
            entries, compression=Compression.GZIP, producer_id=5, producer_epoch=1, base_sequence=0
        ),
    )
    produce(log, keyed_batch([(b"b", b"2")]))
    roll(log)
    run_pass(log)
    data = os.pread(log.segments[0].fd, log.segments[0].size, 0)
    first = scan_batches(data, dense=False)[0]
    assert (first.base_offset, first.last_offset_delta, first.records_count) == (0, 2, 2)
    assert first.compression is Compression.GZIP
    assert (first.producer_id, first.producer_epoch, first.base_sequence) == (5, 1, 0)
    assert read_all(log) == [(0, b"a", b"1"), (2, b"c", b"1"), (3, b"b", b"2")]


def test_keyless_records_are_dropped(tmp_path):
    log = open_log(tmp_path, replace(COMPACT, segment_bytes=10**6))
    produce(log, keyed_batch([(b"a", b"1")]))
    produce(log, make_batch([Record(0, 0, None, b"x")]))
    roll(log)
    run_pass(log)
    assert read_all(log) == [(0, b"a", b"1")]


def test_min_compaction_lag_keeps_young_segments_dirty(tmp_path):
    clock = FakeClock(10_000_000)
    config = replace(COMPACT, segment_bytes=10**6, min_compaction_lag_ms=5_000)
    log = open_log(tmp_path, config, clock)
    produce(log, make_batch([Record(0, 0, b"a", b"1")], base_timestamp=clock.now - 10_000))
    roll(log)
    produce(log, make_batch([Record(0, 0, b"a", b"2")], base_timestamp=clock.now - 1_000))
    roll(log)
    dirty = cleanable_range(log, None, clock.now)
    assert (dirty.first_dirty, dirty.first_uncleanable) == (0, 1)
    run_pass(log)
    # Offset 0 is its key's latest below the first uncleanable offset 1: it stays.
    assert read_all(log) == [(0, b"a", b"1"), (1, b"a", b"2")]


def test_groups_stay_within_segment_bytes(tmp_path):
    log = open_log(tmp_path, replace(COMPACT, segment_bytes=10**6))
    for i in range(6):
        produce(log, keyed_batch([(b"k%d" % i, b"x" * 50)]))
        roll(log)
    sizes = [s.size for s in log.segments[:-1]]
    groups = group_segments(log.segments[:-1], 6, sizes[0] * 2)
    assert [len(g) for g in groups] == [2, 2, 2]


def _cleaned_copy(log: PartitionLog):
    """The cleaner's ``.cleaned`` copy of all rolled segments, not swapped in."""
    offset_map = OffsetMap(1 << 20)
    rolled = log.segments[:-1]
    for segment in rolled:
        for data, header in _batches(segment):
            for record in iter_batch_records(data, header):
                offset_map.put(record.key, header.base_offset + record.offset_delta)
    end = log.active_segment.base_offset
    gen = clean_group(
        log.directory,
        log.config,
        rolled,
        offset_map=offset_map,
        end=end,
        delete_horizon_ms=0,
        producer_last=producer_last_offsets(log.segments),
        stats=CleanerStats(),
    )
    try:
        while True:
            next(gen)
    except StopIteration as stop:
        return rolled, stop.value


def _batches(segment):
    data = os.pread(segment.fd, segment.size, 0)
    for header in scan_batches(data, dense=False):
        yield data, header


def _log_with_updates(tmp_path: Path) -> PartitionLog:
    log = open_log(tmp_path, replace(COMPACT, segment_bytes=10**6))
    for round_ in range(3):
        for key in (b"a", b"b"):
            produce(log, keyed_batch([(key, b"v%d" % round_)]))
        roll(log)
    produce(log, keyed_batch([(b"c", b"tail")]))
    return log


CLEAN_VIEW = [(4, b"a", b"v2"), (5, b"b", b"v2"), (6, b"c", b"tail")]


def test_a_crash_before_the_commit_point_leaves_the_old_segments(tmp_path):
    log = _log_with_updates(tmp_path)
    original = read_all(log)
    _, cleaned = _cleaned_copy(log)
    cleaned.close_fd()
    assert cleaned.log_path.name.endswith(CLEANED_SUFFIX)
    log.close()
    reopened = open_log(tmp_path, replace(COMPACT, segment_bytes=10**6))
    assert read_all(reopened) == original
    assert not [p for p in (tmp_path / "t-0").iterdir() if p.name.endswith(CLEANED_SUFFIX)]


def test_a_crash_after_the_commit_point_completes_the_swap(tmp_path):
    for deleted_old in (0, 1, 3):  # how many old segments were unlinked before the crash
        directory = tmp_path / str(deleted_old)
        log = _log_with_updates(directory)
        rolled, cleaned = _cleaned_copy(log)
        cleaned.change_file_suffixes(CLEANED_SUFFIX, SWAP_SUFFIX)
        cleaned.close_fd()
        for segment in rolled[:deleted_old]:
            segment.unlink_files()
        log.close()  # as a crash would leave it: the swap file and the rest on disk
        reopened = open_log(directory, replace(COMPACT, segment_bytes=10**6))
        assert read_all(reopened) == CLEAN_VIEW, deleted_old
        names = sorted(p.name for p in (directory / "t-0").iterdir() if ".log" in p.name)
        assert names == ["00000000000000000000.log", "00000000000000000006.log"]


def test_a_swap_is_refused_when_retention_or_truncation_changed_the_log(tmp_path):
    log = _log_with_updates(tmp_path)
    gen = clean(log, None, offset_map=OffsetMap(1 << 20), now_ms=0)
    next(gen)  # the pass has started mapping
    log.truncate_to(3)  # a follower's truncation removes segments the pass works on
    try:
        while True:
            next(gen)
    except StopIteration as stop:
        result = stop.value
    assert result is not None and result.stats.swaps_refused == 1
    assert [r[0] for r in read_all(log)] == [0, 1, 2]
    assert not [p for p in (tmp_path / "t-0").iterdir() if p.name.endswith((".cleaned", ".swap"))]


# -- transactions (Kafka's CleanedTransactionMetadata) --------------------------------------


def _txn_append(log: PartitionLog, producer_id: int, sequence: int, entries: list[Entry]) -> None:
    from gregor_broker.protocol.record_batch import TRANSACTIONAL_FLAG, rewrite_header

    batch = rewrite_header(
        keyed_batch(entries, producer_id=producer_id, producer_epoch=0, base_sequence=sequence),
        attributes=TRANSACTIONAL_FLAG,
    )
    buffer = bytearray(batch)
    log.append_as_leader(buffer, scan_batches(buffer), leader_epoch=0)


def _end(log: PartitionLog, producer_id: int, *, commit: bool) -> int:
    return log.append_txn_marker(
        producer_id=producer_id,
        producer_epoch=0,
        coordinator_epoch=0,
        commit=commit,
        leader_epoch=0,
    ).first_offset


def _layout(log: PartitionLog) -> list[tuple[int, bool, int]]:
    """(base offset, is control, record count) of every batch from the log start."""
    out = []
    for segment in log.segments:
        data = os.pread(segment.fd, segment.size, 0)
        if data:
            out.extend(
                (h.base_offset, h.is_control, h.records_count)
                for h in scan_batches(data, dense=False)
            )
    return out


def _data(log: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
    return [
        (offset, key, value)
        for offset, key, value in read_all(log)
        if not any(base == offset and control for base, control, _ in _layout(log))
    ]


def _age_everything(log: PartitionLog, seconds: float) -> None:
    for segment in log.segments:
        old = segment.last_modified_ms() / 1000 - seconds
        os.utime(segment.log_path, (old, old))


def test_aborted_records_go_and_never_shadow_committed_values(tmp_path):
    log = open_log(tmp_path, replace(COMPACT, segment_bytes=10**6, delete_retention_ms=0))
    _txn_append(log, 7, 0, [(b"k", b"committed")])  # 0
    _txn_append(log, 8, 0, [(b"k", b"aborted"), (b"x", b"aborted")])  # 1-2
    assert _end(log, 8, commit=False) == 3
    assert _end(log, 7, commit=True) == 4
    produce(log, keyed_batch([(b"l", b"plain")]))  # 5
    roll(log)
    first = run_pass(log)
    # The aborted value of k neither stays nor takes the committed one's place.
    assert _data(log) == [(0, b"k", b"committed"), (5, b"l", b"plain")]
    # Both markers stay: this pass dropped data of the aborted transaction (its index
    # entry moves to the cleaned segment), and the committed one's data is still here.
    assert [(b, c) for b, c, _ in _layout(log) if c] == [(3, True), (4, True)]
    assert [
        (e.producer_id, e.first_offset, e.last_offset) for e in log.segments[0].txn_index.entries
    ] == [(8, 1, 3)]
    assert log.collect_aborted_transactions(0, 6) == log.segments[0].txn_index.entries

    # A later pass past the delete horizon: nothing of producer 8's transaction is left,
    # so its marker goes (as an empty batch: it is producer 8's last batch); producer
    # 7's marker stays with its data.
    produce(log, keyed_batch([(b"m", b"1")]))
    roll(log)
    _age_everything(log, 3600)
    run_pass(log, first.end)
    layout = _layout(log)
    assert (3, True, 0) in layout and (4, True, 1) in layout
    assert (1, False, 0) not in layout and all(b != 1 for b, _, _ in layout)
    assert log.segments[0].txn_index.entries == []
    assert _data(log) == [(0, b"k", b"committed"), (5, b"l", b"plain"), (6, b"m", b"1")]
    # Producer state rebuilt from the cleaned log: no transaction left open.
    assert ProducerStateManager(log).state().transactions.first_offsets == {}


def test_an_open_transaction_bounds_the_cleanable_range(tmp_path):
    log = open_log(tmp_path, replace(COMPACT, segment_bytes=10**6))
    produce(log, keyed_batch([(b"a", b"1")]))  # 0
    _txn_append(log, 9, 0, [(b"a", b"open")])  # 1: open
    produce(log, keyed_batch([(b"a", b"2")]))  # 2
    roll(log)
    assert cleanable_range(log, None, log._now_ms()).first_uncleanable == 1
    run_pass(log)
    # Only offset 0 was in range: nothing past the open transaction is touched.
    assert _data(log) == [(0, b"a", b"1"), (1, b"a", b"open"), (2, b"a", b"2")]
    _end(log, 9, commit=False)
    roll(log)
    run_pass(log)
    assert _data(log) == [(2, b"a", b"2")]


def test_a_commit_marker_stays_while_its_data_is_in_an_earlier_group(tmp_path):
    """Every batch in a segment (and group) of its own: the marker's group holds none of
    its transaction's data, which is still in the log. Dropping the marker would leave
    that data in a transaction a rebuilt producer state sees as open forever (the LSO
    stuck there)."""
    log = open_log(tmp_path, replace(COMPACT, segment_bytes=100, delete_retention_ms=0))
    _txn_append(log, 7, 0, [(b"k", b"committed")])  # 0
    produce(log, keyed_batch([(b"x", b"1")]))  # 1
    assert _end(log, 7, commit=True) == 2
    produce(log, keyed_batch([(b"y", b"1")]))  # 3
    roll(log)
    assert len(log.segments) >= 4
    first = run_pass(log)
    produce(log, keyed_batch([(b"z", b"1")]))
    roll(log)
    _age_everything(log, 3600)
    run_pass(log, first.end)
    assert (2, True, 1) in _layout(log)
    assert (0, b"k", b"committed") in _data(log)
    assert ProducerStateManager(log).state().transactions.first_offsets == {}
