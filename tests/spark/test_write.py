"""Writes with ``format("gregor")``: Spark's sink columns (batch and streaming), every row
acknowledged once a task succeeds, a failed delivery failing the job, and the refused
``exactlyOnce`` option."""

from __future__ import annotations

import confluent_kafka
import pytest
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    StringType,
    StructField,
    StructType,
)

from .helpers import create_topic

# One SparkSession for all Spark tests: make test runs them on one xdist worker. Spark jobs
# start Python workers and a JVM: on a loaded machine a test can take minutes.
pytestmark = [pytest.mark.xdist_group("spark"), pytest.mark.timeout(900)]

PARTITIONS = 3
SINK_SCHEMA = StructType(
    [
        StructField("key", BinaryType()),
        StructField("value", StringType()),
        StructField("partition", IntegerType()),
        StructField(
            "headers",
            ArrayType(
                StructType([StructField("key", StringType()), StructField("value", BinaryType())])
            ),
        ),
    ]
)


def consume_all(bootstrap: str, topic: str, expected: int) -> list[tuple]:
    """Every record of ``topic`` as (partition, key, value, headers), read by confluent-kafka."""
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "check", "enable.auto.commit": False}
    )
    consumer.assign(
        [
            confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
            for p in range(PARTITIONS)
        ]
    )
    records = []
    try:
        for _ in range(60):
            for m in consumer.consume(1000, timeout=0.5):
                if m.error() is None:
                    records.append((m.partition(), m.key(), m.value(), m.headers()))
            if len(records) >= expected:
                break
    finally:
        consumer.close()
    return records


def test_batch_write_produces_sparks_sink_columns(spark, spark_broker) -> None:
    bootstrap = spark_broker.bootstrap
    create_topic(bootstrap, "orders", PARTITIONS)
    rows = [
        (f"k{i}".encode(), f"order-{i}", i % PARTITIONS, [("source", b"spark")]) for i in range(60)
    ]
    df = spark.createDataFrame(rows, SINK_SCHEMA).repartition(2)
    (
        df.write.format("gregor")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", "orders")
        .mode("append")
        .save()
    )
    got = consume_all(bootstrap, "orders", 60)
    assert sorted(got) == sorted(
        (i % PARTITIONS, f"k{i}".encode(), f"order-{i}".encode(), [("source", b"spark")])
        for i in range(60)
    )


def test_streaming_write_copies_a_topic_with_a_topic_column(spark, spark_broker, tmp_path) -> None:
    bootstrap = spark_broker.bootstrap
    create_topic(bootstrap, "orders-in", PARTITIONS)
    create_topic(bootstrap, "orders-copy", PARTITIONS)
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    for i in range(45):
        producer.produce("orders-in", f"o{i}".encode(), f"k{i}".encode(), partition=i % 3)
    assert producer.flush(30) == 0
    query = (
        spark.readStream.format("gregor")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", "orders-in")
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("key", "value", "partition", "'orders-copy' AS topic")
        .writeStream.format("gregor")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(300)
    assert query.exception() is None
    got = consume_all(bootstrap, "orders-copy", 45)
    assert sorted((p, k, v) for p, k, v, _ in got) == sorted(
        (i % 3, f"k{i}".encode(), f"o{i}".encode()) for i in range(45)
    )


def test_a_record_the_broker_refuses_fails_the_job(spark, spark_broker) -> None:
    bootstrap = spark_broker.bootstrap
    create_topic(bootstrap, "orders-small", 1)
    df = spark.createDataFrame([(None, "x", 5, None)], SINK_SCHEMA)  # partition 5 does not exist
    with pytest.raises(Exception, match=r"(?i)unknown partition"):
        (
            df.write.format("gregor")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("kafka.message.timeout.ms", "10000")
            .option("topic", "orders-small")
            .mode("append")
            .save()
        )


def test_exactly_once_is_refused_until_transactions_exist(spark) -> None:
    df = spark.createDataFrame([(None, "x", None, None)], SINK_SCHEMA)
    with pytest.raises(Exception, match="transactions"):
        (
            df.write.format("gregor")
            .option("kafka.bootstrap.servers", "127.0.0.1:9")
            .option("topic", "t")
            .option("exactlyOnce", "true")
            .mode("append")
            .save()
        )
    with pytest.raises(Exception, match="Required attribute 'value' not found"):
        (
            spark.createDataFrame([("k",)], "key string")
            .write.format("gregor")
            .option("kafka.bootstrap.servers", "127.0.0.1:9")
            .option("topic", "t")
            .mode("append")
            .save()
        )
