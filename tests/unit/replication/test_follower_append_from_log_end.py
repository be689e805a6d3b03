"""A follower appends only what lies at and after its log end (``fetcher.from_log_end``).

The leader answers a fetch with the batch holding the fetch offset, so an answer can
start below the follower's log end. Before, the follower left such batches out of the
batch list but still wrote the whole received buffer: their bytes went into the segment
between batches with higher offsets, and after a kill -9 the start-up's recovery stopped
at the offset going backwards and cut every later batch off (acknowledged records gone
from a replica that had counted for them). A batch straddling the log end was left out
altogether and the next one appended after a hole.

Real logs in a temporary directory: batches written by a leader log, copied as a
follower's fetcher copies them, and the follower's log opened again as after a crash.
"""

from __future__ import annotations

from pathlib import Path

from gregor_broker.log.log_config import LogConfig
from gregor_broker.log.partition_log import PartitionLog
from gregor_broker.protocol.record_batch import scan_batches
from gregor_broker.protocol.records import Record, make_batch
from gregor_broker.replication.fetcher import from_log_end


def _open(directory: Path) -> PartitionLog:
    return PartitionLog.open(directory, LogConfig(), now_ms=lambda: 0)


def _leader_bytes(directory: Path, batch_sizes: list[int]) -> bytes:
    """The batches a leader log holds, as it would send them (offsets assigned)."""
    leader = _open(directory)
    for size in batch_sizes:
        buffer = bytearray(make_batch([Record(i, 0, None, b"v%d" % i) for i in range(size)]))
        leader.append(buffer, scan_batches(buffer), leader_epoch=0)
    data = b"".join(path.read_bytes() for path in sorted(directory.glob("*.log")))
    leader.close()
    return data


def _offsets(log: PartitionLog) -> list[tuple[int, int]]:
    """(base, last) of every batch in the log's segment files, in file order."""
    return [
        (h.base_offset, h.last_offset)
        for path in sorted(log.directory.glob("*.log"))
        for h in scan_batches(bytearray(path.read_bytes()), dense=False)
    ]


def _copy(follower: PartitionLog, received: bytes) -> int | None:
    """What the fetcher does with a leader's answer (``ReplicaFetcher._apply_fetched``);
    the offset the log was cut back to, if it was."""
    buffer = bytearray(received)
    buffer, headers, cut_at = from_log_end(follower, buffer, scan_batches(buffer, dense=False))
    if cut_at is not None:
        follower.truncate_to(cut_at)
        if follower.log_end_offset != cut_at:
            return cut_at  # fetched again from the new log end
        buffer, headers, _ = from_log_end(follower, buffer, headers)
    if headers:
        follower.append_as_follower(buffer, headers)
    return cut_at


def test_batches_below_the_log_end_are_not_written_again(tmp_path: Path) -> None:
    received = _leader_bytes(tmp_path / "leader-0", [5, 5, 5])  # offsets 0-4, 5-9, 10-14
    first_batch = scan_batches(bytearray(received), dense=False)[1].position
    follower = _open(tmp_path / "follower-0")
    assert _copy(follower, received[:first_batch]) is None  # 0-4
    # An answer starting at the batch the follower already has (the leader sent from an
    # earlier fetch offset): only 5-14 are new.
    assert _copy(follower, received) is None
    assert follower.log_end_offset == 15
    assert _offsets(follower) == [(0, 4), (5, 9), (10, 14)]
    follower.close()

    # After a crash, recovery keeps every batch.
    reopened = PartitionLog.open(
        tmp_path / "follower-0", LogConfig(), now_ms=lambda: 0, recovery_point=0
    )
    assert reopened.log_end_offset == 15
    assert _offsets(reopened) == [(0, 4), (5, 9), (10, 14)]
    reopened.close()


def test_a_log_end_inside_a_leader_batch_is_cut_back_to_it_not_skipped(tmp_path: Path) -> None:
    leader_bytes = _leader_bytes(tmp_path / "leader-0", [3, 7, 5])  # 0-2, 3-9, 10-14
    answer_from_3 = leader_bytes[scan_batches(bytearray(leader_bytes), dense=False)[1].position :]
    # The follower's own history: 0-4 and 5-7 in other batches (a tail the leader's
    # history does not share), so its log end (8) is inside the leader's batch 3-9.
    follower = _open(tmp_path / "follower-0")
    assert _copy(follower, _leader_bytes(tmp_path / "other-0", [5, 3])) is None
    assert follower.log_end_offset == 8

    # Not appended after a hole at 8-9: cut back to 3, which drops its batch 0-4 whole.
    assert _copy(follower, answer_from_3) == 3
    assert follower.log_end_offset == 0
    assert _copy(follower, leader_bytes) is None  # the next fetch, from 0
    assert _offsets(follower) == [(0, 2), (3, 9), (10, 14)]
    assert follower.log_end_offset == 15
    follower.close()


def test_a_log_cut_back_to_where_the_leader_batch_begins_takes_it_at_once(tmp_path: Path):
    leader_bytes = _leader_bytes(tmp_path / "leader-0", [5, 5, 5])  # 0-4, 5-9, 10-14
    answer_from_5 = leader_bytes[scan_batches(bytearray(leader_bytes), dense=False)[1].position :]
    follower = _open(tmp_path / "follower-0")
    # Its own 0-4 (shared) and 5-7 (not): its log end (8) is inside the leader's 5-9.
    assert _copy(follower, _leader_bytes(tmp_path / "other-0", [5, 3])) is None
    assert _copy(follower, answer_from_5) == 5
    assert _offsets(follower) == [(0, 4), (5, 9), (10, 14)]
    assert follower.log_end_offset == 15
    follower.close()


def test_an_empty_log_starting_inside_a_leader_batch_starts_at_the_batch(tmp_path: Path):
    """Kafka's truncateFullyAndStartAt case: a log start moved into a batch (DeleteRecords)
    and a follower starting there. Cut back and fetched again from the batch's offset, it
    would ask below the leader's log start, be told OFFSET_OUT_OF_RANGE, start again at
    the log start, and loop; it takes the batch in the same step instead."""
    leader_bytes = _leader_bytes(tmp_path / "leader-0", [10, 5])  # 0-9, 10-14
    # Nothing there: the log starts at the leader's log start.
    follower = PartitionLog.open(
        tmp_path / "follower-0", LogConfig(), log_start_offset=5, now_ms=lambda: 0
    )
    assert follower.log_start_offset == follower.log_end_offset == 5
    assert _copy(follower, leader_bytes) == 0
    assert follower.log_start_offset == 0
    assert _offsets(follower) == [(0, 9), (10, 14)]
    assert follower.log_end_offset == 15
    follower.close()
