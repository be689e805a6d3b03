"""The transaction coordinator's rules for one transactional id (Kafka's
TransactionCoordinator decisions), without I/O."""

from __future__ import annotations

import itertools

import pytest
from kio.schema.errors import ErrorCode

from gregor_broker.coordinator.transaction_metadata import (
    MAX_PRODUCER_EPOCH,
    State,
    TransactionError,
    new_metadata,
    prepare_abort_after_fence,
    prepare_add_partitions,
    prepare_complete,
    prepare_end_transaction,
    prepare_init_producer_id,
    timed_out,
)

ids = itertools.count(1000)


def _init(metadata, **kwargs):
    decision = prepare_init_producer_id(
        metadata, timeout_ms=60_000, now_ms=0, new_producer_id=lambda: next(ids), **kwargs
    )
    if decision.transition is not None:
        metadata.complete(decision.transition)
    return decision


def _ready():
    metadata = new_metadata("payments", 7, 60_000)
    _init(metadata)
    return metadata


def _error(call) -> ErrorCode:
    with pytest.raises(TransactionError) as raised:
        call()
    return raised.value.error_code


def test_a_new_id_gets_epoch_0_and_each_init_bumps_it():
    metadata = _ready()
    assert (metadata.producer_id, metadata.producer_epoch, metadata.state) == (7, 0, State.EMPTY)
    _init(metadata)
    assert metadata.producer_epoch == 1 and metadata.last_producer_epoch == 0


def test_a_full_commit_goes_ongoing_prepare_commit_complete_commit():
    metadata = _ready()
    metadata.complete(prepare_add_partitions(metadata, 7, 0, {("orders", 0)}, now_ms=10))
    assert metadata.state == State.ONGOING and metadata.start_ms == 10
    # Adding what is already in is a no-op; adding more keeps the start time.
    assert prepare_add_partitions(metadata, 7, 0, {("orders", 0)}, now_ms=11) is None
    metadata.complete(prepare_add_partitions(metadata, 7, 0, {("orders", 1)}, now_ms=12))
    assert metadata.partitions == {("orders", 0), ("orders", 1)} and metadata.start_ms == 10
    metadata.complete(prepare_end_transaction(metadata, 7, 0, commit=True, now_ms=13))
    assert metadata.state == State.PREPARE_COMMIT
    # While markers are written: a retried commit is CONCURRENT, an abort is refused.
    assert _error(lambda: prepare_end_transaction(metadata, 7, 0, True, 14)) is (
        ErrorCode.concurrent_transactions
    )
    assert _error(lambda: prepare_end_transaction(metadata, 7, 0, False, 14)) is (
        ErrorCode.invalid_txn_state
    )
    assert _error(lambda: prepare_add_partitions(metadata, 7, 0, {("x", 0)}, 14)) is (
        ErrorCode.concurrent_transactions
    )
    metadata.complete(prepare_complete(metadata, now_ms=15))
    assert metadata.state == State.COMPLETE_COMMIT and metadata.partitions == set()
    # A retried commit after completion is answered NONE; an abort is refused.
    assert prepare_end_transaction(metadata, 7, 0, commit=True, now_ms=16) is None
    assert _error(lambda: prepare_end_transaction(metadata, 7, 0, False, 16)) is (
        ErrorCode.invalid_txn_state
    )


def test_ending_with_no_transaction_is_invalid_txn_state():
    metadata = _ready()
    assert _error(lambda: prepare_end_transaction(metadata, 7, 0, True, 1)) is (
        ErrorCode.invalid_txn_state
    )


def test_an_old_epoch_is_fenced_and_an_unknown_producer_is_a_bad_mapping():
    metadata = _ready()
    _init(metadata)  # a second producer with the same transactional id: epoch 1
    assert _error(lambda: prepare_add_partitions(metadata, 7, 0, {("o", 0)}, 1)) is (
        ErrorCode.producer_fenced
    )
    assert _error(lambda: prepare_end_transaction(metadata, 8, 1, True, 1)) is (
        ErrorCode.invalid_producer_id_mapping
    )
    assert _error(lambda: prepare_add_partitions(None, 7, 1, {("o", 0)}, 1)) is (
        ErrorCode.invalid_producer_id_mapping
    )


def test_init_during_a_transaction_fences_it_then_aborts_it():
    metadata = _ready()
    metadata.complete(prepare_add_partitions(metadata, 7, 0, {("orders", 0)}, 1))
    decision = _init(metadata)
    assert decision.fence and metadata.state == State.PREPARE_EPOCH_FENCE
    assert metadata.producer_epoch == 1  # the zombie's epoch 0 is fenced from now on
    assert _error(lambda: prepare_end_transaction(metadata, 7, 0, True, 2)) is (
        ErrorCode.producer_fenced
    )
    metadata.complete(prepare_abort_after_fence(metadata, 2))
    assert metadata.state == State.PREPARE_ABORT
    metadata.complete(prepare_complete(metadata, 3))
    assert metadata.state == State.COMPLETE_ABORT
    _init(metadata)
    assert (metadata.state, metadata.producer_epoch) == (State.EMPTY, 2)


def test_a_pending_change_makes_every_request_concurrent():
    metadata = _ready()
    prepare_add_partitions(metadata, 7, 0, {("orders", 0)}, 1)  # not completed yet
    assert _error(lambda: prepare_end_transaction(metadata, 7, 0, True, 2)) is (
        ErrorCode.concurrent_transactions
    )
    assert _error(lambda: _init(metadata)) is ErrorCode.concurrent_transactions
    metadata.abort_pending()  # the write failed: nothing changed
    assert metadata.state == State.EMPTY and metadata.pending is None


def test_kip360_bump_with_the_current_epoch_and_a_fenced_expectation():
    metadata = _ready()
    _init(metadata, expected=(7, 0))
    assert metadata.producer_epoch == 1
    assert _init(metadata, expected=(7, 0)).transition is None  # a retry of that bump
    assert _error(lambda: _init(metadata, expected=(7, 5))) is ErrorCode.producer_fenced


def test_an_exhausted_epoch_rotates_the_producer_id():
    metadata = _ready()
    metadata.producer_epoch = MAX_PRODUCER_EPOCH - 1
    _init(metadata)
    assert metadata.producer_id != 7 and metadata.producer_epoch == 0
    assert metadata.previous_producer_id == 7


def test_an_ongoing_transaction_times_out():
    metadata = _ready()
    metadata.complete(prepare_add_partitions(metadata, 7, 0, {("orders", 0)}, 1_000))
    assert not timed_out(metadata, 1_000 + 60_000)
    assert timed_out(metadata, 1_000 + 60_001)
