"""The produce purgatory wakes an acks=all produce only when the high watermark passes
its append (or something else about its partition changes), and answers it in that call.
"""

from __future__ import annotations

import asyncio

from kio.schema.errors import ErrorCode

from gregor_broker.replication.delayed_produce import DelayedProduce, ProducePurgatory

A = ("a", 0)
B = ("b", 0)


class Partitions:
    """A stand-in for the replica manager's ``replication_outcome``: high watermarks
    and leader epochs, and a count of the checks made."""

    def __init__(self) -> None:
        self.high_watermark = {A: 0, B: 0}
        self.epoch = {A: 1, B: 1}
        self.checks = 0

    def outcome(self, key, epoch, last_offset):
        self.checks += 1
        if self.epoch[key] != epoch:
            return ErrorCode.not_leader_or_follower
        if self.high_watermark[key] > last_offset:
            return ErrorCode.none
        return None

    def move(self, purgatory: ProducePurgatory, key, high_watermark: int) -> None:
        self.high_watermark[key] = high_watermark
        purgatory.notify_high_watermark(key, high_watermark)


def _answers(produce: DelayedProduce) -> list:
    seen: list = []
    produce.answer.then(lambda value, error: seen.append(error or value))
    return seen


def test_a_high_watermark_move_checks_only_the_produces_it_completes() -> None:
    async def scenario() -> None:
        purgatory = ProducePurgatory()
        partitions = Partitions()
        produces = [
            DelayedProduce(purgatory, partitions.outcome, [(A, 1, last)], 30)
            for last in (9, 19, 29, 39, 49)
        ]
        answers = [_answers(produce) for produce in produces]
        assert purgatory.pending() == 5
        partitions.checks = 0
        partitions.move(purgatory, A, 5)  # completes none: nothing is checked
        assert partitions.checks == 0
        partitions.move(purgatory, A, 20)  # passes 9 and 19: those two only
        assert partitions.checks == 2
        assert answers[0] == [[ErrorCode.none]] and answers[1] == [[ErrorCode.none]]
        assert answers[2] == [] and purgatory.pending() == 3
        partitions.move(purgatory, A, 50)
        assert all(answer == [[ErrorCode.none]] for answer in answers)
        assert purgatory.pending() == 0

    asyncio.run(scenario())


def test_leadership_change_wakes_every_produce_and_a_short_one_keeps_waiting() -> None:
    async def scenario() -> None:
        purgatory = ProducePurgatory()
        partitions = Partitions()
        moved = DelayedProduce(purgatory, partitions.outcome, [(A, 1, 9)], 30)
        answer = _answers(moved)
        # Something about A changed that does not settle the append (an ISR change).
        purgatory.notify(A)
        assert answer == [] and purgatory.pending() == 1  # watching A again
        partitions.epoch[A] = 2
        purgatory.notify(A)
        assert answer == [[ErrorCode.not_leader_or_follower]]
        assert purgatory.pending() == 0

    asyncio.run(scenario())


def test_a_produce_on_two_partitions_is_answered_once_both_have_outcomes() -> None:
    async def scenario() -> None:
        purgatory = ProducePurgatory()
        partitions = Partitions()
        produce = DelayedProduce(purgatory, partitions.outcome, [(A, 1, 4), (B, 1, 7)], 30)
        answer = _answers(produce)
        partitions.move(purgatory, A, 5)
        assert answer == [] and purgatory.pending() == 1
        partitions.move(purgatory, B, 6)  # still short on B
        assert answer == []
        partitions.move(purgatory, B, 8)
        assert answer == [[ErrorCode.none, ErrorCode.none]]
        assert purgatory.pending() == 0

    asyncio.run(scenario())


def test_the_timer_answers_what_is_short_and_leaves_nothing_watching() -> None:
    async def scenario() -> None:
        purgatory = ProducePurgatory()
        partitions = Partitions()
        produce = DelayedProduce(purgatory, partitions.outcome, [(A, 1, 4), (B, 1, 7)], 0.01)
        answer = _answers(produce)
        partitions.move(purgatory, A, 5)
        await asyncio.sleep(0.05)
        assert answer == [[ErrorCode.none, ErrorCode.request_timed_out]]
        assert purgatory.pending() == 0
        partitions.move(purgatory, B, 100)  # nothing left to wake
        assert answer == [[ErrorCode.none, ErrorCode.request_timed_out]]

    asyncio.run(scenario())


def test_produces_added_out_of_offset_order_are_woken_in_order() -> None:
    async def scenario() -> None:
        purgatory = ProducePurgatory()
        partitions = Partitions()
        late = DelayedProduce(purgatory, partitions.outcome, [(A, 1, 30)], 30)
        early = DelayedProduce(purgatory, partitions.outcome, [(A, 1, 10)], 30)
        late_answer, early_answer = _answers(late), _answers(early)
        partitions.move(purgatory, A, 11)
        assert early_answer == [[ErrorCode.none]] and late_answer == []
        partitions.move(purgatory, A, 31)
        assert late_answer == [[ErrorCode.none]]

    asyncio.run(scenario())
