"""``gregor leaders elect --preferred``: give partitions back to their preferred leader.

The preferred leader is a partition's first replica. This asks the controller, through
``/admin/preferred_replica_election`` (as kafka-leader-election did with ZooKeeper), to
move leadership where the preferred replica is live and in sync.
"""

from __future__ import annotations

import argparse
import sys
import time

from kazoo.exceptions import NodeExistsError

from gregor_broker.cli import zk_target
from gregor_broker.cli.topics import partition_rows


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "leaders",
        help="preferred leader election",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.set_defaults(func=lambda args: parser.print_help() or 2)
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")
    elect = commands.add_parser(
        "elect",
        help="move leadership to preferred replicas",
        description="Elect the preferred replica (the first in the assignment) as leader of "
        "every partition not led by it, or only of --topic/--partition. Exits 1 when some "
        "partition could not be moved (its preferred replica is down or out of sync).",
    )
    zk_target.add_arguments(elect)
    elect.add_argument(
        "--preferred",
        action="store_true",
        required=True,
        help="preferred leader election (the only kind; unclean elections are a topic config)",
    )
    elect.add_argument("--topic", help="only this topic")
    elect.add_argument("--partition", type=int, help="only this partition (needs --topic)")
    elect.add_argument("--timeout", type=float, default=30, help="seconds to wait (default 30)")
    elect.set_defaults(func=elect_command)


def elect_command(args: argparse.Namespace) -> int:
    if args.partition is not None and not args.topic:
        print("gregor leaders: --partition needs --topic", file=sys.stderr)
        return 2
    with zk_target.connect(args) as admin:
        topics = [args.topic] if args.topic else sorted(admin.list_topics())
        rows = [
            r
            for r in partition_rows(admin, topics)
            if args.partition is None or r["partition"] == args.partition
        ]
        wanted = [(r["topic"], r["partition"]) for r in rows if r["leader"] != r["replicas"][0]]
        if not wanted:
            print("Every partition is already led by its preferred replica.")
            return 0
        try:
            admin.request_preferred_replica_election(wanted)
        except NodeExistsError:
            print("gregor leaders: another election is pending; try again shortly", file=sys.stderr)
            return 1
        deadline = time.monotonic() + args.timeout
        while time.monotonic() < deadline:
            rows = {(r["topic"], r["partition"]): r for r in partition_rows(admin, topics)}
            if all(rows[k]["leader"] == rows[k]["replicas"][0] for k in wanted):
                break
            time.sleep(0.3)
        failed = 0
        for key in wanted:
            row = rows[key] if isinstance(rows, dict) else None
            ok = row is not None and row["leader"] == row["replicas"][0]
            failed += not ok
            print(
                f"{key[0]}-{key[1]}: leader {row['leader'] if row else '?'}"
                + ("" if ok else " (preferred replica not live and in sync)")
            )
    return 1 if failed else 0
