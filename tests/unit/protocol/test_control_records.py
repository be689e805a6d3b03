"""Transaction markers (control batches) and the aborted-transaction index."""

from __future__ import annotations

from gregor_broker.log.transaction_index import (
    ENTRY_SIZE,
    AbortedTxn,
    OpenTransactions,
    TransactionIndex,
)
from gregor_broker.protocol.control_records import (
    ControlRecordType,
    EndTransactionMarker,
    build_marker_batch,
    marker_of,
)
from gregor_broker.protocol.record_batch import scan_batches


def test_a_marker_batch_is_a_transactional_control_batch_with_kafkas_record():
    marker = EndTransactionMarker(ControlRecordType.COMMIT, coordinator_epoch=4)
    batch = build_marker_batch(marker, producer_id=9, producer_epoch=2, timestamp=1234)
    [header] = scan_batches(batch)  # a valid batch: CRC right
    assert header.is_control and header.is_transactional
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (9, 2, -1)
    assert header.records_count == 1
    assert marker_of(batch, header) == marker
    # Kafka's bytes: key version 0, type 1; value version 0, coordinator epoch 4.
    assert b"\x00\x00\x00\x01" in batch and b"\x00\x00\x00\x00\x00\x04" in batch


def test_the_index_file_holds_34_byte_entries_and_reads_back(tmp_path):
    path = tmp_path / "00000000000000000000.txnindex"
    index = TransactionIndex(path)
    index.append(AbortedTxn(7, 10, 20, 10))
    index.append(AbortedTxn(8, 15, 30, 31))
    assert path.stat().st_size == 2 * ENTRY_SIZE == 68
    again = TransactionIndex.load(path)
    assert again.entries == index.entries
    found, complete = again.collect(fetch_offset=21, upper_bound=40)
    assert found == [AbortedTxn(8, 15, 30, 31)] and not complete
    found, complete = again.collect(fetch_offset=0, upper_bound=12)
    assert found == [AbortedTxn(7, 10, 20, 10)] and complete
    again.truncate_to(25)
    assert TransactionIndex.load(path).entries == [AbortedTxn(7, 10, 20, 10)]


def test_the_last_stable_offset_waits_for_the_oldest_open_transaction():
    open_txns = OpenTransactions()
    assert open_txns.last_stable_offset(50) == 50
    open_txns.on_transactional_batch(1, 10)
    open_txns.on_transactional_batch(2, 12)
    open_txns.on_transactional_batch(1, 14)  # still the transaction opened at 10
    assert open_txns.last_stable_offset(50) == 10
    aborted = open_txns.on_marker(1, 20, aborted=True)
    assert aborted == AbortedTxn(1, 10, 20, 12)
    assert open_txns.on_marker(2, 21, aborted=False) is None
    assert open_txns.last_stable_offset(50) == 50
