"""Reading the brokers' Prometheus endpoints (``metrics.port``) from the command line.

Some of what a tool shows is carried by no Kafka API: the log cleaner's dirty ratio of a
partition is one (Kafka exports only the maximum, as ``max-dirty-percent``). Rather than
invent a wire field, the broker exports it as the gauge
``gregor_log_cleaner_dirty_ratio{topic,partition}`` and the tool reads the gauge of the
partition's leader.

Where a broker's endpoint is: ``--metrics-port`` (every broker's ``metrics.port``, the
shape of a Kubernetes deployment, where every pod uses the same port; the host is the one
the broker registered), else ``GREGOR_METRICS_PORT``, else the ports the local cluster of
``gregor local up`` recorded in its ``cluster.json`` when that is the cluster asked about.
Nothing is read when none of these is known.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping

from prometheus_client.parser import text_string_to_metric_families

from gregor_broker.cli import zk_target
from gregor_broker.cluster.models import BrokerRegistration

DIRTY_RATIO = "gregor_log_cleaner_dirty_ratio"
SCRAPE_TIMEOUT_S = 5.0

Key = tuple[str, int]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--metrics-port",
        type=int,
        metavar="PORT",
        help="every broker's metrics.port, to read what only the brokers' /metrics shows "
        "(the dirty ratio of compacted partitions); default: $GREGOR_METRICS_PORT, else "
        "the ports of the local cluster",
    )


def _host(registration: BrokerRegistration) -> str | None:
    if registration.host:
        return registration.host
    for endpoint in registration.endpoints:  # "LISTENER://host:port"
        host = endpoint.split("://", 1)[-1].rsplit(":", 1)[0].strip("[]")
        if host:
            return host
    return None


def endpoints(
    args: argparse.Namespace, brokers: Mapping[int, BrokerRegistration]
) -> dict[int, str]:
    """broker id -> its /metrics URL, for the brokers whose endpoint is known."""
    port = args.metrics_port
    if port is None and os.environ.get("GREGOR_METRICS_PORT"):
        port = int(os.environ["GREGOR_METRICS_PORT"])
    if port is not None:
        found = {}
        for broker, registration in brokers.items():
            host = _host(registration)
            if host:
                found[broker] = f"http://{host}:{port}/metrics"
        return found
    return _local_cluster_endpoints(args)


def _local_cluster_endpoints(args: argparse.Namespace) -> dict[int, str]:
    """The endpoints ``gregor local up`` recorded, when its ZooKeeper is the one asked."""
    try:
        state = json.loads((args.data_dir / "cluster.json").read_text())
        if state["zookeeper"]["connect"] != zk_target.resolve(args):
            return {}
        return {
            int(broker["id"]): f"http://{broker['host']}:{broker['metrics_port']}/metrics"
            for broker in state["brokers"]
            if broker.get("metrics_port")
        }
    except (OSError, KeyError, TypeError, ValueError, zk_target.NoZooKeeper):
        return {}


def scrape(url: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """The samples of metric ``name`` at ``url``: sorted label pairs -> value."""
    with urllib.request.urlopen(url, timeout=SCRAPE_TIMEOUT_S) as response:
        text = response.read().decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                samples[tuple(sorted(sample.labels.items()))] = sample.value
    return samples


def dirty_ratios(urls: Mapping[int, str], leaders: Iterable[tuple[Key, int]]) -> dict[Key, float]:
    """Each partition's dirty ratio as its leader exports it (compacted logs only). A
    broker that does not answer is named on stderr; its partitions are left out."""
    wanted: dict[int, set[Key]] = {}
    for key, leader in leaders:
        if leader in urls:
            wanted.setdefault(leader, set()).add(key)
    found: dict[Key, float] = {}
    for broker, keys in sorted(wanted.items()):
        try:
            samples = scrape(urls[broker], DIRTY_RATIO)
        except (OSError, urllib.error.URLError, ValueError) as error:
            print(
                f"gregor: cannot read the metrics of broker {broker} at {urls[broker]}: {error}",
                file=sys.stderr,
            )
            continue
        for labels, value in samples.items():
            named = dict(labels)
            key = (named.get("topic", ""), int(named.get("partition", -1)))
            if key in keys:
                found[key] = value
    return found
