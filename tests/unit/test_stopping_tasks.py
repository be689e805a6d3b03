"""``tasks.cancel_and_wait``: the one way a component's stop cancels its tasks.

It replaced ``task.cancel()`` then ``with suppress(CancelledError): await task`` in the
group and transaction coordinators, the request preparer and the log cleaner: that
swallowed a cancellation of the stop itself, and waited for good on a task that lost its
cancellation.
"""

from __future__ import annotations

import asyncio

from gregor_broker.tasks import cancel_and_wait

# Only bounds a hang; every wait below ends at once when the code is right.
BOUND_S = 30.0


async def _unwinding(unwinding: asyncio.Event, release: asyncio.Event) -> None:
    """A task that takes time to unwind once cancelled (closing a connection, say)."""
    try:
        await asyncio.sleep(3600)
    finally:
        unwinding.set()
        await release.wait()


async def _cancel_the_stop() -> tuple[bool, bool]:
    unwinding, release = asyncio.Event(), asyncio.Event()
    background = asyncio.create_task(_unwinding(unwinding, release))
    await asyncio.sleep(0)
    stopper = asyncio.create_task(cancel_and_wait([background], "test"))
    async with asyncio.timeout(BOUND_S):
        await unwinding.wait()  # the stopper cancelled it, and waits for it to end
    stopper.cancel()
    async with asyncio.timeout(BOUND_S):
        await asyncio.wait([stopper])
    release.set()
    async with asyncio.timeout(BOUND_S):
        await asyncio.wait([background])
    return stopper.cancelled(), background.cancelled()


def test_a_cancellation_of_the_stop_itself_reaches_its_caller() -> None:
    stop_cancelled, background_cancelled = asyncio.run(_cancel_the_stop())
    assert stop_cancelled, "the stop's own cancellation was swallowed"
    assert background_cancelled


async def _stubborn(stop: asyncio.Event) -> None:
    """A task that loses its cancellation and goes on."""
    while not stop.is_set():
        try:
            await stop.wait()
        except asyncio.CancelledError:
            continue


async def _stop_a_stubborn_task() -> tuple[bool, set[asyncio.Task[None]], float, bool]:
    stop = asyncio.Event()
    stubborn = asyncio.create_task(_stubborn(stop), name="stubborn")
    await asyncio.sleep(0)
    loop = asyncio.get_running_loop()
    started = loop.time()
    stopper = asyncio.create_task(cancel_and_wait([stubborn], "test", timeout=0.3))
    # asyncio.wait: the stop is not cancelled by the bound (a timeout would be lost on
    # the stubborn task, and hang this test rather than fail it).
    done, _ = await asyncio.wait([stopper], timeout=BOUND_S)
    waited = loop.time() - started
    still_running = not stubborn.done()
    stop.set()
    await stubborn
    return bool(done), await stopper, waited, still_running


def test_a_task_that_lost_its_cancellation_is_left_behind_after_the_timeout(caplog) -> None:
    stopped, left, waited, still_running = asyncio.run(_stop_a_stubborn_task())
    assert stopped, "the stop waited for good on a task that lost its cancellation"
    assert still_running
    assert [task.get_name() for task in left] == ["stubborn"]
    assert waited >= 0.3
    assert "left behind: stubborn" in caplog.text


async def _failing() -> None:
    raise ValueError("boom")


async def _stop_all_kinds() -> tuple[set[asyncio.Task[None]], list[asyncio.Task[None]]]:
    finished = asyncio.create_task(asyncio.sleep(0))
    failing = asyncio.create_task(_failing())
    sleeping = asyncio.create_task(asyncio.sleep(3600))
    await asyncio.sleep(0.01)  # the first two have ended
    tasks = [finished, failing, sleeping]
    async with asyncio.timeout(BOUND_S):
        left = await cancel_and_wait([*tasks, None], "test")
    return left, tasks


def test_whatever_the_tasks_ended_with_is_consumed() -> None:
    left, (finished, failing, sleeping) = asyncio.run(_stop_all_kinds())
    assert left == set()
    assert finished.done() and not finished.cancelled()
    assert isinstance(failing.exception(), ValueError)
    assert sleeping.cancelled()


def test_nothing_to_stop() -> None:
    assert asyncio.run(cancel_and_wait([None], "test")) == set()
