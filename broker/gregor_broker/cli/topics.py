"""``gregor topics``: create, alter, delete, list and describe topics (like kafka-topics).

``create``, ``alter`` and ``delete`` go through the Kafka API (``--bootstrap-server``), as
kafka-topics does, so the brokers validate them exactly as they validate any client's;
``list`` and ``describe`` read the cluster's ZooKeeper (``--zookeeper``), which also knows
reassignments in flight.
"""

from __future__ import annotations

import argparse
import sys

from gregor_broker.cli import broker_metrics, kafka_api, zk_target
from gregor_broker.cli.kafka_api import ToolError
from gregor_broker.cluster.admin import ZkAdmin


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "topics",
        help="list topics and show leaders, replicas and in-sync replicas",
        description="Topic information read from the cluster's ZooKeeper, like kafka-topics.",
    )
    parser.set_defaults(func=lambda args: parser.print_help() or 2)
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")

    create = commands.add_parser(
        "create",
        help="create a topic (kafka-topics --create)",
        description="Create a topic through the Kafka API (CreateTopics). Without "
        "--partitions/--replication-factor the brokers' num.partitions and "
        "default.replication.factor apply.",
        epilog="example: gregor topics create -b 127.0.0.1:9092 --topic orders --partitions 6 "
        "--replication-factor 3 --config retention.ms=86400000 --config cleanup.policy=compact",
    )
    kafka_api.add_bootstrap_argument(create)
    create.add_argument("--topic", required=True, help="the topic's name")
    create.add_argument("--partitions", type=int, default=-1, help="number of partitions")
    create.add_argument(
        "--replication-factor", type=int, default=-1, help="replicas of each partition"
    )
    create.add_argument(
        "--replica-assignment",
        metavar="B:B,B:B",
        help="brokers per partition, partitions separated by commas and replicas by colons "
        "(the first broker of each is the preferred leader), e.g. 1:2:3,2:3:1",
    )
    create.add_argument(
        "--config", action="append", metavar="KEY=VALUE", help="a topic config (repeatable)"
    )
    create.add_argument(
        "--if-not-exists", action="store_true", help="succeed if the topic already exists"
    )
    create.set_defaults(func=lambda args: kafka_api.run(create_topic, args, "gregor topics"))

    alter = commands.add_parser(
        "alter",
        help="add partitions to a topic (kafka-topics --alter)",
        description="Grow a topic to --partitions partitions (CreatePartitions); partitions "
        "never shrink. Change topic configs with 'gregor configs alter'.",
        epilog="example: gregor topics alter -b 127.0.0.1:9092 --topic orders --partitions 12",
    )
    kafka_api.add_bootstrap_argument(alter)
    alter.add_argument("--topic", required=True)
    alter.add_argument("--partitions", type=int, required=True, help="the new partition count")
    alter.add_argument(
        "--replica-assignment",
        metavar="B:B,B:B",
        help="brokers of each NEW partition, as for create",
    )
    alter.set_defaults(func=lambda args: kafka_api.run(alter_topic, args, "gregor topics"))

    delete = commands.add_parser(
        "delete",
        help="delete topics (kafka-topics --delete)",
        description="Delete topics through the Kafka API (DeleteTopics).",
        epilog="example: gregor topics delete -b 127.0.0.1:9092 --topic orders",
    )
    kafka_api.add_bootstrap_argument(delete)
    delete.add_argument("--topic", action="append", required=True, help="(repeatable)")
    delete.add_argument("--if-exists", action="store_true", help="succeed for missing topics")
    delete.set_defaults(func=lambda args: kafka_api.run(delete_topics, args, "gregor topics"))

    list_parser = commands.add_parser(
        "list", help="print every topic name", epilog="example: gregor topics list"
    )
    zk_target.add_arguments(list_parser)
    kafka_api.add_output_argument(list_parser)
    list_parser.set_defaults(func=list_topics)

    describe = commands.add_parser(
        "describe",
        help="per partition: leader, replicas, ISR; flags offline and under-replicated ones",
        description=(
            "Show each partition's leader, leader epoch, replicas and in-sync replicas (ISR). "
            "A partition is OFFLINE when it has no live leader and UNDER-REPLICATED when its "
            "ISR is smaller than its replica set. Exits 1 when any shown partition is offline. "
            "Compacted partitions show their DirtyRatio (the share of the log the cleaner "
            "has not cleaned yet, as it chooses by it) when the brokers' metrics endpoints "
            "are known (--metrics-port, or the local cluster)."
        ),
    )
    zk_target.add_arguments(describe)
    broker_metrics.add_arguments(describe)
    describe.add_argument("--topic", action="append", help="only this topic (repeatable)")
    describe.add_argument(
        "--under-replicated",
        "--under-replicated-partitions",
        action="store_true",
        help="only under-replicated partitions",
    )
    describe.add_argument(
        "--offline",
        "--unavailable-partitions",
        action="store_true",
        help="only offline partitions (no live leader)",
    )
    describe.add_argument(
        "--at-min-isr-partitions",
        action="store_true",
        help="only partitions whose ISR is exactly the topic's min.insync.replicas",
    )
    describe.add_argument(
        "--topics-with-overrides",
        action="store_true",
        help="only topics with config overrides (their overrides are printed)",
    )
    kafka_api.add_output_argument(describe)
    describe.epilog = (
        "examples: gregor topics describe --topic orders --under-replicated-partitions; "
        "gregor topics describe --topic accounts --metrics-port 9404"
    )
    describe.set_defaults(func=describe_topics)


def parse_replica_assignment(text: str | None) -> list[list[int]] | None:
    """Kafka's ``--replica-assignment`` syntax: ``1:2:3,2:3:1`` -> ``[[1,2,3],[2,3,1]]``."""
    if not text:
        return None
    try:
        return [[int(b) for b in part.split(":")] for part in text.split(",")]
    except ValueError as error:
        raise ToolError(
            f"--replica-assignment {text!r}: expected broker ids like 1:2:3,2:3:1", exit_code=2
        ) from error


def create_topic(args: argparse.Namespace) -> int:
    from confluent_kafka.admin import NewTopic

    assignment = parse_replica_assignment(args.replica_assignment)
    configs = kafka_api.parse_configs(args.config, "--config")
    if assignment is not None:
        if args.partitions not in (-1, len(assignment)) or args.replication_factor != -1:
            raise ToolError(
                "--replica-assignment sets the partitions and replicas: leave out "
                "--partitions/--replication-factor",
                exit_code=2,
            )
        new = NewTopic(args.topic, len(assignment), replica_assignment=assignment, config=configs)
    else:
        new = NewTopic(
            args.topic,
            num_partitions=args.partitions,
            replication_factor=args.replication_factor,
            config=configs,
        )
    client = kafka_api.admin(args.bootstrap_server)
    future = client.create_topics([new], request_timeout=kafka_api.TIMEOUT_S)[args.topic]
    try:
        kafka_api.result(future, f"Topic {args.topic}")
    except ToolError as error:
        if args.if_not_exists and "already exists" in str(error).lower():
            return 0
        raise
    print(f"Created topic {args.topic}.")
    return 0


def alter_topic(args: argparse.Namespace) -> int:
    from confluent_kafka.admin import NewPartitions

    assignment = parse_replica_assignment(args.replica_assignment)
    client = kafka_api.admin(args.bootstrap_server)
    if assignment is None:
        request = NewPartitions(args.topic, args.partitions)
    else:
        request = NewPartitions(args.topic, args.partitions, replica_assignment=assignment)
    future = client.create_partitions([request], request_timeout=kafka_api.TIMEOUT_S)[args.topic]
    kafka_api.result(future, f"Topic {args.topic}")
    print(f"Topic {args.topic} now has {args.partitions} partitions.")
    return 0


def delete_topics(args: argparse.Namespace) -> int:
    client = kafka_api.admin(args.bootstrap_server)
    futures = client.delete_topics(args.topic, operation_timeout=kafka_api.TIMEOUT_S)
    failed = False
    for name, future in futures.items():
        try:
            kafka_api.result(future, f"Topic {name}")
            print(f"Deleted topic {name}.")
        except ToolError as error:
            if args.if_exists and "unknown topic" in str(error).lower():
                continue
            print(f"gregor topics: {error}", file=sys.stderr)
            failed = True
    return 1 if failed else 0


def list_topics(args: argparse.Namespace) -> int:
    try:
        with zk_target.connect(args) as admin:
            names = sorted(admin.list_topics())
    except zk_target.NoZooKeeper as error:
        print(f"gregor topics: {error}", file=sys.stderr)
        return 2
    if args.output == "json":
        kafka_api.print_rows([{"topic": name} for name in names], ["topic"], "json")
    else:
        for name in names:
            print(name)
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
            overrides = {topic: admin.get_topic_config(topic) for topic in topics}
            rows = partition_rows(admin, topics)
            metrics_urls = broker_metrics.endpoints(args, admin.list_brokers())
    except zk_target.NoZooKeeper as error:
        print(f"gregor topics: {error}", file=sys.stderr)
        return 2
    ratios = broker_metrics.dirty_ratios(
        metrics_urls, (((r["topic"], r["partition"]), r["leader"]) for r in rows)
    )
    for row in rows:
        # The broker default (min.insync.replicas) is not in ZooKeeper: Kafka's default, 1,
        # unless the topic overrides it.
        min_isr = int(overrides[row["topic"]].get("min.insync.replicas", "1"))
        row["at_min_isr"] = len(row["isr"]) == min_isr
        row["configs"] = overrides[row["topic"]]
        row["dirty_ratio"] = ratios.get((row["topic"], row["partition"]))
    if args.under_replicated:
        rows = [r for r in rows if r["under_replicated"]]
    if args.offline:
        rows = [r for r in rows if r["offline"]]
    if args.at_min_isr_partitions:
        rows = [r for r in rows if r["at_min_isr"]]
    if args.topics_with_overrides:
        rows = [r for r in rows if r["configs"]]
    if args.output == "json":
        kafka_api.print_rows(rows, [], "json")
        return 1 if any(r["offline"] for r in rows) else 0
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
            f"Isr: {','.join(map(str, row['isr']))}"
            + (f"\tDirtyRatio: {row['dirty_ratio']:.2f}" if row["dirty_ratio"] is not None else "")
            + (f"\t{' '.join(flags)}" if flags else "")
            + (
                "\tConfigs: " + ",".join(f"{k}={v}" for k, v in sorted(row["configs"].items()))
                if args.topics_with_overrides
                else ""
            )
        )
    return 1 if any(r["offline"] for r in rows) else 0
