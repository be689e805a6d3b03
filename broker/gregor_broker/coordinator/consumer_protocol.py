"""The parts of Kafka's consumer protocol (``ConsumerProtocolSubscription``) the broker reads.

The broker carries subscriptions and assignments as opaque bytes; it looks inside a
subscription only to learn which topics a group consumes (OffsetDelete refuses to
delete offsets of a subscribed topic, GROUP_SUBSCRIBED_TO_TOPIC). Every version starts
with an int16 version and the topic names (int32 count, int16-length strings).
"""

from __future__ import annotations

import struct


def subscription_topics(subscription: bytes) -> set[str]:
    """Topic names of a serialized ``ConsumerProtocolSubscription`` (any version)."""
    if len(subscription) < 6:
        raise ValueError("subscription too short")
    (count,) = struct.unpack_from(">i", subscription, 2)
    position = 6
    topics = set()
    for _ in range(max(count, 0)):
        (length,) = struct.unpack_from(">h", subscription, position)
        position += 2
        if length < 0 or position + length > len(subscription):
            raise ValueError("subscription topic runs past the end")
        topics.add(subscription[position : position + length].decode("utf-8"))
        position += length
    return topics
