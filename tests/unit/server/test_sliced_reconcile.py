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

        def apply(topics: set[str]) -> None:
            time.sleep(0.002)  # creating logs: about a millisecond per partition
            calls.append(topics)
            applied.update(topics)

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
        reconcile = SlicedReconcile(lambda: set(changed), calls.append)
        reconcile.schedule()
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        return calls

    assert asyncio.run(scenario()) == [{"a", "b", "c"}]


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
