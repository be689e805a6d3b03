"""``gregor offsets get``: a partition's earliest, latest or by-time offset (like
kafka-get-offsets), through the Kafka API (ListOffsets).

Prints ``topic:partition:offset`` lines as kafka-get-offsets does, or JSON with
``--output json``. ``--time`` takes Kafka's values: ``-1`` (latest, the high watermark),
``-2`` (earliest, the log start offset), ``-3`` (the record with the largest timestamp) or a
timestamp in milliseconds (the first offset at or after it; -1 when there is none).
"""

from __future__ import annotations

import argparse
from typing import Any

from gregor_broker.cli import kafka_api
from gregor_broker.cli.kafka_api import ToolError

EXAMPLES = """\
examples:
  gregor offsets get -b 127.0.0.1:9092 --topic orders
  gregor offsets get -b 127.0.0.1:9092 --topic orders --partitions 0,1 --time -2
  gregor offsets get -b 127.0.0.1:9092 --topic orders --time 1767225600000 --output json
"""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "offsets",
        help="earliest, latest or by-time offsets of partitions (kafka-get-offsets)",
        description=__doc__.replace("``", ""),
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.set_defaults(func=lambda args: parser.print_help() or 2)
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")
    get = commands.add_parser(
        "get",
        help="print offsets",
        description=__doc__.replace("``", ""),
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    kafka_api.add_bootstrap_argument(get)
    get.add_argument("--topic", required=True)
    get.add_argument("--partitions", help="comma-separated partition ids (default: all)")
    get.add_argument("--time", type=int, default=-1, help="-1 latest, -2 earliest, -3, or ms")
    kafka_api.add_output_argument(get)
    get.set_defaults(func=lambda args: kafka_api.run(get_offsets, args, "gregor offsets"))


def _spec(time_ms: int) -> Any:
    from confluent_kafka.admin import OffsetSpec

    if time_ms == -1:
        return OffsetSpec.latest()
    if time_ms == -2:
        return OffsetSpec.earliest()
    if time_ms == -3:
        return OffsetSpec.max_timestamp()
    if time_ms < 0:
        raise ToolError(f"--time {time_ms}: use -1, -2, -3 or a timestamp in ms", exit_code=2)
    return OffsetSpec.for_timestamp(time_ms)


def get_offsets(args: argparse.Namespace) -> int:
    from confluent_kafka import TopicPartition

    client = kafka_api.admin(args.bootstrap_server)
    # Every topic, not just this one: a Metadata request naming a missing topic would
    # create it on a cluster with auto.create.topics.enable.
    metadata = client.list_topics(timeout=kafka_api.TIMEOUT_S)
    topic = metadata.topics.get(args.topic)
    if topic is None or topic.error is not None:
        raise ToolError(f"Topic {args.topic}: {topic.error.str() if topic else 'not found'}")
    if args.partitions:
        try:
            indexes = [int(p) for p in args.partitions.split(",")]
        except ValueError as error:
            raise ToolError(f"--partitions {args.partitions!r}: expected 0,1,...", 2) from error
        missing = sorted(set(indexes) - set(topic.partitions))
        if missing:
            raise ToolError(f"Topic {args.topic} has no partition {missing[0]}")
    else:
        indexes = sorted(topic.partitions)
    spec = _spec(args.time)
    request = {TopicPartition(args.topic, index): spec for index in indexes}
    futures = client.list_offsets(request, request_timeout=kafka_api.TIMEOUT_S)
    rows = []
    for partition, future in sorted(futures.items(), key=lambda item: item[0].partition):
        info = kafka_api.result(future, f"Topic {args.topic} partition {partition.partition}")
        rows.append(
            {
                "topic": args.topic,
                "partition": partition.partition,
                "offset": info.offset,
                "timestamp": info.timestamp,
            }
        )
    if args.output == "json":
        kafka_api.print_rows(rows, [], "json")
    else:
        for row in rows:
            print(f"{row['topic']}:{row['partition']}:{row['offset']}")
    return 0
