"""``gregor perf produce|consume``: Kafka's kafka-producer-perf-test.sh and
kafka-consumer-perf-test.sh, on confluent-kafka.

Same options and the same output lines as Kafka's tools, so numbers and scripts carry
over: the producer prints a progress line every 5 s and a summary with latency
percentiles (latency: from ``produce()`` to the delivery report); the consumer prints
Kafka's CSV header and line (with ``--show-detailed-stats``, one line per reporting
interval). For the comparisons behind docs/performance.md use ``gregor bench``: this is
the operator's quick check of a cluster.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import time
import uuid
from typing import Any

from .kafka_api import (
    ToolError,
    add_bootstrap_argument,
    add_output_argument,
    client_config,
    command_group,
    parse_configs,
    run,
)

PROG = "gregor perf"
MB = 1024 * 1024
JOIN_S = 30  # how long to wait for the group join on top of --timeout


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    commands = command_group(
        subparsers,
        "perf",
        help="measure produce or consume throughput (kafka-*-perf-test)",
        description=(
            "Quick throughput checks of a cluster, like Kafka's "
            "kafka-producer-perf-test.sh and kafka-consumer-perf-test.sh."
        ),
    )

    produce = commands.add_parser(
        "produce",
        help="produce records and report throughput and latency",
        description=(
            "Produce --num-records records of --record-size bytes to --topic, at most "
            "--throughput records/s (-1: as fast as possible). Prints a progress line "
            "every 5 s and a summary like kafka-producer-perf-test.sh: records/s, MB/s, "
            "average and maximum latency, and the 50th, 95th, 99th, 99.9th percentiles."
        ),
        epilog=(
            "example: gregor perf produce --topic perf --num-records 100000 "
            "--record-size 100 --throughput -1 --producer-props acks=all linger.ms=5"
        ),
    )
    add_bootstrap_argument(produce)
    add_output_argument(produce)
    produce.add_argument("--topic", required=True, help="the topic to produce to")
    produce.add_argument("--num-records", type=int, required=True, help="how many records")
    produce.add_argument("--record-size", type=int, default=100, help="bytes per record")
    produce.add_argument(
        "--throughput",
        type=float,
        default=-1,
        help="at most this many records/s; -1 for no limit (default)",
    )
    produce.add_argument("--acks", choices=("0", "1", "all", "-1"), help="the producer's acks")
    produce.add_argument(
        "--producer-props",
        nargs="+",
        metavar="KEY=VALUE",
        help="librdkafka producer settings (e.g. linger.ms=5 compression.type=lz4)",
    )
    produce.add_argument(
        "--print-metrics",
        action="store_true",
        help="print librdkafka's statistics (JSON) at the end",
    )
    produce.set_defaults(func=lambda args: run(_produce, args, PROG))

    consume = commands.add_parser(
        "consume",
        help="consume records and report throughput",
        description=(
            "Consume --messages records of --topic from the beginning with a new group "
            "and print kafka-consumer-perf-test.sh's CSV: start and end time, MB and "
            "records consumed and per second, the time to join the group and the fetch "
            "rates after it."
        ),
        epilog="example: gregor perf consume --topic perf --messages 100000 -b 127.0.0.1:9092",
    )
    add_bootstrap_argument(consume)
    add_output_argument(consume)
    consume.add_argument("--topic", required=True, help="the topic to consume")
    consume.add_argument("--messages", type=int, required=True, help="how many records")
    consume.add_argument("--group", help="the group id (default: a new perf-consumer-<id>)")
    consume.add_argument(
        "--timeout",
        type=int,
        default=10_000,
        metavar="MS",
        help="give up when no record came for this long (default 10000)",
    )
    consume.add_argument(
        "--show-detailed-stats",
        action="store_true",
        help="a line per --reporting-interval, not only the total",
    )
    consume.add_argument(
        "--reporting-interval", type=int, default=5000, metavar="MS", help="(default 5000)"
    )
    consume.add_argument("--hide-header", action="store_true", help="no CSV header line")
    consume.add_argument(
        "--consumer-props",
        nargs="+",
        metavar="KEY=VALUE",
        help="librdkafka consumer settings (e.g. fetch.max.bytes=52428800)",
    )
    consume.set_defaults(func=lambda args: run(_consume, args, PROG))


# -- produce ---------------------------------------------------------------------------------


class _Stats:
    """Kafka's ProducerPerformance.Stats: a window every 5 s and the whole run."""

    def __init__(self, record_size: int, progress: bool = True) -> None:
        self.record_size = record_size
        self.progress = progress
        self.start = self.window_start = time.monotonic()
        self.latencies: list[float] = []
        self.count = self.window_count = 0
        self.max_latency = self.window_max = self.window_total = 0.0
        self.errors = 0

    def record(self, latency_ms: float) -> None:
        self.latencies.append(latency_ms)
        self.count += 1
        self.window_count += 1
        self.window_total += latency_ms
        self.max_latency = max(self.max_latency, latency_ms)
        self.window_max = max(self.window_max, latency_ms)
        if self.progress and time.monotonic() - self.window_start >= 5.0:
            self.print_window()

    def print_window(self) -> None:
        elapsed = max(time.monotonic() - self.window_start, 1e-9)
        rate = self.window_count / elapsed
        print(
            f"{self.window_count} records sent, {rate:.1f} records/sec "
            f"({rate * self.record_size / MB:.2f} MB/sec), "
            f"{self.window_total / max(self.window_count, 1):.1f} ms avg latency, "
            f"{self.window_max:.1f} ms max latency.",
            flush=True,
        )
        self.window_start = time.monotonic()
        self.window_count = 0
        self.window_total = self.window_max = 0.0

    def totals(self) -> dict[str, Any]:
        """The summary's figures (``--output json``)."""
        elapsed = max(time.monotonic() - self.start, 1e-9)
        rate = self.count / elapsed
        ordered = sorted(self.latencies) or [0.0]

        def percentile(p: float) -> int:
            return int(ordered[min(int(p * len(ordered)), len(ordered) - 1)])

        return {
            "records": self.count,
            "records_per_sec": rate,
            "mb_per_sec": rate * self.record_size / MB,
            "avg_latency_ms": sum(ordered) / len(ordered),
            "max_latency_ms": self.max_latency,
            "p50_ms": percentile(0.5),
            "p95_ms": percentile(0.95),
            "p99_ms": percentile(0.99),
            "p999_ms": percentile(0.999),
        }

    def summary(self) -> str:
        """Kafka's summary line, from :meth:`totals`."""
        t = self.totals()
        return (
            f"{t['records']} records sent, {t['records_per_sec']:f} records/sec "
            f"({t['mb_per_sec']:.2f} MB/sec), {t['avg_latency_ms']:.2f} ms avg latency, "
            f"{t['max_latency_ms']:.2f} ms max latency, {t['p50_ms']} ms 50th, "
            f"{t['p95_ms']} ms 95th, {t['p99_ms']} ms 99th, {t['p999_ms']} ms 99.9th."
        )


def _produce(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaException, Producer

    if args.num_records < 0 or args.record_size < 0:
        raise ToolError("--num-records and --record-size must not be negative", exit_code=2)
    settings = parse_configs(args.producer_props, "--producer-props")
    if args.acks is not None:
        settings["acks"] = args.acks
    statistics: list[str] = []
    if args.print_metrics:
        settings.setdefault("statistics.interval.ms", "1000")
        settings["stats_cb"] = statistics.append
    try:
        producer = Producer(client_config(args.bootstrap_server, **settings))
    except KafkaException as error:
        raise ToolError(f"--producer-props: {error.args[0].str()}", exit_code=2) from error
    stats = _Stats(args.record_size, progress=args.output == "table")
    failures: list[str] = []
    # Kafka's tool sends random printable bytes; their content does not matter to a broker.
    payload = os.urandom(args.record_size)

    def delivered(sent_at: float) -> Any:
        def report(error: Any, _message: Any) -> None:
            if error is not None:
                failures.append(error.str())
                return
            stats.record((time.monotonic() - sent_at) * 1000)

        return report

    interval = 1.0 / args.throughput if args.throughput > 0 else 0.0
    started = time.monotonic()
    for i in range(args.num_records):
        if interval:
            # Kafka's ThroughputThrottler: sleep while ahead of the target rate.
            ahead = started + i * interval - time.monotonic()
            if ahead > 0:
                producer.poll(ahead)
        while True:
            try:
                producer.produce(args.topic, value=payload, on_delivery=delivered(time.monotonic()))
                break
            except BufferError:
                producer.poll(0.05)  # the local queue is full: let deliveries drain it
        producer.poll(0)
        if len(failures) > 100:
            break
    remaining = producer.flush(60)
    if args.output == "json":
        print(json.dumps(stats.totals(), indent=2), flush=True)
    else:
        print(stats.summary(), flush=True)
    if args.print_metrics and statistics:
        print(json.dumps(json.loads(statistics[-1]), indent=2))
    if failures or remaining:
        first = failures[0] if failures else f"{remaining} records still unsent after 60 s"
        raise ToolError(
            f"topic {args.topic}: {len(failures) + remaining} records not acknowledged "
            f"(first: {first}); check the topic exists and --bootstrap-server"
        )
    return 0


# -- consume ---------------------------------------------------------------------------------

HEADER = (
    "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
    "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
)


def _stamp(moment: float) -> str:
    """Kafka's tool's date format, yyyy-MM-dd HH:mm:ss:SSS."""
    value = datetime.datetime.fromtimestamp(moment)
    return value.strftime("%Y-%m-%d %H:%M:%S:") + f"{value.microsecond // 1000:03d}"


def _figures(start: float, end: float, nbytes: int, count: int, join_ms: float) -> dict:
    """The columns of Kafka's CSV line, named as in its header."""
    elapsed = max(end - start, 1e-9)
    fetch_s = max(elapsed - join_ms / 1000, 1e-9)
    mb = nbytes / MB
    return {
        "start.time": _stamp(start),
        "end.time": _stamp(end),
        "data.consumed.in.MB": round(mb, 4),
        "MB.sec": round(mb / elapsed, 4),
        "data.consumed.in.nMsg": count,
        "nMsg.sec": round(count / elapsed, 4),
        "rebalance.time.ms": round(join_ms),
        "fetch.time.ms": round(fetch_s * 1000),
        "fetch.MB.sec": round(mb / fetch_s, 4),
        "fetch.nMsg.sec": round(count / fetch_s, 4),
    }


def _line(start: float, end: float, nbytes: int, count: int, join_ms: float) -> str:
    figures = _figures(start, end, nbytes, count, join_ms)
    return ", ".join(
        f"{value:.4f}" if isinstance(value, float) else str(value) for value in figures.values()
    )


def _consume(args: argparse.Namespace) -> int:
    from confluent_kafka import Consumer, KafkaException

    settings = {
        "group.id": args.group or f"perf-consumer-{uuid.uuid4().hex[:8]}",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        **parse_configs(args.consumer_props, "--consumer-props"),
    }
    joined: list[float] = []

    def on_assign(consumer: Any, partitions: Any) -> None:
        joined.append(time.time())

    try:
        consumer = Consumer(client_config(args.bootstrap_server, **settings))
    except KafkaException as error:
        raise ToolError(f"--consumer-props: {error.args[0].str()}", exit_code=2) from error
    if not args.hide_header and args.output == "table":
        print(HEADER, flush=True)
    start = time.time()
    count = nbytes = 0
    window = (start, 0, 0)
    last_record = started = time.monotonic()
    try:
        consumer.subscribe([args.topic], on_assign=on_assign)
        while count < args.messages:
            messages = consumer.consume(min(args.messages - count, 10_000), 0.5)
            for message in messages:
                if message.error() is not None:
                    raise ToolError(f"topic {args.topic}: {message.error().str()}")
                count += 1
                nbytes += len(message.value() or b"") + len(message.key() or b"")
            if messages or not joined:
                # The silence clock runs from the group join on: joining takes the group
                # coordinator's initial rebalance delay, which is not silence of the topic.
                last_record = started = time.monotonic()
                if (
                    not joined
                    and (time.monotonic() - started) * 1000 > args.timeout + JOIN_S * 1000
                ):
                    raise ToolError(
                        f"topic {args.topic}: group {settings['group.id']} got no partitions "
                        f"within {JOIN_S} s (does the topic exist? check --bootstrap-server)"
                    )
            elif (time.monotonic() - last_record) * 1000 > args.timeout:
                break
            now = time.time()
            if (
                args.output == "table"
                and args.show_detailed_stats
                and (now - window[0]) * 1000 >= args.reporting_interval
            ):
                print(_line(window[0], now, nbytes - window[1], count - window[2], 0), flush=True)
                window = (now, nbytes, count)
    finally:
        consumer.close()
    end = time.time()
    join_ms = (joined[0] - start) * 1000 if joined else 0.0
    if args.output == "json":
        print(json.dumps(_figures(start, end, nbytes, count, join_ms), indent=2), flush=True)
    else:
        print(_line(start, end, nbytes, count, join_ms), flush=True)
    if count < args.messages:
        raise ToolError(
            f"topic {args.topic}: only {count} of {args.messages} records within "
            f"{args.timeout} ms of silence (does the topic hold that many? --timeout)"
        )
    return 0
