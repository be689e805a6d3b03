"""consumer_byte_rate: a consumer over its quota gets fetch responses at the quota's pace
(sendfile bytes count), others read at full speed, and a raised quota applies at once."""

from __future__ import annotations

import time

from .broker_helpers import create_topic
from .quota_helpers import MB, MIB, ConsumerLoop, fill_topic, set_quota, zk_admin

QUOTA = MIB
TOPIC_BYTES = 70 * MB


def test_consumer_byte_rate_holds_a_bulk_consumer_to_its_quota_and_spares_others(
    broker_factory, zk_connect
) -> None:
    broker = broker_factory()
    create_topic(broker.bootstrap, "history")
    fill_topic(broker.bootstrap, "history", TOPIC_BYTES)
    with zk_admin(zk_connect) as admin:
        set_quota(admin, None, "bulk-reader", consumer_byte_rate=QUOTA)
        time.sleep(1)
        bulk = ConsumerLoop(broker.bootstrap, "history", "bulk-reader")
        free = ConsumerLoop(broker.bootstrap, "history", "free-reader")
        bulk.start()
        free.start()
        try:
            time.sleep(3)
            start = time.monotonic()
            time.sleep(20)
            end = time.monotonic()
            bulk_rate = bulk.timeline.rate(start, end)
            free_total = free.timeline.total()
            throttled_before_raise = list(bulk.timeline.throttle_ms)

            set_quota(admin, None, "bulk-reader", consumer_byte_rate=4 * QUOTA)
            raised = time.monotonic()
            time.sleep(11)
            first_seconds_rate = bulk.timeline.rate(raised, raised + 3)
            raised_rate = bulk.timeline.rate(raised, raised + 11)
        finally:
            bulk.stop()
            free.stop()
    print(
        f"bulk consumer {bulk_rate / MB:.3f} MB/s (quota {QUOTA / MB:.3f}); free consumer read "
        f"{free_total / MB:.1f} of {TOPIC_BYTES / MB:.0f} MB in the first 23 s; after raising "
        f"to 4 MiB/s: {raised_rate / MB:.3f} MB/s over 11 s, {first_seconds_rate / MB:.3f} "
        "MB/s in the first 3 s"
    )
    assert 0.85 * QUOTA <= bulk_rate <= 1.15 * QUOTA
    assert max(throttled_before_raise) > 0
    # The unthrottled consumer read everything while the bulk one trickled, never throttled.
    assert free_total >= TOPIC_BYTES * 0.99
    assert free.timeline.throttle_ms == []
    assert first_seconds_rate > 2 * QUOTA
    assert 0.8 * 4 * QUOTA <= raised_rate <= 1.2 * 4 * QUOTA
