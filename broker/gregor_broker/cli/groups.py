"""``gregor groups``: list, describe, delete consumer groups and reset their offsets.

Like Kafka's ``kafka-consumer-groups.sh``, it talks to the brokers with the Kafka
protocol (confluent-kafka's AdminClient: ListGroups, DescribeGroups, OffsetFetch,
ListOffsets, OffsetCommit, DeleteGroups), so it shows exactly what clients see. Lag is
the partition's end offset (high watermark) minus the group's committed offset.
"""

from __future__ import annotations

import argparse
import datetime
import sys
from dataclasses import dataclass
from typing import Any

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
TIMEOUT_S = 15.0


class GroupsError(Exception):
    """A failure to report to the user as one line, exit code 1."""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    groups = subparsers.add_parser(
        "groups",
        help="list, describe and delete consumer groups; reset their offsets",
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
    common.add_argument(
        "--bootstrap-server",
        "-b",
        default=DEFAULT_BOOTSTRAP,
        metavar="HOST:PORT",
        help=f"any broker of the cluster (default: {DEFAULT_BOOTSTRAP})",
    )

    listing = commands.add_parser(
        "list",
        parents=[common],
        help="list the consumer groups of the cluster",
        description="List every consumer group the cluster's coordinators know, with its state.",
        epilog="example: gregor groups list -b 127.0.0.1:9092",
    )
    listing.set_defaults(func=_list)

    describe = commands.add_parser(
        "describe",
        parents=[common],
        help="show a group's members, assignments, committed offsets and lag",
        description=(
            "For each partition the group has committed an offset for or is assigned: the "
            "committed offset, the partition's end offset, the lag, and the member that "
            "consumes it. Then the members, with their client id, host and assignment."
        ),
        epilog="example: gregor groups describe orders-service -b 127.0.0.1:9092",
    )
    describe.add_argument("group", help="the group id (the consumers' group.id)")
    describe.set_defaults(func=_describe)

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
    delete.set_defaults(func=_delete)

    reset = commands.add_parser(
        "reset-offsets",
        parents=[common],
        help="move a group's committed offsets (dry run unless --execute)",
        description=(
            "Plan new committed offsets for a group and, with --execute, commit them. "
            "Without --execute nothing changes: the plan is only printed. The group must "
            "have no active members (stop its consumers first), as with Kafka's tool."
        ),
        epilog=(
            "examples:\n"
            "  gregor groups reset-offsets billing --topic invoices --to-earliest\n"
            "  gregor groups reset-offsets billing --topic invoices:0,1 --to-offset 42 --execute\n"
            "  gregor groups reset-offsets billing --all-topics "
            "--to-datetime 2024-05-01T12:00:00 --execute"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    reset.add_argument("group", help="the group id")
    which = reset.add_mutually_exclusive_group(required=True)
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
    target.add_argument("--to-offset", type=int, metavar="N", help="offset N (clamped to the log)")
    target.add_argument(
        "--to-datetime",
        metavar="YYYY-MM-DDTHH:MM:SS[.mmm][+ZONE]",
        help="the first message at or after this time (UTC unless a zone is given)",
    )
    reset.add_argument(
        "--execute", action="store_true", help="commit the new offsets (default: dry run)"
    )
    reset.set_defaults(func=_reset_offsets)


def _print_help(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 0


# -- the client side -------------------------------------------------------------------------


def _admin(bootstrap: str) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})


def _result(future: Any, what: str) -> Any:
    from confluent_kafka import KafkaException

    try:
        return future.result(TIMEOUT_S)
    except KafkaException as error:
        raise GroupsError(f"{what}: {error.args[0].str() if error.args else error}") from error
    except TimeoutError as error:
        raise GroupsError(f"{what}: no answer from the brokers within {TIMEOUT_S:.0f} s") from error


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


def _committed(admin: Any, group: str) -> dict[tuple[str, int], int]:
    from confluent_kafka import ConsumerGroupTopicPartitions

    future = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group]
    result = _result(future, f"group {group}: cannot read committed offsets")
    return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions if tp.offset >= 0}


def _list_offsets(admin: Any, partitions: list[tuple[str, int]], spec: Any) -> dict:
    from confluent_kafka import TopicPartition

    if not partitions:
        return {}
    futures = admin.list_offsets({TopicPartition(t, p): spec for t, p in partitions})
    found = {}
    for tp, future in futures.items():
        info = _result(future, f"partition {tp.topic}-{tp.partition}: cannot list offsets")
        found[(tp.topic, tp.partition)] = info.offset
    return found


def _describe_group(admin: Any, group: str) -> Any:
    return _result(admin.describe_consumer_groups([group])[group], f"group {group}")


def _state_name(state: Any) -> str:
    name = getattr(state, "name", str(state))
    return {
        "STABLE": "Stable",
        "EMPTY": "Empty",
        "DEAD": "Dead",
        "PREPARING_REBALANCING": "PreparingRebalance",
        "COMPLETING_REBALANCING": "CompletingRebalance",
    }.get(name, name.title())


def _table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    for row in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    return "\n".join(lines)


def describe_rows(bootstrap: str, group: str) -> tuple[Any, list[PartitionRow]]:
    """The group's description and one row per partition (for the command and tests)."""
    from confluent_kafka.admin import OffsetSpec

    admin = _admin(bootstrap)
    description = _describe_group(admin, group)
    owners: dict[tuple[str, int], str] = {}
    for member in description.members:
        assignment = member.assignment.topic_partitions if member.assignment else []
        for tp in assignment:
            owners[(tp.topic, tp.partition)] = member.member_id
    committed = _committed(admin, group)
    partitions = sorted(set(committed) | set(owners))
    ends = _list_offsets(admin, partitions, OffsetSpec.latest())
    rows = [
        PartitionRow(t, p, committed.get((t, p)), ends.get((t, p)), owners.get((t, p), "-"))
        for t, p in partitions
    ]
    return description, rows


# -- commands ----------------------------------------------------------------------------


def _run(command: Any, args: argparse.Namespace) -> int:
    try:
        return command(args)
    except GroupsError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1


def _list(args: argparse.Namespace) -> int:
    def run(args: argparse.Namespace) -> int:
        admin = _admin(args.bootstrap_server)  # must outlive the future
        result = _result(admin.list_consumer_groups(), "listing groups")
        rows = sorted(
            [
                g.group_id,
                _state_name(g.state),
                "consumer" if g.is_simple_consumer_group is False else "simple",
            ]
            for g in result.valid
        )
        if not rows:
            print("no consumer groups")
            return 0
        print(_table(["GROUP", "STATE", "TYPE"], rows))
        return 0

    return _run(run, args)


def _describe(args: argparse.Namespace) -> int:
    def run(args: argparse.Namespace) -> int:
        description, rows = describe_rows(args.bootstrap_server, args.group)
        state = _state_name(description.state)
        if state == "Dead" and not rows:
            raise GroupsError(f"group {args.group} does not exist")
        print(
            f"Group {args.group}: state {state}, {len(description.members)} members, "
            f"assignor {description.partition_assignor or '-'}, coordinator "
            f"{description.coordinator.id if description.coordinator else '-'}"
        )
        print()
        print(
            _table(
                ["TOPIC", "PARTITION", "COMMITTED-OFFSET", "END-OFFSET", "LAG", "MEMBER"],
                [
                    [
                        r.topic,
                        str(r.partition),
                        "-" if r.committed is None else str(r.committed),
                        "-" if r.end is None else str(r.end),
                        "-" if r.lag is None else str(r.lag),
                        r.member,
                    ]
                    for r in rows
                ],
            )
        )
        if description.members:
            print()
            member_rows = []
            for m in description.members:
                tps = m.assignment.topic_partitions if m.assignment else []
                assigned = ",".join(f"{tp.topic}-{tp.partition}" for tp in tps) or "-"
                member_rows.append(
                    [m.member_id, m.group_instance_id or "-", m.client_id, m.host, assigned]
                )
            print(_table(["MEMBER", "INSTANCE", "CLIENT-ID", "HOST", "ASSIGNMENT"], member_rows))
        return 0

    return _run(run, args)


def _delete(args: argparse.Namespace) -> int:
    def run(args: argparse.Namespace) -> int:
        admin = _admin(args.bootstrap_server)  # must outlive the futures
        futures = admin.delete_consumer_groups(args.groups)
        failures = 0
        for group, future in futures.items():
            try:
                _result(future, f"group {group}")
                print(f"deleted group {group}")
            except GroupsError as error:
                failures += 1
                message = str(error)
                if "NON_EMPTY_GROUP" in message or "not empty" in message.lower():
                    message = f"group {group} still has active members; stop its consumers first"
                print(f"error: {message}", file=sys.stderr)
        return 1 if failures else 0

    return _run(run, args)


def parse_datetime(text: str) -> int:
    """Milliseconds since the epoch; naive times are UTC."""
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError as error:
        raise GroupsError(
            f"--to-datetime {text!r} is not a date and time like 2024-05-01T12:00:00"
        ) from error
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return int(moment.timestamp() * 1000)


def _partitions_to_reset(
    admin: Any, args: argparse.Namespace, committed: dict[tuple[str, int], int]
) -> list[tuple[str, int]]:
    if args.all_topics:
        return sorted(committed)
    chosen: list[tuple[str, int]] = []
    topics = _result_metadata(admin)
    for spec in args.topic:
        name, _, parts = spec.partition(":")
        if name not in topics:
            raise GroupsError(f"topic {name} does not exist")
        if parts:
            try:
                wanted = [int(p) for p in parts.split(",")]
            except ValueError as error:
                raise GroupsError(f"--topic {spec}: partitions must be numbers") from error
            missing = [p for p in wanted if p not in topics[name]]
            if missing:
                raise GroupsError(f"topic {name} has no partitions {missing}")
        else:
            wanted = sorted(topics[name])
        chosen += [(name, p) for p in wanted]
    return chosen


def _result_metadata(admin: Any) -> dict[str, set[int]]:
    metadata = admin.list_topics(timeout=TIMEOUT_S)
    return {name: set(topic.partitions) for name, topic in metadata.topics.items()}


def plan_reset(args: argparse.Namespace) -> list[tuple[str, int, int | None, int]]:
    """(topic, partition, current committed offset or None, new offset) per partition."""
    from confluent_kafka.admin import OffsetSpec

    admin = _admin(args.bootstrap_server)
    description = _describe_group(admin, args.group)
    state = _state_name(description.state)
    if description.members or state not in ("Empty", "Dead"):
        raise GroupsError(
            f"group {args.group} has {len(description.members)} active members (state "
            f"{state}); offsets can only be reset while the group is inactive: stop its "
            "consumers first"
        )
    committed = _committed(admin, args.group)
    partitions = _partitions_to_reset(admin, args, committed)
    if not partitions:
        raise GroupsError(f"group {args.group} has no committed offsets to reset")
    earliest = _list_offsets(admin, partitions, OffsetSpec.earliest())
    latest = _list_offsets(admin, partitions, OffsetSpec.latest())
    if args.to_earliest:
        targets = earliest
    elif args.to_latest:
        targets = latest
    elif args.to_offset is not None:
        targets = {key: min(max(args.to_offset, earliest[key]), latest[key]) for key in partitions}
    else:
        found = _list_offsets(
            admin, partitions, OffsetSpec.for_timestamp(parse_datetime(args.to_datetime))
        )
        # No message at or after the time: the end of the log, as Kafka's tool does.
        targets = {key: (found[key] if found[key] >= 0 else latest[key]) for key in partitions}
    return [(t, p, committed.get((t, p)), targets[(t, p)]) for t, p in partitions]


def _reset_offsets(args: argparse.Namespace) -> int:
    def run(args: argparse.Namespace) -> int:
        from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

        plan = plan_reset(args)
        print(
            _table(
                ["TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"],
                [
                    [t, str(p), "-" if current is None else str(current), str(new)]
                    for t, p, current, new in plan
                ],
            )
        )
        if not args.execute:
            print("\ndry run: nothing changed; add --execute to commit these offsets")
            return 0
        admin = _admin(args.bootstrap_server)
        request = ConsumerGroupTopicPartitions(
            args.group, [TopicPartition(t, p, new) for t, p, _, new in plan]
        )
        result = _result(
            admin.alter_consumer_group_offsets([request])[args.group],
            f"group {args.group}: cannot commit the new offsets",
        )
        failed = [tp for tp in result.topic_partitions if tp.error is not None]
        if failed:
            for tp in failed:
                print(f"error: {tp.topic}-{tp.partition}: {tp.error.str()}", file=sys.stderr)
            return 1
        print(f"\ncommitted new offsets for {len(plan)} partitions of group {args.group}")
        return 0

    return _run(run, args)
