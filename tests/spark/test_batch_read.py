"""Batch reads with ``format("gregor")``: Spark's Kafka options, tasks and exact schema,
against a real broker and a real local SparkSession."""

from __future__ import annotations

import time

import pytest
from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from .helpers import create_topic, produce, task_count

# One SparkSession for all Spark tests: make test runs them on one xdist worker. Spark jobs
# start Python workers and a JVM: on a loaded machine a test can take minutes.
pytestmark = [pytest.mark.xdist_group("spark"), pytest.mark.timeout(900)]

PARTITIONS = 6
PER_PARTITION = 50

SPARK_KAFKA_SCHEMA = StructType(
    [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
)
HEADERS_FIELD = StructField(
    "headers",
    ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())])),
)


def spark_kafka_job(spark: SparkSession, source_format: str, bootstrap: str, topic: str):
    """A batch job written for Spark's Kafka source, option names and all."""
    return (
        spark.read.format(source_format)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .option("includeHeaders", "true")
        .load()
        .selectExpr(
            "CAST(key AS STRING) AS k",
            "CAST(value AS STRING) AS v",
            "topic",
            "partition",
            "offset",
            "timestampType",
            "headers",
        )
    )


def fill(bootstrap: str, topic: str) -> set[tuple[str, str, int, int]]:
    create_topic(bootstrap, topic, PARTITIONS)
    records = [
        (p, f"k{p}-{i}".encode(), f"v{p}-{i}".encode(), [("h", f"{i}".encode())])
        for p in range(PARTITIONS)
        for i in range(PER_PARTITION)
    ]
    produce(bootstrap, topic, records)
    return {
        (f"k{p}-{i}", f"v{p}-{i}", p, i) for p in range(PARTITIONS) for i in range(PER_PARTITION)
    }


def rows(df: DataFrame) -> list[tuple]:
    return [tuple(r) for r in df.collect()]


def test_six_partitions_read_as_six_tasks_every_record_once_with_sparks_schema(
    spark, spark_broker
) -> None:
    expected = fill(spark_broker.bootstrap, "pageviews")
    raw = (
        spark.read.format("gregor")
        .option("kafka.bootstrap.servers", spark_broker.bootstrap)
        .option("subscribe", "pageviews")
        .load()
    )
    assert raw.schema == SPARK_KAFKA_SCHEMA
    with_headers = (
        spark.read.format("gregor")
        .option("kafka.bootstrap.servers", spark_broker.bootstrap)
        .option("subscribe", "pageviews")
        .option("includeHeaders", "true")
        .load()
    )
    assert with_headers.schema == StructType([*SPARK_KAFKA_SCHEMA.fields, HEADERS_FIELD])
    assert task_count(raw) == PARTITIONS

    job = spark_kafka_job(spark, "gregor", spark_broker.bootstrap, "pageviews")
    got = rows(job)
    assert len(got) == PARTITIONS * PER_PARTITION  # every record once
    assert {(k, v, p, o) for k, v, _, p, o, _, _ in got} == expected
    assert {t for _, _, t, _, _, _, _ in got} == {"pageviews"}
    assert {ts_type for *_, ts_type, _ in got} == {0}  # CreateTime, as Spark reports it
    assert all(
        h == [("h", str(o).encode())]
        for _, _, _, _, o, _, h in [(*r[:6], [tuple(x) for x in r[6]]) for r in got]
    )
    stamps = raw.selectExpr("min(timestamp)", "max(timestamp)").collect()[0]
    assert abs(stamps[1].timestamp() - time.time()) < 300
    assert stamps[0] <= stamps[1]


def test_the_same_job_fails_on_sparks_kafka_format_without_its_jar(spark, spark_broker) -> None:
    """What users hit with format("kafka") and no jar; format("gregor") needs none."""
    with pytest.raises(AnalysisException, match="kafka"):
        spark_kafka_job(spark, "kafka", spark_broker.bootstrap, "pageviews").collect()
