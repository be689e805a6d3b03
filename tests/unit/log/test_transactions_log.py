"""Transactions on a partition log: open transactions, markers, the last stable offset,
the aborted-transaction index (.txnindex), rebuild after restart and truncation, and a
follower's copy."""

from __future__ import annotations

import os
import struct

import pytest
from crc32c import crc32c
from kio.schema.errors import ErrorCode
from log_helpers import FakeClock

from gregor_broker.log.log_config import LogConfig
from gregor_broker.log.partition_log import PartitionLog
from gregor_broker.log.producer_state import ProducerStateError
from gregor_broker.log.transaction_index import ENTRY_SIZE, AbortedTxn, TransactionIndex
from gregor_broker.protocol.record_batch import TRANSACTIONAL_FLAG, rewrite_header, scan_batches
from gregor_broker.protocol.records import Record, make_batch


def txn_batch(producer_id: int, sequence: int, count: int = 2, epoch: int = 0) -> bytes:
    records = [Record(i, 0, b"k", f"v{sequence + i}".encode()) for i in range(count)]
    batch = make_batch(
        records, producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence
    )
    return rewrite_header(batch, attributes=TRANSACTIONAL_FLAG)


def plain_idempotent(producer_id: int, sequence: int, epoch: int = 0) -> bytes:
    return make_batch(
        [Record(0, 0, b"k", b"v")],
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=sequence,
    )


def open_log(path, **config) -> PartitionLog:
    return PartitionLog.open(path, LogConfig(**config), now_ms=FakeClock())


@pytest.fixture
def log(tmp_path):
    partition_log = open_log(tmp_path / "t-0")
    yield partition_log
    partition_log.close()


def append(log: PartitionLog, data: bytes) -> tuple[int, int]:
    buffer = bytearray(data)
    result = log.append_as_leader(buffer, scan_batches(buffer), leader_epoch=0)
    return result.first_offset, result.last_offset


def marker(log: PartitionLog, producer_id: int, *, commit: bool, epoch: int = 0, coord: int = 0):
    return log.append_txn_marker(
        producer_id=producer_id,
        producer_epoch=epoch,
        coordinator_epoch=coord,
        commit=commit,
        leader_epoch=0,
    ).first_offset


def test_an_open_transaction_holds_the_last_stable_offset_at_its_first_offset(log) -> None:
    append(log, make_batch([Record(0, 0, b"k", b"plain")]))  # offset 0
    assert log.last_stable_offset == 1
    append(log, txn_batch(7, 0))  # 1-2
    append(log, txn_batch(8, 0))  # 3-4
    append(log, txn_batch(7, 2))  # 5-6
    assert log.open_transactions() == {7: 1, 8: 3}
    assert log.last_stable_offset == 1
    assert marker(log, 7, commit=True) == 7
    assert log.last_stable_offset == 3  # producer 8 still open
    assert marker(log, 8, commit=False) == 8
    assert log.last_stable_offset == log.high_watermark == 9
    assert log.open_transactions() == {}


def test_the_lso_never_passes_the_high_watermark_nor_an_unreplicated_marker(log) -> None:
    log.stop_following_log_end()  # replication owns the high watermark
    append(log, txn_batch(7, 0))  # 0-1
    marker(log, 7, commit=True)  # 2
    assert log.high_watermark == 0 and log.last_stable_offset == 0
    log.maybe_increment_high_watermark(2)  # the data, not the marker, is replicated
    # Kafka's unreplicatedTxns: until the marker is below the HW, the txn holds the LSO.
    assert log.last_stable_offset == 0
    log.maybe_increment_high_watermark(3)
    assert log.last_stable_offset == 3


def test_an_abort_is_indexed_in_the_segment_holding_its_marker(log, tmp_path) -> None:
    append(log, txn_batch(7, 0))  # 0-1
    append(log, txn_batch(8, 0))  # 2-3
    assert marker(log, 7, commit=False) == 4
    assert marker(log, 8, commit=True) == 5
    append(log, txn_batch(9, 0))  # 6-7
    assert marker(log, 9, commit=False) == 8
    # Kafka's format: version 0, producer id, first offset, marker offset, LSO then.
    path = tmp_path / "t-0" / f"{0:020d}.txnindex"
    assert os.path.getsize(path) == 2 * ENTRY_SIZE
    assert TransactionIndex.load(path).entries == [
        AbortedTxn(7, 0, 4, 2),  # producer 8's transaction was still open at 2
        AbortedTxn(9, 6, 8, 9),
    ]
    assert log.collect_aborted_transactions(0, 9) == [
        AbortedTxn(7, 0, 4, 2),
        AbortedTxn(9, 6, 8, 9),
    ]
    assert log.collect_aborted_transactions(5, 9) == [AbortedTxn(9, 6, 8, 9)]
    assert log.collect_aborted_transactions(0, 4) == [AbortedTxn(7, 0, 4, 2)]


def test_aborted_transactions_are_found_across_segments(tmp_path) -> None:
    log = open_log(tmp_path / "t-0", segment_bytes=200)
    try:
        append(log, txn_batch(7, 0))
        append(log, txn_batch(8, 0))
        for i in range(2, 12, 2):
            append(log, txn_batch(8, i))
        end = marker(log, 7, commit=False)
        assert len(log.segments) > 2
        # The marker is in a later segment than where the fetch starts.
        assert log.collect_aborted_transactions(0, log.log_end_offset) == [AbortedTxn(7, 0, end, 2)]
        assert log.last_stable_offset == 2
    finally:
        log.close()


def test_a_non_transactional_write_in_an_open_transaction_is_invalid_txn_state(log) -> None:
    append(log, txn_batch(7, 0))
    with pytest.raises(ProducerStateError) as error:
        append(log, plain_idempotent(7, 2))
    assert error.value.error_code is ErrorCode.invalid_txn_state
    marker(log, 7, commit=True)
    assert append(log, plain_idempotent(7, 2)) == (3, 3)


def test_transactional_batches_go_through_the_idempotence_checks(log) -> None:
    assert append(log, txn_batch(7, 0)) == (0, 1)
    assert append(log, txn_batch(7, 0)) == (0, 1)  # a retry: its original offsets
    with pytest.raises(ProducerStateError) as error:
        append(log, txn_batch(7, 5))
    assert error.value.error_code is ErrorCode.out_of_order_sequence_number
    assert log.log_end_offset == 2


def test_stale_markers_are_fenced(log) -> None:
    append(log, txn_batch(7, 0, epoch=3))
    with pytest.raises(ProducerStateError) as error:
        marker(log, 7, commit=True, epoch=2)
    assert error.value.error_code is ErrorCode.invalid_producer_epoch
    marker(log, 7, commit=False, epoch=3, coord=5)
    append(log, txn_batch(7, 2, epoch=3))
    with pytest.raises(ProducerStateError) as error:
        marker(log, 7, commit=True, epoch=3, coord=4)
    assert error.value.error_code is ErrorCode.transaction_coordinator_fenced
    assert log.open_transactions() == {7: 3}
    # A newer epoch (the coordinator fenced the producer, then aborts) is taken.
    marker(log, 7, commit=False, epoch=4, coord=5)
    assert log.open_transactions() == {}


def test_a_coordinator_write_needs_no_sequence(log) -> None:
    """TxnOffsetCommit's records: transactional, base sequence -1 (origin COORDINATOR)."""
    batch = rewrite_header(
        make_batch([Record(0, 0, b"k", b"v")], producer_id=7, producer_epoch=1, base_sequence=-1),
        attributes=TRANSACTIONAL_FLAG,
    )
    buffer = bytearray(batch)
    log.append_as_leader(buffer, scan_batches(buffer), leader_epoch=0, from_client=False)
    assert log.open_transactions() == {7: 0}
    old = bytearray(
        rewrite_header(
            make_batch(
                [Record(0, 0, b"k", b"v")], producer_id=7, producer_epoch=0, base_sequence=-1
            ),
            attributes=TRANSACTIONAL_FLAG,
        )
    )
    with pytest.raises(ProducerStateError) as error:
        log.append_as_leader(old, scan_batches(old), leader_epoch=0, from_client=False)
    assert error.value.error_code is ErrorCode.invalid_producer_epoch


def test_open_transactions_and_the_index_survive_a_restart(tmp_path) -> None:
    directory = tmp_path / "t-0"
    log = open_log(directory)
    append(log, txn_batch(7, 0))  # 0-1
    append(log, txn_batch(8, 0))  # 2-3
    marker(log, 7, commit=False)  # 4
    log.abandon()  # a crash: no flush, no snapshot
    index_path = directory / f"{0:020d}.txnindex"
    index_path.unlink()  # as if the crash came before the index write reached the disk
    log = open_log(directory)  # unclean: recovery from offset 0
    try:
        assert log.last_stable_offset == 2  # producer 8's transaction is still open
        assert log.open_transactions() == {8: 2}
        assert TransactionIndex.load(index_path).entries == [AbortedTxn(7, 0, 4, 2)]
        assert log.collect_aborted_transactions(0, 5) == [AbortedTxn(7, 0, 4, 2)]
        # No duplicate entry when the state is rebuilt again.
        log.truncate_to(log.log_end_offset)
        assert len(TransactionIndex.load(index_path).entries) == 1
    finally:
        log.close()


def test_truncation_drops_index_entries_and_reopens_transactions(log, tmp_path) -> None:
    append(log, txn_batch(7, 0))  # 0-1
    marker(log, 7, commit=False)  # 2
    assert log.last_stable_offset == 3
    log.truncate_to(2)  # the marker goes (a follower truncating to its leader's log)
    assert log.open_transactions() == {7: 0}
    assert log.last_stable_offset == 0
    assert TransactionIndex.load(tmp_path / "t-0" / f"{0:020d}.txnindex").entries == []
    assert log.collect_aborted_transactions(0, 2) == []


def test_a_torn_index_entry_is_dropped_on_load_and_written_again(tmp_path) -> None:
    directory = tmp_path / "t-0"
    log = open_log(directory)
    append(log, txn_batch(7, 0))
    marker(log, 7, commit=False)
    log.close()
    index_path = directory / f"{0:020d}.txnindex"
    index_path.write_bytes(index_path.read_bytes()[:20])  # half an entry
    log = open_log(directory)
    try:
        assert log.collect_aborted_transactions(0, 3) == [AbortedTxn(7, 0, 2, 3)]
        assert os.path.getsize(index_path) == ENTRY_SIZE
    finally:
        log.close()


def test_a_follower_indexes_what_it_copies(tmp_path) -> None:
    leader = open_log(tmp_path / "leader" / "t-0")
    follower = open_log(tmp_path / "follower" / "t-0")
    try:
        append(leader, txn_batch(7, 0))
        append(leader, txn_batch(8, 0))
        marker(leader, 7, commit=False)
        marker(leader, 8, commit=True)
        append(leader, txn_batch(9, 0))
        offset = 0
        while offset < leader.log_end_offset:
            found = leader.read(offset, 1 << 20)
            buffer = bytearray(os.pread(found.fd, found.size, found.position))
            headers = scan_batches(buffer)
            follower.append_as_follower(buffer, headers)
            offset = headers[-1].next_offset
        name = f"{0:020d}.txnindex"
        leader_index = (tmp_path / "leader" / "t-0" / name).read_bytes()
        assert leader_index and (tmp_path / "follower" / "t-0" / name).read_bytes() == leader_index
        assert follower.open_transactions() == leader.open_transactions() == {9: 6}
    finally:
        leader.close()
        follower.close()


def test_a_snapshot_in_kafkas_format_restores_the_state_without_a_scan(tmp_path) -> None:
    directory = tmp_path / "t-0"
    log = open_log(directory)
    append(log, txn_batch(7, 0, epoch=2))  # 0-1
    marker(log, 7, commit=True, epoch=2, coord=4)  # 2
    append(log, txn_batch(8, 0))  # 3-4: open
    log.close()
    snapshot = directory / f"{5:020d}.snapshot"
    data = snapshot.read_bytes()
    # ProducerSnapshot v1: version, CRC-32C of the rest, entries (producer id, epoch,
    # last sequence, last offset, offset delta, timestamp, coordinator epoch, txn first).
    version, crc, count = struct.unpack_from(">hIi", data)
    assert (version, count) == (1, 2) and crc == crc32c(data[6:])
    entries = sorted(
        struct.unpack_from(">qhiqiqiq", data, 10 + 46 * i)[:5]
        + struct.unpack_from(">qhiqiqiq", data, 10 + 46 * i)[6:]
        for i in range(count)
    )
    assert entries == [(7, 2, 1, 1, 1, 4, -1), (8, 0, 1, 4, 1, -1, 3)]

    # Reopened after a clean shutdown: the state comes from the snapshot, and the log
    # is not read (its segment is unreadable here to prove it).
    segment = directory / f"{0:020d}.log"
    saved = segment.read_bytes()
    log = PartitionLog.open(
        directory, LogConfig(), now_ms=FakeClock(), recovery_point=5, had_clean_shutdown=True
    )
    try:
        assert log.producer_state.built
        segment.write_bytes(b"\0" * len(saved))  # a scan would now find no batches
        assert log.open_transactions() == {8: 3}
        assert log.last_stable_offset == 3
        segment.write_bytes(saved)
        # The last batch is known: its retry is a duplicate; epochs are remembered.
        assert append(log, txn_batch(8, 0)) == (3, 4)
        with pytest.raises(ProducerStateError) as error:
            marker(log, 7, commit=True, epoch=2, coord=3)
        assert error.value.error_code is ErrorCode.transaction_coordinator_fenced
    finally:
        log.close()


def test_after_a_crash_recovery_scans_from_the_snapshot_below_the_recovery_point(tmp_path):
    directory = tmp_path / "t-0"
    log = open_log(directory, segment_bytes=300)
    append(log, txn_batch(7, 0))  # 0-1
    append(log, txn_batch(7, 2))
    while len(log.segments) < 3:
        append(log, txn_batch(7, log.log_end_offset))
    abort_at = marker(log, 7, commit=False)
    snapshots = sorted(p.name for p in directory.glob("*.snapshot"))
    assert snapshots  # one per roll
    log.abandon()
    for index in directory.glob("*.txnindex"):
        index.unlink()
    log = open_log(directory)  # unclean, recovery point 0: every segment is rescanned
    try:
        assert log.collect_aborted_transactions(0, log.log_end_offset) == [
            AbortedTxn(7, 0, abort_at, abort_at + 1)
        ]
        assert log.open_transactions() == {}
    finally:
        log.close()


def test_truncation_deletes_snapshots_past_it_and_reloads_from_an_older_one(tmp_path):
    directory = tmp_path / "t-0"
    log = open_log(directory, segment_bytes=300)
    try:
        append(log, txn_batch(7, 0))
        while len(log.segments) < 3:
            append(log, txn_batch(7, log.log_end_offset))
        offsets = sorted(int(p.name[:20]) for p in directory.glob("*.snapshot"))
        assert len(offsets) == 2
        log.truncate_to(offsets[1] - 1)
        assert sorted(int(p.name[:20]) for p in directory.glob("*.snapshot")) == offsets[:1]
        assert log.open_transactions() == {7: 0}
        assert log.producer_state.state().entries[7].last_sequence == log.log_end_offset - 1
    finally:
        log.close()


def test_idle_producers_expire_but_not_with_an_open_transaction(tmp_path) -> None:
    clock = FakeClock()
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(), now_ms=clock)
    try:
        append(log, txn_batch(7, 0))  # batch timestamp 0
        marker(log, 7, commit=True)  # the marker's timestamp: the clock's now
        append(log, txn_batch(8, 0))  # open, timestamp 0
        day = 86_400_000
        assert log.producer_state.remove_expired_producers(clock.now + 1000, day) == 0
        assert log.producer_state.remove_expired_producers(clock.now + day, day) == 1
        assert sorted(log.producer_state.state().entries) == [8]  # its transaction is open
        # An expired producer is unknown again: any sequence is accepted.
        assert append(log, plain_idempotent(7, 50)) == (5, 5)
    finally:
        log.close()


def test_the_broker_own_transactional_write_passes_validation_without_a_sequence(log) -> None:
    """TxnOffsetCommit through the PartitionWriter: validate_append without an API
    version is Kafka's origin COORDINATOR (no client checks); a client may not do it."""
    from gregor_broker.log.inflate import DecompressionBudget
    from gregor_broker.protocol.record_batch import InvalidBatch

    batch = rewrite_header(
        make_batch([Record(0, 0, b"k", b"v")], producer_id=7, producer_epoch=0, base_sequence=-1),
        attributes=TRANSACTIONAL_FLAG,
    )
    headers = log.validate_append(batch, budget=DecompressionBudget(1 << 20))
    assert headers[0].producer_id == 7
    with pytest.raises(InvalidBatch):
        log.validate_append(batch, budget=DecompressionBudget(1 << 20), api_version=9)
