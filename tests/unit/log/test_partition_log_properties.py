"""Property tests: random appends, rolls, restarts and crashes keep offsets dense and
reads exact."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import hypothesis.strategies as st
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from log_helpers import FakeClock, produce, record_values, slice_bytes, slice_headers

from gregor_broker.log import LogConfig, PartitionLog
from gregor_broker.protocol.records import Record, make_batch


def value_for(offset: int) -> bytes:
    return f"value-{offset}".encode()


class PartitionLogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="gregor-log-"))
        self.clock = FakeClock()
        self.config = LogConfig(segment_bytes=600, index_interval_bytes=150, segment_ms=10_000)
        self.log = self._open(clean=False)
        self.values: dict[int, bytes] = {}
        self.timestamps: dict[int, int] = {}
        self.log_start_offset = 0
        self.batch_bases: list[int] = []

    def _open(self, *, clean: bool, recovery_point: int = 0, start: int = 0) -> PartitionLog:
        return PartitionLog.open(
            self.root / "prop-0",
            self.config,
            now_ms=self.clock,
            had_clean_shutdown=clean,
            recovery_point=recovery_point,
            log_start_offset=start,
        )

    @property
    def log_end_offset(self) -> int:
        return max(self.values, default=self.log_start_offset - 1) + 1

    @rule(
        sizes=st.lists(st.integers(1, 5), min_size=1, max_size=3),
        timestamp=st.integers(0, 10_000),
        padding=st.integers(0, 120),
    )
    def append(self, sizes: list[int], timestamp: int, padding: int) -> None:
        start = self.log.log_end_offset
        batches = []
        offset = start
        for count in sizes:
            records = [
                Record(i, i * 7, None, value_for(offset + i) + b"." * padding) for i in range(count)
            ]
            batches.append(make_batch(records, base_timestamp=timestamp))
            self.batch_bases.append(offset)
            for i in range(count):
                self.values[offset + i] = value_for(offset + i) + b"." * padding
                self.timestamps[offset + i] = timestamp + i * 7
            offset += count
        result = produce(self.log, *batches)
        assert result.first_offset == start
        assert result.last_offset == offset - 1

    @rule(ms=st.integers(0, 20_000))
    def time_passes(self, ms: int) -> None:
        self.clock.advance(ms)
        self.log.maybe_roll()

    @rule()
    def clean_restart(self) -> None:
        start = self.log.log_start_offset
        self.log.close()
        self.log = self._open(clean=True, recovery_point=self.log_end_offset, start=start)

    @rule(torn=st.integers(1, 60))
    def crash_with_a_torn_write(self, torn: int) -> None:
        recovery_point, start = self.log.recovery_point, self.log.log_start_offset
        for segment in self.log._segments:
            segment.close_fd()
        active = sorted((self.root / "prop-0").glob("*.log"))[-1]
        with open(active, "ab") as file:
            file.write(os.urandom(torn))
        self.log = self._open(clean=False, recovery_point=recovery_point, start=start)

    @rule()
    def flush(self) -> None:
        self.log.flush()
        assert self.log.recovery_point == self.log_end_offset

    @precondition(lambda self: self.values)
    @rule(data=st.data())
    def delete_records(self, data) -> None:
        target = data.draw(st.integers(self.log_start_offset, self.log_end_offset))
        assert self.log.delete_records_before(target) == max(target, self.log_start_offset)
        for offset in range(self.log_start_offset, target):
            self.values.pop(offset, None)
        self.log_start_offset = max(self.log_start_offset, target)

    @precondition(lambda self: self.values)
    @rule(data=st.data())
    def truncate_at_a_batch_boundary(self, data) -> None:
        # Replication truncates at batch boundaries (epoch start offsets).
        boundaries = [b for b in self.batch_bases if b >= self.log_start_offset]
        target = data.draw(st.sampled_from([*boundaries, self.log_end_offset]))
        self.log.truncate_to(target)
        assert self.log.log_end_offset == target
        self.batch_bases = [b for b in self.batch_bases if b < target]
        for offset in list(self.values):
            if offset >= target:
                del self.values[offset]

    @invariant()
    def offsets_match_the_model(self) -> None:
        assert self.log.log_end_offset == self.log_end_offset
        assert self.log.log_start_offset == self.log_start_offset

    @invariant()
    def reads_are_exact_and_dense(self) -> None:
        position = self.log.log_start_offset
        seen: dict[int, bytes | None] = {}
        while position < self.log.log_end_offset:
            file_slice = self.log.read(position, 400)
            assert file_slice is not None
            data = slice_bytes(file_slice)
            for offset, value in record_values(data):
                if offset >= self.log_start_offset:
                    seen[offset] = value
            position = slice_headers(file_slice)[-1].next_offset
        assert seen == self.values
        assert self.log.read(self.log.log_end_offset, 100) is None

    @invariant()
    def timestamp_lookup_finds_the_first_matching_record(self) -> None:
        if not self.values:
            return
        target = self.timestamps[min(self.values)] + 3
        expected = next(
            ((o, self.timestamps[o]) for o in sorted(self.values) if self.timestamps[o] >= target),
            None,
        )
        assert self.log.offset_for_timestamp(target) == expected

    def teardown(self) -> None:
        self.log.close()
        shutil.rmtree(self.root, ignore_errors=True)


PartitionLogMachine.TestCase.settings = settings(
    max_examples=60,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_random_operations_keep_offsets_dense_and_reads_exact = PartitionLogMachine.TestCase
