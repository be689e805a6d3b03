"""Pure planning: offset ranges to Spark input partitions, and admission control per trigger.

The rules are Spark's Kafka source's (``KafkaOffsetRangeCalculator`` and
``KafkaMicroBatchStream.rateLimit``/``delayBatch``) so that task counts and batch sizes match a
``format("kafka")`` job. No I/O and no clock: callers pass the offsets and the time.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from pyspark.sql.datasource import InputPartition

from gregor_spark.options import TopicPartition


@dataclass(frozen=True)
class OffsetRange(InputPartition):
    """Offsets ``[start, end)`` of one topic partition: what one Spark task reads."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return max(0, self.end - self.start)


def split_evenly(whole: OffsetRange, parts: int) -> list[OffsetRange]:
    """``parts`` consecutive ranges; the last takes the rounding remainder (as Spark)."""
    ranges, remaining, start = [], whole.size, whole.start
    for part in range(parts):
        this = remaining // (parts - part)
        remaining -= this
        end = min(start + this, whole.end)
        ranges.append(OffsetRange(whole.topic, whole.partition, start, end))
        start = end
    return ranges


def plan_partitions(
    ranges: list[OffsetRange],
    min_partitions: int | None = None,
    max_records_per_partition: int | None = None,
) -> list[OffsetRange]:
    """One input partition per topic partition, split when the options ask for more.

    ``maxRecordsPerPartition`` splits each range into pieces of at most that many offsets;
    then, if fewer than ``minPartitions`` remain, large ranges are divided in proportion to
    their share of all offsets. Empty ranges are dropped.
    """
    planned = [r for r in ranges if r.size > 0]
    if max_records_per_partition:
        planned = [
            piece
            for r in planned
            for piece in split_evenly(r, math.ceil(r.size / max_records_per_partition))
        ]
    if not min_partitions or len(planned) >= min_partitions:
        return planned
    total = sum(r.size for r in planned)
    result = []
    for r in planned:
        # Half-up like Scala's math.round, so that the split matches Spark's task count.
        parts = max(math.floor(r.size / total * min_partitions + 0.5), 1)
        result.extend(piece for piece in split_evenly(r, parts) if piece.size > 0)
    return result


def rate_limit(
    start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int], limit: int
) -> dict[TopicPartition, int]:
    """End offsets admitting about ``limit`` records, split across partitions by backlog.

    Spark's rule: each partition gets ``limit * backlog / total backlog`` records, rounded
    down, except that a share under one record is rounded up so that a small partition is
    never starved.
    """
    backlog = {tp: end - start[tp] for tp, end in latest.items() if end - start[tp] > 0}
    total = sum(backlog.values())
    if total < 1:
        return dict(latest)
    ends = {}
    for tp, end in latest.items():
        if tp not in backlog:
            ends[tp] = end
            continue
        share = limit * backlog[tp] / total
        admitted = math.ceil(share) if share < 1 else math.floor(share)
        ends[tp] = min(end, start[tp] + admitted)
    return ends


def should_delay(
    backlog: int, min_offsets: int, now_ms: int, last_trigger_ms: int, max_delay_ms: int
) -> bool:
    """``minOffsetsPerTrigger`` with ``maxTriggerDelay``: wait for ``min_offsets`` new records,
    but never longer than ``max_delay_ms`` since the last batch ran."""
    if now_ms - last_trigger_ms >= max_delay_ms:
        return False
    return backlog < min_offsets
