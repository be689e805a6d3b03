"""Produce page-view events to ``pageviews``: JSON values keyed by user, event time as the
record's timestamp, spread over the last few minutes with a skew towards popular URLs."""

from __future__ import annotations

import argparse
import json
import random
import time

from common import PAGEVIEWS, PARTITIONS, VIEWS_PER_MINUTE
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

URLS = ["/", "/search", "/cart", "/checkout", "/product/1", "/product/2", "/help", "/login"]
WEIGHTS = [30, 20, 10, 5, 15, 10, 5, 5]


def create_topics(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    wanted = [
        NewTopic(PAGEVIEWS, PARTITIONS, 1),
        NewTopic(VIEWS_PER_MINUTE, 3, 1, config={"cleanup.policy": "compact"}),
    ]
    existing = admin.list_topics(timeout=30).topics
    for topic, future in admin.create_topics(
        [t for t in wanted if t.topic not in existing], operation_timeout=30
    ).items():
        future.result(30)
        print(f"created topic {topic}")


def generate(bootstrap: str, events: int, minutes: int, seed: int) -> None:
    rng = random.Random(seed)
    now_ms = int(time.time() * 1000)
    first_ms = now_ms - minutes * 60_000
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for n in range(events):
        at_ms = first_ms + n * (now_ms - first_ms) // events
        user = f"user-{rng.randrange(200)}"
        event = {
            "user": user,
            "url": rng.choices(URLS, WEIGHTS)[0],
            "event_time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(at_ms / 1000))
            + f".{at_ms % 1000:03d}Z",
        }
        while True:
            try:
                producer.produce(
                    PAGEVIEWS, json.dumps(event).encode(), user.encode(), timestamp=at_ms
                )
                break
            except BufferError:
                producer.poll(0.1)
    if producer.flush(60):
        raise SystemExit("not every event was acknowledged")
    print(f"produced {events} page views over {minutes} minutes to {PAGEVIEWS}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--events", type=int, default=5000)
    parser.add_argument("--minutes", type=int, default=5)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    create_topics(args.bootstrap)
    generate(args.bootstrap, args.events, args.minutes, args.seed)


if __name__ == "__main__":
    main()
