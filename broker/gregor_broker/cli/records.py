"""``gregor records delete``: move partitions' log start offsets forward (like
kafka-delete-records), through the Kafka API (DeleteRecords).

The offsets come from a JSON file in kafka-delete-records' format:
``{"version": 1, "partitions": [{"topic": "orders", "partition": 0, "offset": 42}]}``;
offset -1 means "up to the high watermark" (everything committed). Records below the new
log start offset are gone for every consumer; whole segments below it are deleted.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from gregor_broker.cli import kafka_api
from gregor_broker.cli.kafka_api import ToolError

EXAMPLES = """\
examples:
  echo '{"version":1,"partitions":[{"topic":"orders","partition":0,"offset":42}]}' > del.json
  gregor records delete -b 127.0.0.1:9092 --offset-json-file del.json
"""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "records",
        help="delete records below an offset (kafka-delete-records)",
        description=__doc__.replace("``", ""),
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.set_defaults(func=lambda args: parser.print_help() or 2)
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")
    delete = commands.add_parser(
        "delete",
        help="delete records below the offsets in a JSON file",
        description=__doc__.replace("``", ""),
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    kafka_api.add_bootstrap_argument(delete)
    delete.add_argument("--offset-json-file", type=Path, required=True)
    kafka_api.add_output_argument(delete)
    delete.set_defaults(func=lambda args: kafka_api.run(delete_records, args, "gregor records"))


def read_offset_file(path: Path) -> list[tuple[str, int, int]]:
    try:
        document = json.loads(path.read_text())
        return [
            (str(entry["topic"]), int(entry["partition"]), int(entry["offset"]))
            for entry in document["partitions"]
        ]
    except OSError as error:
        raise ToolError(f"{path}: {error.strerror}", 2) from error
    except (ValueError, KeyError, TypeError) as error:
        raise ToolError(
            f'{path}: expected {{"partitions": [{{"topic": ..., "partition": ..., '
            f'"offset": ...}}]}} ({error})',
            2,
        ) from error


def delete_records(args: argparse.Namespace) -> int:
    from confluent_kafka import TopicPartition

    wanted = read_offset_file(args.offset_json_file)
    if not wanted:
        raise ToolError(f"{args.offset_json_file}: no partitions listed", 2)
    client = kafka_api.admin(args.bootstrap_server)
    futures = client.delete_records(
        [TopicPartition(topic, partition, offset) for topic, partition, offset in wanted],
        request_timeout=kafka_api.TIMEOUT_S,
    )
    rows = []
    failed = False
    for partition, future in sorted(futures.items(), key=lambda i: (i[0].topic, i[0].partition)):
        what = f"Topic {partition.topic} partition {partition.partition}"
        try:
            deleted = kafka_api.result(future, what)
            rows.append(
                {
                    "topic": partition.topic,
                    "partition": partition.partition,
                    "low_watermark": deleted.low_watermark,
                    "error": None,
                }
            )
        except ToolError as error:
            failed = True
            rows.append(
                {
                    "topic": partition.topic,
                    "partition": partition.partition,
                    "low_watermark": None,
                    "error": str(error),
                }
            )
    kafka_api.print_rows(rows, ["topic", "partition", "low_watermark", "error"], args.output)
    return 1 if failed else 0
