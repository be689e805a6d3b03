"""The event loop never waits on the file system for a log's periodic work: the fsyncs of
a flush, the producer snapshot written at a roll, and the unlinks and last closes of
deleted segments run on the log manager's threads (under heavy disk I/O each waited on
the journal for seconds, while the broker answered nobody). Each test slows the file
system call on the threads only and checks that the loop keeps turning, then that the
outcome is right: the recovery point moves only once the fsyncs are done and never past
a truncation, a descriptor being fsynced is never closed, a late unlink never removes a
file created again under the same name, a failure takes the log dir offline, and a
snapshot written at a roll is what a restart after a crash loads. A new partition's
files, also made on the threads, fail its creation when they could not be made."""

from __future__ import annotations

import asyncio
import errno
import os
import threading
import time
from collections.abc import Callable

import pytest
from log_helpers import FakeClock, batch, consume_offsets, produce

from gregor_broker.log import LogConfig, LogManager, PartitionLog, log_manager
from gregor_broker.log.log_manager import LogDirOffline
from gregor_broker.protocol.record_batch import scan_batches
from gregor_broker.protocol.records import Record, make_batch

ONE = batch(1, value_size=100)
CONFIG = LogConfig(segment_bytes=3 * len(ONE))


class Gate:
    """``os.<name>`` waits for ``release`` when called on a thread other than the main
    one (the event loop's, in these tests), then runs for real."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
        self.entered = threading.Event()
        self._open = threading.Event()
        real = getattr(os, name)

        def held(*args, **kwargs):
            if threading.current_thread() is not threading.main_thread():
                self.entered.set()
                assert self._open.wait(30)
            return real(*args, **kwargs)

        monkeypatch.setattr(os, name, held)

    def release(self) -> None:
        self._open.set()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def slow_fsync(monkeypatch):
    gate = Gate(monkeypatch, "fsync")
    yield gate
    gate.release()


@pytest.fixture
def slow_unlink(monkeypatch):
    gate = Gate(monkeypatch, "unlink")
    yield gate
    gate.release()


def manager(tmp_path, clock) -> LogManager:
    return LogManager([tmp_path / "d1"], default_config=CONFIG, now_ms=clock)


async def until(condition: Callable[[], object], timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.01)


async def loop_turns_while(gate: Gate, seconds: float = 0.3) -> int:
    """How many 10 ms sleeps the loop completed in ``seconds`` with ``gate`` held."""
    assert gate.entered.wait(10)  # a thread is inside the slowed call
    turns = 0
    ends = time.monotonic() + seconds
    while time.monotonic() < ends:
        await asyncio.sleep(0.01)
        turns += 1
    return turns


def rolled(log: PartitionLog, segments: int) -> None:
    while len(log.segments) < segments:
        produce(log, ONE)


def test_a_rolled_segment_is_fsynced_off_the_loop_and_only_then_counts_as_recovered(
    tmp_path, clock, slow_fsync
):
    async def scenario() -> None:
        logs = manager(tmp_path, clock)
        log = logs.get_or_create("orders", 0, CONFIG)
        rolled(log, 3)  # [0, 3, 6]: the roll at 3 starts a flush (Kafka's at roll)
        assert await loop_turns_while(slow_fsync) >= 10
        assert log.recovery_point == 0  # not before the fsyncs are done
        await logs.flush_due_sliced()  # one flush in flight per log: nothing more
        slow_fsync.release()
        # Then the segment rolled meanwhile (at 6) is flushed too.
        await until(lambda: log.recovery_point == 6)
        logs.close()

    asyncio.run(scenario())


def test_flush_ms_fsyncs_the_active_segment_off_the_loop(tmp_path, clock, slow_fsync):
    async def scenario() -> None:
        logs = manager(tmp_path, clock)
        config = LogConfig(segment_bytes=CONFIG.segment_bytes, flush_ms=1000)
        log = logs.get_or_create("orders", 0, config)
        produce(log, ONE, ONE)
        clock.advance(1000)
        await logs.flush_due_sliced()
        assert await loop_turns_while(slow_fsync) >= 10
        produce(log, ONE)  # appends go on meanwhile, to the segment being fsynced
        assert log.recovery_point == 0
        slow_fsync.release()
        await until(lambda: log.recovery_point == 2)  # what was there when chosen
        logs.close()

    asyncio.run(scenario())


def test_a_truncation_during_a_flush_keeps_the_recovery_point_at_or_below_the_log_end(
    tmp_path, clock, slow_fsync
):
    async def scenario() -> None:
        logs = manager(tmp_path, clock)
        log = logs.get_or_create("orders", 0, CONFIG)
        rolled(log, 2)  # [0, 3], log end 4; the roll at 3 flushes up to 3, on a thread
        assert slow_fsync.entered.wait(10)
        log.truncate_to(2)  # a follower's truncation: segment 3 goes, 0 is cut at 2
        produce(log, ONE, ONE, ONE)  # rolls at 2: offsets 2-4, in a new segment, unsynced
        assert (log.segment_base_offsets, log.log_end_offset) == ([0, 2], 5)
        slow_fsync.release()
        # The flush chosen before the truncation (up to 3) moves nothing; the one the
        # roll at 2 asked for, chosen after it, moves the recovery point to 2.
        await until(lambda: log._flushing is None and log.recovery_point == 2)
        await asyncio.sleep(0.1)
        assert log.recovery_point == 2
        assert consume_offsets(log) == list(range(5))
        logs.close()

    asyncio.run(scenario())


def test_a_deleted_segments_descriptor_stays_open_while_a_flush_of_it_is_in_flight(
    tmp_path, clock, slow_fsync
):
    async def scenario() -> None:
        logs = manager(tmp_path, clock)
        log = logs.get_or_create("orders", 0, CONFIG)
        rolled(log, 3)  # [0, 3, 6]: the roll at 3 flushes segment 0, on a thread
        first = log.segments[0]
        fd = first.fd
        inode = os.fstat(fd).st_ino
        assert slow_fsync.entered.wait(10)
        log.delete_records_before(6)  # segment 0 goes while being fsynced (and 3)
        clock.advance(CONFIG.file_delete_delay_ms + 1)
        assert log.close_deleted_segments() == 1  # past the delay, still in flight
        logs.run_retention()
        assert first.is_open and os.fstat(fd).st_ino == inode
        await until(lambda: not (tmp_path / "d1" / "orders-0" / f"{0:020d}.log").exists())
        slow_fsync.release()
        await until(lambda: not first.is_open)  # closed once the flush let go
        await until(lambda: log.recovery_point == log.log_end_offset)
        logs.close()

    asyncio.run(scenario())


def test_deleted_segments_are_unlinked_off_the_loop(tmp_path, clock, slow_unlink):
    async def scenario() -> None:
        logs = manager(tmp_path, clock)
        log = logs.get_or_create("orders", 0, CONFIG)
        rolled(log, 3)
        directory = tmp_path / "d1" / "orders-0"
        log.delete_records_before(6)
        assert log.segment_base_offsets == [6]
        assert await loop_turns_while(slow_unlink) >= 10
        assert (directory / f"{0:020d}.log").exists()  # the thread has not got to it
        slow_unlink.release()
        await until(lambda: sorted(p.name for p in directory.glob("*.log")) == [f"{6:020d}.log"])
        logs.close()

    asyncio.run(scenario())


def test_a_late_unlink_never_removes_a_segment_created_again_at_the_same_base(
    tmp_path, clock, slow_unlink
):
    async def scenario() -> None:
        logs = manager(tmp_path, clock)
        log = logs.get_or_create("orders", 0, CONFIG)
        rolled(log, 3)
        directory = tmp_path / "d1" / "orders-0"
        log.delete_records_before(6)  # unlinks of segments 0 and 3 held on the threads
        assert slow_unlink.entered.wait(10)
        threading.Timer(0.3, slow_unlink.release).start()
        started = time.monotonic()
        log.truncate_to(0)  # full truncation: a new segment 0, after the old one's unlink
        assert time.monotonic() - started >= 0.2
        produce(log, ONE)
        await until(lambda: not log._unlinking)
        await asyncio.sleep(0.1)
        assert (directory / f"{0:020d}.log").exists()
        assert (directory / f"{0:020d}.index").exists()
        assert consume_offsets(log) == [0]
        logs.close()

    asyncio.run(scenario())


def test_a_pending_unlink_the_threads_have_not_started_is_done_before_the_name_is_reused(
    tmp_path, clock
):
    async def scenario() -> None:
        logs = manager(tmp_path, clock)
        log = logs.get_or_create("orders", 0, CONFIG)
        rolled(log, 3)
        directory = tmp_path / "d1" / "orders-0"
        busy = threading.Event()
        for _ in range(8):  # every thread of the pool busy: the unlinks wait in its queue
            logs.submit(log, lambda: busy.wait(30))
        log.delete_records_before(6)
        assert (directory / f"{0:020d}.log").exists()
        log.truncate_to(0)  # does segment 0's queued unlink itself, then creates it
        produce(log, ONE)
        busy.set()
        await until(lambda: not log._unlinking)
        await asyncio.sleep(0.1)
        assert sorted(p.name for p in directory.glob("*.log")) == [f"{0:020d}.log"]
        assert consume_offsets(log) == [0]
        logs.close()

    asyncio.run(scenario())


def test_a_failed_fsync_on_a_thread_takes_the_log_dir_offline(tmp_path, clock, monkeypatch):
    real = os.fsync

    def failing(fd: int) -> None:
        if threading.current_thread() is not threading.main_thread():
            raise OSError(errno.EIO, "Input/output error")
        real(fd)

    async def scenario() -> None:
        logs = manager(tmp_path, clock)
        failed = []
        logs.dir_failure_listeners.append(lambda d, keys: failed.append((d, keys)))
        log = logs.get_or_create("orders", 0, CONFIG)
        monkeypatch.setattr(os, "fsync", failing)
        rolled(log, 2)  # the roll's flush fails on its thread
        await until(lambda: failed)
        assert failed == [(tmp_path / "d1", [("orders", 0)])]
        assert logs.is_offline(("orders", 0))
        assert log.recovery_point == 0
        logs.close()
        assert not (tmp_path / "d1" / ".kafka_cleanshutdown").exists()

    asyncio.run(scenario())


def test_new_files_that_cannot_be_made_fail_the_partitions_creation(tmp_path, clock, monkeypatch):
    def failing(directory):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(log_manager, "prepare_first_segment", failing)

    async def scenario() -> None:
        logs = manager(tmp_path, clock)
        told = []
        logs.ready_listeners.append(told.append)
        assert logs.creating(("orders", 0))
        await until(lambda: told)
        assert told == [("orders", 0)] and not logs.creating(("orders", 0))
        logs.flush_due()  # a periodic job: the failure is not the thread's to report
        assert logs.offline_dirs == {}
        with pytest.raises(LogDirOffline, match="No space left"):
            logs.get_or_create("orders", 0, CONFIG)
        assert tmp_path / "d1" in logs.offline_dirs  # as a creation failing here would
        logs.close()

    asyncio.run(scenario())


def idempotent_batch(producer_id: int, sequence: int) -> bytes:
    records = [Record(0, 0, b"k", b"v" * 100)]
    return make_batch(records, producer_id=producer_id, producer_epoch=0, base_sequence=sequence)


def append_idempotent(log: PartitionLog, producer_id: int, sequence: int) -> None:
    buffer = bytearray(idempotent_batch(producer_id, sequence))
    log.append_as_leader(buffer, scan_batches(buffer), leader_epoch=0)


def test_the_snapshot_written_at_a_roll_off_the_loop_is_what_a_restart_after_a_crash_loads(
    tmp_path, clock, slow_fsync
):
    config = LogConfig(segment_bytes=3 * len(idempotent_batch(7, 0)))

    async def scenario() -> None:
        logs = LogManager([tmp_path / "d1"], default_config=config, now_ms=clock)
        log = logs.get_or_create("orders", 0, config)
        directory = tmp_path / "d1" / "orders-0"
        for sequence in range(3):
            append_idempotent(log, 7 + sequence % 2, sequence // 2)
        append_idempotent(log, 9, 0)  # rolls at 3: the snapshot describes offsets 0-2
        assert log.segment_base_offsets == [0, 3]
        assert await loop_turns_while(slow_fsync) >= 10  # the snapshot's fsync is held
        assert not (directory / f"{3:020d}.snapshot").exists()
        slow_fsync.release()
        await until(lambda: (directory / f"{3:020d}.snapshot").exists())
        await logs.flush_due_sliced()
        await until(lambda: log.recovery_point == 3)
        logs.checkpoint()
        # A crash: no close, no clean-shutdown marker. The restart recovers from the
        # recovery point (3) and starts its producer state from the snapshot at 3.
        reopened = PartitionLog.open(directory, config, now_ms=clock, recovery_point=3)
        try:
            assert reopened.producer_state._state is not None
            assert reopened.producer_state._state.next_offset == 3
            assert sorted(reopened.producer_state._state.entries) == [7, 8]
            assert sorted(reopened.active_producers()) == sorted(log.active_producers())
            # The restarted log knows producer 9's last batch: its retry is a duplicate.
            buffer = bytearray(idempotent_batch(9, 0))
            result = reopened.append_as_leader(buffer, scan_batches(buffer), leader_epoch=0)
            assert result.duplicate and result.first_offset == 3
        finally:
            reopened.abandon()
            reopened.close_deleted_segments(force=True)
        logs.close()

    asyncio.run(scenario())


def test_a_truncation_cancels_a_snapshot_still_being_written(tmp_path, clock, slow_fsync):
    config = LogConfig(segment_bytes=3 * len(idempotent_batch(7, 0)))

    async def scenario() -> None:
        logs = LogManager([tmp_path / "d1"], default_config=config, now_ms=clock)
        log = logs.get_or_create("orders", 0, config)
        directory = tmp_path / "d1" / "orders-0"
        for sequence in range(4):
            append_idempotent(log, 7, sequence)  # rolls at 3: a snapshot at 3 on a thread
        assert slow_fsync.entered.wait(10)
        log.truncate_to(2)  # the snapshot at 3 describes a batch that is gone
        slow_fsync.release()
        await until(lambda: all(w.done.is_set() for w in log.producer_state._writes))
        assert sorted(p.name for p in directory.iterdir() if "snapshot" in p.name) == []
        assert log.producer_state.state().entries[7].last_sequence == 1
        logs.close()

    asyncio.run(scenario())
