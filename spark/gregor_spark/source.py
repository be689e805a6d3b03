"""The ``DataSource`` Spark instantiates for ``format("gregor")``.

Only wiring: it validates the options for the kind of access Spark asks for (batch read,
streaming read, batch or streaming write) and hands them to the reader or writer. Its class is
what ``pyspark_gregor.DefaultSource`` exports.
"""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from gregor_spark.options import lowercase, parse_bool, sink_options, source_options
from gregor_spark.schema import ddl


class GregorDataSource(DataSource):
    """Spark's Kafka source and sink for Gregor (and any Kafka-compatible cluster)."""

    @classmethod
    def name(cls) -> str:
        return "gregor"

    def schema(self) -> str:
        include = parse_bool(
            lowercase(self.options).get("includeheaders", "false"), "includeHeaders"
        )
        return ddl(include)

    def reader(self, schema: StructType) -> DataSourceReader:
        from gregor_spark.batch import (
            GregorBatchReader,
            GregorPushdownBatchReader,
            filter_pushdown_enabled,
        )

        options = source_options(self.options, streaming=False)
        if filter_pushdown_enabled():
            return GregorPushdownBatchReader(options)
        return GregorBatchReader(options)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from gregor_spark.stream import GregorStreamReader

        return GregorStreamReader(source_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from gregor_spark.write import GregorBatchWriter

        return GregorBatchWriter(sink_options(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from gregor_spark.write import GregorStreamWriter

        return GregorStreamWriter(sink_options(self.options), schema)
