"""``gregor groups``: list, describe, delete consumer groups, reset and delete their offsets.

Like Kafka's ``kafka-consumer-groups.sh``, it talks to the brokers with the Kafka
protocol (confluent-kafka's AdminClient: ListGroups, DescribeGroups, OffsetFetch,
ListOffsets, OffsetCommit, DeleteGroups; OffsetDelete, which that client lacks, through
``wire_client``), so it shows exactly what clients see. Lag is the partition's end
offset (high watermark) minus the group's committed offset. The shared option, admin
client, errors, exit codes and output come from ``kafka_api``.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode

from .kafka_api import (
    ToolError,
    add_bootstrap_argument,
    add_output_argument,
    admin,
    print_rows,
    result,
    run,
)
from .wire_client import request

PROG = "gregor groups"
OFFSET_DELETE = 47


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    groups = subparsers.add_parser(
        "groups",
        help="list, describe and delete consumer groups; reset or delete their offsets",
        description=(
            "Inspect and manage consumer groups, like Kafka's kafka-consumer-groups.sh. "
            "A consumer group is a set of consumers sharing the partitions of the topics "
            "they subscribe to; the group's committed offsets say where each partition "
            "resumes. Lag is how many messages of a partition the group has not "
            "committed yet (end offset minus committed offset)."
        ),
    )
    groups.set_defaults(func=lambda _args: _print_help(groups))
    commands = groups.add_subparsers(title="commands", metavar="COMMAND")

    common = argparse.ArgumentParser(add_help=False)
    add_bootstrap_argument(common)
    add_output_argument(common)

    listing = commands.add_parser(
        "list",
        parents=[common],
        help="list the consumer groups of the cluster",
        description="List every consumer group the cluster's coordinators know, with its state.",
        epilog="example: gregor groups list -b 127.0.0.1:9092",
    )
    listing.set_defaults(func=lambda args: run(_list, args, PROG))

    describe = commands.add_parser(
        "describe",
        parents=[common],
        help="show a group's offsets and lag, its members (--members) or its state (--state)",
        description=(
            "By default (like kafka-consumer-groups --describe --offsets), for each "
            "partition the group has committed an offset for or is assigned: the committed "
            "offset, the partition's end offset, the lag, and the member that consumes it; "
            "then the members. --members lists the members with their number of "
            "partitions (--verbose: and the partitions); --state shows the coordinator, "
            "the assignment strategy, the state and the number of members."
        ),
        epilog=(
            "examples:\n"
            "  gregor groups describe orders-service -b 127.0.0.1:9092\n"
            "  gregor groups describe orders-service --members --verbose\n"
            "  gregor groups describe orders-service --state --output json"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    describe.add_argument("group", help="the group id (the consumers' group.id)")
    view = describe.add_mutually_exclusive_group()
    view.add_argument("--offsets", action="store_true", help="offsets and lag (the default)")
    view.add_argument("--members", action="store_true", help="the group's members")
    view.add_argument("--state", action="store_true", help="the group's state and coordinator")
    describe.add_argument(
        "--verbose", action="store_true", help="with --members: each member's partitions"
    )
    describe.set_defaults(func=lambda args: run(_describe, args, PROG))

    delete = commands.add_parser(
        "delete",
        parents=[common],
        help="delete groups that have no active members, with their committed offsets",
        description=(
            "Delete consumer groups and all their committed offsets. A group with active "
            "members cannot be deleted: stop its consumers first."
        ),
        epilog="example: gregor groups delete old-service -b 127.0.0.1:9092",
    )
    delete.add_argument("groups", nargs="+", metavar="GROUP", help="group ids to delete")
    delete.set_defaults(func=lambda args: run(_delete, args, PROG))

    delete_offsets = commands.add_parser(
        "delete-offsets",
        parents=[common],
        help="delete a group's committed offsets of some topics or partitions",
        description=(
            "Delete the group's committed offsets of the given topics or partitions "
            "(OffsetDelete), like kafka-consumer-groups --delete-offsets. The group's "
            "consumers then start these partitions from their auto.offset.reset. A group "
            "whose active members subscribe to a topic keeps that topic's offsets "
            "(GROUP_SUBSCRIBED_TO_TOPIC)."
        ),
        epilog=(
            "examples:\n"
            "  gregor groups delete-offsets billing --topic invoices\n"
            "  gregor groups delete-offsets billing --topic invoices:0,2 --output json"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    delete_offsets.add_argument("group", help="the group id")
    delete_offsets.add_argument(
        "--topic",
        action="append",
        required=True,
        metavar="TOPIC[:P,P,...]",
        help="a topic, or some of its partitions; repeat for more topics",
    )
    delete_offsets.set_defaults(func=lambda args: run(_delete_offsets, args, PROG))

    reset = commands.add_parser(
        "reset-offsets",
        parents=[common],
        help="move a group's committed offsets (dry run unless --execute)",
        description=(
            "Plan new committed offsets for a group and, with --execute, commit them, "
            "like kafka-consumer-groups --reset-offsets. Without --execute (or with "
            "--dry-run) nothing changes: the plan is only printed. The group must have no "
            "active members (stop its consumers first), as with Kafka's tool. New offsets "
            "outside the log are clamped to its first or end offset."
        ),
        epilog=(
            "examples:\n"
            "  gregor groups reset-offsets billing --topic invoices --to-earliest\n"
            "  gregor groups reset-offsets billing --topic invoices:0,1 --to-offset 42 --execute\n"
            "  gregor groups reset-offsets billing --all-topics --shift-by -10 --execute\n"
            "  gregor groups reset-offsets billing --all-topics --by-duration PT1H --execute\n"
            "  gregor groups reset-offsets billing --all-topics "
            "--to-datetime 2024-05-01T12:00:00 --execute\n"
            "  gregor groups reset-offsets billing --from-file plan.csv --execute  "
            "# lines TOPIC,PARTITION,OFFSET"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    reset.add_argument("group", help="the group id")
    which = reset.add_mutually_exclusive_group()
    which.add_argument(
        "--topic",
        action="append",
        metavar="TOPIC[:P,P,...]",
        help="a topic, or some of its partitions; repeat for more topics",
    )
    which.add_argument(
        "--all-topics",
        action="store_true",
        help="every topic the group has committed offsets for",
    )
    target = reset.add_mutually_exclusive_group(required=True)
    target.add_argument(
        "--to-earliest", action="store_true", help="the first offset still in the log"
    )
    target.add_argument(
        "--to-latest", action="store_true", help="the end of the log (skip everything)"
    )
    target.add_argument(
        "--to-current", action="store_true", help="the committed offset (end if none)"
    )
    target.add_argument("--to-offset", type=int, metavar="N", help="offset N (clamped to the log)")
    target.add_argument(
        "--shift-by",
        type=int,
        metavar="N",
        help="the committed offset plus N (negative: back), clamped to the log",
    )
    target.add_argument(
        "--to-datetime",
        metavar="YYYY-MM-DDTHH:MM:SS[.mmm][+ZONE]",
        help="the first message at or after this time (UTC unless a zone is given)",
    )
    target.add_argument(
        "--by-duration",
        metavar="PnDTnHnMnS",
        help="the first message at or after now minus this ISO-8601 duration (e.g. PT30M)",
    )
    target.add_argument(
        "--from-file",
        type=Path,
        metavar="CSV",
        help="the offsets in a CSV file of TOPIC,PARTITION,OFFSET lines",
    )
    mode = reset.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="only print the plan (the default)")
    mode.add_argument("--execute", action="store_true", help="commit the new offsets")
    reset.set_defaults(func=lambda args: run(_reset_offsets, args, PROG))


def _print_help(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 0


# -- the client side -------------------------------------------------------------------------


@dataclass(frozen=True)
class PartitionRow:
    topic: str
    partition: int
    committed: int | None
    end: int | None
    member: str

    @property
    def lag(self) -> int | None:
        if self.committed is None or self.end is None:
            return None
        return max(self.end - self.committed, 0)


def _committed(client: Any, group: str) -> dict[tuple[str, int], int]:
    from confluent_kafka import ConsumerGroupTopicPartitions

    future = client.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group]
    found = result(future, f"group {group}: cannot read committed offsets")
    return {(tp.topic, tp.partition): tp.offset for tp in found.topic_partitions if tp.offset >= 0}


def _list_offsets(client: Any, partitions: list[tuple[str, int]], spec: Any) -> dict:
    from confluent_kafka import TopicPartition

    if not partitions:
        return {}
    futures = client.list_offsets({TopicPartition(t, p): spec for t, p in partitions})
    found = {}
    for tp, future in futures.items():
        info = result(future, f"partition {tp.topic}-{tp.partition}: cannot list offsets")
        found[(tp.topic, tp.partition)] = info.offset
    return found


def _describe_group(client: Any, group: str) -> Any:
    return result(client.describe_consumer_groups([group])[group], f"group {group}")


def _state_name(state: Any) -> str:
    name = getattr(state, "name", str(state))
    return {
        "STABLE": "Stable",
        "EMPTY": "Empty",
        "DEAD": "Dead",
        "PREPARING_REBALANCING": "PreparingRebalance",
        "COMPLETING_REBALANCING": "CompletingRebalance",
    }.get(name, name.title())


def describe_rows(bootstrap: str, group: str) -> tuple[Any, list[PartitionRow]]:
    """The group's description and one row per partition (for the command and tests)."""
    from confluent_kafka.admin import OffsetSpec

    client = admin(bootstrap)
    description = _describe_group(client, group)
    owners: dict[tuple[str, int], str] = {}
    for member in description.members:
        assignment = member.assignment.topic_partitions if member.assignment else []
        for tp in assignment:
            owners[(tp.topic, tp.partition)] = member.member_id
    committed = _committed(client, group)
    partitions = sorted(set(committed) | set(owners))
    ends = _list_offsets(client, partitions, OffsetSpec.latest())
    rows = [
        PartitionRow(t, p, committed.get((t, p)), ends.get((t, p)), owners.get((t, p), "-"))
        for t, p in partitions
    ]
    return description, rows


def _topic_partitions(client: Any, specs: list[str]) -> list[tuple[str, int]]:
    """``TOPIC`` or ``TOPIC:P,P`` arguments to (topic, partition) pairs, checked against
    the cluster's metadata."""
    metadata = client.list_topics(timeout=30)
    topics = {name: set(topic.partitions) for name, topic in metadata.topics.items()}
    chosen: list[tuple[str, int]] = []
    for spec in specs:
        name, _, parts = spec.partition(":")
        if name not in topics:
            raise ToolError(f"topic {name} does not exist (see gregor topics list)")
        if parts:
            try:
                wanted = [int(p) for p in parts.split(",")]
            except ValueError as error:
                raise ToolError(
                    f"--topic {spec}: partitions must be numbers", exit_code=2
                ) from error
            missing = [p for p in wanted if p not in topics[name]]
            if missing:
                raise ToolError(f"topic {name} has no partitions {missing}")
        else:
            wanted = sorted(topics[name])
        chosen += [(name, p) for p in wanted]
    return chosen


# -- commands ----------------------------------------------------------------------------


def _list(args: argparse.Namespace) -> int:
    client = admin(args.bootstrap_server)  # must outlive the future
    found = result(client.list_consumer_groups(), "listing groups")
    rows = sorted(
        (
            {
                "group": g.group_id,
                "state": _state_name(g.state),
                "type": "consumer" if g.is_simple_consumer_group is False else "simple",
            }
            for g in found.valid
        ),
        key=lambda row: row["group"],
    )
    if not rows and args.output == "table":
        print("no consumer groups")
        return 0
    print_rows(rows, ["group", "state", "type"], args.output)
    return 0


def _member_row(group: str, member: Any, verbose: bool) -> dict[str, Any]:
    tps = member.assignment.topic_partitions if member.assignment else []
    row = {
        "group": group,
        "consumer_id": member.member_id,
        "group_instance_id": member.group_instance_id,
        "host": member.host,
        "client_id": member.client_id,
        "#partitions": len(tps),
    }
    if verbose:
        row["assignment"] = [f"{tp.topic}-{tp.partition}" for tp in tps]
    return row


def _describe(args: argparse.Namespace) -> int:
    description, rows = describe_rows(args.bootstrap_server, args.group)
    state = _state_name(description.state)
    if state == "Dead" and not rows:
        raise ToolError(f"group {args.group} does not exist (see gregor groups list)")
    coordinator = description.coordinator
    if args.state:
        state_row = {
            "group": args.group,
            "coordinator": (
                f"{coordinator.host}:{coordinator.port} ({coordinator.id})" if coordinator else None
            ),
            "assignment_strategy": description.partition_assignor or None,
            "state": state,
            "#members": len(description.members),
        }
        print_rows([state_row], list(state_row), args.output)
        return 0
    if args.members:
        member_rows = [_member_row(args.group, m, args.verbose) for m in description.members]
        columns = ["group", "consumer_id", "group_instance_id", "host", "client_id", "#partitions"]
        if args.output == "table" and not member_rows:
            print(f"Group {args.group} has no active members.")
            return 0
        print_rows(member_rows, columns + (["assignment"] if args.verbose else []), args.output)
        return 0
    partition_rows = [
        {
            "topic": r.topic,
            "partition": r.partition,
            "committed_offset": r.committed,
            "end_offset": r.end,
            "lag": r.lag,
            "member": r.member,
        }
        for r in rows
    ]
    if args.output == "json":
        print_rows(partition_rows, list(partition_rows[0]) if partition_rows else [], "json")
        return 0
    print(
        f"Group {args.group}: state {state}, {len(description.members)} members, "
        f"assignor {description.partition_assignor or '-'}, coordinator "
        f"{coordinator.id if coordinator else '-'}"
    )
    print()
    print_rows(
        partition_rows,
        ["topic", "partition", "committed_offset", "end_offset", "lag", "member"],
        "table",
    )
    if description.members:
        print()
        print_rows(
            [_member_row(args.group, m, True) for m in description.members],
            ["consumer_id", "group_instance_id", "client_id", "host", "assignment"],
            "table",
        )
    return 0


def _delete(args: argparse.Namespace) -> int:
    client = admin(args.bootstrap_server)  # must outlive the futures
    futures = client.delete_consumer_groups(args.groups)
    rows = []
    for group, future in futures.items():
        try:
            result(future, f"group {group}")
            rows.append({"group": group, "status": "deleted", "error": None})
        except ToolError as error:
            message = str(error)
            if "NON_EMPTY_GROUP" in message or "not empty" in message.lower():
                message = f"group {group} still has active members; stop its consumers first"
            rows.append({"group": group, "status": "error", "error": message})
            if args.output == "table":
                print(f"{PROG}: {message}", file=sys.stderr)
    if args.output == "json":
        print_rows(rows, ["group", "status", "error"], "json")
    else:
        for row in rows:
            if row["status"] == "deleted":
                print(f"deleted group {row['group']}")
    return 1 if any(row["error"] for row in rows) else 0


def _delete_offsets(args: argparse.Namespace) -> int:
    client = admin(args.bootstrap_server)
    description = _describe_group(client, args.group)
    if _state_name(description.state) == "Dead" and not _committed(client, args.group):
        raise ToolError(f"group {args.group} does not exist (see gregor groups list)")
    partitions = _topic_partitions(client, args.topic)
    by_topic: dict[str, list[dict[str, int]]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append({"partition_index": partition})
    coordinator = description.coordinator
    response = request(
        f"{coordinator.host}:{coordinator.port}",
        OFFSET_DELETE,
        0,
        {
            "group_id": args.group,
            "topics": [{"name": name, "partitions": parts} for name, parts in by_topic.items()],
        },
    )
    if response.error_code is not ErrorCode.none:
        raise ToolError(
            f"group {args.group}: cannot delete offsets: {response.error_code.name.upper()}"
        )
    rows = [
        {
            "topic": topic.name,
            "partition": part.partition_index,
            "status": "Successful" if part.error_code is ErrorCode.none else "Error",
            "error": None if part.error_code is ErrorCode.none else part.error_code.name.upper(),
        }
        for topic in response.topics
        for part in topic.partitions
    ]
    print_rows(rows, ["topic", "partition", "status", "error"], args.output)
    failed = [row for row in rows if row["error"]]
    subscribed = any(row["error"] == "GROUP_SUBSCRIBED_TO_TOPIC" for row in failed)
    if subscribed and args.output == "table":
        print(
            f"{PROG}: group {args.group} has active members subscribed to these topics; "
            "stop its consumers first",
            file=sys.stderr,
        )
    return 1 if failed else 0


def parse_datetime(text: str) -> int:
    """Milliseconds since the epoch; naive times are UTC."""
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError as error:
        raise ToolError(
            f"--to-datetime {text!r} is not a date and time like 2024-05-01T12:00:00",
            exit_code=2,
        ) from error
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return int(moment.timestamp() * 1000)


_DURATION = re.compile(
    r"P(?:(?P<days>\d+)D)?(?:T(?:(?P<hours>\d+)H)?(?:(?P<minutes>\d+)M)?"
    r"(?:(?P<seconds>\d+(?:\.\d+)?)S)?)?",
    re.IGNORECASE,
)


def parse_duration_ms(text: str) -> int:
    """An ISO-8601 duration as Kafka's tool reads it (java.time.Duration: PnDTnHnMn.nS)."""
    match = _DURATION.fullmatch(text.strip())
    if match is None or text.strip().upper() in ("P", "PT"):
        raise ToolError(
            f"--by-duration {text!r} is not a duration like PT30M, PT2H or P1DT12H",
            exit_code=2,
        )
    parts = {k: float(v) for k, v in match.groupdict().items() if v}
    seconds = (
        parts.get("days", 0) * 86400
        + parts.get("hours", 0) * 3600
        + parts.get("minutes", 0) * 60
        + parts.get("seconds", 0)
    )
    return int(seconds * 1000)


def _read_plan_file(path: Path) -> dict[tuple[str, int], int]:
    """Kafka's --from-file CSV: TOPIC,PARTITION,OFFSET per line (its dry run's export)."""
    try:
        lines = path.read_text().splitlines()
    except OSError as error:
        raise ToolError(f"--from-file {path}: {error.strerror}", exit_code=2) from error
    plan: dict[tuple[str, int], int] = {}
    for number, fields in enumerate(csv.reader(lines), 1):
        if not fields or not "".join(fields).strip():
            continue
        try:
            topic, partition, offset = (field.strip() for field in fields)
            plan[(topic, int(partition))] = int(offset)
        except ValueError as error:
            raise ToolError(
                f"--from-file {path} line {number}: expected TOPIC,PARTITION,OFFSET",
                exit_code=2,
            ) from error
    return plan


def plan_reset(args: argparse.Namespace) -> list[tuple[str, int, int | None, int]]:
    """(topic, partition, current committed offset or None, new offset) per partition."""
    from confluent_kafka.admin import OffsetSpec

    client = admin(args.bootstrap_server)
    description = _describe_group(client, args.group)
    state = _state_name(description.state)
    if description.members or state not in ("Empty", "Dead"):
        raise ToolError(
            f"group {args.group} has {len(description.members)} active members (state "
            f"{state}); offsets can only be reset while the group is inactive: stop its "
            "consumers first"
        )
    committed = _committed(client, args.group)
    from_file = _read_plan_file(args.from_file) if args.from_file else None
    if from_file is not None:
        partitions = sorted(from_file)
        _topic_partitions(client, [f"{t}:{p}" for t, p in partitions])  # they must exist
    elif args.all_topics:
        partitions = sorted(committed)
    elif args.topic:
        partitions = _topic_partitions(client, args.topic)
    else:
        raise ToolError(
            "reset-offsets needs --topic, --all-topics or --from-file to say which "
            "partitions to reset",
            exit_code=2,
        )
    if not partitions:
        raise ToolError(f"group {args.group} has no committed offsets to reset")
    earliest = _list_offsets(client, partitions, OffsetSpec.earliest())
    latest = _list_offsets(client, partitions, OffsetSpec.latest())

    def clamp(key: tuple[str, int], offset: int) -> int:
        return min(max(offset, earliest[key]), latest[key])

    if args.to_earliest:
        targets = earliest
    elif args.to_latest:
        targets = latest
    elif args.to_current:
        targets = {key: committed.get(key, latest[key]) for key in partitions}
    elif args.to_offset is not None:
        targets = {key: clamp(key, args.to_offset) for key in partitions}
    elif args.shift_by is not None:
        missing = [f"{t}-{p}" for t, p in partitions if (t, p) not in committed]
        if missing:
            raise ToolError(
                f"cannot shift the offsets of {', '.join(missing)}: group {args.group} has "
                "no committed offset there (use --to-earliest or --to-offset)"
            )
        targets = {key: clamp(key, committed[key] + args.shift_by) for key in partitions}
    elif from_file is not None:
        targets = {key: clamp(key, from_file[key]) for key in partitions}
    else:
        if args.by_duration is not None:
            stamp = int(time.time() * 1000) - parse_duration_ms(args.by_duration)
        else:
            stamp = parse_datetime(args.to_datetime)
        found = _list_offsets(client, partitions, OffsetSpec.for_timestamp(stamp))
        # No message at or after the time: the end of the log, as Kafka's tool does.
        targets = {key: (found[key] if found[key] >= 0 else latest[key]) for key in partitions}
    return [(t, p, committed.get((t, p)), targets[(t, p)]) for t, p in partitions]


def _reset_offsets(args: argparse.Namespace) -> int:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    plan = plan_reset(args)
    rows = [
        {"group": args.group, "topic": t, "partition": p, "current_offset": cur, "new_offset": new}
        for t, p, cur, new in plan
    ]
    print_rows(rows, ["group", "topic", "partition", "current_offset", "new_offset"], args.output)
    if not args.execute:
        if args.output == "table":
            print("\ndry run: nothing changed; add --execute to commit these offsets")
        return 0
    client = admin(args.bootstrap_server)
    reset = ConsumerGroupTopicPartitions(
        args.group, [TopicPartition(t, p, new) for t, p, _, new in plan]
    )
    done = result(
        client.alter_consumer_group_offsets([reset])[args.group],
        f"group {args.group}: cannot commit the new offsets",
    )
    failed = [tp for tp in done.topic_partitions if tp.error is not None]
    if failed:
        for tp in failed:
            print(f"{PROG}: {tp.topic}-{tp.partition}: {tp.error.str()}", file=sys.stderr)
        return 1
    if args.output == "table":
        print(f"\ncommitted new offsets for {len(plan)} partitions of group {args.group}")
    return 0
