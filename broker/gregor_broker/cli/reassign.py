"""``gregor reassign``: move partitions between brokers (like kafka-reassign-partitions).

``plan`` proposes new replica sets that move as little data as possible, ``execute``
starts the move (optionally throttled) and can wait for it with a progress bar, and
``verify`` reports progress and removes the throttles once everything has moved.
Plans use Kafka's JSON format, so plans from Kafka's tool work too.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from kazoo.exceptions import NodeExistsError

from gregor_broker.cli import zk_target
from gregor_broker.cluster.admin import ZkAdmin
from gregor_broker.cluster.models import PartitionReassignment
from gregor_broker.cluster.reassignment import plan_moves
from gregor_broker.replication.reassignment_throttles import (
    apply_throttles,
    remove_throttles,
)

Plan = dict[tuple[str, int], tuple[int, ...]]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "reassign",
        help="move partitions between brokers: plan, execute (throttled), verify",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.set_defaults(func=lambda args: parser.print_help() or 2)
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")

    plan = commands.add_parser(
        "plan",
        help="propose a plan that puts the topics' replicas on the given brokers",
        description="Print (or save) the current assignment and a proposed one in Kafka's "
        "JSON format. Replicas already on a listed broker stay put; the rest move to the "
        "least loaded listed brokers, on racks the partition does not use yet.",
    )
    zk_target.add_arguments(plan)
    plan.add_argument("--topics", required=True, help="comma-separated topic names")
    plan.add_argument("--brokers", required=True, help="comma-separated broker ids to use")
    plan.add_argument(
        "--replication-factor", type=int, help="change the replication factor too (default: keep)"
    )
    plan.add_argument("--output", type=Path, help="write the proposed plan to this file")
    plan.set_defaults(func=plan_command)

    execute = commands.add_parser(
        "execute",
        help="start moving partitions according to a plan file",
        description="Start the reassignment in a plan file. With --throttle, copying for the "
        "moving replicas is limited to that many bytes/s per broker until 'verify' sees the "
        "move finished. With --wait, show progress until done.",
    )
    zk_target.add_arguments(execute)
    execute.add_argument("--plan", type=Path, required=True, help="plan JSON (from 'plan')")
    execute.add_argument(
        "--throttle", type=int, metavar="BYTES_PER_S", help="replication throttle while moving"
    )
    execute.add_argument("--wait", action="store_true", help="wait and show a progress bar")
    execute.add_argument("--timeout", type=float, default=3600, help="seconds --wait waits")
    execute.set_defaults(func=execute_command)

    verify = commands.add_parser(
        "verify",
        help="report progress of a plan; remove the throttles once it is complete",
        description="Exit 0 when every partition of the plan has moved (and remove the "
        "throttles 'execute --throttle' set), 1 while any is still moving.",
    )
    zk_target.add_arguments(verify)
    verify.add_argument("--plan", type=Path, required=True, help="plan JSON")
    verify.set_defaults(func=verify_command)


def _parse_ids(text: str) -> list[int]:
    return [int(item) for item in text.split(",") if item.strip()]


def to_json(plan: Plan) -> str:
    return PartitionReassignment(plan).to_json().decode()


def read_plan(path: Path) -> Plan:
    return dict(PartitionReassignment.from_json(path.read_bytes()).partitions)


def current_assignment(admin: ZkAdmin, topics: list[str]) -> Plan:
    current: Plan = {}
    for topic in topics:
        assignment = admin.get_topic(topic)
        if assignment is None:
            raise SystemExit(f"gregor reassign: topic {topic!r} does not exist")
        for index, replicas in assignment.partitions.items():
            current[(topic, index)] = tuple(replicas)
    return current


def plan_command(args: argparse.Namespace) -> int:
    with zk_target.connect(args) as admin:
        topics = [t for t in args.topics.split(",") if t]
        current = current_assignment(admin, topics)
        registered = admin.list_brokers()
        wanted = _parse_ids(args.brokers)
        unknown = [b for b in wanted if b not in registered]
        if unknown:
            print(f"gregor reassign: brokers {unknown} are not registered", file=sys.stderr)
            return 2
        brokers = {b: registered[b].rack for b in wanted}
    try:
        proposed = plan_moves(current, brokers, args.replication_factor)
    except ValueError as error:
        print(f"gregor reassign: {error}", file=sys.stderr)
        return 2
    moved = sum(len(set(proposed[k]) - set(current[k])) for k in current)
    print(f"Current partition replica assignment\n{to_json(current)}\n")
    print(f"Proposed partition reassignment ({moved} replicas move)\n{to_json(proposed)}")
    if args.output:
        args.output.write_text(to_json(proposed) + "\n")
        print(
            f"\nSaved to {args.output}; start it with: gregor reassign execute --plan {args.output}"
        )
    return 0


def execute_command(args: argparse.Namespace) -> int:
    plan = read_plan(args.plan)
    with zk_target.connect(args) as admin:
        if admin.get_reassignment() is not None:
            print(
                "gregor reassign: a reassignment is already in progress; wait for it "
                "('gregor reassign verify') before starting another",
                file=sys.stderr,
            )
            return 1
        current = current_assignment(admin, sorted({t for t, _ in plan}))
        print(f"Current assignment (save it to roll back):\n{to_json(current)}\n")
        if args.throttle:
            apply_throttles(admin, plan, current, args.throttle)
            print(f"Throttle: {args.throttle} bytes/s per broker while moving.")
        try:
            admin.request_reassignment(PartitionReassignment(plan))
        except NodeExistsError:
            print("gregor reassign: a reassignment started meanwhile", file=sys.stderr)
            return 1
        print(f"Started moving {len(plan)} partitions.")
        if not args.wait:
            print(f"Check progress with: gregor reassign verify --plan {args.plan}")
            return 0
        return 0 if _wait(admin, plan, args.timeout) else 1


def _done(admin: ZkAdmin, plan: Plan) -> dict[tuple[str, int], bool]:
    status = {}
    for (topic, index), target in plan.items():
        assignment = admin.get_topic(topic)
        status[(topic, index)] = (
            assignment is not None
            and tuple(assignment.partitions.get(index, ())) == tuple(target)
            and index not in assignment.adding_replicas
            and index not in assignment.removing_replicas
        )
    return status


def _wait(admin: ZkAdmin, plan: Plan, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    width = 30
    while True:
        status = _done(admin, plan)
        finished = sum(status.values())
        filled = width * finished // max(len(plan), 1)
        sys.stderr.write(
            f"\r[{'#' * filled}{'.' * (width - filled)}] {finished}/{len(plan)} partitions moved"
        )
        sys.stderr.flush()
        if finished == len(plan):
            sys.stderr.write("\n")
            return True
        if time.monotonic() > deadline:
            sys.stderr.write("\n")
            print("gregor reassign: still moving when --timeout ran out", file=sys.stderr)
            return False
        time.sleep(0.5)


def verify_command(args: argparse.Namespace) -> int:
    plan = read_plan(args.plan)
    with zk_target.connect(args) as admin:
        status = _done(admin, plan)
        for (topic, index), complete in sorted(status.items()):
            state = "is complete" if complete else "is still in progress"
            print(f"Reassignment of partition {topic}-{index} {state}.")
        if not all(status.values()):
            return 1
        removed = remove_throttles(admin, {t for t, _ in plan})
        if removed:
            print("Throttles removed.")
    return 0


__all__ = ["register"]
