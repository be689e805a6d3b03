"""A Deferred hands its one outcome to its one consumer, in the call that settles it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from gregor_broker.deferred import Deferred


def test_the_consumer_gets_the_value_in_the_call_that_resolves_it() -> None:
    deferred = Deferred()
    seen: list[tuple[Any, BaseException | None]] = []
    deferred.then(lambda value, error: seen.append((value, error)))
    assert seen == [] and not deferred.settled
    deferred.resolve("answer")
    assert seen == [("answer", None)]
    assert deferred.settled


def test_a_consumer_added_after_it_settled_gets_the_outcome_at_once() -> None:
    deferred = Deferred()
    error = ValueError("bad")
    deferred.fail(error)
    seen: list[tuple[Any, BaseException | None]] = []
    deferred.then(lambda value, failure: seen.append((value, failure)))
    assert seen == [(None, error)]


def test_it_settles_once_and_has_one_consumer() -> None:
    deferred = Deferred()
    deferred.then(lambda value, error: None)
    with pytest.raises(RuntimeError):
        deferred.then(lambda value, error: None)
    deferred.resolve(1)
    with pytest.raises(RuntimeError):
        deferred.resolve(2)
    with pytest.raises(RuntimeError):
        deferred.fail(ValueError())


def test_awaiting_it_gives_the_value_or_raises_the_error() -> None:
    async def scenario() -> tuple[Any, BaseException | None]:
        loop = asyncio.get_running_loop()
        resolved, failed = Deferred(), Deferred()
        loop.call_later(0.01, resolved.resolve, "late")
        loop.call_later(0.01, failed.fail, KeyError("gone"))
        value = await resolved
        try:
            await failed
        except KeyError as error:
            return value, error
        return value, None

    value, error = asyncio.run(scenario())
    assert value == "late"
    assert isinstance(error, KeyError)
