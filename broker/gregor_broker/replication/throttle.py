"""Replication throttles for partitions being moved (kafka-reassign-partitions --throttle).

Kafka's contract: a topic's ``follower.replication.throttled.replicas`` lists
``partition:broker`` pairs (or ``*``) whose copying is limited, and each broker's dynamic
``follower.replication.throttled.rate`` (bytes/s, ``/config/brokers/<id>`` or
``<default>``) caps the bytes its fetchers copy for them. Like Kafka's follower quota,
a fetcher over its budget leaves the throttled partitions out of its next fetches until
the budget recovers; other partitions keep flowing.
"""

from __future__ import annotations

import time

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
