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
  ZooKeeper).

Objects that carry the finalizer of an earlier version lose it: kopf drops a finalizer that
no handler of the object needs any more.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from typing import Any

log = logging.getLogger(__name__)

Key = tuple[str, str]  # (namespace, name)
Step = Callable[[Mapping[str, Any]], None]


class Periodic:
    """``every(plural, step)``: ``step(body)`` for each live object of ``plural`` (as
    ``track`` saw it last), every ``interval`` seconds."""

    def __init__(self) -> None:
        self.bodies: dict[str, dict[Key, Mapping[str, Any]]] = {}
        self.steps: dict[str, Step] = {}

    def every(self, plural: str, step: Step) -> None:
        self.steps[plural] = step
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

    def start(self, interval: float) -> asyncio.Task[None]:
        return asyncio.create_task(self._run(interval), name="gregor-periodic")

    async def _run(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            for plural, step in self.steps.items():
                for key, body in self.live(plural).items():
                    try:
                        await asyncio.to_thread(step, body)
                    except Exception:  # one object's failure must not stop the others
                        log.exception("periodic step of %s %s/%s failed", plural, *key)

    @staticmethod
    async def stop(task: asyncio.Task[None] | None) -> None:
        if task is None:
            return
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
