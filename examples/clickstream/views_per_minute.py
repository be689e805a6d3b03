"""Page views per URL per minute, streaming from ``pageviews`` with a 1-minute watermark.

Two sinks from the same source: the compacted topic ``pageviews-per-minute`` in update mode
through ``foreachBatch`` and the batch writer (key ``url@minute``: compaction keeps each
window's latest count) and Parquet in append mode
(a window is written once the watermark has passed it). ``Trigger.AvailableNow`` processes
what is in the topic and stops, like a scheduled job; drop it to run continuously.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from common import EVENT_DDL, PAGEVIEWS, VIEWS_GROUP, VIEWS_PER_MINUTE, local_spark
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.functions import col, from_json, window


def views_per_minute(spark: SparkSession, bootstrap: str) -> DataFrame:
    events = (
        spark.readStream.format("gregor")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", PAGEVIEWS)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "20000")
        .load()
        .select(from_json(col("value").cast("string"), EVENT_DDL).alias("event"))
        .select("event.*")
        .withWatermark("event_time", "1 minute")
    )
    return (
        events.groupBy(window("event_time", "1 minute").alias("window"), "url")
        .count()
        .select(col("window.start").alias("minute"), "url", col("count").alias("views"))
    )


def run(spark: SparkSession, bootstrap: str, out: Path, available_now: bool = True) -> None:
    counts = views_per_minute(spark, bootstrap)
    trigger = {"availableNow": True} if available_now else {"processingTime": "10 seconds"}

    def to_compacted_topic(batch: DataFrame, _batch_id: int) -> None:
        # Update mode through foreachBatch: Spark's Python streaming sinks take append mode
        # only, and a window's count changes until the watermark passes it. Each batch's
        # changed counts go out with the batch writer; compaction keeps the latest per key.
        (
            batch.selectExpr(
                "CONCAT(url, '@', CAST(minute AS STRING)) AS key",
                "to_json(struct(minute, url, views)) AS value",
            )
            .write.format("gregor")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", VIEWS_PER_MINUTE)
            .mode("append")
            .save()
        )

    to_topic = (
        counts.writeStream.outputMode("update")
        .foreachBatch(to_compacted_topic)
        .option("checkpointLocation", str(out / "checkpoints" / "to-topic"))
        .trigger(**trigger)
        .start()
    )
    # One query at a time: each starts Python workers, and a busy small machine is better
    # off starting them in turn (drop the awaits to run both side by side).
    if available_now:
        to_topic.awaitTermination()
    to_parquet = (
        counts.writeStream.format("parquet")
        .outputMode("append")
        .option("path", str(out / "views-per-minute"))
        .option("checkpointLocation", str(out / "checkpoints" / "to-parquet"))
        .trigger(**trigger)
        .start()
    )
    for query in (to_topic, to_parquet):
        query.awaitTermination()


def commit_progress(spark: SparkSession, bootstrap: str, out: Path) -> None:
    """A pass-through query that commits its progress to ``clickstream-views``, so that
    ``gregor groups describe clickstream-views`` shows how far the pipeline has read."""
    query = (
        spark.readStream.format("gregor")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", PAGEVIEWS)
        .option("startingOffsets", "earliest")
        .option("commitOffsetsToGroup", VIEWS_GROUP)
        .load()
        .selectExpr("partition", "offset")
        .writeStream.format("noop")
        .option("checkpointLocation", str(out / "checkpoints" / "progress"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--continuous", action="store_true")
    args = parser.parse_args()
    spark = local_spark("clickstream-views-per-minute")
    run(spark, args.bootstrap, args.out, available_now=not args.continuous)
    commit_progress(spark, args.bootstrap, args.out)


if __name__ == "__main__":
    main()
