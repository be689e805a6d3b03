"""Replication throttles for partitions being moved (kafka-reassign-partitions --throttle).

Kafka's contract: a topic's ``follower.replication.throttled.replicas`` lists
``partition:broker`` pairs (or ``*``) whose copying is limited, and each broker's dynamic
``follower.replication.throttled.rate`` (bytes/s, ``/config/brokers/<id>`` or
``<default>``) caps the bytes its fetchers copy for them. Like Kafka's follower quota,
a fetcher over its rate leaves the throttled partitions out of its next fetches until
the measured rate is back under the limit; other partitions keep flowing.
"""

from __future__ import annotations

import time
from collections import deque

FOLLOWER_RATE = "follower.replication.throttled.rate"
LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
LEADER_REPLICAS = "leader.replication.throttled.replicas"


def is_throttled(topic_config: dict[str, str], key: str, partition: int, broker_id: int) -> bool:
    """Whether ``partition`` on ``broker_id`` appears in a throttled-replicas config."""
    value = topic_config.get(key, "").strip()
    if not value:
        return False
    if value == "*":
        return True
    wanted = f"{partition}:{broker_id}"
    return any(item.strip() == wanted for item in value.split(","))


class RateMeter:
    """Bytes per second over a sliding window (Kafka samples quotas the same way)."""

    def __init__(self, window_s: float = 1.0, clock=time.monotonic) -> None:
        self.window_s = window_s
        self.clock = clock
        self._samples: deque[tuple[float, int]] = deque()
        self._total = 0

    def record(self, size: int) -> None:
        now = self.clock()
        self._samples.append((now, size))
        self._total += size
        self._expire(now)

    def _expire(self, now: float) -> None:
        while self._samples and now - self._samples[0][0] > self.window_s:
            self._total -= self._samples.popleft()[1]

    def over(self, rate: float) -> bool:
        self._expire(self.clock())
        return self._total > rate * self.window_s

    def wait_time(self, rate: float) -> float:
        """Seconds until the window's bytes fall back to the rate."""
        now = self.clock()
        self._expire(now)
        excess = self._total - rate * self.window_s
        for timestamp, size in self._samples:
            if excess <= 0:
                break
            excess -= size
            if excess <= 0:
                return max(timestamp + self.window_s - now, 0.0)
        return 0.0
