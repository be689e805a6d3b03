"""log.max.open.files: segment descriptors are bounded, reopened on demand, never closed
under a FileSlice, and closed at once when their partition is deleted (issue 9)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from log_helpers import FakeClock, batch, consume_offsets, produce, slice_bytes

from gregor_broker.log import LogConfig, LogManager
from gregor_broker.log.open_files import OPEN_FILES

CONFIG = LogConfig(segment_bytes=1 << 20)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def bound() -> Iterator[None]:
    before = OPEN_FILES.max_open
    yield
    OPEN_FILES.max_open = before


def open_log_files(under: Path) -> list[str]:
    """Targets of this process's descriptors that are segment files under ``under``
    (an unlinked one reads "... (deleted)")."""
    targets = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(under)) and ".log" in target:
            targets.append(target)
    return targets


def test_open_segment_files_stay_within_the_bound_and_reopen_on_demand(tmp_path, clock, bound):
    logs = LogManager([tmp_path], default_config=CONFIG, now_ms=clock, max_open_files=16)
    for partition in range(100):
        log = logs.get_or_create("many", partition, CONFIG)
        produce(log, batch(2, value_size=10))
        assert len(open_log_files(tmp_path)) <= 16
    for partition in range(100):  # every log still reads (its file reopens)
        assert consume_offsets(logs.get("many", partition)) == [0, 1]
        assert len(open_log_files(tmp_path)) <= 16
    assert OPEN_FILES.evicted_total > 0
    logs.close()
    assert open_log_files(tmp_path) == []


def test_a_file_slice_keeps_its_descriptor_open_past_the_bound(tmp_path, clock, bound):
    logs = LogManager([tmp_path], default_config=CONFIG, now_ms=clock, max_open_files=16)
    first = logs.get_or_create("pinned", 0, CONFIG)
    produce(first, batch(3, value_size=10))
    file_slice = first.read(0, 1 << 20)
    expected = slice_bytes(file_slice)
    for partition in range(1, 60):  # enough opens to evict "pinned-0" if it were idle
        produce(logs.get_or_create("pinned", partition, CONFIG), batch(1, value_size=10))
    assert slice_bytes(file_slice) == expected  # sendfile would still send the right bytes
    assert os.readlink(f"/proc/self/fd/{file_slice.fd}").endswith("pinned-0/" + "0" * 20 + ".log")
    del file_slice
    produce(logs.get_or_create("pinned", 60, CONFIG), batch(1, value_size=10))
    assert len(open_log_files(tmp_path)) <= 16  # unpinned, so it could go
    logs.close()


def test_a_deleted_partition_closes_its_files_at_once_unless_a_slice_is_being_sent(tmp_path, clock):
    logs = LogManager([tmp_path], default_config=CONFIG, now_ms=clock)
    for partition in range(3):
        log = logs.get_or_create("churn", partition, CONFIG)
        produce(log, batch(3, value_size=10))
        consume_offsets(log)
    in_flight = logs.get("churn", 2).read(0, 1 << 20)
    for partition in range(3):
        logs.delete_log("churn", partition)
    logs.wait_for_removals()
    # Not after file.delete.delay.ms (60 s): now (by the remover thread). Only the
    # slice's file stays open (in the renamed "-delete" directory, or unlinked once the
    # remover got to it).
    (still_open,) = open_log_files(tmp_path)
    assert "/churn-2." in still_open and "-delete/" in still_open
    assert len(slice_bytes(in_flight)) == in_flight.size
    del in_flight
    assert open_log_files(tmp_path) == []
    logs.close()
