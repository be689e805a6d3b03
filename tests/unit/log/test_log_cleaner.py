"""Which log the cleaner takes, its checkpoint file and its throttle
(``log/log_cleaner.py``), on real logs in a real LogManager."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from log_helpers import FakeClock, produce

from gregor_broker.log.checkpoints import read_offset_checkpoint
from gregor_broker.log.cleaner import OffsetMap
from gregor_broker.log.log_cleaner import (
    CLEANER_OFFSET_CHECKPOINT,
    CleanerConfig,
    LogCleaner,
    Throttler,
)
from gregor_broker.log.log_config import LogConfig
from gregor_broker.log.log_manager import LogManager
from gregor_broker.protocol.records import Record, make_batch

COMPACT = LogConfig(cleanup_policy="compact", segment_bytes=10**6)


def _updates(log, key_count: int, rounds: int, timestamp: int = 1_000) -> None:
    for round_ in range(rounds):
        for key in range(key_count):
            record = Record(0, 0, b"k%d" % key, b"v%d" % round_)
            produce(log, make_batch([record], base_timestamp=timestamp))
    log._roll(log.log_end_offset)


def _manager(tmp_path, clock=None) -> LogManager:
    manager = LogManager([tmp_path / "logs"], default_config=COMPACT, now_ms=clock or FakeClock())
    manager.load(lambda topic: COMPACT)
    return manager


def test_the_dirtiest_compacted_log_above_its_ratio_is_taken(tmp_path):
    manager = _manager(tmp_path)
    slightly = manager.get_or_create("slightly", 0, COMPACT)
    very = manager.get_or_create("very", 0, COMPACT)
    plain = manager.get_or_create("plain", 0, replace(COMPACT, cleanup_policy="delete"))
    for log in (slightly, very, plain):
        _updates(log, 10, 3)
    cleaner = LogCleaner(manager, CleanerConfig())
    # "slightly" was cleaned once, then got a little more: its dirty ratio is low.
    asyncio.run(cleaner.clean_log(slightly, OffsetMap(1 << 20)))
    _updates(slightly, 1, 1)
    assert cleaner.dirty_ratio(slightly) < 0.5 < cleaner.dirty_ratio(very)
    assert cleaner.grab_filthiest() is very
    assert cleaner.grab_filthiest() is None  # "very" is in progress, "slightly" under 0.5
    assert cleaner.metrics.max_dirty_percent > 0


def test_max_compaction_lag_makes_a_log_due_below_its_ratio(tmp_path):
    clock = FakeClock(1_000_000)
    manager = _manager(tmp_path, clock)
    config = replace(COMPACT, min_cleanable_dirty_ratio=0.99, max_compaction_lag_ms=60_000)
    log = manager.get_or_create("lagging", 0, config)
    _updates(log, 10, 1, timestamp=clock.now)
    cleaner = LogCleaner(manager, CleanerConfig(), now_ms=clock)
    asyncio.run(cleaner.clean_log(log, OffsetMap(1 << 20)))
    _updates(log, 1, 1, timestamp=clock.now)
    assert cleaner.grab_filthiest() is None
    clock.advance(61_000)
    assert cleaner.grab_filthiest() is log


def test_the_checkpoint_file_records_where_each_pass_ended_and_is_read_back(tmp_path):
    manager = _manager(tmp_path)
    log = manager.get_or_create("accounts", 3, COMPACT)
    _updates(log, 5, 4)
    cleaner = LogCleaner(manager, CleanerConfig())
    result = asyncio.run(cleaner.clean_log(log, OffsetMap(1 << 20)))
    assert result is not None and result.end == 20
    path = tmp_path / "logs" / CLEANER_OFFSET_CHECKPOINT
    assert read_offset_checkpoint(path) == {("accounts", 3): 20}
    again = LogCleaner(manager, CleanerConfig(enable=False))
    again.start()  # reads the checkpoint files (workers start only when enabled)
    assert again.checkpoint_of("accounts", 3) == 20
    assert again.grab_filthiest() is None  # nothing new since the checkpoint


def test_a_disabled_cleaner_starts_no_workers(tmp_path):
    async def run() -> int:
        cleaner = LogCleaner(_manager(tmp_path), CleanerConfig(enable=False))
        cleaner.start()
        return len(cleaner._tasks)

    assert asyncio.run(run()) == 0


def test_workers_clean_in_the_background_and_stop(tmp_path):
    manager = _manager(tmp_path)
    log = manager.get_or_create("accounts", 0, COMPACT)
    _updates(log, 5, 4)

    async def run() -> int:
        cleaner = LogCleaner(manager, CleanerConfig(threads=2, backoff_ms=10))
        cleaner.start()
        for _ in range(200):
            if cleaner.metrics.passes:
                break
            await asyncio.sleep(0.01)
        await cleaner.stop()
        return cleaner.metrics.passes

    assert asyncio.run(run()) == 1
    assert log.size_bytes < 5 * 4 * 70


def test_the_throttler_holds_bytes_to_its_rate():
    now = [0.0]
    slept: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    async def run() -> None:
        throttler = Throttler(1000.0, clock=lambda: now[0], sleep=fake_sleep)
        await throttler.maybe_throttle(500)  # 500 bytes at 1,000/s: half a second
        now[0] += 0.1
        await throttler.maybe_throttle(100)  # 600 bytes by 0.6 s: on time, no sleep

    asyncio.run(run())
    assert slept == [0.5]
