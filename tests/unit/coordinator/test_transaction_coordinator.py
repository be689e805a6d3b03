"""The transaction coordinator's pure parts: replaying ``__transaction_state``, the log
value of a transition, KIP-588's error mapping; and the group side of transactions:
TxnOffsetCommit's pending offsets, settled by markers, also when a ``__consumer_offsets``
partition is loaded from its log."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from gregor_broker.coordinator.group_coordinator import CoordinatorConfig, GroupCoordinator
from gregor_broker.coordinator.records import (
    OffsetAndMetadata,
    OffsetCommitKey,
    encode_offset_commit_key,
    encode_offset_commit_value,
    replay,
)
from gregor_broker.coordinator.service import read_offsets_log
from gregor_broker.coordinator.transaction_coordinator import (
    fenced_error,
    log_value,
    replay_state,
)
from gregor_broker.coordinator.transaction_log import decode_value, encode_key, encode_value
from gregor_broker.coordinator.transaction_metadata import State, Transition
from gregor_broker.log import LogConfig, PartitionLog
from gregor_broker.protocol.control_records import (
    ControlRecordType,
    EndTransactionMarker,
    build_marker_batch,
)
from gregor_broker.protocol.record_batch import TRANSACTIONAL_FLAG, rewrite_header, scan_batches
from gregor_broker.protocol.records import Record, make_batch

GROUP = "g"


def transition(state: State, partitions=frozenset(), epoch=3) -> Transition:
    return Transition(
        producer_id=7,
        previous_producer_id=-1,
        producer_epoch=epoch,
        last_producer_epoch=epoch - 1,
        timeout_ms=60000,
        state=state,
        partitions=frozenset(partitions),
        start_ms=1000,
        last_update_ms=2000,
    )


def state_record(transactional_id: str, t: Transition | None):
    return encode_key(transactional_id), None if t is None else encode_value(log_value(t))


# -- __transaction_state --------------------------------------------------------------------


def test_log_value_carries_the_transition_in_kafkas_format():
    value = decode_value(
        encode_value(log_value(transition(State.ONGOING, {("b", 1), ("a", 2), ("a", 0)})))
    )
    assert (value.producer_id, value.producer_epoch, value.transaction_timeout_ms) == (7, 3, 60000)
    assert value.status == State.ONGOING
    assert value.partitions == {"a": (0, 2), "b": (1,)}
    assert (value.start_ms, value.last_update_ms) == (1000, 2000)


def test_replay_keeps_the_latest_state_of_each_id_and_drops_tombstones():
    loaded = replay_state(
        [
            state_record("committing", transition(State.ONGOING, {("t", 0)})),
            state_record("committing", transition(State.PREPARE_COMMIT, {("t", 0), ("t", 1)})),
            state_record("expired", transition(State.COMPLETE_ABORT)),
            state_record("expired", None),
            state_record("empty", transition(State.EMPTY, epoch=0)),
            (b"\x00\x09garbage", b"\x00"),  # a bad record is skipped, not fatal
        ]
    )
    assert set(loaded) == {"committing", "empty"}
    committing = loaded["committing"]
    assert committing.state == State.PREPARE_COMMIT
    assert committing.partitions == {("t", 0), ("t", 1)}
    assert (committing.producer_id, committing.producer_epoch) == (7, 3)
    assert committing.pending is None
    assert loaded["empty"].producer_epoch == 0


def test_producer_fenced_is_invalid_producer_epoch_for_clients_before_kip_588():
    assert fenced_error(ErrorCode.producer_fenced, 1, 2) is ErrorCode.invalid_producer_epoch
    assert fenced_error(ErrorCode.producer_fenced, 2, 2) is ErrorCode.producer_fenced
    assert fenced_error(ErrorCode.not_coordinator, 0, 2) is ErrorCode.not_coordinator


# -- pending transactional offsets ------------------------------------------------------------


class MemoryStore:
    def __init__(self) -> None:
        self.appends: list[tuple[list, tuple[int, int] | None]] = []

    def append(self, group_id, records, producer=None, on_replicated=None):
        self.appends.append((records, producer))
        if on_replicated is not None:
            on_replicated(ErrorCode.none)
        return ErrorCode.none


def group_coordinator() -> tuple[GroupCoordinator, MemoryStore]:
    store = MemoryStore()
    coordinator = GroupCoordinator(CoordinatorConfig(num_partitions=1), store)
    coordinator.load_partition(0, replay([]), 0)
    return coordinator, store


def committed(coordinator: GroupCoordinator) -> dict:
    error, offsets = coordinator.fetch_offsets(GROUP, None)
    assert error is ErrorCode.none
    return {key: value.offset for key, value in offsets.items()}


def txn_commit(coordinator: GroupCoordinator, producer_id: int, offset: int) -> dict:
    outcome = coordinator.commit_transactional_offsets(
        GROUP, producer_id, 0, -1, "", None, {("t", 0): OffsetAndMetadata(offset)}, 0
    )
    if outcome.pending is not None:
        coordinator.complete_transactional_offset_commit(outcome.pending, ErrorCode.none)
    return outcome.errors


def test_transactional_offsets_are_pending_until_the_commit_marker():
    coordinator, store = group_coordinator()
    assert txn_commit(coordinator, 5, 42) == {("t", 0): ErrorCode.none}
    assert store.appends[-1][1] == (5, 0)  # written as the producer's transactional batch
    assert committed(coordinator) == {}
    assert coordinator.has_pending_offset_commit(GROUP, ("t", 0))
    # A marker of another producer, or on another partition, changes nothing.
    assert coordinator.complete_transactional_offsets(6, [0], commit=True) == 0
    assert coordinator.complete_transactional_offsets(5, [3], commit=True) == 0
    assert committed(coordinator) == {}
    assert coordinator.complete_transactional_offsets(5, [0], commit=True) == 1
    assert committed(coordinator) == {("t", 0): 42}
    assert not coordinator.has_pending_offset_commit(GROUP, ("t", 0))


def test_an_abort_marker_drops_the_pending_offsets():
    coordinator, _store = group_coordinator()
    txn_commit(coordinator, 5, 10)
    coordinator.complete_transactional_offsets(5, [0], commit=True)
    txn_commit(coordinator, 5, 20)
    assert coordinator.complete_transactional_offsets(5, [0], commit=False) == 1
    assert committed(coordinator) == {("t", 0): 10}
    assert not coordinator.has_pending_offset_commit(GROUP, ("t", 0))


def test_a_transactional_commit_that_fails_to_replicate_is_no_longer_pending():
    """Kafka's failPendingTxnOffsetCommit: the producer's marker does not apply a commit
    its client was told failed, and require_stable readers stop waiting for it; a
    commit of the producer that replicated stays pending."""
    coordinator, _store = group_coordinator()
    first = coordinator.commit_transactional_offsets(
        GROUP, 5, 0, -1, "", None, {("t", 1): OffsetAndMetadata(7)}, 0
    )
    assert first.pending is not None
    assert coordinator.complete_transactional_offset_commit(first.pending, ErrorCode.none) is (
        ErrorCode.none
    )
    failed = coordinator.commit_transactional_offsets(
        GROUP, 5, 0, -1, "", None, {("t", 0): OffsetAndMetadata(42)}, 0
    )
    assert failed.errors == {("t", 0): ErrorCode.none}
    assert failed.pending is not None
    assert coordinator.has_pending_offset_commit(GROUP, ("t", 0))
    error = coordinator.complete_transactional_offset_commit(
        failed.pending, ErrorCode.request_timed_out
    )
    assert error is ErrorCode.coordinator_not_available
    assert not coordinator.has_pending_offset_commit(GROUP, ("t", 0))
    assert coordinator.has_pending_offset_commit(GROUP, ("t", 1))
    assert coordinator.complete_transactional_offsets(5, [0], commit=True) == 1
    assert committed(coordinator) == {("t", 1): 7}


def test_a_member_of_an_unknown_generation_cannot_commit_in_a_transaction():
    coordinator, store = group_coordinator()
    result = coordinator.commit_transactional_offsets(
        GROUP, 5, 0, 3, "", None, {("t", 0): OffsetAndMetadata(1)}, 0
    )
    assert result.errors == {("t", 0): ErrorCode.illegal_generation}
    assert result.pending is None
    assert store.appends == []


# -- loading __consumer_offsets with transactions in it ----------------------------------------


def _offset_batch(offset: int, producer_id: int = -1) -> bytes:
    key = encode_offset_commit_key(OffsetCommitKey(GROUP, "t", 0))
    batch = make_batch(
        [Record(0, 0, key, encode_offset_commit_value(OffsetAndMetadata(offset)))],
        producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1,
    )
    if producer_id >= 0:
        batch = rewrite_header(batch, attributes=TRANSACTIONAL_FLAG)
    return batch


def _marker(producer_id: int, commit: bool) -> bytes:
    kind = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    return build_marker_batch(
        EndTransactionMarker(kind, 0), producer_id=producer_id, producer_epoch=0, timestamp=0
    )


def test_loading_applies_committed_transactions_at_their_marker_and_keeps_open_ones(tmp_path):
    log = PartitionLog.open(tmp_path / "__consumer_offsets-0", LogConfig())
    for batch in (
        _offset_batch(1),  # a plain commit
        _offset_batch(5, producer_id=9),  # committed below
        _offset_batch(2),  # a plain commit before the marker: the transaction wins
        _marker(9, commit=True),
        _offset_batch(6, producer_id=8),  # aborted below
        _marker(8, commit=False),
        _offset_batch(7, producer_id=4),  # still open
    ):
        log.append(bytearray(batch), scan_batches(batch))
    log.update_high_watermark(log.log_end_offset)
    records, pending = read_offsets_log(log)
    loaded = replay(records)
    assert loaded.offsets[GROUP][("t", 0)].offset == 5
    assert set(pending) == {4}
    assert replay(pending[4]).offsets[GROUP][("t", 0)].offset == 7


def _tombstone_batch() -> bytes:
    key = encode_offset_commit_key(OffsetCommitKey(GROUP, "t", 0))
    return make_batch([Record(0, 0, key, None)])


def test_loading_drops_an_open_transactions_offset_a_later_tombstone_deleted(tmp_path):
    """Kafka's replay of a tombstone removes the key from open transactions too: a group
    deleted (DeleteGroups, OffsetDelete) while a transaction held an offset for it does
    not get the offset back when that transaction commits."""
    log = PartitionLog.open(tmp_path / "__consumer_offsets-0", LogConfig())
    for batch in (
        _offset_batch(1),
        _offset_batch(5, producer_id=9),  # open when the tombstone comes
        _tombstone_batch(),
        _marker(9, commit=True),
    ):
        log.append(bytearray(batch), scan_batches(batch))
    log.update_high_watermark(log.log_end_offset)
    records, pending = read_offsets_log(log)
    assert pending == {}
    assert ("t", 0) not in replay(records).offsets.get(GROUP, {})
    # A transactional offset written after the tombstone counts when committed.
    for batch in (_offset_batch(6, producer_id=8), _marker(8, commit=True)):
        log.append(bytearray(batch), scan_batches(batch))
    log.update_high_watermark(log.log_end_offset)
    records, pending = read_offsets_log(log)
    assert replay(records).offsets[GROUP][("t", 0)].offset == 6


def test_deleting_a_group_with_open_transactional_offsets_drops_them():
    """Kafka deletes an Empty group even while a transaction holds offsets for it
    (``ClassicGroup.validateDeleteGroup`` only refuses groups with members;
    ``deleteAllOffsets`` writes tombstones for the pending ones too)."""
    coordinator, store = group_coordinator()
    txn_commit(coordinator, 5, 42)
    answers: list[ErrorCode] = []
    coordinator.delete_group(GROUP, 0, answers.append)
    assert answers == [ErrorCode.none]
    assert GROUP not in coordinator.groups
    assert not coordinator.has_pending_offset_commit(GROUP, ("t", 0))
    assert store.appends[-1][0][0][1] is None  # the offset's tombstone
    coordinator.complete_transactional_offsets(5, [0], commit=True)
    assert committed(coordinator) == {}


def test_offset_delete_of_an_offset_only_a_transaction_holds_drops_it():
    """Kafka's deleteOffsets writes a tombstone when a pending transactional offset
    exists, and its replay removes that offset from the transaction."""
    coordinator, store = group_coordinator()
    txn_commit(coordinator, 5, 42)
    answers: list = []
    coordinator.delete_offsets(GROUP, [("t", 0)], lambda e, r: answers.append((e, r)))
    assert answers == [(ErrorCode.none, {("t", 0): ErrorCode.none})]
    assert store.appends[-1][0][0][1] is None  # the tombstone was written
    assert not coordinator.has_pending_offset_commit(GROUP, ("t", 0))
    coordinator.complete_transactional_offsets(5, [0], commit=True)
    assert committed(coordinator) == {}
