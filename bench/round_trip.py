"""Where an acks=all round trip's CPU goes: each broker's CPU per acknowledged message.

Starts a 3-broker cluster (``GregorClusterTarget``: RF=3, ``min.insync.replicas=2``), runs
the harness's own produce workload (``bench.clients produce``, 1 KiB, acks=all, unbatched
unless ``--batched``) several times, and reports for each run: acknowledged messages/s,
every broker's CPU time per acknowledged message (leader and followers apart, from
``/proc/<pid>/stat``), its voluntary and involuntary context switches per message, and
its requests per message by API (``gregor_requests_total`` from ``/metrics``). CPU per
message holds up on a shared machine far better than a rate does, so it is the figure to
compare between two versions of Gregor run one after the other.

    python -m bench.round_trip                      # 1 partition, 3 runs of 5 s
    python -m bench.round_trip --partitions 8 --reps 2 --seconds 3
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from .targets import GregorClusterTarget, process_cpu_seconds


def _switches(pid: int) -> tuple[int, int]:
    """Voluntary and involuntary context switches of a process so far."""
    voluntary = involuntary = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("voluntary_ctxt_switches"):
            voluntary = int(line.split()[1])
        elif line.startswith("nonvoluntary_ctxt_switches"):
            involuntary = int(line.split()[1])
    return voluntary, involuntary


def _requests(metrics_port: int) -> dict[str, float]:
    """Requests handled so far, per API name (``gregor_requests_total``)."""
    url = f"http://127.0.0.1:{metrics_port}/metrics"
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    counts = {}
    for line in text.splitlines():
        if line.startswith("gregor_requests_total{"):
            counts[line.split('"')[1]] = float(line.split()[-1])
    return counts


def _sample(target: GregorClusterTarget) -> list[tuple[float, tuple[int, int], dict[str, float]]]:
    return [
        (
            process_cpu_seconds(broker.pid),  # type: ignore[arg-type]
            _switches(broker.pid),  # type: ignore[arg-type]
            _requests(broker.metrics_port),  # type: ignore[arg-type]
        )
        for broker in target.cluster.brokers
    ]


def run(directory: Path, partitions: int, reps: int, seconds: float, batched: bool) -> list[dict]:
    target = GregorClusterTarget(directory)
    for broker in target.cluster.brokers:
        broker.metrics_port = 0
        broker.__post_init__()  # picks a free metrics port
    target.start()
    try:
        topic = "round-trip"
        target.create_topic(topic, partitions)
        metadata = target.admin().list_topics(topic, timeout=10)
        leaders = {p.leader for p in metadata.topics[topic].partitions.values()}
        results = []
        for _ in range(reps):
            spec = {
                "bootstrap": target.bootstrap,
                "topic": topic,
                "size": 1024,
                "partitions": partitions,
                "acks": -1,
                "batched": batched,
                "seconds": seconds,
                "broker_pids": target.pids,
            }
            before = _sample(target)
            done = subprocess.run(
                [sys.executable, "-m", "bench.clients", "produce", "--spec", json.dumps(spec)],
                capture_output=True,
                text=True,
                check=True,
            )
            after = _sample(target)
            measured = json.loads(done.stdout.strip().splitlines()[-1])
            messages = max(measured["messages"], 1)
            brokers = []
            for broker, (cpu0, sw0, req0), (cpu1, sw1, req1) in zip(
                target.cluster.brokers, before, after, strict=True
            ):
                brokers.append(
                    {
                        "broker": broker.broker_id,
                        "leader": broker.broker_id in leaders,
                        "cpu_us_per_message": (cpu1 - cpu0) / messages * 1e6,
                        "switches_per_message": [
                            (sw1[0] - sw0[0]) / messages,
                            (sw1[1] - sw0[1]) / messages,
                        ],
                        "requests_per_message": {
                            api: (count - req0.get(api, 0)) / messages
                            for api, count in req1.items()
                            if count > req0.get(api, 0)
                        },
                    }
                )
            results.append(
                {
                    "messages_per_s": measured["messages"] / measured["seconds"],
                    "cluster_cores": measured["broker_cores"],
                    "brokers": brokers,
                }
            )
        return results
    finally:
        target.stop()


def _print(result: dict[str, Any]) -> None:
    print(
        f"{result['messages_per_s']:,.0f} msg/s acknowledged, "
        f"cluster {result['cluster_cores']:.3f} cores"
    )
    for broker in result["brokers"]:
        role = "leader  " if broker["leader"] else "follower"
        requests = ", ".join(f"{api} {n:.2f}" for api, n in broker["requests_per_message"].items())
        voluntary, involuntary = broker["switches_per_message"]
        print(
            f"  broker {broker['broker']} {role}: {broker['cpu_us_per_message']:.0f} us CPU, "
            f"{voluntary:.2f} + {involuntary:.2f} context switches, requests: {requests}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.round_trip",
        description="Each broker's CPU per acknowledged acks=all message on a 3-broker "
        "cluster, e.g. python -m bench.round_trip --partitions 8 --reps 2",
    )
    parser.add_argument("--partitions", type=int, default=1, help="topic partitions (1)")
    parser.add_argument("--reps", type=int, default=3, help="produce runs (3)")
    parser.add_argument("--seconds", type=float, default=5, help="length of each run (5)")
    parser.add_argument("--batched", action="store_true", help="linger 5 ms, 64 KiB batches")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)
    started = time.strftime("%H:%M:%S")
    with tempfile.TemporaryDirectory(prefix="gregor-round-trip-") as directory:
        results = run(Path(directory), args.partitions, args.reps, args.seconds, args.batched)
    if args.json:
        print(json.dumps(results))
        return 0
    print(f"1 KiB acks=all, {args.partitions} partition(s), started {started}")
    for result in results:
        _print(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
