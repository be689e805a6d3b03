"""Spark's automatic registration hook for Gregor's data source.

Spark lists every importable top-level module named ``pyspark_<name>`` and registers its
``DefaultSource`` under ``DefaultSource.name()`` (pyspark ``sql/worker/lookup_data_sources.py``),
so once ``gregor[spark]`` is installed ``spark.read.format("gregor")`` works with no
``spark.dataSource.register`` call. This module only re-exports; the source lives in
``gregor_spark``.
"""

from gregor_spark.source import GregorDataSource as DefaultSource

__all__ = ["DefaultSource"]
