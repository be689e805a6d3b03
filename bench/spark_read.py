"""The Spark group of the benchmark (``make bench BENCH_ARGS='--only spark'``): one
measurement per process, printed as JSON for the harness.

- ``fill``: a topic of ``--messages`` records of ``--size`` bytes, round-robin over its
  partitions (confluent-kafka, acks=1).
- ``raw``: a confluent-kafka consumer assigned every partition reads the whole topic and
  decodes every record's key, value, offset and timestamp (what Spark's rows hold): the rate
  a plain client gets, the baseline.
- ``batch``: ``spark.read.format("gregor")`` on Spark ``local[2]`` reads the whole topic into
  Spark's ``noop`` sink (every row materialised, nothing written); timed around the job only,
  not the session start.
- ``stream``: the same through ``readStream`` with ``Trigger.AvailableNow``: records/s a
  streaming query sustains from a backlog.

Spark runs also report ``phases``: where the timed window went, from Spark's event log; batch
runs also ``cpu``: CPU seconds of Spark's JVM and of its Python processes in that window.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
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
    newest = last_offset = 0
    started = None
    deadline = time.perf_counter() + 900
    try:
        while received < args.messages and time.perf_counter() < deadline:
            for message in consumer.consume(10_000, timeout=1.0):
                if message.error() is None:
                    if started is None:
                        started = time.perf_counter()
                    # The work Spark's rows stand for: every record's key, value, offset and
                    # timestamp decoded (the Spark side turns all of them into columns).
                    key, value = message.key(), message.value()
                    _, millis = message.timestamp()
                    newest = max(newest, millis)
                    last_offset = message.offset()
                    received += 1
                    payload += len(value) + (len(key) if key is not None else 0)
        seconds = time.perf_counter() - (started or time.perf_counter())
    finally:
        consumer.close()
    return {
        "records": received,
        "bytes": payload,
        "seconds": seconds,
        "newest_timestamp_ms": newest,
        "last_offset": last_offset,
    }


def spark_session(event_dir: str):
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
        # Spark's event log (read back by ``phases``): where the timed window's time went.
        .config("spark.eventLog.enabled", "true")
        .config("spark.eventLog.compress", "false")
        .config("spark.eventLog.dir", event_dir)
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def phases(event_dir: str, started: float, finished: float) -> dict[str, Any]:
    """Where a timed Spark window went, from Spark's event log (epoch milliseconds):

    - ``to_job_s``: from the clock's start to the first job's submission (query planning,
      which for a Python data source runs ``partitions()`` in a Python planning worker
      that Spark starts for it, or a streaming query's start-up);
    - ``to_first_task_s``: to the first task's launch (scheduling);
    - ``tasks_s``: first task launch to last task end (the reading itself; the first task
      in each Python worker includes that worker's start);
    - ``task_run_s``: each task's run time, in launch order;
    - ``after_s``: last task end to the clock's stop (commit, job end).
    """
    jobs: list[int] = []
    tasks: list[tuple[int, int, int]] = []
    for path in Path(event_dir).rglob("events_*"):
        with path.open() as lines:
            for line in lines:
                event = json.loads(line)
                kind = event["Event"]
                if kind == "SparkListenerJobStart":
                    jobs.append(event["Submission Time"])
                elif kind == "SparkListenerTaskEnd":
                    info = event["Task Info"]
                    run_ms = event.get("Task Metrics", {}).get("Executor Run Time", 0)
                    tasks.append((info["Launch Time"], info["Finish Time"], run_ms))
    start_ms, end_ms = started * 1000, finished * 1000
    jobs = [t for t in jobs if start_ms <= t <= end_ms]
    tasks = sorted(t for t in tasks if start_ms <= t[0] <= end_ms)
    if not jobs or not tasks:
        return {}
    first_launch = tasks[0][0]
    last_end = max(t[1] for t in tasks)
    return {
        "to_job_s": round((jobs[0] - start_ms) / 1000, 2),
        "to_first_task_s": round((first_launch - jobs[0]) / 1000, 2),
        "tasks_s": round((last_end - first_launch) / 1000, 2),
        "task_run_s": [round(t[2] / 1000, 2) for t in tasks],
        "after_s": round((end_ms - last_end) / 1000, 2),
    }


def process_tree_cpu(root: int) -> dict[str, float]:
    """CPU seconds (user + system) so far of process ``root`` (Spark's JVM) and, apart, of
    every live descendant (the Python daemons and workers it started), from /proc. A
    descendant that exited in between is missed: Spark keeps its Python daemons and reused
    workers alive until the session stops. Empty where /proc is missing."""
    tick = os.sysconf("SC_CLK_TCK")
    children: dict[int, list[int]] = {}
    cpu: dict[int, int] = {}
    for entry in Path("/proc").iterdir() if Path("/proc/self/stat").exists() else ():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        children.setdefault(int(fields[1]), []).append(int(entry.name))
        cpu[int(entry.name)] = int(fields[11]) + int(fields[12])
    if root not in cpu:
        return {}
    python, stack = 0, list(children.get(root, []))
    while stack:
        pid = stack.pop()
        python += cpu.get(pid, 0)
        stack.extend(children.get(pid, []))
    return {"jvm": cpu[root] / tick, "python": python / tick}


def cpu_spent(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {k: round(after[k] - before[k], 2) for k in after if k in before}


def batch(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="gregor-bench-events-") as events:
        return _batch(args, events)


def _batch(args: argparse.Namespace, events: str) -> dict[str, Any]:
    spark = spark_session(events)
    try:
        df = (
            spark.read.format("gregor")
            .option("kafka.bootstrap.servers", args.bootstrap)
            .option("subscribe", args.topic)
            .load()
        )
        jvm = spark.sparkContext._gateway.proc.pid
        cpu_before = process_tree_cpu(jvm)
        wall_started, started = time.time(), time.perf_counter()
        df.write.format("noop").mode("overwrite").save()
        seconds = time.perf_counter() - started
        wall_finished = time.time()
        cpu = cpu_spent(cpu_before, process_tree_cpu(jvm))
        # Counted after the clock stops: the number of rows the timed job produced.
        records = df.count()
    finally:
        spark.stop()
    return {
        "records": records,
        "bytes": records * args.size,
        "seconds": seconds,
        "phases": phases(events, wall_started, wall_finished),
        "cpu": cpu,
    }


def stream(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="gregor-bench-events-") as events:
        return _stream(args, events)


def _stream(args: argparse.Namespace, events: str) -> dict[str, Any]:
    spark = spark_session(events)
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
            wall_started, started = time.time(), time.perf_counter()
            running = query.start()
            running.awaitTermination()
            seconds = time.perf_counter() - started
            wall_finished = time.time()
            records = sum(p["numInputRows"] for p in running.recentProgress)
    finally:
        spark.stop()
    return {
        "records": records,
        "bytes": records * args.size,
        "seconds": seconds,
        "phases": phases(events, wall_started, wall_finished),
    }


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
