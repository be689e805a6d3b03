"""``make pipeline-demo``: the whole clickstream pipeline against ``gregor local up``.

Starts a one-broker local cluster (free ports, a temporary data directory), produces page
views, runs the streaming job (AvailableNow) and two nightly loads with more events in
between, prints the result table, the loads' offset ranges and the consumer group's lag, and
stops the cluster.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import generator
import nightly_load
import views_per_minute
from common import PAGEVIEWS, VIEWS_GROUP, VIEWS_PER_MINUTE, local_spark
from pyspark.sql.functions import col, from_json, max_by

GREGOR = [sys.executable, "-m", "gregor_broker.cli.main"]


def gregor(*args: str) -> str:
    return subprocess.run([*GREGOR, *args], check=True, capture_output=True, text=True).stdout


def result_table(spark, bootstrap: str) -> None:
    """The compacted topic read back with format("gregor"): the latest count per key."""
    latest = (
        spark.read.format("gregor")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", VIEWS_PER_MINUTE)
        .load()
        .groupBy(col("key").cast("string").alias("key"))
        .agg(max_by(col("value").cast("string"), col("offset")).alias("value"))
        .select(from_json("value", "minute timestamp, url string, views long").alias("v"))
        .select("v.*")
        .orderBy("minute", col("views").desc())
    )
    print(f"\nPage views per URL per minute (topic {VIEWS_PER_MINUTE}, latest per key):")
    latest.show(60, truncate=False)


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="gregor-pipeline-demo-") as tmp:
        data_dir, out = Path(tmp) / "cluster", Path(tmp) / "out"
        gregor(
            "local",
            "up",
            "--data-dir",
            str(data_dir),
            "--port",
            "0",
            "--zookeeper-port",
            "0",
            "--detach",
            "--config",
            "group.initial.rebalance.delay.ms=0",
        )
        try:
            state = json.loads((data_dir / "cluster.json").read_text())
            bootstrap = state["bootstrap_servers"]
            print(f"gregor local cluster at {bootstrap}")
            generator.create_topics(bootstrap)
            generator.generate(bootstrap, events=4000, minutes=5, seed=7)
            spark = local_spark("clickstream-demo")
            first = nightly_load.load(spark, bootstrap, out)
            views_per_minute.run(spark, bootstrap, out)
            views_per_minute.commit_progress(spark, bootstrap, out)
            generator.generate(bootstrap, events=1000, minutes=1, seed=8)
            second = nightly_load.load(spark, bootstrap, out)
            result_table(spark, bootstrap)
            windows = spark.read.parquet(str(out / "views-per-minute"))
            print(f"Parquet (finished windows only): {windows.count()} rows")
            print(f"\nNightly loads of {PAGEVIEWS} (loads.json):")
            for entry in (first, second):
                print(
                    f"  load {entry['load']}: {entry['records']} records, offsets "
                    f"{entry['start']} -> {entry['end']}"
                )
            print(f"\ngregor groups describe {VIEWS_GROUP}:")
            print(gregor("groups", "describe", VIEWS_GROUP, "-b", bootstrap))
            spark.stop()
        finally:
            gregor("local", "down", "--data-dir", str(data_dir))


if __name__ == "__main__":
    main()
