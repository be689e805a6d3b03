"""Where an acks=all round trip's CPU goes: each broker's CPU per acknowledged message.

Starts a 3-broker cluster (``GregorClusterTarget``: RF=3, ``min.insync.replicas=2``; with
``--brokers 1`` one broker at RF=1, the same workload without replication), runs
the harness's own produce workload (``bench.clients produce``, 1 KiB, acks=all, unbatched
unless ``--batched``) several times, and reports for each run: acknowledged messages/s,
every broker's CPU time per acknowledged message (leader and followers apart, from
``/proc/<pid>/stat``), its voluntary and involuntary context switches per message, and
its requests per message by API (``gregor_requests_total`` from ``/metrics``). CPU per
message holds up on a shared machine far better than a rate does, so it is the figure to
compare between two versions of Gregor run one after the other.

    python -m bench.round_trip                      # 1 partition, 3 runs of 5 s
    python -m bench.round_trip --partitions 8 --reps 2 --seconds 3
    python -m bench.round_trip --rate 1000 --idle 30  # paced, as the latency rows
    python -m bench.round_trip --idle-partitions 1000  # beside 1,000 partitions at rest
    python -m bench.round_trip --brokers 1 --rate 400  # the same at RF=1, for comparison

``--rate`` offers that many messages/s instead (the latency rows' paced producer and
stamping consumer, ``bench.clients latency-*``, 1 partition) and adds the end-to-end p50
and p99; at a low rate the brokers' CPU per message shows what a lone message costs, not
what a batched round trip does. ``--idle`` first measures each broker's CPU with no
traffic (after the topic exists): the periodic work a low rate divides by few messages.
``--hold`` keeps the cluster up that many seconds before the runs, its pids printed, for
``py-spy`` or ``strace`` from another shell. Before measuring it waits (at most
``--settle`` s, 60; 0: not at all) until every broker's start-up work is over, as the
bench harness does (``bench/targets.py``, ``wait_settled``): from 10 s after its start a
broker prepares the request versions it serves on a background thread for about 10 s
(``protocol/preparation.py``), and that thread's turns with the GIL delay the event loop
by milliseconds.
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

from .harness import run_latency_clients
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


def _paced(target: GregorClusterTarget, topic: str, rate: int, seconds: float) -> dict:
    """One latency run at ``rate`` msg/s (the latency rows' clients): the consumer's
    percentiles and the number of messages."""
    messages = max(int(rate * seconds), 1)
    result = run_latency_clients(target, topic, rate, messages, seconds, acks=-1)
    return {**result, "messages": messages, "seconds": seconds}


def _idle(target: GregorClusterTarget, seconds: float) -> list[float]:
    """Each broker's CPU (cores) over ``seconds`` with no traffic."""
    pids = [broker.pid for broker in target.cluster.brokers]
    before = [process_cpu_seconds(pid) for pid in pids]  # type: ignore[arg-type]
    time.sleep(seconds)
    after = [process_cpu_seconds(pid) for pid in pids]  # type: ignore[arg-type]
    return [(b - a) / seconds for a, b in zip(before, after, strict=True)]


def replication_factor(brokers: int) -> int:
    """One broker: the same workload at RF=1 (min.insync.replicas=1), what replication's
    per-message cost is measured against; three: RF=3 (min.insync.replicas=2)."""
    return min(brokers, 3)


def run(
    directory: Path,
    partitions: int,
    reps: int,
    seconds: float,
    batched: bool,
    rate: int | None = None,
    idle: float = 0.0,
    hold: float = 0.0,
    settle: float = 0.0,
    idle_partitions: int = 0,
    brokers: int = 3,
) -> list[dict]:
    replicas = replication_factor(brokers)
    target = GregorClusterTarget(directory, brokers, replicas, min(replicas, 2))
    for broker in target.cluster.brokers:
        broker.metrics_port = 0
        broker.__post_init__()  # picks a free metrics port
    target.start()
    try:
        topic = "round-trip"
        if idle_partitions:
            # Replicated like the measured topic, never written: what a follower's fetch
            # session and the leader's fetch path cost per partition that has no traffic.
            target.create_topic("round-trip-idle", idle_partitions)
        target.create_topic(topic, partitions)
        metadata = target.admin().list_topics(topic, timeout=10)
        leaders = {p.leader for p in metadata.topics[topic].partitions.values()}
        if hold:
            pids = {b.broker_id: b.pid for b in target.cluster.brokers}
            print(
                f"holding {hold:.0f} s; broker pids {pids}, leaders {sorted(leaders)}", flush=True
            )
            time.sleep(hold)
        if settle:
            target.wait_settled(settle)
        results = []
        if idle:
            time.sleep(2)  # the topic's creation and first fetches settle
            results.append({"idle_cores": _idle(target, idle), "leaders": sorted(leaders)})
        if rate is not None:
            target.delete_topic(topic)  # the paced runs' followers fetch their topic only
        for rep in range(reps):
            if rate is not None:
                # A topic per run: the consumer reads from offset 0, and the previous run's
                # stamps would count as late messages.
                paced_topic = f"round-trip-paced-{rep}"
                target.create_topic(paced_topic, 1)
                found = target.admin().list_topics(paced_topic, timeout=10).topics[paced_topic]
                leaders = {p.leader for p in found.partitions.values()}
                before = _sample(target)
                began = time.monotonic()
                measured = _paced(target, paced_topic, rate, seconds)
                wall = time.monotonic() - began
                after = _sample(target)
                target.delete_topic(paced_topic)
                cpu = sum(b[0] - a[0] for a, b in zip(before, after, strict=True))
                results.append(
                    _per_message(target, leaders, before, after, measured["messages"])
                    | {
                        "messages_per_s": measured["messages"] / seconds,
                        # Over the whole run, the clients' start and end included.
                        "cluster_cores": cpu / wall,
                        "p50_ms": measured["p50_ms"],
                        "p99_ms": measured["p99_ms"],
                    }
                )
                continue
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
            results.append(
                _per_message(target, leaders, before, after, measured["messages"])
                | {
                    "messages_per_s": measured["messages"] / measured["seconds"],
                    "cluster_cores": measured["broker_cores"],
                }
            )
        return results
    finally:
        target.stop()


def _per_message(
    target: GregorClusterTarget, leaders: set[int], before: list, after: list, messages: int
) -> dict[str, Any]:
    """Each broker's CPU, context switches and requests per message between two samples."""
    messages = max(messages, 1)
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
    return {"brokers": brokers}


def _print(result: dict[str, Any]) -> None:
    if "idle_cores" in result:
        cores = ", ".join(f"{c:.4f}" for c in result["idle_cores"])
        print(f"idle: brokers' cores {cores} (leader {result['leaders']})")
        return
    latency = (
        f", p50 {result['p50_ms']:.3f} ms, p99 {result['p99_ms']:.3f} ms"
        if "p50_ms" in result
        else ""
    )
    print(
        f"{result['messages_per_s']:,.0f} msg/s acknowledged, "
        f"cluster {result['cluster_cores']:.3f} cores{latency}"
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
        "cluster (or one broker at RF=1), e.g. python -m bench.round_trip --partitions 8 "
        "--reps 2, or python -m bench.round_trip --brokers 1 --rate 400",
    )
    parser.add_argument("--partitions", type=int, default=1, help="topic partitions (1)")
    parser.add_argument(
        "--brokers",
        type=int,
        default=3,
        help="brokers (3: RF=3, min.insync.replicas=2; 1: the same workload at RF=1)",
    )
    parser.add_argument("--reps", type=int, default=3, help="produce runs (3)")
    parser.add_argument("--seconds", type=float, default=5, help="length of each run (5)")
    parser.add_argument("--batched", action="store_true", help="linger 5 ms, 64 KiB batches")
    parser.add_argument(
        "--rate", type=int, help="offer this many msg/s, paced, with end-to-end latency"
    )
    parser.add_argument(
        "--idle", type=float, default=0, help="first measure idle brokers' CPU this many s"
    )
    parser.add_argument(
        "--hold", type=float, default=0, help="keep the cluster up this many s first"
    )
    parser.add_argument(
        "--settle",
        type=float,
        default=60,
        help="wait at most this many s for the brokers' start-up work to end (60; 0: not)",
    )
    parser.add_argument(
        "--idle-partitions",
        type=int,
        default=0,
        help="first create a topic of this many partitions that gets no traffic (0)",
    )
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)
    started = time.strftime("%H:%M:%S")
    with tempfile.TemporaryDirectory(prefix="gregor-round-trip-") as directory:
        results = run(
            Path(directory),
            args.partitions,
            args.reps,
            args.seconds,
            args.batched,
            args.rate,
            args.idle,
            args.hold,
            args.settle,
            args.idle_partitions,
            args.brokers,
        )
    if args.json:
        print(json.dumps(results))
        return 0
    paced = f", paced at {args.rate:,} msg/s" if args.rate else ""
    idle = f", {args.idle_partitions:,} idle partitions" if args.idle_partitions else ""
    replicas = replication_factor(args.brokers)
    print(
        f"1 KiB acks=all, {args.brokers} broker(s) at RF={replicas}, {args.partitions} "
        f"partition(s){paced}{idle}, started {started}"
    )
    for result in results:
        _print(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
