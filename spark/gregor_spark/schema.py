"""The rows the source returns: Spark's Kafka schema, and Arrow batches built from messages.

The schema is exactly Spark's ``KafkaRecordToRowConverter.kafkaSchema`` (headers only with
``includeHeaders``). ``record_batch`` turns one fetched list of confluent-kafka messages into
one ``pyarrow.RecordBatch`` column by column: Spark takes Arrow batches without converting row
by row, which is what makes the Python source fast.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

BASE_DDL = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int"
)
HEADERS_DDL = "headers array<struct<key: string, value: binary>>"

HEADERS_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
BASE_FIELDS = [
    ("key", pa.binary()),
    ("value", pa.binary()),
    ("topic", pa.string()),
    ("partition", pa.int32()),
    ("offset", pa.int64()),
    ("timestamp", pa.timestamp("us", tz="UTC")),
    ("timestampType", pa.int32()),
]


def ddl(include_headers: bool) -> str:
    return f"{BASE_DDL}, {HEADERS_DDL}" if include_headers else BASE_DDL


def arrow_schema(include_headers: bool) -> pa.Schema:
    fields = [*BASE_FIELDS, ("headers", HEADERS_TYPE)] if include_headers else BASE_FIELDS
    return pa.schema(fields)


def record_batch(messages: Sequence[Any], include_headers: bool) -> pa.RecordBatch:
    """One Arrow batch from confluent-kafka ``Message`` objects of one partition."""
    count = len(messages)
    keys = [m.key() for m in messages]
    values = [m.value() for m in messages]
    offsets = [m.offset() for m in messages]
    stamps = [m.timestamp() for m in messages]
    first = messages[0]
    # Kafka's timestamp type: librdkafka says 1 for CreateTime and 2 for LogAppendTime; Spark
    # (the Java client's TimestampType.id) says 0 and 1.
    columns = [
        pa.array(keys, pa.binary()),
        pa.array(values, pa.binary()),
        pa.array([first.topic()] * count, pa.string()),
        pa.array([first.partition()] * count, pa.int32()),
        pa.array(offsets, pa.int64()),
        pa.array([ms * 1000 for _, ms in stamps], pa.int64()).cast(pa.timestamp("us", tz="UTC")),
        pa.array([kind - 1 if kind > 0 else -1 for kind, _ in stamps], pa.int32()),
    ]
    if include_headers:
        columns.append(
            pa.array(
                [
                    [{"key": k, "value": v} for k, v in m.headers()] if m.headers() else None
                    for m in messages
                ],
                HEADERS_TYPE,
            )
        )
    return pa.RecordBatch.from_arrays(columns, schema=arrow_schema(include_headers))
