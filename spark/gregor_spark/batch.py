"""Batch reads (``spark.read.format("gregor")``): plan offset ranges, push filters down.

``partitions()`` runs on the driver when Spark plans the job: it lists the topic partitions,
resolves the starting and ending offsets then (not when the DataFrame was defined), and
returns one ``OffsetRange`` per topic partition (more with ``minPartitions`` or
``maxRecordsPerPartition``). ``read()`` runs in the tasks (``fetch.read_range``).

Filter pushdown (``spark.sql.python.filterPushdown.enabled``): comparisons on ``partition``
and ``offset`` narrow the ranges exactly and are not re-checked by Spark; a lower bound on
``timestamp`` becomes a ListOffsets-by-time seek (the first offset whose timestamp is at or
after it: every earlier record is older), and Spark still applies the filter itself.
"""

from __future__ import annotations

import datetime
import sys
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

from pyspark.sql.datasource import (
    DataSourceReader,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    LessThan,
    LessThanOrEqual,
)

from gregor_spark.client import ClusterView
from gregor_spark.options import SourceOptions, TopicPartition
from gregor_spark.planning import OffsetRange, plan_partitions

if TYPE_CHECKING:
    import pyarrow as pa

INT64_MAX = 2**63 - 1


class PushedBounds:
    """What the pushed filters allow: a set of partitions and offset/timestamp bounds."""

    def __init__(self) -> None:
        self.partitions: set[int] | None = None
        self.min_offset = 0
        self.max_offset = INT64_MAX  # exclusive
        self.min_timestamp_ms: int | None = None

    def allows(self, partition: int) -> bool:
        return self.partitions is None or partition in self.partitions

    def restrict_partitions(self, allowed: Iterable[int]) -> None:
        allowed = set(allowed)
        self.partitions = allowed if self.partitions is None else self.partitions & allowed

    def push(self, f: Filter) -> bool:
        """Apply one filter; True if it is handled exactly (Spark need not re-check it)."""
        column = f.attribute if hasattr(f, "attribute") else None
        if column == ("partition",):
            return self._push_partition(f)
        if column == ("offset",):
            return self._push_offset(f)
        if column == ("timestamp",):
            self._push_timestamp(f)
        return False

    def _push_partition(self, f: Filter) -> bool:
        if isinstance(f, EqualTo) and isinstance(f.value, int):
            self.restrict_partitions([f.value])
        elif isinstance(f, In) and all(isinstance(v, int) for v in f.value):
            self.restrict_partitions(f.value)
        else:
            return False
        return True

    def _push_offset(self, f: Filter) -> bool:
        value = f.value if hasattr(f, "value") else None
        if not isinstance(value, int) or isinstance(value, bool):
            return False
        if isinstance(f, EqualTo):
            self.min_offset = max(self.min_offset, value)
            self.max_offset = min(self.max_offset, value + 1)
        elif isinstance(f, GreaterThan):
            self.min_offset = max(self.min_offset, value + 1)
        elif isinstance(f, GreaterThanOrEqual):
            self.min_offset = max(self.min_offset, value)
        elif isinstance(f, LessThan):
            self.max_offset = min(self.max_offset, value)
        elif isinstance(f, LessThanOrEqual):
            self.max_offset = min(self.max_offset, value + 1)
        else:
            return False
        return True

    def _push_timestamp(self, f: Filter) -> None:
        if isinstance(f, (GreaterThan, GreaterThanOrEqual, EqualTo)) and isinstance(
            f.value, datetime.datetime
        ):
            stamp = f.value
            if stamp.tzinfo is None:
                stamp = stamp.astimezone()
            millis = int(stamp.timestamp() * 1000)
            current = self.min_timestamp_ms
            self.min_timestamp_ms = millis if current is None else max(current, millis)


class GregorBatchReader(DataSourceReader):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self.bounds = PushedBounds()

    def partitions(self) -> Sequence[InputPartition]:
        view = ClusterView(self.options)
        try:
            ranges = self._ranges(view)
        finally:
            view.close()
        return plan_partitions(
            ranges, self.options.min_partitions, self.options.max_records_per_partition
        )

    def _ranges(self, view: ClusterView) -> list[OffsetRange]:
        partitions = view.partitions()
        starts = view.resolve(self.options.starting, partitions, is_start=True)
        ends = view.resolve(self.options.ending, partitions, is_start=False)
        # Only data below the high watermark is read: an explicit end past it is clipped.
        # With endingOffsets latest (the default) the ends are the high watermarks already:
        # one ListOffsets round trip fewer on the planning worker's serial path.
        latest = ends if self.options.ending.kind == "latest" else view.latest(partitions)
        chosen: list[TopicPartition] = [tp for tp in partitions if self.bounds.allows(tp[1])]
        seeks: dict[TopicPartition, int] = {}
        if self.bounds.min_timestamp_ms is not None:
            seeks = view.list_offsets(dict.fromkeys(chosen, self.bounds.min_timestamp_ms))
        ranges = []
        for tp in chosen:
            end = min(ends[tp], latest[tp], self.bounds.max_offset)
            start = max(starts[tp], self.bounds.min_offset)
            if tp in seeks:
                # -1: no record at or after that time, nothing to read.
                start = end if seeks[tp] < 0 else max(start, seeks[tp])
            ranges.append(OffsetRange(tp[0], tp[1], start, max(start, end)))
        return ranges

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        # Imported here, in the task: the planning worker, which only calls partitions(),
        # then skips the task side's modules (the Arrow builders, the consumer loop).
        from gregor_spark.fetch import read_partition

        return read_partition(self.options, partition)


class GregorPushdownBatchReader(GregorBatchReader):
    """The batch reader with ``pushFilters``: Spark refuses a reader that implements it while
    ``spark.sql.python.filterPushdown.enabled`` is off, so this one is used only when it is on."""

    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:
        for f in filters:
            if not self.bounds.push(f):
                yield f


def filter_pushdown_enabled() -> bool:
    """Whether Spark asked for this reader with ``spark.sql.python.filterPushdown.enabled``.

    A data source cannot read Spark's configuration. With pushdown on, Spark creates the
    reader in its filter-pushdown worker (pyspark ``sql/worker/data_source_pushdown_filters.py``)
    and pickles it to the planning worker; with it off, the planning worker
    (``plan_data_source_read.py``, which holds the flag as a local variable) creates it and
    rejects a reader that implements ``pushFilters``. So look at who is calling. Anything
    else (another Spark version, a call outside Spark) means no pushdown: always correct,
    only slower.
    """
    frame = sys._getframe(1)
    for _ in range(8):
        if frame is None:
            break
        filename = frame.f_code.co_filename
        if filename.endswith("data_source_pushdown_filters.py"):
            return True
        if filename.endswith("plan_data_source_read.py"):
            return bool(frame.f_locals.get("enable_pushdown", False))
        frame = frame.f_back
    return False
