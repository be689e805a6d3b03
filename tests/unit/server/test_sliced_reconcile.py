"""The event loop keeps running while many changed topics are applied, and while the
periodic sweeps walk every log (issue 9: one CreateTopics of 1,000 partitions, or a roll
pass over 10,000 logs, held the loop for seconds on a loaded machine)."""

from __future__ import annotations

import asyncio
import time

from gregor_broker.log import LogConfig, LogManager
from gregor_broker.server.sliced_reconcile import SlicedReconcile


def test_a_large_change_is_applied_in_slices_with_the_loop_running_between() -> None:
    async def scenario() -> tuple[list[set[str]], int, set[str]]:
        changed = {f"t{i}" for i in range(400)}
        applied: set[str] = set()
        calls: list[set[str]] = []
        ticks = 0

        def take() -> set[str]:
            nonlocal changed
            taken, changed = changed, set()
            return taken

        def apply(topics: set[str], *, max_changes: int | None = None) -> set[str]:
            time.sleep(0.002)  # creating logs: about a millisecond per partition
            calls.append(topics)
            applied.update(topics)
            return set()

        reconcile = SlicedReconcile(take, apply, budget_s=0.01, min_topics=16)

        async def ticker() -> None:
            nonlocal ticks
            while reconcile.pending or not applied:
                ticks += 1
                await asyncio.sleep(0)

        reconcile.schedule()
        await asyncio.wait_for(ticker(), 10)
        return calls, ticks, applied

    calls, ticks, applied = asyncio.run(scenario())
    assert applied == {f"t{i}" for i in range(400)}
    # 25 batches of 16 at 2 ms or more each, a slice ends after 10 ms: at least 5 batches
    # per slice at most, so several slices, and the loop ran between them (how many turns
    # depends on how long the sleeps really take on a busy machine).
    assert ticks >= 2, ticks
    assert all(len(batch) <= 16 for batch in calls)


def test_a_small_change_is_applied_at_once() -> None:
    async def scenario() -> list[set[str]]:
        calls: list[set[str]] = []
        changed = {"a", "b", "c"}

        def apply(topics: set[str], *, max_changes: int | None = None) -> set[str]:
            calls.append(topics)
            return set()

        reconcile = SlicedReconcile(lambda: set(changed), apply)
        reconcile.schedule()
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        return calls

    assert asyncio.run(scenario()) == [{"a", "b", "c"}]


def test_one_topic_of_many_partitions_is_created_over_several_turns_of_the_loop() -> None:
    """A CreateTopics of 1,000 partitions is one topic: a slice counting topics created
    every log in one call (1.5 to 8 s of loop time in the fuzzer). A call creates at
    most ``changes_per_call`` logs and the slice ends on time once one was capped."""

    async def scenario() -> tuple[list[int], int]:
        to_create = 400
        per_call: list[int] = []
        ticks = 0

        def apply(topics: set[str], *, max_changes: int | None = None) -> set[str]:
            nonlocal to_create
            assert topics == {"big"}
            count = to_create if max_changes is None else min(to_create, max_changes)
            time.sleep(0.0005 * count)  # half a millisecond a log
            to_create -= count
            per_call.append(count)
            return {"big"} if to_create else set()

        taken = [False]

        def take() -> set[str]:
            if taken[0]:
                return set()
            taken[0] = True
            return {"big"}

        reconcile = SlicedReconcile(take, apply, budget_s=0.01, changes_per_call=16)
        reconcile.schedule()
        while to_create:
            ticks += 1
            await asyncio.sleep(0)
        return per_call, ticks

    per_call, ticks = asyncio.run(scenario())
    assert sum(per_call) == 400
    assert max(per_call) <= 16, per_call
    # 25 calls of 8 ms or more: a 10 ms slice holds at most two, so the loop ran between.
    assert ticks >= 5, ticks


def test_the_roll_sweep_yields_to_the_loop_between_slices(tmp_path) -> None:
    logs = LogManager([tmp_path / "d1"], default_config=LogConfig())
    for index in range(300):
        logs.get_or_create("t", index, LogConfig())
    seen: list[int] = []

    async def scenario() -> int:
        ticks = 0
        sweep = asyncio.ensure_future(logs.sweep(lambda log: seen.append(log.partition)))
        while not sweep.done():
            ticks += 1
            await asyncio.sleep(0)
        return ticks

    ticks = asyncio.run(scenario())
    assert sorted(seen) == list(range(300))
    assert ticks >= 1, ticks  # 300 logs, 256 per slice: two slices
    logs.close()


def test_a_slow_sweep_ends_its_turn_after_a_few_milliseconds(tmp_path) -> None:
    """On a starved machine 256 logs can take 100 ms: a turn also ends on time."""
    logs = LogManager([tmp_path / "d1"], default_config=LogConfig())
    for index in range(20):
        logs.get_or_create("t", index, LogConfig())
    turns: list[list[int]] = [[]]

    async def scenario() -> None:
        sweep = asyncio.ensure_future(
            logs.sweep(lambda log: (time.sleep(0.003), turns[-1].append(log.partition)))
        )
        while not sweep.done():
            await asyncio.sleep(0)
            turns.append([])

    asyncio.run(scenario())
    assert sorted(p for turn in turns for p in turn) == list(range(20))
    # 3 ms per log, 5 ms per turn: at most two logs a turn (not 20 in one).
    assert max(len(turn) for turn in turns) <= 2, turns
    logs.close()
