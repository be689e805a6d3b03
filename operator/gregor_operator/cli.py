"""``gregor-operator``: run the operator, or print a rebalancing plan.

gregor-operator run --zookeeper-connect zk:2181/gregor --http-port 8080
gregor-operator plan --zookeeper-connect 127.0.0.1:2181 --mode remove-brokers --brokers 4,5
"""

from __future__ import annotations

import argparse
import json
import logging
import sys

EXAMPLES = """\
examples:
  gregor-operator run --http-port 8080
  gregor-operator run --zookeeper-connect 127.0.0.1:2181 --namespace kafka
  gregor-operator plan --zookeeper-connect 127.0.0.1:2181 --mode full
  gregor-operator plan --zookeeper-connect 127.0.0.1:2181 --mode remove-brokers --brokers 3,4
  gregor-operator plan --zookeeper-connect 127.0.0.1:2181 --mode add-brokers --brokers 5 --json
"""


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="gregor-operator",
        description="Gregor's Kubernetes operator (docs/operator.md).",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = top.add_subparsers(dest="command", metavar="COMMAND", required=True)
    run = commands.add_parser(
        "run",
        help="reconcile Topic, Quota, GregorCluster and GregorRebalance resources",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument(
        "--zookeeper-connect",
        help="ZooKeeper of resources without spec.cluster (host:port[/chroot])",
    )
    run.add_argument(
        "--namespace", action="append", default=[], help="watch only these (default: all)"
    )
    run.add_argument("--http-port", type=int, default=8080, help="/healthz and /metrics (0: off)")
    run.add_argument(
        "--status-interval", type=float, default=10.0, help="seconds between status refreshes"
    )
    run.add_argument(
        "--kube-server", help="API server URL without authentication (tests); default: kubeconfig"
    )
    run.add_argument("--verbose", action="store_true")
    plan = commands.add_parser(
        "plan",
        help="print the rebalancing plan GregorRebalance would show",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    plan.add_argument("--zookeeper-connect", required=True, help="host:port[/chroot]")
    plan.add_argument(
        "--mode",
        default="full",
        choices=("full", "add-brokers", "remove-brokers", "preferred-leaders"),
    )
    plan.add_argument("--brokers", default="", help="comma-separated broker ids")
    plan.add_argument("--exclude-topics", default="", help="comma-separated topics to leave")
    plan.add_argument("--json", action="store_true", help="print the plan as JSON")
    return top


def plan_command(args: argparse.Namespace) -> int:
    from gregor_broker.cluster.admin import ZkAdmin
    from gregor_broker.devtools.local_cluster import zookeeper_client
    from gregor_operator.planners.rebalance import PlanRefused
    from gregor_operator.rebalancing import (
        compute_plan,
        describe,
        partition_sizes,
        read_cluster,
        replica_sizes,
    )

    brokers = [int(b) for b in args.brokers.split(",") if b.strip()]
    excluded = [t for t in args.exclude_topics.split(",") if t.strip()]
    client = zookeeper_client(args.zookeeper_connect)
    try:
        admin = ZkAdmin(client)
        view = read_cluster(admin, excluded)
        sizes = partition_sizes(replica_sizes(admin))
    finally:
        client.stop()
        client.close()
    try:
        plan = compute_plan(view, args.mode, brokers)
    except PlanRefused as refusal:
        print(f"gregor-operator plan: refused: {refusal}", file=sys.stderr)
        return 2
    info = describe(view, args.mode, plan, sizes)
    if args.json:
        print(json.dumps(info, indent=2, sort_keys=True))
        return 0
    print(
        f"Plan ({args.mode}): {info['partitionsMoving']} partitions move, "
        f"{info['replicaMoves']} replicas"
    )
    for move in info["moves"]:
        print(f"  {move['topic']}-{move['partition']}: {move['from']} -> {move['to']}")
    print("Replicas per broker after:", info["replicasPerBroker"])
    print("Leaders per broker after: ", info["leadersPerBroker"])
    print("Replicas per rack after:  ", info["replicasPerRack"])
    for partition in info.get("preferredLeaderElections", []):
        print(f"  preferred leader election: {partition}")
    return 0


def run_command(args: argparse.Namespace) -> int:
    from gregor_operator.handlers.common import OperatorConfig
    from gregor_operator.operator import run

    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    run(
        OperatorConfig(
            zookeeper_connect=args.zookeeper_connect,
            kube_server=args.kube_server,
            status_interval=args.status_interval,
            http_port=args.http_port,
            namespaces=tuple(args.namespace),
        )
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.command == "plan":
        return plan_command(args)
    return run_command(args)


if __name__ == "__main__":
    raise SystemExit(main())
