"""The rows the source returns: exactly Spark's Kafka schema, as the DDL Spark asks for.

The schema is Spark's ``KafkaRecordToRowConverter.kafkaSchema`` (headers only with
``includeHeaders``). Pure: ``DataSource.schema()`` runs in the short-lived Python workers
Spark starts to look the source up and create it, which need neither pyarrow nor a Kafka
client; the Arrow side of the same schema is ``arrow_batch``.
"""

from __future__ import annotations

BASE_DDL = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int"
)
HEADERS_DDL = "headers array<struct<key: string, value: binary>>"


def ddl(include_headers: bool) -> str:
    return f"{BASE_DDL}, {HEADERS_DDL}" if include_headers else BASE_DDL
