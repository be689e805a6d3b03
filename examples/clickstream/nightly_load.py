"""The nightly offline load: the ``pageviews`` offsets added since the previous load, into
Parquet, with the exact range recorded in ``loads.json``.

The end offsets are fixed before reading (the high watermarks now) and passed as
``endingOffsets``; the next load starts at them, so consecutive loads cover the topic with
no gap and no overlap, and a failed load can be re-run over the same range.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from common import PAGEVIEWS, local_spark
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec
from pyspark.sql import SparkSession


def high_watermarks(bootstrap: str) -> dict[str, int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    partitions = admin.list_topics(PAGEVIEWS, timeout=30).topics[PAGEVIEWS].partitions
    futures = admin.list_offsets(
        {TopicPartition(PAGEVIEWS, p): OffsetSpec.latest() for p in partitions}
    )
    return {str(tp.partition): f.result().offset for tp, f in futures.items()}


def load(spark: SparkSession, bootstrap: str, out: Path) -> dict:
    ledger = out / "loads.json"
    loads = json.loads(ledger.read_text()) if ledger.exists() else []
    previous = loads[-1]["end"] if loads else {}
    end = high_watermarks(bootstrap)
    start = {p: previous.get(p, -2) for p in end}  # -2: earliest, for partitions never loaded
    number = len(loads) + 1
    target = out / "offline" / "pageviews" / f"load={number}"
    df = (
        spark.read.format("gregor")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", PAGEVIEWS)
        .option("startingOffsets", json.dumps({PAGEVIEWS: start}))
        .option("endingOffsets", json.dumps({PAGEVIEWS: end}))
        .load()
        .selectExpr("partition", "offset", "timestamp", "CAST(value AS STRING) AS event")
    )
    df.write.mode("overwrite").parquet(str(target))
    records = spark.read.parquet(str(target)).count()
    entry = {
        "load": number,
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "topic": PAGEVIEWS,
        "start": start,
        "end": end,
        "records": records,
        "path": str(target),
    }
    ledger.parent.mkdir(parents=True, exist_ok=True)
    ledger.write_text(json.dumps([*loads, entry], indent=2))
    return entry


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    entry = load(local_spark("clickstream-nightly-load"), args.bootstrap, args.out)
    print(json.dumps(entry, indent=2))


if __name__ == "__main__":
    main()
