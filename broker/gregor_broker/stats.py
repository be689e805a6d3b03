"""Sampled rates, throttle times and latency histograms: the measuring primitives.

The bottom of the broker's layers (nothing here imports the rest of Gregor): client
quotas (``server/quotas.py``) and replication throttles (``replication/throttle.py``)
measure rates with ``SampledRate`` and turn an excess into a wait with
``throttle_time_ms``; the request router times requests into ``LatencyHistogram``s that
the metrics endpoint (``server/metrics.py``) exposes. No I/O and no clock of its own:
callers pass ``now``. ``RateLimitedLog`` applies the same idea to log lines: at most so
many per interval, the rest counted.
"""

from __future__ import annotations

import bisect
import logging
import time
from collections.abc import Callable
from typing import Any

# Request latency buckets, seconds.
LATENCY_BUCKETS = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
)  # fmt: skip

# -- rates ---------------------------------------------------------------------------------


class SampledRate:
    """Kafka's ``Rate`` over a ``SampledStat``: a sum per sample window, divided by the
    time the retained samples cover, padded so that a client that has only just started
    is not measured over a few milliseconds.

    Gregor differs from Kafka in the padding. Kafka pads to ``samples - 1`` whole windows,
    which lets a client that starts at full speed send ``samples - 1`` windows' worth of
    quota at once; when that sample expires ``samples`` windows later the same burst is
    allowed again, and again (the burstiness KIP-599 describes): a producer under 1 MB/s
    with the default 11 x 1 s windows sends 10 MB every 11 s and almost nothing between.
    Gregor pads to one window (``min_full_windows``), so a saturating client gets its
    quota evenly, second by second.
    """

    __slots__ = ("_current", "_starts", "_values", "min_full_windows", "samples", "window_s")

    def __init__(
        self, samples: int, window_s: float, now: float, min_full_windows: int = 1
    ) -> None:
        self.samples = max(samples, 1)
        self.window_s = window_s
        self.min_full_windows = min(min_full_windows, self.samples - 1)
        self._starts = [now]
        self._values = [0.0]
        self._current = 0

    def record(self, value: float, now: float) -> None:
        current = self._current
        if now - self._starts[current] >= self.window_s:
            current = self._advance(now)
        self._values[current] += value

    def _advance(self, now: float) -> int:
        current = (self._current + 1) % self.samples
        if current >= len(self._starts):
            self._starts.append(now)
            self._values.append(0.0)
        else:
            self._starts[current] = now
            self._values[current] = 0.0
        self._current = current
        return current

    def _purge(self, now: float) -> None:
        expire = self.samples * self.window_s
        starts = self._starts
        for i, start in enumerate(starts):
            if now - start >= expire:
                starts[i] = now
                self._values[i] = 0.0

    def window_size(self, now: float) -> float:
        """Seconds the rate is measured over (Kafka's ``Rate.windowSize``)."""
        self._purge(now)
        elapsed = now - min(self._starts)
        full_windows = int(elapsed // self.window_s)
        minimum = self.min_full_windows
        if full_windows < minimum:
            elapsed += (minimum - full_windows) * self.window_s
        return max(elapsed, 0.001)

    def measure(self, now: float) -> float:
        """Units per second over the retained samples."""
        window = self.window_size(now)
        return sum(self._values) / window


def throttle_time_ms(observed: float, bound: float, window_s: float) -> int:
    """Kafka's throttle time: how long to wait for the rate over ``window_s`` to fall
    back to ``bound`` (``(observed - bound) / bound * window``); 0 within the quota."""
    if observed <= bound:
        return 0
    return round((observed - bound) / bound * window_s * 1000)


class LatencyHistogram:
    """A Prometheus histogram at the cost of a bisect and two adds per observation."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...] = LATENCY_BUCKETS) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # the last one is +Inf
        self.sum = 0.0

    def observe(self, seconds: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, seconds)] += 1
        self.sum += seconds

    def buckets(self) -> list[tuple[str, int]]:
        cumulative = 0
        out = []
        for bound, count in zip((*self.bounds, float("inf")), self.counts, strict=True):
            cumulative += count
            out.append(("+Inf" if bound == float("inf") else repr(bound), cumulative))
        return out


class RateLimitedLog:
    """One line per event, a traceback at most once per ``interval`` per kind of error.

    A fuzzer or a broken client can send tens of thousands of bad requests; a full
    traceback for each filled the log with megabytes saying the same thing. Lines past
    ``lines_per_interval`` in an interval are counted and reported once it ends.
    """

    def __init__(
        self,
        logger: logging.Logger,
        *,
        interval: float = 60.0,
        lines_per_interval: int = 100,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.logger = logger
        self.interval = interval
        self.lines_per_interval = lines_per_interval
        self.clock = clock
        self._window_start = -interval
        self._lines = 0
        self._suppressed = 0
        self._traced: dict[str, float] = {}

    def warning(self, message: str, *args: Any, error: BaseException | None = None) -> None:
        self.log(logging.WARNING, message, *args, error=error)

    def info(self, message: str, *args: Any) -> None:
        self.log(logging.INFO, message, *args)

    def log(self, level: int, message: str, *args: Any, error: BaseException | None = None) -> None:
        now = self.clock()
        if now - self._window_start >= self.interval:
            if self._suppressed:
                self.logger.log(
                    level,
                    "%d similar lines suppressed in the last %.0f s",
                    self._suppressed,
                    now - self._window_start,
                )
            self._window_start = now
            self._lines = 0
            self._suppressed = 0
        if self._lines >= self.lines_per_interval:
            self._suppressed += 1
            return
        self._lines += 1
        trace = False
        if error is not None:
            kind = f"{type(error).__module__}.{type(error).__qualname__}"
            last = self._traced.get(kind)
            if last is None or now - last >= self.interval:
                self._traced[kind] = now
                trace = True
        if trace:
            self.logger.log(level, message, *args, exc_info=error)
        else:
            self.logger.log(level, message, *args)


class AuthenticationMetrics:
    """Successful and failed logins per (listener, mechanism), as Kafka's
    ``successful-authentication-total`` / ``failed-authentication-total`` /
    ``successful-reauthentication-total``."""

    def __init__(self) -> None:
        self.successful: dict[tuple[str, str], int] = {}
        self.failed: dict[tuple[str, str], int] = {}
        # Of the successful ones, those that renewed a session (KIP-368).
        self.reauthenticated: dict[tuple[str, str], int] = {}

    def record(self, listener: str, mechanism: str, ok: bool, renewal: bool = False) -> None:
        counts = self.successful if ok else self.failed
        counts[(listener, mechanism)] = counts.get((listener, mechanism), 0) + 1
        if ok and renewal:
            key = (listener, mechanism)
            self.reauthenticated[key] = self.reauthenticated.get(key, 0) + 1
