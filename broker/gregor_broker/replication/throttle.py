"""Replication throttles for partitions being moved (kafka-reassign-partitions --throttle).

Kafka's contract has two halves, each a list of ``partition:broker`` pairs (or ``*``) in a
topic config and a dynamic rate (bytes/s) in ``/config/brokers/<id>`` or ``<default>``:

- follower side: ``follower.replication.throttled.replicas`` names the replicas whose
  copying is limited, and ``follower.replication.throttled.rate`` caps the bytes the
  fetchers of the replica's broker copy for them (``ByteBudget``, used by the fetcher).
  A fetcher over its budget leaves the throttled partitions out of its next fetches
  until the budget recovers; other partitions keep flowing, and so do replicas already
  in the ISR (Kafka's ``shouldFollowerThrottle``).
- leader side: ``leader.replication.throttled.replicas`` names partitions on their
  leader, and ``leader.replication.throttled.rate`` caps the bytes the leader sends to
  followers for them (``LeaderReplicationQuota``, used by the Fetch handler). Like
  Kafka's ReplicationQuotaManager it is a rate over sampled windows: over the quota, the
  leader answers a follower's fetch for a throttled partition with no records; in-sync
  followers are never held back.

This module owns the arithmetic, not the I/O: reading configs and answering fetches is
the fetcher's and the Fetch handler's business.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ..stats import SampledRate, throttle_time_ms

FOLLOWER_RATE = "follower.replication.throttled.rate"
LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
# Kafka's replication.quota.window.num and replication.quota.window.size.seconds defaults.
REPLICATION_QUOTA_WINDOW_NUM = 11
REPLICATION_QUOTA_WINDOW_SIZE_S = 1.0
# Shortest wait before a held-back fetch looks at the quota again (no busy loop when the
# measured rate is a hair over the bound).
MIN_RETRY_S = 0.01


def is_throttled(topic_config: dict[str, str], key: str, partition: int, broker_id: int) -> bool:
    """Whether ``partition`` on ``broker_id`` appears in a throttled-replicas config."""
    value = topic_config.get(key, "").strip()
    if not value:
        return False
    if value == "*":
        return True
    wanted = f"{partition}:{broker_id}"
    return any(item.strip() == wanted for item in value.split(","))


def parse_rate(value: str | None) -> float | None:
    """A ``*.replication.throttled.rate`` as bytes/s; None when unset or unreadable
    (Kafka's default is Long.MAX_VALUE: no throttle)."""
    if value is None:
        return None
    try:
        rate = float(value)
    except ValueError:
        return None
    return rate if rate >= 0 else None


class ByteBudget:
    """A token bucket: ``rate`` bytes/s accrue, at most one second's worth saved up.

    Copying may overdraw it by one fetch (a batch is never split); the next throttled
    fetch then waits until the budget is back to zero, so over any stretch longer than a
    second the copy rate stays at the limit.
    """

    def __init__(self, clock=time.monotonic) -> None:
        self.clock = clock
        self._tokens = 0.0
        self._updated = clock()

    def _refill(self, rate: float) -> None:
        now = self.clock()
        self._tokens = min(self._tokens + (now - self._updated) * rate, rate)
        self._updated = now

    def spend(self, size: int, rate: float) -> None:
        self._refill(rate)
        self._tokens -= size

    def wait_time(self, rate: float) -> float:
        """Seconds until throttled copying may go on (0 when it may now)."""
        self._refill(rate)
        if self._tokens >= 0 or rate <= 0:
            return 0.0
        return -self._tokens / rate


class LeaderReplicationQuota:
    """The leader half of the replication throttle, one per broker (Kafka's
    ReplicationQuotaManager for ``LeaderReplication``).

    The Fetch handler asks ``exceeded`` before reading a throttled partition for an
    out-of-sync follower, and ``record``s the bytes it sent to followers for throttled
    partitions once the response is built (all followers, in-sync ones included, as
    Kafka's ``sizeOfThrottledPartitions`` does). The bound is passed in on every call, so
    a new ``leader.replication.throttled.rate`` applies to the rate already measured.
    """

    def __init__(
        self,
        samples: int = REPLICATION_QUOTA_WINDOW_NUM,
        window_s: float = REPLICATION_QUOTA_WINDOW_SIZE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.samples = samples
        self.window_s = window_s
        self.clock = clock
        self._rate: SampledRate | None = None
        self.bytes_total = 0  # record bytes sent to followers for throttled partitions
        self.held_back_total = 0  # partition fetches answered without records

    def _sampled(self, now: float) -> SampledRate:
        if self._rate is None:
            # Started on first use, not with the broker: a first sample that began long
            # before the first throttled byte would let that whole stretch's quota out at
            # once.
            self._rate = SampledRate(self.samples, self.window_s, now)
        return self._rate

    def exceeded(self, bound: float, pending: int = 0) -> bool:
        """Whether the quota is used up (Kafka's ``isQuotaExceeded``). ``pending``: bytes
        of throttled partitions already in the response being built, so that one fetch
        of many throttled partitions cannot overshoot by more than one partition's read.
        """
        now = self.clock()
        rate = self._sampled(now)
        return rate.measure(now) + pending / rate.window_size(now) > bound

    def record(self, size: int) -> None:
        if size:
            now = self.clock()
            self._sampled(now).record(size, now)
            self.bytes_total += size

    def delay(self, bound: float) -> float:
        """Seconds until the measured rate is back within ``bound``."""
        now = self.clock()
        rate = self._sampled(now)
        window = rate.window_size(now)
        if bound <= 0:
            return window
        return max(throttle_time_ms(rate.measure(now), bound, window) / 1000, MIN_RETRY_S)

    def observed(self) -> float:
        """Bytes/s of throttled partitions sent to followers, over the quota window."""
        if self._rate is None:
            return 0.0
        now = self.clock()
        return self._rate.measure(now)
