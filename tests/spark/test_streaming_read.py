"""Streaming reads with ``readStream.format("gregor")``: checkpointed offsets, exactly-once
output in a file sink across a stop and restarts, ``maxOffsetsPerTrigger`` per batch,
``Trigger.AvailableNow`` bounded by the offsets present at its start, and
``commitOffsetsToGroup`` showing the query's lag in ``gregor groups describe``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.group_helpers import wait_until

from .helpers import create_topic, produce

# One SparkSession for all Spark tests: make test runs them on one xdist worker. Spark jobs
# start Python workers and a JVM: on a loaded machine a test can take minutes.
pytestmark = [pytest.mark.xdist_group("spark"), pytest.mark.timeout(900)]

PARTITIONS = 3
TOPIC = "clicks"
GROUP = "clicks-to-parquet"
MAX_PER_TRIGGER = 20


def produce_values(bootstrap: str, first: int, count: int) -> None:
    produce(
        bootstrap,
        TOPIC,
        [(n % PARTITIONS, None, f"click-{n}".encode(), None) for n in range(first, first + count)],
    )


def group_lag(bootstrap: str) -> dict[int, int]:
    """LAG per partition, as the real ``gregor groups describe`` prints it."""
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "gregor_broker.cli.main",
            "groups",
            "describe",
            GROUP,
            "-b",
            bootstrap,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    lag = {}
    for line in out.splitlines():
        cells = line.split()
        if cells and cells[0] == TOPIC:
            lag[int(cells[1])] = int(cells[4])
    return lag


def start_query(spark, bootstrap: str, out: Path, checkpoint: Path, **trigger):
    stream = (
        spark.readStream.format("gregor")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", TOPIC)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(MAX_PER_TRIGGER))
        .option("commitOffsetsToGroup", GROUP)
        .load()
        .selectExpr("CAST(value AS STRING) AS value", "partition", "offset")
    )
    return (
        stream.writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
        .trigger(**trigger)
        .start()
    )


def batch_sizes(query) -> list[int]:
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"] > 0]


def test_restarted_query_writes_each_record_once_and_its_group_lag_falls_to_zero(
    spark, spark_broker, tmp_path
) -> None:
    bootstrap = spark_broker.bootstrap
    create_topic(bootstrap, TOPIC, PARTITIONS)
    produce_values(bootstrap, 0, 90)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"

    # Run 1: a continuous query, stopped after two data batches.
    query = start_query(spark, bootstrap, out, checkpoint, processingTime="1 second")
    try:
        wait_until(lambda: len(batch_sizes(query)) >= 2, 180, "two micro-batches")
    finally:
        query.stop()
    first_run = batch_sizes(query)
    assert all(size <= MAX_PER_TRIGGER for size in first_run), first_run
    # The group holds the end of a finished batch: at most what the sink got, never zero.
    lag = group_lag(bootstrap)
    assert 90 > sum(lag.values()) >= 90 - sum(first_run), lag

    # Run 2: AvailableNow from the checkpoint; records produced after it started wait.
    query = start_query(spark, bootstrap, out, checkpoint, availableNow=True)
    wait_until(lambda: len(batch_sizes(query)) >= 1, 180, "the first AvailableNow batch")
    produce_values(bootstrap, 90, 30)
    query.awaitTermination(300)
    assert query.exception() is None
    second_run = batch_sizes(query)
    assert all(size <= MAX_PER_TRIGGER for size in second_run), second_run
    assert sum(first_run) + sum(second_run) == 90  # stopped at the offsets present at start
    assert len(second_run) >= 2
    assert group_lag(bootstrap) == {0: 10, 1: 10, 2: 10}

    # Run 3: the late records, once.
    query = start_query(spark, bootstrap, out, checkpoint, availableNow=True)
    query.awaitTermination(300)
    assert query.exception() is None
    assert sum(batch_sizes(query)) == 30
    assert group_lag(bootstrap) == {0: 0, 1: 0, 2: 0}

    written = [tuple(r) for r in spark.read.parquet(str(out)).collect()]
    assert sorted(v for v, _, _ in written) == sorted(f"click-{n}" for n in range(120))
    assert len({(p, o) for _, p, o in written}) == 120
