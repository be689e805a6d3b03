"""A task's read path (``gregor_spark.fetch.read_range``) without Spark, against a real broker:
the batches it yields, and Python's cyclic garbage collector kept out of the batch building
(collections there scanned the worker's whole heap for every few hundred records)."""

from __future__ import annotations

import gc
import sys

import pytest

from gregor_spark.fetch import read_range
from gregor_spark.options import SourceOptions
from gregor_spark.planning import OffsetRange

from .helpers import create_topic, produce

pytestmark = [pytest.mark.xdist_group("spark"), pytest.mark.timeout(300)]

RECORDS = 5_000
BATCH_BUILDERS = {"_next_batch", "record_batch", "_split_events", "binary_column"}


def _in_batch_building() -> bool:
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name in BATCH_BUILDERS and "gregor_spark" in frame.f_code.co_filename:
            return True
        frame = frame.f_back
    return False


def test_read_range_builds_batches_without_garbage_collections(spark_broker) -> None:
    topic = "fetch-gc"
    create_topic(spark_broker.bootstrap, topic, 1)
    produce(
        spark_broker.bootstrap,
        topic,
        [(0, None, f"v{i}".encode(), None) for i in range(RECORDS)],
    )
    options = SourceOptions(
        strategy="assign", kafka={"bootstrap.servers": spark_broker.bootstrap}, group_id="t"
    )
    collections_inside: list[int] = []
    collections_total: list[int] = []

    def on_gc(phase: str, info: dict) -> None:
        if phase == "start":
            collections_total.append(info["generation"])
            if _in_batch_building():
                collections_inside.append(info["generation"])

    assert gc.isenabled()
    gc.callbacks.append(on_gc)
    values: list[bytes] = []
    offsets: list[int] = []
    try:
        for batch in read_range(options, OffsetRange(topic, 0, 0, RECORDS)):
            # Spark's code runs between batches: the collector is on for it.
            assert gc.isenabled()
            values += batch.column("value").to_pylist()
            offsets += batch.column("offset").to_pylist()
            # Tracked garbage made while the caller holds the batch is still collected.
            junk = [[] for _ in range(2_000)]
            del junk
    finally:
        gc.callbacks.remove(on_gc)
    assert gc.isenabled()
    assert offsets == list(range(RECORDS))
    assert values == [f"v{i}".encode() for i in range(RECORDS)]
    # 5,000 Message objects per range: without the pause, gen-0 collections (threshold 700
    # allocations) run inside the batch building.
    assert collections_inside == []
    assert collections_total, "the caller's own allocations should still trigger collections"


def test_collector_state_is_restored_when_already_off(spark_broker) -> None:
    topic = "fetch-gc-off"
    create_topic(spark_broker.bootstrap, topic, 1)
    produce(spark_broker.bootstrap, topic, [(0, None, b"v", None) for _ in range(10)])
    options = SourceOptions(
        strategy="assign", kafka={"bootstrap.servers": spark_broker.bootstrap}, group_id="t"
    )
    gc.disable()
    try:
        rows = sum(b.num_rows for b in read_range(options, OffsetRange(topic, 0, 0, 10)))
        assert not gc.isenabled()
    finally:
        gc.enable()
    assert rows == 10
