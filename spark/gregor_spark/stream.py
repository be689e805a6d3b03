"""Streaming reads (``spark.readStream.format("gregor")``): offsets, admission control, commits.

Spark keeps this reader in one long-lived driver-side process and checkpoints the offsets it
returns: ``{"topic": {"partition": next_offset}}``, the JSON Spark's Kafka source writes. Per
trigger Spark calls ``latestOffset(start, limit)`` (how far this batch may go), then
``partitions(start, end)`` (the tasks; ``read()`` runs in them) and, once the batch is
written, ``commit(end)``.

Admission control follows Spark's Kafka source: ``maxOffsetsPerTrigger`` is split across
partitions by backlog; ``minOffsetsPerTrigger`` holds a batch back until that many records
wait or ``maxTriggerDelay`` has passed since the last batch; ``Trigger.AvailableNow`` reads up
to the offsets present when the query started. Partitions that appear later are read from
their earliest offset. Beyond Spark, ``commitOffsetsToGroup`` commits each finished batch's end
offsets to a consumer group, so Kafka lag tools (``gregor groups describe``) see the query.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from gregor_spark.client import ClusterView, commit_to_group
from gregor_spark.fetch import read_partition, report_data_loss
from gregor_spark.options import SourceOptions, TopicPartition
from gregor_spark.planning import OffsetRange, plan_partitions, rate_limit, should_delay

log = logging.getLogger("gregor_spark")


def encode(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """Spark's Kafka offset JSON: ``{"topic": {"0": 23}}``."""
    result: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        result.setdefault(topic, {})[str(partition)] = offset
    return result


def decode(offsets: Mapping[str, Mapping[str, Any]] | None) -> dict[TopicPartition, int]:
    return {
        (topic, int(partition)): int(offset)
        for topic, partitions in (offsets or {}).items()
        for partition, offset in partitions.items()
    }


class GregorStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._view: ClusterView | None = None
        self._latest: dict[TopicPartition, int] | None = None
        self._available_now_target: dict[TopicPartition, int] | None = None
        self._last_trigger_ms = 0
        self._committed: dict[TopicPartition, int] = {}

    def __getstate__(self) -> dict[str, Any]:
        # Tasks get a pickled copy for read(): the driver's client stays behind.
        return {**self.__dict__, "_view": None}

    @property
    def view(self) -> ClusterView:
        if self._view is None:
            self._view = ClusterView(self.options)
        return self._view

    def initialOffset(self) -> dict:
        partitions = self.view.partitions()
        return encode(self.view.resolve(self.options.starting, partitions, is_start=True))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        if self.options.min_offsets_per_trigger is not None:
            return ReadMinRows(self.options.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._available_now_target = self.view.latest(self.view.partitions())
        log.info("Trigger.AvailableNow: reading up to %s", encode(self._available_now_target))

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = decode(start)
        # ``start`` ends the last batch Spark has finished: commit it now, since commit() for
        # a query's final batch only comes at the next run's first trigger.
        self._commit_to_group(begin)
        partitions = self.view.partitions()
        latest = self.view.latest(partitions)
        self._latest = dict(latest)
        new = [tp for tp in partitions if tp not in begin]
        if new:
            earliest = self.view.earliest(new)
            log.info("New partitions %s: reading them from earliest %s", new, earliest)
            begin.update(earliest)
        target = self._available_now_target
        if target is not None:
            # As if nothing arrived after the query started; later partitions wait too.
            latest = {tp: min(end, target.get(tp, begin[tp])) for tp, end in latest.items()}
        latest = {tp: max(end, begin[tp]) if end >= 0 else begin[tp] for tp, end in latest.items()}
        if isinstance(limit, ReadAllAvailable):
            return encode(latest)
        min_offsets = self.options.min_offsets_per_trigger
        if min_offsets is not None and target is None:
            now_ms = int(time.time() * 1000)
            backlog = sum(end - begin[tp] for tp, end in latest.items())
            if should_delay(
                backlog,
                min_offsets,
                now_ms,
                self._last_trigger_ms,
                self.options.max_trigger_delay_ms,
            ):
                return start
            self._last_trigger_ms = now_ms
        if isinstance(limit, ReadMaxRows):
            return encode(rate_limit(begin, latest, limit.max_rows))
        return encode(latest)

    def reportLatestOffset(self) -> dict | None:
        return encode(self._latest) if self._latest is not None else None

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        begin, until = decode(start), decode(end)
        new = [tp for tp in until if tp not in begin]
        if new:
            begin.update(self.view.earliest(new))
        earliest = self.view.earliest(until)
        ranges = []
        for tp, stop in sorted(until.items()):
            offset_range = OffsetRange(tp[0], tp[1], begin[tp], stop)
            if stop < begin[tp]:
                # The log now ends before where the last batch stopped (a recreated topic).
                report_data_loss(self.options, offset_range, stop)
                continue
            if begin[tp] < earliest.get(tp, 0):
                report_data_loss(self.options, offset_range, min(earliest[tp], stop))
                offset_range = OffsetRange(tp[0], tp[1], min(earliest[tp], stop), stop)
            ranges.append(offset_range)
        return plan_partitions(
            ranges, self.options.min_partitions, self.options.max_records_per_partition
        )

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(self.options, partition)

    def commit(self, end: dict) -> None:
        self._commit_to_group(decode(end))

    def _commit_to_group(self, offsets: dict[TopicPartition, int]) -> None:
        group = self.options.commit_offsets_to_group
        if group and offsets and offsets != self._committed:
            commit_to_group(self.options, group, offsets)
            self._committed = dict(offsets)

    def stop(self) -> None:
        if self._view is not None:
            self._view.close()
            self._view = None
