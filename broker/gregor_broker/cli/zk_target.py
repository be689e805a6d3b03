"""Which ZooKeeper an admin command talks to.

Admin commands (topics, reassign, leaders) write Kafka's ZooKeeper paths directly, as
Kafka's own tools did with ``--zookeeper``. The address comes from ``--zookeeper``,
else ``GREGOR_ZOOKEEPER``, else the local cluster started by ``gregor local up``.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kazoo.client import KazooClient

from gregor_broker.cluster.admin import ZkAdmin

DEFAULT_DATA_DIR = Path(".gregor")


class NoZooKeeper(RuntimeError):
    pass


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--zookeeper",
        metavar="HOST:PORT[/CHROOT]",
        help="the cluster's zookeeper.connect (default: $GREGOR_ZOOKEEPER, else the "
        "cluster 'gregor local up' started in --data-dir)",
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=DEFAULT_DATA_DIR,
        help="data dir of a local cluster, to find its ZooKeeper (default: ./.gregor)",
    )


def resolve(args: argparse.Namespace) -> str:
    if args.zookeeper:
        return args.zookeeper
    if os.environ.get("GREGOR_ZOOKEEPER"):
        return os.environ["GREGOR_ZOOKEEPER"]
    state_file = args.data_dir / "cluster.json"
    try:
        return json.loads(state_file.read_text())["zookeeper"]["connect"]
    except (OSError, KeyError, ValueError):
        raise NoZooKeeper(
            "no ZooKeeper given: pass --zookeeper HOST:PORT[/CHROOT], set GREGOR_ZOOKEEPER, "
            f"or start a local cluster with 'gregor local up' (looked for {state_file})"
        ) from None


@contextmanager
def connect(args: argparse.Namespace) -> Iterator[ZkAdmin]:
    client = KazooClient(hosts=resolve(args), timeout=10)
    client.start(timeout=10)
    try:
        yield ZkAdmin(client)
    finally:
        client.stop()
        client.close()
