"""One chaos campaign end to end: cluster, load, nemesis, checker, summary and JSON.

``run_campaign(Settings(...))`` returns the result as a dict (also what ``--json``
writes); ``result["violations"]`` is 0 when nothing acknowledged was lost, nothing was
acknowledged twice, no replicas diverged and no committed offset went back.
"""

from __future__ import annotations

import itertools
import random
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import confluent_kafka

from ..integration.broker_helpers import create_topic
from .checker import (
    ProducerBatch,
    Verdict,
    check_acknowledgements,
    check_unread,
    divergence,
    longest_gaps,
    producer_batches,
    read_high_watermarks,
    read_partitions,
    replica_batches,
    split_resends,
)
from .cluster import SESSION_TIMEOUT_MS, ChaosCluster
from .load import CLIENT_LOG, AckingProducer, CommitSampler, CommittingConsumer
from .nemesis import SINGLE_BROKER_FAULTS, FaultRecord, Nemesis

TOPIC = "chaos"
GROUP = "chaos-group"


@dataclass
class Settings:
    seed: int
    duration: float = 600.0
    partitions: int = 6
    producers: int = 3
    rate: float = 150.0  # messages per second per producer
    kinds: list[str] = field(default_factory=list)  # empty: every kind
    concurrency: int = 1  # nemesis workers; above 1, faults overlap (nemesis.py)
    pause_s: tuple[float, float] = (0.5, 2.0)  # a worker's pause between its faults
    use_netns: bool = True
    use_zygote: bool = True  # restart brokers by forking a pre-imported zygote
    directory: Path | None = None  # None: a temporary directory, removed when clean
    keep: bool = False  # keep the directory (logs, segments) even when clean
    session_timeout_ms: int = SESSION_TIMEOUT_MS  # the brokers' zookeeper.session.timeout.ms


def run_campaign(settings: Settings, log: Callable[[str], None] = print) -> dict[str, Any]:
    began = time.monotonic()
    rng = random.Random(settings.seed)
    log(f"chaos campaign: seed {settings.seed}, {settings.duration:.0f} s of faults")
    directory = settings.directory or Path(tempfile.mkdtemp(prefix="gregor-chaos-"))
    directory.mkdir(parents=True, exist_ok=True)
    cluster = ChaosCluster.start(
        directory,
        use_netns=settings.use_netns,
        use_zygote=settings.use_zygote,
        session_timeout_ms=settings.session_timeout_ms,
    )
    result: dict[str, Any] = {"seed": settings.seed, "directory": str(directory)}
    try:
        result.update(_campaign(settings, cluster, rng, log))
    finally:
        cluster.stop()
    verdict_ok = result.get("violations", 1) == 0
    if settings.directory is None and verdict_ok and not settings.keep:
        shutil.rmtree(directory, ignore_errors=True)
        result["directory"] = None
    result["elapsed_s"] = round(time.monotonic() - began, 1)
    return result


def _campaign(
    settings: Settings, cluster: ChaosCluster, rng: random.Random, log: Callable[[str], None]
) -> dict[str, Any]:
    bootstrap = cluster.bootstrap_servers
    CLIENT_LOG.protocol_errors.clear()
    create_topic(
        bootstrap,
        TOPIC,
        partitions=settings.partitions,
        replication_factor=3,
        config={"min.insync.replicas": "2"},
    )
    nemesis = Nemesis(
        cluster,
        TOPIC,
        settings.partitions,
        rng,
        log=log,
        kinds=settings.kinds,
        concurrency=settings.concurrency,
        pause_s=settings.pause_s,
    )
    if not nemesis.settle():
        raise RuntimeError("the topic never had a leader and full ISR\n" + cluster.logs())
    producers = [
        AckingProducer(bootstrap, TOPIC, f"p{n}", settings.rate) for n in range(settings.producers)
    ]
    consumer = CommittingConsumer(bootstrap, TOPIC, GROUP)
    sampler = CommitSampler(bootstrap, TOPIC, GROUP, settings.partitions, consumer)
    load_started = time.monotonic()
    for producer in producers:
        producer.start()
    consumer.start()
    sampler.start()
    try:
        time.sleep(2)  # some acknowledgements before the first fault
        nemesis.run(settings.duration)
    finally:
        nemesis.restore()
        settled = nemesis.settle()
        time.sleep(2)  # acknowledgements after the last fault
        load_ended = time.monotonic()
        for producer in producers:
            producer.stop()
        sampler.stop()
        consumer.stop()
    acks = [ack for producer in producers for ack in producer.acks]
    verdict = Verdict()
    check_acknowledgements_and_replicas(verdict, cluster, settings.partitions, acks)
    verdict.protocol_errors = list(CLIENT_LOG.protocol_errors)
    verdict.regressions = [
        f"partition {r.partition}: committed {r.committed} read at {r.at - load_started:.1f} s "
        f"after a commit of {r.earlier_acknowledged} was acknowledged"
        + "".join(f" [during {what}]" for what in _faults_at(nemesis, r.at, load_started))
        for r in sampler.regressions
    ]
    verdict.longest_unavailable_s = longest_gaps(
        acks, settings.partitions, load_started, load_ended
    )
    faults = Counter(record.kind for record in nemesis.history)
    failed = [r for r in nemesis.history if r.what.startswith("failed")]
    failed_faults = [f"{r.kind}: {r.what}" for r in failed]
    overlaps = nemesis.overlaps()
    worst_partition = max(verdict.longest_unavailable_s, key=verdict.longest_unavailable_s.get)
    errors: Counter[str] = Counter()
    for producer in producers:
        errors.update(producer.errors)
    return {
        "violations": verdict.violations(),
        "counts": verdict.counts(),
        "faults": dict(sorted(faults.items())),
        "faults_total": sum(faults.values()),
        "concurrency": settings.concurrency,
        "overlaps": nemesis.overlap_summary(),
        "faults_failed": failed_faults,
        "faults_failed_by_kind": dict(sorted(Counter(r.kind for r in failed).items())),
        # A torn_tail whose victim no ISR dropped in time is a kill -9 without a tear
        # (a torn_leader of a partition without another ISR member too).
        "torn_tails_cut": sum(
            1
            for r in nemesis.history
            if r.kind in ("torn_tail", "torn_leader") and " bytes from " in r.what
        ),
        "broker_startup_exits": list(cluster.startup_exits),
        "faults_not_settled": sum(1 for r in nemesis.history if not r.settled_ok),
        "skipped_kinds": nemesis.skipped,
        "settled_at_end": settled,
        "longest_unavailable_by_partition_s": {
            p: round(s, 2) for p, s in sorted(verdict.longest_unavailable_s.items())
        },
        "longest_unavailable_by_fault_kind_s": _gaps_by_fault_kind(nemesis, acks),
        "single_broker_failure": _single_broker_failure_gaps(nemesis, acks, overlaps),
        "longest_unavailable_during": _faults_during(
            nemesis, acks, worst_partition, verdict.longest_unavailable_s[worst_partition]
        ),
        "sent": sum(p.sent for p in producers),
        "producer_errors": dict(errors.most_common(10)),
        "producer_restarts": sum(p.fatal_restarts for p in producers),
        "consumed": consumer.consumed,
        "commits": len(consumer.commits),
        "commit_samples": sampler.samples,
        "high_watermarks": verdict.high_watermarks,
        "details": {name: getattr(verdict, name)[:20] for name in Verdict.VIOLATIONS},
        "timeline": [
            {
                "kind": r.kind,
                "number": r.number,
                "worker": r.worker,
                "drawn_at_s": round(r.drawn - load_started, 1),
                "at_s": round((r.started or r.drawn) - load_started, 1),
                "undone_after_s": round(r.ended - (r.started or r.drawn), 1),
                "settled_after_s": round(r.settled - r.ended, 1) if r.settled else None,
                "settled": r.settled_ok,
                "claims": list(r.claims),
                "overlapped_with": overlaps.get(r.number, []),
                "what": r.what,
            }
            for r in nemesis.history
        ],
    }


def check_acknowledgements_and_replicas(
    verdict: Verdict, cluster: ChaosCluster, partitions: int, acks: list
) -> None:
    """Read every partition through a consumer, then stop the brokers and compare the
    replicas' files below the high watermark."""
    bootstrap = cluster.bootstrap_servers
    watermarks = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "chaos-checker"}
    )
    try:
        read_high_watermarks(
            lambda partition: watermarks.get_watermark_offsets(
                confluent_kafka.TopicPartition(TOPIC, partition), timeout=10
            )[1],
            partitions,
            verdict,
        )
    finally:
        watermarks.close()
    served = read_partitions(bootstrap, TOPIC, verdict.high_watermarks)
    check_unread(verdict, served, verdict.high_watermarks)
    unreadable = [p for p in range(partitions) if p not in verdict.high_watermarks]
    check_acknowledgements(verdict, acks, served, unreadable)
    # Replicas' files: stop the brokers first (SIGTERM flushes), so nothing moves.
    assignment = cluster.admin().get_topic(TOPIC)
    assert assignment is not None
    for broker in cluster.brokers.values():
        broker.stop()
    writers: dict[int, list[ProducerBatch]] = {}
    for partition in verdict.high_watermarks:
        replicas = {
            broker_id: replica_batches(cluster.brokers[broker_id].log_dir / f"{TOPIC}-{partition}")
            for broker_id in assignment.partitions[partition]
        }
        for problem in divergence(replicas, verdict.high_watermarks[partition]):
            verdict.divergent.append(f"partition {partition}: {problem}")
        longest = max(replicas, key=lambda broker_id: len(replicas[broker_id]))
        writers[partition] = producer_batches(
            cluster.brokers[longest].log_dir / f"{TOPIC}-{partition}"
        )
    split_resends(verdict, writers)


def _span(record: FaultRecord) -> tuple[float, float]:
    """When a fault was applied until it was undone (one at a time: until settled)."""
    start = record.started or record.drawn
    return start, max(record.ended, record.settled, start)


def _gaps(acks: list, shortest: float = 0.5) -> list[tuple[int, float, float]]:
    """Every (partition, from, to) between two acknowledgements at least ``shortest`` apart."""
    times: dict[int, list[float]] = {}
    for ack in acks:
        times.setdefault(ack.partition, []).append(ack.at)
    gaps = []
    for partition, moments in times.items():
        moments.sort()
        gaps += [(partition, a, b) for a, b in itertools.pairwise(moments) if b - a >= shortest]
    return gaps


def _during(nemesis: Nemesis, a: float, b: float) -> list[FaultRecord]:
    return [r for r in nemesis.history if _span(r)[0] <= b and _span(r)[1] >= a]


def _gaps_by_fault_kind(nemesis: Nemesis, acks: list) -> dict[str, float]:
    """Per fault kind, the longest gap between acknowledgements (any partition) that
    overlapped a fault of that kind: how long each kind of fault stops writes."""
    longest: dict[str, float] = {}
    for _, a, b in _gaps(acks):
        for record in _during(nemesis, a, b):
            longest[record.kind] = max(longest.get(record.kind, 0.0), b - a)
    return {kind: round(gap, 2) for kind, gap in sorted(longest.items())}


def _single_broker_failure_gaps(
    nemesis: Nemesis, acks: list, overlaps: dict[int, list[int]]
) -> dict[str, Any]:
    """The longest unavailability after a single broker failure: gaps between
    acknowledgements during which exactly one fault was under way, of a kind that takes
    one broker away (killed, stopped, torn, cut off), per kind and overall; and how many
    such faults ran alone (overlapping no other fault), the sample behind the figure."""
    longest: dict[str, tuple[float, str]] = {}
    for partition, a, b in _gaps(acks):
        during = _during(nemesis, a, b)
        if len(during) == 1 and during[0].kind in SINGLE_BROKER_FAULTS:
            record = during[0]
            if b - a > longest.get(record.kind, (0.0, ""))[0]:
                longest[record.kind] = (b - a, f"partition {partition}: fault {record.number}")
    alone = Counter(
        r.kind
        for r in nemesis.history
        if r.kind in SINGLE_BROKER_FAULTS and not overlaps.get(r.number)
    )
    worst = max(longest.items(), key=lambda item: item[1][0], default=None)
    return {
        "longest_s": round(worst[1][0], 2) if worst else None,
        "longest_during": f"{worst[0]} ({worst[1][1]})" if worst else None,
        "by_kind_s": {kind: round(gap, 2) for kind, (gap, _) in sorted(longest.items())},
        "faults_alone": dict(sorted(alone.items())),
    }


def _faults_during(nemesis: Nemesis, acks: list, partition: int, gap: float) -> list[str]:
    """The faults that overlapped the longest gap of ``partition``."""
    moments = sorted(ack.at for ack in acks if ack.partition == partition)
    start = None
    for a, b in itertools.pairwise(moments):
        if abs((b - a) - gap) < 1e-6:
            start = a
            break
    if start is None:
        return []
    end = start + gap
    origin = nemesis.history[0].drawn if nemesis.history else start
    return [f"from {start - origin:.1f} s to {end - origin:.1f} s (since the first fault)"] + [
        f"{r.kind}: {r.what}" for r in _during(nemesis, start, end)
    ]


def _faults_at(nemesis: Nemesis, moment: float, origin: float) -> list[str]:
    """The faults in progress (applied but not yet settled) at ``moment``."""
    return [
        f"{r.kind} at {_span(r)[0] - origin:.1f} s: {r.what}"
        for r in nemesis.history
        if _span(r)[0] <= moment and (not r.ended or _span(r)[1] >= moment)
    ]


def summary(result: dict[str, Any]) -> str:
    """The table ``make chaos`` prints."""
    counts = result.get("counts", {})
    lines = [
        f"seed {result['seed']}: {result.get('faults_total', 0)} faults in "
        f"{result.get('elapsed_s', 0)} s, {counts.get('acknowledged', 0)} acknowledged of "
        f"{result.get('sent', 0)} sent",
        "",
        f"{'fault kind':28s} {'count':>6s} {'failed':>6s} {'overlapped':>10s}"
        "  longest gap without acks while it lasted",
    ]
    gaps = result.get("longest_unavailable_by_fault_kind_s", {})
    overlaps = result.get("overlaps", {})
    overlapped = overlaps.get("overlapped_by_kind", {})
    failed = result.get("faults_failed_by_kind", {})
    for kind, count in result.get("faults", {}).items():
        gap = f"{gaps[kind]:8.2f} s" if kind in gaps else "       -"
        lines.append(
            f"{kind:28s} {count:6d} {failed.get(kind, 0):6d} {overlapped.get(kind, 0):10d}  {gap}"
        )
    if {"torn_tail", "torn_leader"} & set(result.get("faults", {})):
        lines.append(f"{'  of which tore a tail':28s} {result.get('torn_tails_cut', 0):6d}")
    if result.get("concurrency", 1) > 1:
        pairs = list(overlaps.get("overlapping_pairs", {}).items())
        lines.append(
            f"{result['concurrency']} workers, at most {overlaps.get('most_at_once')} faults "
            "at once; most frequent overlaps: "
            + ", ".join(f"{pair} {count}" for pair, count in pairs[:6])
        )
    for kind, reason in result.get("skipped_kinds", {}).items():
        lines.append(f"{kind:28s} {'skipped':>6s}  ({reason})")
    lines += ["", f"{'check':28s} {'value':>8s}"]
    for name, value in counts.items():
        lines.append(f"{name:28s} {value!s:>8s}")
    lines.append(f"{'faults not settled':28s} {result.get('faults_not_settled', 0)!s:>8s}")
    exits = result.get("broker_startup_exits", [])
    lines.append(f"{'brokers exited starting':28s} {len(exits):>8d}")
    for line in exits[:3]:
        lines.append(f"  startup exit: {line[:200]}")
    for name, examples in result.get("details", {}).items():
        for example in examples[:5]:
            lines.append(f"  {name}: {example}")
    single = result.get("single_broker_failure", {})
    if single.get("longest_s") is not None:
        lines.append(
            f"longest unavailability while a single broker failure was the only fault: "
            f"{single['longest_s']} s ({single['longest_during']}; "
            f"{sum(single['faults_alone'].values())} such faults ran alone)"
        )
    if result.get("longest_unavailable_during"):
        lines.append(
            "longest unavailability overlapped: " + "; ".join(result["longest_unavailable_during"])
        )
    lines.append(
        f"reproduce: make chaos SEED={result['seed']} DURATION=<seconds>"
        + (f"   (files kept in {result['directory']})" if result.get("directory") else "")
    )
    verdict = "PASS" if result.get("violations") == 0 else "FAIL"
    lines.append(f"{verdict}: {result.get('violations')} violations")
    return "\n".join(lines)
