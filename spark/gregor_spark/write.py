"""Writes (``df.write.format("gregor")`` and ``writeStream``): Spark's Kafka sink columns.

Each task opens an idempotent confluent-kafka producer (``enable.idempotence``, the Kafka
default since 3.0; ``kafka.enable.idempotence=false`` turns it off), produces its rows, waits
for every delivery report and fails if any record was not acknowledged, so Spark retries the
task. A retried task can write its rows again (at-least-once, as Spark's Kafka sink); the
exactly-once option needs transactions and is refused until Gregor has them.

Columns, as Spark's sink reads them: ``value`` (required, string or binary), ``key`` (string
or binary), ``headers`` (``array<struct<key string, value binary>>``), ``topic`` (string; the
``topic`` option overrides it) and ``partition`` (int; otherwise the producer's partitioner).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from confluent_kafka import KafkaError, KafkaException, Producer
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    StringType,
    StructType,
)

from gregor_spark.options import SinkOptions

FLUSH_TIMEOUT_S = 120.0
BYTES_OR_STRING = (BinaryType, StringType)


@dataclass
class Delivered(WriterCommitMessage):
    records: int


def validate_schema(sink: SinkOptions, schema: StructType) -> None:
    """Spark's KafkaWriter.validateQuery: which columns a sink DataFrame needs, and types."""
    fields = {f.name.lower(): f.dataType for f in schema.fields}
    if sink.topic is None and "topic" not in fields:
        raise ValueError(
            "topic option required when no 'topic' attribute is present. Use the topic "
            "option for setting a topic."
        )
    if "topic" in fields and not isinstance(fields["topic"], StringType):
        raise ValueError(
            f"topic attribute unsupported type {fields['topic'].simpleString()}. topic must "
            "be a(n) string"
        )
    if "value" not in fields:
        raise ValueError("Required attribute 'value' not found")
    for name in ("key", "value"):
        if name in fields and not isinstance(fields[name], BYTES_OR_STRING):
            raise ValueError(
                f"{name} attribute unsupported type {fields[name].simpleString()}. {name} "
                "attribute type must be a string or binary"
            )
    if "partition" in fields and not isinstance(fields["partition"], IntegerType):
        raise ValueError(
            f"partition attribute unsupported type {fields['partition'].simpleString()}. "
            "partition must be a(n) int"
        )
    headers = fields.get("headers")
    if headers is not None and not (
        isinstance(headers, ArrayType)
        and isinstance(headers.elementType, StructType)
        and [f.name for f in headers.elementType.fields] == ["key", "value"]
    ):
        raise ValueError(
            f"headers attribute unsupported type {headers.simpleString()}. headers must be "
            "a(n) array<struct<key:string,value:binary>>"
        )


def producer_config(sink: SinkOptions) -> dict[str, Any]:
    config: dict[str, Any] = {"enable.idempotence": True, "acks": "all", "linger.ms": 5}
    config.update(sink.kafka)
    return config


def produce_all(sink: SinkOptions, batches: Iterable[pa.RecordBatch]) -> Delivered:
    """Produce every row and wait for all delivery reports; raise on the first failure."""
    producer = Producer(producer_config(sink))
    failures: list[KafkaError] = []

    def delivered(error: KafkaError | None, _message: Any) -> None:
        if error is not None:
            failures.append(error)

    count = 0
    for batch in batches:
        for row in batch.to_pylist():
            topic = sink.topic or row.get("topic")
            if topic is None:
                raise ValueError(
                    "Null topic present in the data. Use the topic option for setting a topic."
                )
            headers = row.get("headers")
            kwargs: dict[str, Any] = {"on_delivery": delivered}
            if row.get("partition") is not None:
                kwargs["partition"] = row["partition"]
            if headers:
                kwargs["headers"] = [(h["key"], h["value"]) for h in headers]
            while True:
                try:
                    producer.produce(topic, row["value"], row.get("key"), **kwargs)
                    break
                except BufferError:
                    # The local queue is full: serve delivery reports until there is room.
                    producer.poll(0.1)
            count += 1
            if failures:
                raise KafkaException(failures[0])
        producer.poll(0)
    remaining = producer.flush(FLUSH_TIMEOUT_S)
    if failures:
        raise KafkaException(failures[0])
    if remaining:
        raise TimeoutError(f"{remaining} records not acknowledged within {FLUSH_TIMEOUT_S:.0f} s")
    return Delivered(count)


class GregorBatchWriter(DataSourceArrowWriter):
    def __init__(self, sink: SinkOptions, schema: StructType) -> None:
        validate_schema(sink, schema)
        self.sink = sink

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return produce_all(self.sink, iterator)


class GregorStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, sink: SinkOptions, schema: StructType) -> None:
        validate_schema(sink, schema)
        self.sink = sink

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return produce_all(self.sink, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        # Every record was acknowledged by the task that wrote it: nothing left to do.
        return None

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        # Acknowledged records stay in the log (at-least-once, as Spark's Kafka sink).
        return None
