"""The transaction coordinator's rules for one transactional id: Kafka's
``TransactionState``, ``TransactionMetadata`` and the decisions of
``TransactionCoordinator.handleInitProducerId / handleAddPartitionsToTransaction /
handleEndTransaction``, with no I/O.

Every change is two steps, as in Kafka: a decision ``prepare_*`` checks the request
against the current metadata and returns the ``Transition`` to write to
``__transaction_state`` (or raises ``TransactionError`` with the error code the client
gets), marking the metadata pending; once the record is replicated the service calls
``complete`` (or ``abort_pending`` when the write failed). A pending transition makes
every other request for the id answer CONCURRENT_TRANSACTIONS.

States and the states each may follow (Kafka's ``TransactionState.validPreviousStates``):

=================== =========================================================
Empty               Empty, CompleteCommit, CompleteAbort
Ongoing             Ongoing, Empty, CompleteCommit, CompleteAbort
PrepareCommit       Ongoing
PrepareAbort        Ongoing, PrepareEpochFence
CompleteCommit      PrepareCommit
CompleteAbort       PrepareAbort
Dead                Empty, CompleteAbort, CompleteCommit
PrepareEpochFence   Ongoing
=================== =========================================================
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from enum import IntEnum

from kio.schema.errors import ErrorCode

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
# Kafka rotates the producer id once the epoch reaches Short.MAX_VALUE - 1.
MAX_PRODUCER_EPOCH = 2**15 - 1


class State(IntEnum):
    """Kafka's ``TransactionState`` ids (the status byte of ``__transaction_state``)."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7


VALID_PREVIOUS: dict[State, frozenset[State]] = {
    State.EMPTY: frozenset({State.EMPTY, State.COMPLETE_COMMIT, State.COMPLETE_ABORT}),
    State.ONGOING: frozenset(
        {State.ONGOING, State.EMPTY, State.COMPLETE_COMMIT, State.COMPLETE_ABORT}
    ),
    State.PREPARE_COMMIT: frozenset({State.ONGOING}),
    State.PREPARE_ABORT: frozenset({State.ONGOING, State.PREPARE_EPOCH_FENCE}),
    State.COMPLETE_COMMIT: frozenset({State.PREPARE_COMMIT}),
    State.COMPLETE_ABORT: frozenset({State.PREPARE_ABORT}),
    State.DEAD: frozenset({State.EMPTY, State.COMPLETE_ABORT, State.COMPLETE_COMMIT}),
    State.PREPARE_EPOCH_FENCE: frozenset({State.ONGOING}),
}

TopicPartition = tuple[str, int]


class TransactionError(Exception):
    """A request the coordinator refuses; ``error_code`` is what the client gets."""

    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


@dataclass(frozen=True, slots=True)
class Transition:
    """What the next ``__transaction_state`` record says (Kafka's ``TxnTransitMetadata``)."""

    producer_id: int
    previous_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    state: State
    partitions: frozenset[TopicPartition]
    start_ms: int
    last_update_ms: int


@dataclass(slots=True)
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: State = State.EMPTY
    previous_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    partitions: set[TopicPartition] = field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = -1
    pending: Transition | None = None

    # -- two-step changes ------------------------------------------------------------------

    def _prepare(self, **changes: object) -> Transition:
        current = Transition(
            self.producer_id,
            self.previous_producer_id,
            self.producer_epoch,
            self.last_producer_epoch,
            self.timeout_ms,
            self.state,
            frozenset(self.partitions),
            self.start_ms,
            self.last_update_ms,
        )
        transition = replace(current, **changes)  # type: ignore[arg-type]
        if self.state not in VALID_PREVIOUS[transition.state]:
            raise TransactionError(
                ErrorCode.invalid_txn_state,
                f"{self.transactional_id}: cannot go from {self.state.name} to "
                f"{transition.state.name}",
            )
        self.pending = transition
        return transition

    def complete(self, transition: Transition) -> None:
        """The transition's record is replicated: it is the metadata now."""
        if self.pending != transition:
            raise ValueError(f"{self.transactional_id}: completing a transition not pending")
        self.producer_id = transition.producer_id
        self.previous_producer_id = transition.previous_producer_id
        self.producer_epoch = transition.producer_epoch
        self.last_producer_epoch = transition.last_producer_epoch
        self.timeout_ms = transition.timeout_ms
        self.state = transition.state
        self.partitions = set(transition.partitions)
        self.start_ms = transition.start_ms
        self.last_update_ms = transition.last_update_ms
        self.pending = None

    def abort_pending(self) -> None:
        """The record was not written (not enough replicas, lost leadership)."""
        self.pending = None

    def _check_not_pending(self) -> None:
        if self.pending is not None:
            raise TransactionError(
                ErrorCode.concurrent_transactions,
                f"{self.transactional_id}: a change to {self.pending.state.name} is in progress",
            )

    @property
    def epoch_exhausted(self) -> bool:
        return self.producer_epoch >= MAX_PRODUCER_EPOCH - 1


# -- InitProducerId ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class InitDecision:
    """``transition`` to write; with ``fence`` the ongoing transaction is first aborted
    under a bumped epoch (the client gets CONCURRENT_TRANSACTIONS and retries)."""

    transition: Transition | None
    fence: bool = False


def prepare_init_producer_id(
    metadata: TransactionMetadata,
    *,
    timeout_ms: int,
    now_ms: int,
    new_producer_id: Callable[[], int],
    expected: tuple[int, int] | None = None,
) -> InitDecision:
    """Kafka's ``handleInitProducerId`` for an id that has metadata (a new id gets
    ``new_metadata`` first). ``expected``: the (producer id, epoch) a KIP-360 client
    sends to bump its epoch after an error; None from a new producer."""
    metadata._check_not_pending()
    if expected is not None and expected != (NO_PRODUCER_ID, NO_PRODUCER_EPOCH):
        current = (metadata.producer_id, metadata.producer_epoch)
        retried = (metadata.producer_id, metadata.last_producer_epoch)
        rotated = expected[0] == metadata.previous_producer_id
        if expected == retried and metadata.state in (
            State.EMPTY,
            State.COMPLETE_COMMIT,
            State.COMPLETE_ABORT,
        ):
            return InitDecision(None)  # a retry of the bump that already happened
        if expected != current and not rotated:
            raise TransactionError(
                ErrorCode.producer_fenced,
                f"{metadata.transactional_id}: producer {expected[0]} epoch {expected[1]} is "
                f"not the current producer {current[0]} epoch {current[1]}",
            )
    if metadata.state in (State.PREPARE_COMMIT, State.PREPARE_ABORT):
        raise TransactionError(
            ErrorCode.concurrent_transactions,
            f"{metadata.transactional_id}: the last transaction is still completing",
        )
    if metadata.state == State.ONGOING:
        return InitDecision(
            metadata._prepare(
                state=State.PREPARE_EPOCH_FENCE,
                producer_epoch=metadata.producer_epoch + 1,
                last_producer_epoch=metadata.producer_epoch,
                last_update_ms=now_ms,
            ),
            fence=True,
        )
    if metadata.state not in (State.EMPTY, State.COMPLETE_COMMIT, State.COMPLETE_ABORT):
        raise TransactionError(
            ErrorCode.concurrent_transactions,
            f"{metadata.transactional_id} is {metadata.state.name}",
        )
    if metadata.epoch_exhausted:
        producer_id, epoch, previous = new_producer_id(), 0, metadata.producer_id
    else:
        producer_id, epoch = metadata.producer_id, metadata.producer_epoch + 1
        previous = metadata.previous_producer_id
    return InitDecision(
        metadata._prepare(
            producer_id=producer_id,
            previous_producer_id=previous,
            producer_epoch=epoch,
            last_producer_epoch=metadata.producer_epoch,
            timeout_ms=timeout_ms,
            state=State.EMPTY,
            partitions=frozenset(),
            start_ms=-1,
            last_update_ms=now_ms,
        )
    )


def new_metadata(transactional_id: str, producer_id: int, timeout_ms: int) -> TransactionMetadata:
    """Metadata of an id seen for the first time: epoch -1, so its first
    ``prepare_init_producer_id`` makes it 0."""
    return TransactionMetadata(transactional_id, producer_id, NO_PRODUCER_EPOCH, timeout_ms)


# -- AddPartitionsToTxn / AddOffsetsToTxn ---------------------------------------------------


def check_producer(
    metadata: TransactionMetadata | None, producer_id: int, epoch: int
) -> TransactionMetadata:
    """The id's metadata when (producer_id, epoch) is its current producer."""
    if metadata is None or metadata.producer_id != producer_id:
        raise TransactionError(
            ErrorCode.invalid_producer_id_mapping,
            f"producer {producer_id} is not the producer of this transactional id",
        )
    if epoch != metadata.producer_epoch:
        raise TransactionError(
            ErrorCode.producer_fenced,
            f"{metadata.transactional_id}: epoch {epoch} is not the current epoch "
            f"{metadata.producer_epoch}",
        )
    return metadata


def prepare_add_partitions(
    metadata: TransactionMetadata | None,
    producer_id: int,
    epoch: int,
    partitions: set[TopicPartition],
    now_ms: int,
) -> Transition | None:
    """The transition adding ``partitions``; None when they are all in already."""
    metadata = check_producer(metadata, producer_id, epoch)
    metadata._check_not_pending()
    if metadata.state in (State.PREPARE_COMMIT, State.PREPARE_ABORT):
        raise TransactionError(
            ErrorCode.concurrent_transactions,
            f"{metadata.transactional_id}: the last transaction is still completing",
        )
    if metadata.state == State.ONGOING and partitions <= metadata.partitions:
        return None
    starting = metadata.state != State.ONGOING
    return metadata._prepare(
        state=State.ONGOING,
        partitions=frozenset(metadata.partitions | partitions),
        start_ms=now_ms if starting else metadata.start_ms,
        last_update_ms=now_ms,
    )


# -- EndTxn --------------------------------------------------------------------------------


def prepare_end_transaction(
    metadata: TransactionMetadata | None,
    producer_id: int,
    epoch: int,
    commit: bool,
    now_ms: int,
) -> Transition | None:
    """The transition to PrepareCommit / PrepareAbort; None for a retry of an end that
    already completed (answered NONE, as Kafka does)."""
    metadata = check_producer(metadata, producer_id, epoch)
    metadata._check_not_pending()
    state = metadata.state
    wanted, other = (
        (State.COMPLETE_COMMIT, State.COMPLETE_ABORT)
        if commit
        else (State.COMPLETE_ABORT, State.COMPLETE_COMMIT)
    )
    preparing = State.PREPARE_COMMIT if commit else State.PREPARE_ABORT
    if state == State.ONGOING:
        return metadata._prepare(state=preparing, last_update_ms=now_ms)
    if state == wanted:
        return None
    if state == preparing:
        raise TransactionError(
            ErrorCode.concurrent_transactions,
            f"{metadata.transactional_id}: already {state.name}",
        )
    verb = "commit" if commit else "abort"
    raise TransactionError(
        ErrorCode.invalid_txn_state,
        f"{metadata.transactional_id}: cannot {verb} a transaction in state {state.name}"
        + (f" (it is {other.name})" if state == other else ""),
    )


def prepare_complete(metadata: TransactionMetadata, now_ms: int) -> Transition:
    """After every partition has its marker: CompleteCommit / CompleteAbort, no
    partitions (Kafka's ``prepareComplete``)."""
    if metadata.state == State.PREPARE_COMMIT:
        done = State.COMPLETE_COMMIT
    elif metadata.state == State.PREPARE_ABORT:
        done = State.COMPLETE_ABORT
    else:
        raise TransactionError(
            ErrorCode.invalid_txn_state,
            f"{metadata.transactional_id}: no transaction is completing ({metadata.state.name})",
        )
    return metadata._prepare(state=done, partitions=frozenset(), last_update_ms=now_ms)


def prepare_abort_after_fence(metadata: TransactionMetadata, now_ms: int) -> Transition:
    """After PrepareEpochFence: abort the fenced transaction under the new epoch."""
    if metadata.state != State.PREPARE_EPOCH_FENCE:
        raise TransactionError(
            ErrorCode.invalid_txn_state,
            f"{metadata.transactional_id}: not fencing ({metadata.state.name})",
        )
    return metadata._prepare(state=State.PREPARE_ABORT, last_update_ms=now_ms)


def timed_out(metadata: TransactionMetadata, now_ms: int) -> bool:
    """An ongoing transaction older than its timeout: the coordinator aborts it
    (Kafka's ``abortTimedOutTransactions``)."""
    return (
        metadata.state == State.ONGOING
        and metadata.pending is None
        and now_ms - metadata.start_ms > metadata.timeout_ms
    )
