"""The Arrow batches a task hands to Spark, built column by column from confluent-kafka's own
``Message`` objects (no broker needed): every value Spark's Kafka source would give, for the
cases the vectorized column builders treat apart (missing keys, tombstones, empty values,
timestamp types, headers)."""

from __future__ import annotations

import datetime as dt

import pytest
from confluent_kafka import Message

from gregor_spark.arrow_batch import arrow_schema, binary_column, record_batch

UTC = dt.UTC


@pytest.mark.parametrize(
    "items",
    [[b"a", b"", b"xyz" * 500], [None, None], [b"a", None, b""], [b""], []],
    ids=["values", "all-null", "mixed", "one-empty", "none"],
)
def test_binary_column_equals_arrow_conversion(items) -> None:
    column = binary_column(items)
    column.validate(full=True)
    assert column.to_pylist() == items
    assert str(column.type) == "binary"


def test_record_batch_has_spark_values_and_schema() -> None:
    messages = [
        # librdkafka's timestamp types 1 (CreateTime), 2 (LogAppendTime), 0 (none).
        Message(topic="t", partition=3, offset=7, key=b"k", value=b"v1", timestamp=(1, 1500)),
        Message(topic="t", partition=3, offset=9, key=None, value=None, timestamp=(2, 2000)),
        Message(
            topic="t",
            partition=3,
            offset=10,
            key=b"",
            value=b"",
            timestamp=(0, -1),
            headers=[("h", b"x"), ("n", None)],
        ),
    ]
    batch = record_batch(messages, include_headers=True)
    assert batch.schema == arrow_schema(True)
    assert batch.to_pylist() == [
        {
            "key": b"k",
            "value": b"v1",
            "topic": "t",
            "partition": 3,
            "offset": 7,
            "timestamp": dt.datetime(1970, 1, 1, 0, 0, 1, 500_000, tzinfo=UTC),
            "timestampType": 0,
            "headers": None,
        },
        {
            "key": None,
            "value": None,
            "topic": "t",
            "partition": 3,
            "offset": 9,
            "timestamp": dt.datetime(1970, 1, 1, 0, 0, 2, tzinfo=UTC),
            "timestampType": 1,
            "headers": None,
        },
        {
            "key": b"",
            "value": b"",
            "topic": "t",
            "partition": 3,
            "offset": 10,
            "timestamp": dt.datetime(1969, 12, 31, 23, 59, 59, 999_000, tzinfo=UTC),
            "timestampType": -1,
            "headers": [{"key": "h", "value": b"x"}, {"key": "n", "value": None}],
        },
    ]
    assert record_batch(messages, include_headers=False).schema == arrow_schema(False)
