"""The Spark group of the benchmark (``make bench BENCH_ARGS='--only spark'``): one
measurement per process, printed as JSON for the harness.

- ``fill``: a topic of ``--messages`` records of ``--size`` bytes, round-robin over its
  partitions (confluent-kafka, acks=1).
- ``raw``: a confluent-kafka consumer assigned every partition reads the whole topic: the
  rate a plain client gets, the baseline.
- ``batch``: ``spark.read.format("gregor")`` on Spark ``local[2]`` reads the whole topic into
  Spark's ``noop`` sink (every row materialised, nothing written); timed around the job only,
  not the session start.
- ``stream``: the same through ``readStream`` with ``Trigger.AvailableNow``: records/s a
  streaming query sustains from a backlog.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from typing import Any

from bench.clients import consumer_config, producer_config


def fill(args: argparse.Namespace) -> dict[str, Any]:
    from confluent_kafka import Producer

    producer = Producer(producer_config({"bootstrap": args.bootstrap, "batched": True}))
    payload = b"s" * args.size
    started = time.perf_counter()
    for n in range(args.messages):
        while True:
            try:
                producer.produce(args.topic, payload, partition=n % args.partitions)
                break
            except BufferError:
                producer.poll(0.01)
    if producer.flush(600):
        raise RuntimeError(f"not every record was delivered while filling {args.topic}")
    return {"messages": args.messages, "seconds": time.perf_counter() - started}


def raw(args: argparse.Namespace) -> dict[str, Any]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(consumer_config(args.bootstrap))
    consumer.assign([TopicPartition(args.topic, p, 0) for p in range(args.partitions)])
    received = payload = 0
    started = None
    deadline = time.perf_counter() + 900
    try:
        while received < args.messages and time.perf_counter() < deadline:
            for message in consumer.consume(10_000, timeout=1.0):
                if message.error() is None:
                    if started is None:
                        started = time.perf_counter()
                    received += 1
                    payload += len(message.value())
        seconds = time.perf_counter() - (started or time.perf_counter())
    finally:
        consumer.close()
    return {"records": received, "bytes": payload, "seconds": seconds}


def spark_session():
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "2g")
        # Python workers connect back to the JVM within this time (default 15 s); a busy
        # 2-core machine can take longer to start one.
        .config("spark.python.authenticate.socketTimeout", "120s")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def batch(args: argparse.Namespace) -> dict[str, Any]:
    spark = spark_session()
    try:
        df = (
            spark.read.format("gregor")
            .option("kafka.bootstrap.servers", args.bootstrap)
            .option("subscribe", args.topic)
            .load()
        )
        started = time.perf_counter()
        df.write.format("noop").mode("overwrite").save()
        seconds = time.perf_counter() - started
        # Counted after the clock stops: the number of rows the timed job produced.
        records = df.count()
    finally:
        spark.stop()
    return {"records": records, "bytes": records * args.size, "seconds": seconds}


def stream(args: argparse.Namespace) -> dict[str, Any]:
    spark = spark_session()
    try:
        with tempfile.TemporaryDirectory(prefix="gregor-bench-stream-") as checkpoint:
            query = (
                spark.readStream.format("gregor")
                .option("kafka.bootstrap.servers", args.bootstrap)
                .option("subscribe", args.topic)
                .option("startingOffsets", "earliest")
                .load()
                .writeStream.format("noop")
                .option("checkpointLocation", checkpoint)
                .trigger(availableNow=True)
            )
            started = time.perf_counter()
            running = query.start()
            running.awaitTermination()
            seconds = time.perf_counter() - started
            records = sum(p["numInputRows"] for p in running.recentProgress)
    finally:
        spark.stop()
    return {"records": records, "bytes": records * args.size, "seconds": seconds}


KINDS = {"fill": fill, "raw": raw, "batch": batch, "stream": stream}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("kind", choices=sorted(KINDS))
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--messages", type=int, default=1024 * 1024)
    parser.add_argument("--size", type=int, default=1024)
    args = parser.parse_args(argv)
    json.dump(KINDS[args.kind](args), sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
