"""A version's first use is prepared on the preparation thread a step at a time, each
step handed over by the event loop: the thread never runs through a backlog on its own
(it held the interpreter lock whenever the loop let go of it, and the loop waited the
switch interval to get it back after each socket call)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

from gregor_broker.protocol import entities, frame_guard, preparation
from gregor_broker.protocol.frame_guard import checker_classes
from gregor_broker.protocol.preparation import Preparer

FETCH, FETCH_VERSION = 1, 16


def test_checker_classes_come_nested_first_and_the_request_last() -> None:
    request_class = entities.payload_class(FETCH, FETCH_VERSION, "request")
    ordered = checker_classes(request_class)
    assert ordered[-1] is request_class
    assert len(ordered) == len(set(ordered)) > 2  # topics, partitions, forgotten topics...
    for position, cls in enumerate(ordered):
        nested = [step.kind for step in frame_guard._steps(cls)[0] if isinstance(step.kind, type)]
        assert all(ordered.index(kind) < position for kind in nested), cls


def test_a_version_is_prepared_one_checker_per_step() -> None:
    request_class = entities.payload_class(FETCH, FETCH_VERSION, "request")
    steps = list(preparation.preparation(FETCH, FETCH_VERSION))
    # One step per checker, one for the reader and response class; the builder ends it.
    assert len(steps) == len(checker_classes(request_class)) + 1


def test_the_thread_takes_one_step_at_a_time_with_the_loop_running_between(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    preparer = Preparer()
    queued: list[int] = []  # other steps waiting for the thread while one runs

    def steps(api_key: int, version: int) -> Iterator[None]:
        for _ in range(5):
            time.sleep(0.002)
            queued.append(preparer._executor._work_queue.qsize())
            yield

    monkeypatch.setattr(preparation, "preparation", steps)
    versions = [(FETCH, version) for version in range(12, 16)]

    async def scenario() -> int:
        ticks = 0
        preparing = asyncio.gather(*(preparer.prepare(*version) for version in versions))
        while not preparing.done():
            ticks += 1
            await asyncio.sleep(0)
        await preparing
        await preparer.stop()
        return ticks

    ticks = asyncio.run(scenario())
    assert all(preparer.ready(*version) for version in versions)
    assert len(queued) == 4 * 5 and max(queued) == 0, queued
    assert ticks >= 4 * 5, ticks  # the loop ran at least once per step


def test_the_end_of_the_background_preparation_is_logged(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The line a benchmark waits for before it measures a broker (``bench/targets.py``):
    logged once every version is prepared, not before."""
    monkeypatch.setattr(preparation, "BACKGROUND_DELAY_S", 0.0)
    monkeypatch.setattr(preparation, "BACKGROUND_PAUSE_S", 0.0)
    preparer = Preparer()
    versions = [(FETCH, version) for version in range(12, 14)]
    seen_before_the_end: list[bool] = []

    async def scenario() -> None:
        preparer.start_background(versions)
        while preparer._task is not None and not preparer._task.done():
            seen_before_the_end.append(preparation.PREPARED_LOG_LINE in caplog.text)
            await asyncio.sleep(0)
        await preparer.stop()

    with caplog.at_level("INFO", logger=preparation.__name__):
        asyncio.run(scenario())
    assert all(preparer.ready(*version) for version in versions)
    assert seen_before_the_end and not any(seen_before_the_end)
    assert f"{preparation.PREPARED_LOG_LINE}: 2 in the background" in caplog.text
