"""``gregor topics``: list topics and describe their partitions (like kafka-topics)."""

from __future__ import annotations

import argparse
import sys

from gregor_broker.cli import zk_target
from gregor_broker.cluster.admin import ZkAdmin


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "topics",
        help="list topics and show leaders, replicas and in-sync replicas",
        description="Topic information read from the cluster's ZooKeeper, like kafka-topics.",
    )
    parser.set_defaults(func=lambda args: parser.print_help() or 2)
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")

    list_parser = commands.add_parser("list", help="print every topic name")
    zk_target.add_arguments(list_parser)
    list_parser.set_defaults(func=list_topics)

    describe = commands.add_parser(
        "describe",
        help="per partition: leader, replicas, ISR; flags offline and under-replicated ones",
        description=(
            "Show each partition's leader, leader epoch, replicas and in-sync replicas (ISR). "
            "A partition is OFFLINE when it has no live leader and UNDER-REPLICATED when its "
            "ISR is smaller than its replica set. Exits 1 when any shown partition is offline."
        ),
    )
    zk_target.add_arguments(describe)
    describe.add_argument("--topic", action="append", help="only this topic (repeatable)")
    describe.add_argument(
        "--under-replicated", action="store_true", help="only under-replicated partitions"
    )
    describe.add_argument("--offline", action="store_true", help="only offline partitions")
    describe.set_defaults(func=describe_topics)


def list_topics(args: argparse.Namespace) -> int:
    try:
        with zk_target.connect(args) as admin:
            for name in sorted(admin.list_topics()):
                print(name)
    except zk_target.NoZooKeeper as error:
        print(f"gregor topics: {error}", file=sys.stderr)
        return 2
    return 0


def partition_rows(admin: ZkAdmin, topics: list[str]) -> list[dict]:
    live = set(admin.list_brokers())
    rows = []
    for topic in topics:
        assignment = admin.get_topic(topic)
        if assignment is None:
            continue
        for index in sorted(assignment.partitions):
            replicas = list(assignment.partitions[index])
            found = admin.get_partition_state(topic, index)
            leader, epoch, isr = (-1, -1, [])
            if found is not None:
                state = found[0]
                leader, epoch, isr = state.leader, state.leader_epoch, list(state.isr)
            rows.append(
                {
                    "topic": topic,
                    "partition": index,
                    "leader": leader,
                    "leader_epoch": epoch,
                    "replicas": replicas,
                    "isr": isr,
                    "offline": leader < 0 or leader not in live,
                    "under_replicated": len(isr) < len(replicas),
                    "adding": list(assignment.adding_replicas.get(index, ())),
                    "removing": list(assignment.removing_replicas.get(index, ())),
                }
            )
    return rows


def describe_topics(args: argparse.Namespace) -> int:
    try:
        with zk_target.connect(args) as admin:
            topics = args.topic or sorted(admin.list_topics())
            rows = partition_rows(admin, topics)
    except zk_target.NoZooKeeper as error:
        print(f"gregor topics: {error}", file=sys.stderr)
        return 2
    if args.under_replicated:
        rows = [r for r in rows if r["under_replicated"]]
    if args.offline:
        rows = [r for r in rows if r["offline"]]
    for row in rows:
        flags = []
        if row["offline"]:
            flags.append("OFFLINE")
        if row["under_replicated"]:
            flags.append("UNDER-REPLICATED")
        if row["adding"] or row["removing"]:
            flags.append(f"REASSIGNING(+{row['adding']} -{row['removing']})")
        print(
            f"Topic: {row['topic']}\tPartition: {row['partition']}\tLeader: {row['leader']}\t"
            f"Epoch: {row['leader_epoch']}\tReplicas: {','.join(map(str, row['replicas']))}\t"
            f"Isr: {','.join(map(str, row['isr']))}" + (f"\t{' '.join(flags)}" if flags else "")
        )
    return 1 if any(r["offline"] for r in rows) else 0
