"""Arrow record batches built from fetched messages, in Spark's Kafka row schema.

``record_batch`` turns one fetched list of confluent-kafka messages into one
``pyarrow.RecordBatch`` column by column: Spark takes Arrow batches without converting row
by row, which is what makes the Python source fast. Kept apart from ``schema`` (the DDL) so
that the workers Spark starts only to look the source up and learn its schema do not import
pyarrow and numpy (about half a CPU second each; docs/spark.md). The column arithmetic is
numpy's (already loaded with pyspark in every worker), not ``pyarrow.compute``: that module is
another 40 ms of CPU to import in each task worker, more than the arithmetic it would do.
"""

from __future__ import annotations

import array
import itertools
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
from confluent_kafka import Message

TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")
HEADERS_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
BASE_FIELDS = [
    ("key", pa.binary()),
    ("value", pa.binary()),
    ("topic", pa.string()),
    ("partition", pa.int32()),
    ("offset", pa.int64()),
    ("timestamp", TIMESTAMP_TYPE),
    ("timestampType", pa.int32()),
]


def arrow_schema(include_headers: bool) -> pa.Schema:
    fields = [*BASE_FIELDS, ("headers", HEADERS_TYPE)] if include_headers else BASE_FIELDS
    return pa.schema(fields)


def binary_column(items: list[bytes | None]) -> pa.Array:
    """An Arrow ``binary`` column from Python bytes. Without nulls it is one join of the
    values plus their running lengths, several times faster than ``pa.array`` converting
    object by object; nulls (no key, tombstones) take ``pa.array``."""
    if None in items:
        return (
            pa.nulls(len(items), pa.binary())
            if items.count(None) == len(items)
            else (pa.array(items, pa.binary()))
        )
    data = b"".join(items)
    if len(data) >= 2**31:
        return pa.array(items, pa.binary())
    ends = array.array("i", itertools.accumulate(map(len, items), initial=0))
    return pa.Array.from_buffers(
        pa.binary(), len(items), [None, pa.py_buffer(ends), pa.py_buffer(data)]
    )


def fixed_width_column(arrow_type: pa.DataType, values: np.ndarray) -> pa.Array:
    """An Arrow column without nulls over a numpy array of the same width (no copy)."""
    return pa.Array.from_buffers(arrow_type, len(values), [None, pa.py_buffer(values)])


def record_batch(messages: Sequence[Message], include_headers: bool) -> pa.RecordBatch:
    """One Arrow batch from confluent-kafka ``Message`` objects of one partition."""
    count = len(messages)
    first = messages[0]
    # ``map`` over the unbound C methods calls into confluent-kafka without a Python frame per
    # record; everything after that is whole-column Arrow work.
    kinds, millis = zip(*map(Message.timestamp, messages), strict=True)
    columns = [
        binary_column(list(map(Message.key, messages))),
        binary_column(list(map(Message.value, messages))),
        pa.repeat(pa.scalar(first.topic(), pa.string()), count),
        pa.repeat(pa.scalar(first.partition(), pa.int32()), count),
        pa.array(list(map(Message.offset, messages)), pa.int64()),
        fixed_width_column(TIMESTAMP_TYPE, np.array(millis, np.int64) * 1000),
        # Kafka's timestamp type: librdkafka says 0 (none), 1 (CreateTime), 2 (LogAppendTime);
        # Spark (the Java client's TimestampType.id) says -1, 0 and 1.
        fixed_width_column(pa.int32(), np.array(kinds, np.int32) - 1),
    ]
    if include_headers:
        columns.append(
            pa.array(
                [
                    [{"key": k, "value": v} for k, v in headers] if headers else None
                    for headers in map(Message.headers, messages)
                ],
                HEADERS_TYPE,
            )
        )
    return pa.RecordBatch.from_arrays(columns, schema=arrow_schema(include_headers))
