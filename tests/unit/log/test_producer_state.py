"""Idempotent producer state: duplicates, sequence gaps, fencing, rebuild from the log."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode
from log_helpers import FakeClock

from gregor_broker.log.log_config import LogConfig
from gregor_broker.log.partition_log import PartitionLog
from gregor_broker.log.producer_state import ProducerStateError, ProducerStates
from gregor_broker.protocol import record_batch
from gregor_broker.protocol.record_batch import scan_batches
from gregor_broker.protocol.records import Record, make_batch


def idempotent_batch(producer_id: int, epoch: int, sequence: int, count: int = 2) -> bytes:
    records = [Record(i, 0, b"k", f"v{sequence + i}".encode()) for i in range(count)]
    return make_batch(
        records, producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence
    )


@pytest.fixture
def log(tmp_path):
    partition_log = PartitionLog.open(tmp_path / "t-0", LogConfig(), now_ms=FakeClock())
    yield partition_log
    partition_log.close()


def append(states: ProducerStates, log: PartitionLog, data: bytes) -> tuple[int, int]:
    """What ReplicaManager.append does: check, append unless duplicate, record."""
    buffer = bytearray(data)
    headers = scan_batches(buffer)
    duplicate = states.check(log, headers)
    if duplicate is not None:
        return duplicate.first_offset, duplicate.last_offset
    result = log.append(buffer, headers)
    states.record_append(log, buffer, headers)
    return result.first_offset, result.last_offset


def test_a_retried_batch_gets_its_original_offsets_and_is_not_written_again(log) -> None:
    states = ProducerStates()
    assert append(states, log, idempotent_batch(7, 0, 0)) == (0, 1)
    assert append(states, log, idempotent_batch(7, 0, 2)) == (2, 3)
    assert append(states, log, idempotent_batch(7, 0, 0)) == (0, 1)  # retry of the first
    assert log.log_end_offset == 4


def test_only_the_last_five_batches_are_recognised_as_duplicates(log) -> None:
    states = ProducerStates()
    for i in range(6):
        append(states, log, idempotent_batch(7, 0, 2 * i))
    with pytest.raises(ProducerStateError) as error:
        append(states, log, idempotent_batch(7, 0, 0))  # too old to be found
    assert error.value.error_code is ErrorCode.out_of_order_sequence_number
    assert append(states, log, idempotent_batch(7, 0, 2)) == (2, 3)


def test_a_gap_in_sequences_is_out_of_order(log) -> None:
    states = ProducerStates()
    append(states, log, idempotent_batch(7, 0, 0))
    with pytest.raises(ProducerStateError) as error:
        append(states, log, idempotent_batch(7, 0, 5))
    assert error.value.error_code is ErrorCode.out_of_order_sequence_number
    assert log.log_end_offset == 2


def test_an_older_epoch_is_fenced_and_a_new_epoch_starts_at_zero(log) -> None:
    states = ProducerStates()
    append(states, log, idempotent_batch(7, 1, 0))
    with pytest.raises(ProducerStateError) as error:
        append(states, log, idempotent_batch(7, 0, 2))
    assert error.value.error_code is ErrorCode.invalid_producer_epoch
    with pytest.raises(ProducerStateError) as error:
        append(states, log, idempotent_batch(7, 2, 3))
    assert error.value.error_code is ErrorCode.out_of_order_sequence_number
    assert append(states, log, idempotent_batch(7, 2, 0)) == (2, 3)


def test_an_unknown_producer_may_start_at_any_sequence(log) -> None:
    # Its earlier batches may have gone with retention or DeleteRecords.
    states = ProducerStates()
    assert append(states, log, idempotent_batch(9, 0, 40)) == (0, 1)


def test_state_is_rebuilt_from_the_log_after_a_restart(tmp_path) -> None:
    clock = FakeClock()
    first = PartitionLog.open(tmp_path / "t-0", LogConfig(), now_ms=clock)
    states = ProducerStates()
    append(states, first, make_batch([Record(0, 0, b"k", b"plain")]))
    append(states, first, idempotent_batch(7, 0, 0))
    append(states, first, idempotent_batch(7, 0, 2))
    first.close()

    reopened = PartitionLog.open(tmp_path / "t-0", LogConfig(), now_ms=clock)
    try:
        fresh = ProducerStates()  # a new broker process knows nothing
        assert append(fresh, reopened, idempotent_batch(7, 0, 2)) == (3, 4)
        assert reopened.log_end_offset == 5
        with pytest.raises(ProducerStateError):
            append(fresh, reopened, idempotent_batch(7, 0, 9))
    finally:
        reopened.close()


def test_appends_it_was_not_told_about_are_caught_up_from_the_log(log) -> None:
    # A follower copies batches without the producer-state hook; the state still sees them.
    states = ProducerStates()
    append(states, log, idempotent_batch(7, 0, 0))
    buffer = bytearray(idempotent_batch(7, 0, 2))
    log.append(buffer, scan_batches(buffer))
    assert append(states, log, idempotent_batch(7, 0, 2)) == (2, 3)


def copy_as_follower(log: PartitionLog, data: bytes, base_offset: int) -> None:
    """Append ``data`` at ``base_offset`` as a follower does (offsets set by the leader)."""
    buffer = bytearray(data)
    headers = scan_batches(buffer)
    record_batch.assign_offsets(buffer, headers, base_offset)
    headers = scan_batches(buffer)
    log.append(buffer, headers, assign_offsets=False)


def test_a_truncated_batch_is_appended_again_when_retried_after_the_log_grew_back(log) -> None:
    # A1: a leader appends producer 7's batch, loses leadership before it is replicated,
    # truncates it as a follower and copies producer 8's longer batch at those offsets.
    # Back as leader, producer 7's retry must be written (new offsets), not answered as a
    # duplicate at offsets that now hold producer 8's records.
    states = ProducerStates()
    assert append(states, log, idempotent_batch(7, 0, 0)) == (0, 1)  # committed
    assert append(states, log, idempotent_batch(7, 0, 2)) == (2, 3)  # never replicated
    log.truncate_to(2)
    copy_as_follower(log, idempotent_batch(8, 0, 0, count=3), base_offset=2)
    assert log.log_end_offset == 5  # grown back past the truncated batch's offsets
    assert append(states, log, idempotent_batch(7, 0, 2)) == (5, 6)
    assert log.log_end_offset == 7
    # And the state after the rebuild is right for both producers.
    assert append(states, log, idempotent_batch(7, 0, 2)) == (5, 6)  # now a true duplicate
    assert append(states, log, idempotent_batch(8, 0, 0, count=3)) == (2, 4)


def test_a_full_truncation_forgets_every_producer(log) -> None:
    states = ProducerStates()
    append(states, log, idempotent_batch(7, 0, 0))
    append(states, log, idempotent_batch(7, 0, 2))
    log.delete_records_before(2)
    # A follower whose leader's log starts past ours truncates fully and starts there.
    log.truncate_to(1)
    assert (log.log_start_offset, log.log_end_offset) == (1, 1)
    copy_as_follower(log, idempotent_batch(8, 0, 0, count=5), base_offset=1)
    # Producer 7 is unknown again: its retry is appended, not a duplicate of offsets 0-1.
    assert append(states, log, idempotent_batch(7, 0, 0)) == (6, 7)


def test_a_new_epoch_of_a_known_producer_is_reported_as_a_bump(log) -> None:
    """What the broker logs (rate-limited) when a client bumps its own epoch."""
    states = ProducerStates()
    first = bytearray(idempotent_batch(7, 0, 0))
    assert states.epoch_bumps(log, scan_batches(first)) == []  # no state yet: nothing known
    append(states, log, bytes(first))
    assert states.epoch_bumps(log, scan_batches(bytearray(idempotent_batch(7, 0, 2)))) == []
    assert states.epoch_bumps(log, scan_batches(bytearray(idempotent_batch(8, 0, 0)))) == []
    assert states.epoch_bumps(log, scan_batches(bytearray(idempotent_batch(7, 3, 0)))) == [
        (7, 0, 3)
    ]
