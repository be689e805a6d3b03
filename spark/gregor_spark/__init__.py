"""Gregor's PySpark data source: Spark's Kafka source and sink, in pure Python.

``format("gregor")`` takes the options and returns the rows of Spark's own ``format("kafka")``
(so a job moves between the two by changing the format name), with no JVM jar: tasks read
and write through confluent-kafka. Modules:

- ``options``: parses and validates the options, with Spark's rejections and messages (pure).
- ``schema``: the row schema as Spark's DDL (pure: no pyarrow in Spark's lookup workers).
- ``arrow_batch``: the Arrow record batches built from fetched messages.
- ``planning``: offset ranges to Spark partitions, admission control per trigger (pure).
- ``client``: driver-side metadata and offset look-ups, group commits (confluent-kafka).
- ``fetch``: what one task does to read one offset range.
- ``batch``, ``stream``, ``write``: the DataSource API's reader, stream reader and writers.
- ``source``: the ``DataSource`` itself (``pyspark_gregor.DefaultSource``).
"""

from gregor_spark.source import GregorDataSource

__all__ = ["GregorDataSource"]
