"""Periodic work over custom resources that puts no finalizer on them.

GregorCluster (scaling, rolling restarts, preferred leaders) and GregorRebalance (moves in
flight) need a step every few seconds besides their create/update events. kopf's
``@kopf.timer`` and ``@kopf.daemon`` would do that, but kopf then adds a finalizer to every
object they run for (to stop them on deletion), and only a running operator releases it:
``helm uninstall`` deletes the operator before the GregorCluster, so the resource and its
namespace wedge. Here instead:

- an ``@kopf.on.event`` spy per kind keeps the latest body of every live object (spies need
  no finalizer);
- one asyncio task, started with the operator and cancelled on its cleanup, calls each
  kind's step for each object every interval, in a worker thread (steps block on
  ZooKeeper);
- checks with their own period per object (``on_schedule``: the preferred-leader check
  every ``preferredLeaderCheckIntervalSeconds``) run beside it on a fixed schedule, the
  n-th run due n periods after the first: neither the length of the runs nor the steps of
  other objects delay one, so "every interval" holds to the interval, not to the interval
  rounded up to the next status step.

Objects that carry the finalizer of an earlier version lose it: kopf drops a finalizer that
no handler of the object needs any more.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

log = logging.getLogger(__name__)

Key = tuple[str, str]  # (namespace, name)
Step = Callable[[Mapping[str, Any]], None]
Interval = Callable[[Mapping[str, Any]], float]
# How often the schedule looks for new objects and changed periods (seconds).
SCHEDULE_TICK = 0.5


class Periodic:
    """``every(plural, step)``: ``step(body)`` for each live object of ``plural`` (as
    ``track`` saw it last), every ``interval`` seconds."""

    def __init__(self) -> None:
        self.bodies: dict[str, dict[Key, Mapping[str, Any]]] = {}
        self.steps: dict[str, Step] = {}
        self.scheduled: dict[str, tuple[Interval, Step]] = {}

    def every(self, plural: str, step: Step) -> None:
        self.steps[plural] = step
        self.bodies.setdefault(plural, {})

    def on_schedule(self, plural: str, period: Interval, step: Step) -> None:
        """``step(body)`` for each live object of ``plural`` every ``period(body)``
        seconds (0 or less: never), on a fixed schedule from the first run (when the object
        is first seen); a run that overran its period is followed by the next at once."""
        self.scheduled[plural] = (period, step)
        self.bodies.setdefault(plural, {})

    def track(self, plural: str, event_type: str | None, body: Mapping[str, Any]) -> None:
        """Feed every watch event of ``plural`` here, from an ``@kopf.on.event`` spy (the
        handlers' modules declare it, with the resource spelled out for the RBAC check)."""
        live = self.bodies.setdefault(plural, {})
        key = (body["metadata"].get("namespace") or "", body["metadata"]["name"])
        if event_type == "DELETED" or body["metadata"].get("deletionTimestamp"):
            live.pop(key, None)
        else:
            live[key] = body

    def live(self, plural: str) -> dict[Key, Mapping[str, Any]]:
        """The latest body of every live object of ``plural`` (a snapshot)."""
        return dict(self.bodies.get(plural, {}))

    def start(self, interval: float) -> asyncio.Task[Any]:
        async def both() -> None:
            await asyncio.gather(self._run(interval), self._run_scheduled())

        return asyncio.create_task(both(), name="gregor-periodic")

    async def _run(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            for plural, step in self.steps.items():
                for key, body in self.live(plural).items():
                    try:
                        await asyncio.to_thread(step, body)
                    except Exception:  # one object's failure must not stop the others
                        log.exception("periodic step of %s %s/%s failed", plural, *key)

    async def _run_scheduled(self) -> None:
        due: dict[tuple[str, Key], float] = {}  # when each object's next run is due
        while True:
            now = time.monotonic()
            for plural, (period_of, step) in self.scheduled.items():
                live = self.live(plural)
                for gone in [k for k in due if k[0] == plural and k[1] not in live]:
                    del due[gone]
                for key, body in live.items():
                    period = period_of(body)
                    if period <= 0:
                        due.pop((plural, key), None)
                        continue
                    # First seen: due now; a shortened period takes effect at once.
                    when = min(due.get((plural, key), now), now + period)
                    due[(plural, key)] = when
                    if when > time.monotonic():
                        continue
                    try:
                        await asyncio.to_thread(step, body)
                    except Exception:  # one object's failure must not stop the others
                        log.exception("scheduled step of %s %s/%s failed", plural, *key)
                    # Overran (a slow API server behind the run's event): due at once, so
                    # no two runs are ever more than a period plus one run apart.
                    due[(plural, key)] = max(when + period, time.monotonic())
            wait = min([*due.values(), time.monotonic() + SCHEDULE_TICK]) - time.monotonic()
            await asyncio.sleep(max(0.0, wait))

    @staticmethod
    async def stop(task: asyncio.Task[Any] | None) -> None:
        if task is None:
            return
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
