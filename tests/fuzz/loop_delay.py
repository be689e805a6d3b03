"""The broker's own event-loop delay, read from its ``/metrics`` around each fuzz batch.

Another client's slow ApiVersions alone cannot tell a request that blocks the broker's
event loop from a machine whose CPUs are busy elsewhere (the fuzzer used to report hangs
at load 15-30 without telling which). ``gregor_event_loop_delay_seconds`` samples how
late the loop ran a timer: a batch whose loop delays stay small did not block the loop,
whatever the other client saw.
"""

from __future__ import annotations

import math
import re
import urllib.request

_BUCKET = re.compile(r'^gregor_event_loop_delay_seconds_bucket\{le="([^"]+)"\} ([0-9.e+]+)$')


def read_histogram(url: str) -> dict[float, float] | None:
    """Cumulative counts per upper bound (``inf`` included), or None when unreadable."""
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            text = response.read().decode()
    except OSError:
        return None
    counts = {}
    for line in text.splitlines():
        match = _BUCKET.match(line)
        if match:
            counts[float(match.group(1))] = float(match.group(2))
    return counts or None


def delta(before: dict[float, float] | None, after: dict[float, float] | None) -> dict[float, int]:
    """Samples per bucket (not cumulative) between two reads; a broker restarted in
    between (counts went down) counts from zero."""
    if after is None:
        return {}
    if before is None or any(after.get(b, 0) < c for b, c in before.items()):
        before = {}
    bounds = sorted(after)
    per_bucket = {}
    previous = 0.0
    for bound in bounds:
        cumulative = after[bound] - before.get(bound, 0.0)
        per_bucket[bound] = int(cumulative - previous)
        previous = cumulative
    return per_bucket


def worst_bound(per_bucket: dict[float, int]) -> float:
    """The upper bound of the highest bucket holding a sample (0 when none)."""
    filled = [bound for bound, count in per_bucket.items() if count > 0]
    return max(filled, default=0.0)


def describe(bound: float) -> str:
    return "over the largest bucket" if math.isinf(bound) else f"<= {bound:g} s"
