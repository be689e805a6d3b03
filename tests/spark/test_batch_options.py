"""Batch read options, as Spark's Kafka source reads them: offsets JSON with -2/-1,
timestamps, assign and subscribePattern, minPartitions and maxRecordsPerPartition (task
counts), filter pushdown, and Spark's rejections with Spark's messages."""

from __future__ import annotations

import json

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient

from .helpers import create_topic, produce, task_count

# One SparkSession for all Spark tests: make test runs them on one xdist worker. Spark jobs
# start Python workers and a JVM: on a loaded machine a test can take minutes.
pytestmark = [pytest.mark.xdist_group("spark"), pytest.mark.timeout(900)]

TOPIC, OTHER = "events", "events-archive"
PARTITIONS, PER_PARTITION = 3, 10
OLD, NEW = 1_700_000_000_000, 1_700_000_100_000  # CreateTime of the first and last 5 records


@pytest.fixture(scope="module")
def bootstrap(spark_broker) -> str:
    """A broker with ``events`` (3 partitions x 10 records: 5 at OLD, then 5 at NEW, except
    partition 2 whose records are all OLD) and ``events-archive`` (1 partition, 4 records)."""
    # The records carry 2023 timestamps: without retention.ms=-1 the broker's retention check
    # (every 5 minutes) deletes them while a slow run of this module is still reading.
    create_topic(spark_broker.bootstrap, TOPIC, PARTITIONS, **{"retention.ms": "-1"})
    create_topic(spark_broker.bootstrap, OTHER, 1)
    for p in range(PARTITIONS):
        produce(
            spark_broker.bootstrap,
            TOPIC,
            [(p, None, f"{p}:{i}".encode(), None) for i in range(5)],
            timestamp_ms=OLD,
        )
        produce(
            spark_broker.bootstrap,
            TOPIC,
            [(p, None, f"{p}:{i}".encode(), None) for i in range(5, 10)],
            timestamp_ms=OLD if p == 2 else NEW,
        )
    produce(spark_broker.bootstrap, OTHER, [(0, None, f"a{i}".encode(), None) for i in range(4)])
    return spark_broker.bootstrap


def read(spark, bootstrap: str, **options):
    reader = spark.read.format("gregor").option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def offsets_by_partition(df) -> dict[tuple[str, int], list[int]]:
    result: dict[tuple[str, int], list[int]] = {}
    for topic, partition, offset in df.select("topic", "partition", "offset").collect():
        result.setdefault((topic, partition), []).append(offset)
    return {tp: sorted(offsets) for tp, offsets in sorted(result.items())}


def test_offset_and_timestamp_options_select_ranges_as_spark_does(spark, bootstrap) -> None:
    df = read(
        spark,
        bootstrap,
        subscribe=TOPIC,
        startingOffsets=json.dumps({TOPIC: {"0": 2, "1": -2, "2": 7}}),
        endingOffsets=json.dumps({TOPIC: {"0": 5, "1": -1, "2": -1}}),
    )
    assert offsets_by_partition(df) == {
        (TOPIC, 0): [2, 3, 4],
        (TOPIC, 1): list(range(10)),
        (TOPIC, 2): [7, 8, 9],
    }
    # startingTimestamp: the first offset at or after it, per partition; partition 2 has no
    # record that new, so with the 'latest' strategy it starts (and ends) at the end.
    df = read(
        spark,
        bootstrap,
        subscribe=TOPIC,
        startingTimestamp=str(OLD + 1),
        startingOffsetsByTimestampStrategy="latest",
    )
    assert offsets_by_partition(df) == {(TOPIC, 0): [5, 6, 7, 8, 9], (TOPIC, 1): [5, 6, 7, 8, 9]}
    with pytest.raises(Exception, match="No offset matched the timestamp"):
        read(spark, bootstrap, subscribe=TOPIC, startingTimestamp=str(OLD + 1)).collect()
    by_time = {TOPIC: {"0": OLD, "1": NEW, "2": OLD}}
    until = {TOPIC: {"0": NEW, "1": NEW + 1, "2": NEW}}
    df = read(
        spark,
        bootstrap,
        subscribe=TOPIC,
        startingOffsetsByTimestamp=json.dumps(by_time),
        endingOffsetsByTimestamp=json.dumps(until),
    )
    assert offsets_by_partition(df) == {
        (TOPIC, 0): [0, 1, 2, 3, 4],
        (TOPIC, 1): [5, 6, 7, 8, 9],
        (TOPIC, 2): list(range(10)),
    }


def test_assign_and_subscribe_pattern_choose_partitions(spark, bootstrap) -> None:
    assigned = read(spark, bootstrap, assign=json.dumps({TOPIC: [1], OTHER: [0]}))
    assert task_count(assigned) == 2
    assert offsets_by_partition(assigned) == {(TOPIC, 1): list(range(10)), (OTHER, 0): [0, 1, 2, 3]}
    pattern = read(spark, bootstrap, subscribePattern="events.*")
    assert task_count(pattern) == PARTITIONS + 1
    assert pattern.count() == PARTITIONS * PER_PARTITION + 4


def test_min_partitions_and_max_records_per_partition_split_tasks(spark, bootstrap) -> None:
    split = read(spark, bootstrap, subscribe=TOPIC, minPartitions="6")
    assert task_count(split) == 6
    assert offsets_by_partition(split) == {(TOPIC, p): list(range(10)) for p in range(3)}
    capped = read(spark, bootstrap, subscribe=TOPIC, maxRecordsPerPartition="4")
    assert task_count(capped) == 9  # ceil(10 / 4) per partition
    assert capped.count() == PARTITIONS * PER_PARTITION


def test_a_plan_without_ranges_reads_no_rows(spark, bootstrap) -> None:
    """No range to read (here an empty topic): Spark still runs one task, with its own
    placeholder partition, which must return nothing rather than fail."""
    create_topic(bootstrap, "events-empty", 2)
    df = read(spark, bootstrap, subscribe="events-empty")
    assert df.count() == 0
    assert df.collect() == []


def test_filter_pushdown_narrows_partitions_offsets_and_timestamps(spark, bootstrap) -> None:
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    try:
        df = read(spark, bootstrap, subscribe=TOPIC).where(
            "partition = 1 AND offset >= 3 AND offset < 6"
        )
        assert task_count(df) == 1
        assert offsets_by_partition(df) == {(TOPIC, 1): [3, 4, 5]}
        newer = read(spark, bootstrap, subscribe=TOPIC).where(
            f"timestamp >= timestamp_millis({NEW})"
        )
        # The seek leaves partition 2 (all records older) without a task.
        assert task_count(newer) == 2
        assert offsets_by_partition(newer) == {
            (TOPIC, 0): [5, 6, 7, 8, 9],
            (TOPIC, 1): [5, 6, 7, 8, 9],
        }
    finally:
        spark.conf.set("spark.sql.python.filterPushdown.enabled", "false")
    # Without pushdown the same filters give the same rows (Spark filters every record).
    df = read(spark, bootstrap, subscribe=TOPIC).where(
        "partition = 1 AND offset >= 3 AND offset < 6"
    )
    assert task_count(read(spark, bootstrap, subscribe=TOPIC)) == 3
    assert offsets_by_partition(df) == {(TOPIC, 1): [3, 4, 5]}


def test_an_option_spark_rejects_fails_the_query_with_sparks_message(spark) -> None:
    """Validation runs before any connection (test_options.py covers every rejection)."""
    with pytest.raises(Exception, match=r"Kafka option 'auto.offset.reset' is not supported"):
        read(
            spark, "127.0.0.1:9", subscribe=TOPIC, **{"kafka.auto.offset.reset": "earliest"}
        ).collect()


def test_a_deleted_range_fails_the_read_or_is_skipped(spark, spark_broker) -> None:
    """(The log line naming the skipped range is written by the task's Python worker, whose
    stderr belongs to the JVM: test_options_and_planning.py checks its text.)"""
    bootstrap = spark_broker.bootstrap
    create_topic(bootstrap, "trimmed", 1)
    produce(bootstrap, "trimmed", [(0, None, f"r{i}".encode(), None) for i in range(30)])
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deleted = admin.delete_records([confluent_kafka.TopicPartition("trimmed", 0, 10)])
    for future in deleted.values():
        assert future.result(30).low_watermark == 10  # the new log start offset
    options = {
        "assign": json.dumps({"trimmed": [0]}),
        "startingOffsets": json.dumps({"trimmed": {"0": 0}}),
    }
    with pytest.raises(Exception, match=r"Offsets \[0, 10\) of trimmed-0 are no longer in the log"):
        read(spark, bootstrap, **options).collect()
    skipped = read(spark, bootstrap, failOnDataLoss="false", **options)
    assert offsets_by_partition(skipped) == {("trimmed", 0): list(range(10, 30))}
