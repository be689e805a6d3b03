"""Topics and records for the Spark tests: created and produced with confluent-kafka."""

from __future__ import annotations

import confluent_kafka

from tests.compat.test_confluent_kafka import create_topic

__all__ = ["create_topic", "produce", "task_count"]


def produce(
    bootstrap: str,
    topic: str,
    records: list[tuple[int, bytes | None, bytes, list[tuple[str, bytes]] | None]],
    timestamp_ms: int | None = None,
) -> None:
    """Produce ``(partition, key, value, headers)`` records; every one acknowledged."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    failures: list[object] = []
    for partition, key, value, headers in records:
        extra = {"timestamp": timestamp_ms} if timestamp_ms is not None else {}
        producer.produce(
            topic,
            value,
            key,
            partition=partition,
            headers=headers,
            on_delivery=lambda error, _m: error is not None and failures.append(error),
            **extra,
        )
    assert producer.flush(30) == 0
    assert failures == []


def task_count(df) -> int:
    """How many tasks (input partitions) Spark runs to scan ``df``."""
    return df.rdd.getNumPartitions()
