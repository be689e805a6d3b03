"""The bound on open segment files: a least-recently-used set of ``.log`` descriptors.

One broker may hold 10,000 partitions; one open descriptor per segment would pass the
process's file limit. A segment opens its ``.log`` file on first use and reports here;
once more than ``max_open`` (``log.max.open.files``) are open, the least recently used
are closed, and reopen on their next use. Index files are never held open (see
``index.py``), so the ``.log`` descriptors are all there is to bound.

A descriptor the fetch path may still be sending from must not close: every
``FileSlice`` holds a ``Pin`` on its segment, and a pinned segment is skipped by the
eviction (so while many responses are in flight the count may pass the bound for a
moment). The pin is released when the slice is dropped (reference counting, so as soon
as the response is written).

All calls come from the event loop thread; nothing here locks.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Protocol


class _Closable(Protocol):
    pins: int

    def close_idle_fd(self) -> None: ...


DEFAULT_MAX_OPEN_FILES = 1000


class OpenFiles:
    """Open segment descriptors, least recently used first."""

    def __init__(self, max_open: int = DEFAULT_MAX_OPEN_FILES) -> None:
        self.max_open = max_open
        self._open: OrderedDict[_Closable, None] = OrderedDict()
        self.opened_total = 0
        self.evicted_total = 0

    def __len__(self) -> int:
        return len(self._open)

    def opened(self, segment: _Closable) -> None:
        self._open[segment] = None
        self.opened_total += 1
        if len(self._open) > self.max_open:
            self._evict()

    def used(self, segment: _Closable) -> None:
        open_files = self._open
        if segment in open_files:
            open_files.move_to_end(segment)

    def closed(self, segment: _Closable) -> None:
        self._open.pop(segment, None)

    def _evict(self) -> None:
        excess = len(self._open) - self.max_open
        idle = []
        for segment in self._open:  # least recently used first
            if len(idle) >= excess:
                break
            if segment.pins == 0:
                idle.append(segment)
        for segment in idle:
            segment.close_idle_fd()  # calls closed()
            self.evicted_total += 1


# File descriptors are a per-process resource, so the bound is per process; the log
# manager sets it from log.max.open.files.
OPEN_FILES = OpenFiles()
