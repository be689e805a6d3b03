"""``gregor log-dirs describe``: each broker's log directories and the size of every
partition in them, like Kafka's kafka-log-dirs.sh --describe.

Sends DescribeLogDirs to each broker (found with DescribeCluster), through ``wire_client``
since confluent-kafka's AdminClient has no call for it. ``--output json`` prints the
document kafka-log-dirs.sh prints, so scripts written for it keep working.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from .kafka_api import (
    ToolError,
    add_bootstrap_argument,
    add_output_argument,
    admin,
    brokers,
    command_group,
    print_rows,
    run,
)
from .wire_client import request

PROG = "gregor log-dirs"
DESCRIBE_LOG_DIRS, VERSION = 35, 4


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    commands = command_group(
        subparsers,
        "log-dirs",
        help="show each broker's log directories and partition sizes (kafka-log-dirs)",
        description="Inspect the brokers' log directories, like Kafka's kafka-log-dirs.sh.",
    )
    describe = commands.add_parser(
        "describe",
        help="each broker's log directories with the size of every partition",
        description=(
            "For each broker (or those of --broker-list) and each of its log directories: "
            "the directory's total and usable bytes, and the size in bytes of every "
            "partition it holds (or those of --topic-list). An offline directory shows "
            "its error."
        ),
        epilog=(
            "examples:\n"
            "  gregor log-dirs describe -b 127.0.0.1:9092\n"
            "  gregor log-dirs describe --broker-list 1,2 --topic-list orders --output json"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_bootstrap_argument(describe)
    add_output_argument(describe)
    describe.add_argument(
        "--broker-list", metavar="ID,ID", help="only these brokers (default: every broker)"
    )
    describe.add_argument(
        "--topic-list", metavar="TOPIC,TOPIC", help="only these topics (default: every topic)"
    )
    describe.set_defaults(func=lambda args: run(_describe, args, PROG))


def _ids(text: str | None, option: str) -> set[int] | None:
    if not text:
        return None
    try:
        return {int(item) for item in text.split(",") if item.strip()}
    except ValueError as error:
        raise ToolError(f"{option} {text!r}: expected broker ids like 1,2", exit_code=2) from error


def describe_log_dirs(
    bootstrap: str, broker_ids: set[int] | None, topics: list[str] | None
) -> list[dict[str, Any]]:
    """Kafka's kafka-log-dirs.sh document: one entry per broker with its log dirs."""
    nodes = brokers(bootstrap)
    if broker_ids is not None:
        unknown = broker_ids - {node.id for node in nodes}
        if unknown:
            raise ToolError(
                f"brokers {sorted(unknown)} are not in the cluster "
                f"(brokers: {[node.id for node in nodes]})"
            )
        nodes = [node for node in nodes if node.id in broker_ids]
    wanted = None
    if topics is not None:
        metadata = admin(bootstrap).list_topics(timeout=30)
        missing = [t for t in topics if t not in metadata.topics]
        if missing:
            raise ToolError(f"topics {missing} do not exist (see gregor topics list)")
        wanted = [{"topic": t, "partitions": sorted(metadata.topics[t].partitions)} for t in topics]
    described = []
    for node in nodes:
        response = request(
            f"{node.host}:{node.port}", DESCRIBE_LOG_DIRS, VERSION, {"topics": wanted}
        )
        dirs = []
        for found in response.results:
            error = None if found.error_code.value == 0 else found.error_code.name.upper()
            dirs.append(
                {
                    "logDir": found.log_dir,
                    "error": error,
                    "totalBytes": found.total_bytes,
                    "usableBytes": found.usable_bytes,
                    "partitions": [
                        {
                            "partition": f"{topic.name}-{part.partition_index}",
                            "size": part.partition_size,
                            "offsetLag": part.offset_lag,
                            "isFuture": part.is_future_key,
                        }
                        for topic in found.topics
                        for part in topic.partitions
                    ],
                }
            )
        described.append({"broker": node.id, "logDirs": dirs})
    return described


def _describe(args: argparse.Namespace) -> int:
    topics = [t for t in (args.topic_list or "").split(",") if t] or None
    brokers = describe_log_dirs(
        args.bootstrap_server, _ids(args.broker_list, "--broker-list"), topics
    )
    if args.output == "json":
        print(json.dumps({"version": 1, "brokers": brokers}, indent=2))
    else:
        rows = []
        for broker in brokers:
            for log_dir in broker["logDirs"]:
                base = {"broker": broker["broker"], "log_dir": log_dir["logDir"]}
                if log_dir["error"]:
                    rows.append({**base, "partition": log_dir["error"]})
                for part in log_dir["partitions"]:
                    rows.append({**base, "partition": part["partition"], "size": part["size"]})
                if not log_dir["error"]:
                    rows.append(
                        {
                            **base,
                            "partition": "(total)",
                            "size": sum(p["size"] for p in log_dir["partitions"]),
                            "usable_bytes": log_dir["usableBytes"],
                            "total_bytes": log_dir["totalBytes"],
                        }
                    )
        print_rows(
            rows,
            ["broker", "log_dir", "partition", "size", "usable_bytes", "total_bytes"],
            "table",
        )
    # An offline directory is part of the answer (its error is shown), not a failure of
    # the command: exit 0, as kafka-log-dirs.sh does.
    return 0
