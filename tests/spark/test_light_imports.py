"""The modules Spark's short-lived lookup and create workers import stay light.

Spark starts a fresh Python worker to find ``pyspark_*`` modules and another to create the
source and ask its schema; both import ``pyspark_gregor``. Neither needs pyarrow, numpy or a
Kafka client, which cost about half a CPU second per worker to import (docs/spark.md).
"""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("pyarrow", "numpy", "confluent_kafka")


def test_registration_and_schema_import_no_arrow_or_kafka_client() -> None:
    probe = (
        "import sys, pyspark_gregor\n"
        "source = pyspark_gregor.DefaultSource({'includeHeaders': 'true'})\n"
        "print(source.schema())\n"
        f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    ).stdout.splitlines()
    assert out[0].startswith("key binary, value binary, topic string")
    assert out[0].endswith("headers array<struct<key: string, value: binary>>")
    assert out[1] == ""


def test_planning_skips_task_modules_and_tasks_skip_arrow_compute() -> None:
    """Spark's planning worker only creates the batch reader and calls ``partitions()``: it
    needs no Arrow builders nor the task's consumer loop. The task side builds its columns
    with numpy (loaded with pyspark anyway), not ``pyarrow.compute`` (40 ms more CPU per
    worker to import)."""
    probe = (
        "import sys, pyspark_gregor\n"
        "source = pyspark_gregor.DefaultSource({'subscribe': 't',"
        " 'kafka.bootstrap.servers': '127.0.0.1:1'})\n"
        "reader = source.reader(source.schema())\n"
        "print(','.join(m for m in ('gregor_spark.fetch', 'gregor_spark.arrow_batch',"
        " 'pyarrow.compute') if m in sys.modules))\n"
        "import gregor_spark.fetch\n"
        "print('pyarrow.compute' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    ).stdout.splitlines()
    assert out == ["", "False"]
