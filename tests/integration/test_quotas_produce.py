"""producer_byte_rate: a producer over its quota is slowed to it, others are not, and a
raised quota takes effect at once (seed 000, 配额)."""

from __future__ import annotations

import time

from .broker_helpers import create_topic
from .quota_helpers import MB, MIB, ProducerLoop, set_quota, zk_admin

QUOTA = MIB  # 1 MiB/s
FREE_RATE = 2 * MB  # the unthrottled client asks for this much, paced


def test_producer_byte_rate_holds_a_bulk_producer_to_its_quota_and_spares_others(
    broker_factory, zk_connect
) -> None:
    broker = broker_factory()
    create_topic(broker.bootstrap, "bulk-topic")
    create_topic(broker.bootstrap, "free-topic")
    with zk_admin(zk_connect) as admin:
        set_quota(admin, None, "bulk", producer_byte_rate=QUOTA)
        time.sleep(1)  # the /config/changes notification reaches the broker in ms
        bulk = ProducerLoop(broker.bootstrap, "bulk-topic", "bulk")
        free = ProducerLoop(broker.bootstrap, "free-topic", "free", paced_rate=FREE_RATE)
        bulk.start()
        free.start()
        try:
            time.sleep(3)  # past the first window's burst
            start = time.monotonic()
            time.sleep(20)
            end = time.monotonic()
            bulk_rate = bulk.timeline.rate(start, end)
            free_rate = free.timeline.rate(start, end)
            throttled_before_raise = list(bulk.timeline.throttle_ms)

            set_quota(admin, None, "bulk", producer_byte_rate=4 * QUOTA)
            raised = time.monotonic()
            time.sleep(11)
            first_seconds_rate = bulk.timeline.rate(raised, raised + 3)
            # Over one whole quota window (11 x 1 s), bursts included.
            raised_rate = bulk.timeline.rate(raised, raised + 11)
        finally:
            bulk.stop()
            free.stop()
    print(
        f"bulk {bulk_rate / MB:.3f} MB/s (quota {QUOTA / MB:.3f}), free {free_rate / MB:.3f} "
        f"MB/s (asked {FREE_RATE / MB:.3f}); after raising to 4 MiB/s: {raised_rate / MB:.3f} "
        f"MB/s over 11 s, {first_seconds_rate / MB:.3f} MB/s in the first 3 s"
    )
    assert bulk.errors == [] and free.errors == []
    # Acknowledged payload is a little less than request bytes (batch and request headers).
    assert 0.85 * QUOTA <= bulk_rate <= 1.15 * QUOTA
    assert max(throttled_before_raise) > 0
    assert 0.85 * FREE_RATE <= free_rate <= 1.15 * FREE_RATE
    assert free.timeline.throttle_ms == []
    # The raised quota applies within seconds, without restarting anything...
    assert first_seconds_rate > 2 * QUOTA
    # ...and holds the producer to the new rate (the window's credit is spent in bursts).
    assert 0.8 * 4 * QUOTA <= raised_rate <= 1.2 * 4 * QUOTA
