"""One fuzzing run: inputs in batches, a health check after each batch, the result.

The violations (``result["violations"]`` sums them): ``crashes`` (the broker process
died), ``hangs`` (a batch during which another client waited over ``latency_limit_s``
for ApiVersions, or a fresh client could not round-trip), ``control_damaged`` (the
control topic changed), ``rss_over`` (a check saw RSS above ``rss_limit_mb``),
``stored_invalid`` (batches on disk that Kafka would have rejected), ``server_errors``
(a schema-valid request answered UNKNOWN_SERVER_ERROR: a handler failed on it) and
``served_nulls`` (a request with a null its schema does not allow was answered; Kafka
refuses to parse it). Each violation
names the batch's input range: ``--first``/``--inputs`` replay it with the same seed.
"""

from __future__ import annotations

import math
import os
import socket
import statistics
import struct
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import batches, loop_delay
from .inputs import API_VERSIONS, make_input
from .requests import frame, header
from .target import CONTROL_TOPIC, HEALTH_TOPIC, FuzzTarget, Prober, RssWatchdog, Sender, read_frame


@dataclass
class Settings:
    seed: int
    inputs: int = 50_000
    first: int = 0  # index of the first input (replay a range)
    batch: int = 500
    workers: int = 4  # connections sending inputs at once
    batch_budget_s: float = 120.0  # a batch taking longer counts as a hang
    rss_limit_mb: float = 1024
    latency_limit_s: float = 1.0
    directory: Path | None = None


def advertised_pairs(host: str, port: int) -> list[tuple[int, int]]:
    """Every (api key, version) the broker's ApiVersions v0 response advertises."""
    with socket.create_connection((host, port), timeout=10) as sock:
        sock.sendall(frame(header(API_VERSIONS, 0, 1, False, "fuzz"), b""))
        answer = read_frame(sock, time.monotonic() + 10)
    assert answer is not None, "no ApiVersions answer"
    error, count = struct.unpack_from(">hi", answer, 4)
    assert error == 0, f"ApiVersions error {error}"
    pairs = []
    for n in range(count):
        api_key, low, high = struct.unpack_from(">hhh", answer, 10 + 6 * n)
        pairs += [(api_key, version) for version in range(low, high + 1)]
    return pairs


def run_fuzz(settings: Settings, log: Callable[[str], None] = print) -> dict[str, Any]:
    began = time.monotonic()
    directory = settings.directory or Path(tempfile.mkdtemp(prefix="gregor-fuzz-"))
    target = FuzzTarget(directory)
    prober = Prober(target.broker.host, target.broker.port)
    watchdog = RssWatchdog(target, settings.rss_limit_mb * 2)
    pairs = advertised_pairs(target.broker.host, target.broker.port)
    log(
        f"fuzzing broker {target.bootstrap}: seed {settings.seed}, inputs "
        f"{settings.first}..{settings.first + settings.inputs - 1}, "
        f"{len(pairs)} advertised (api, version) pairs"
    )
    kinds: Counter[str] = Counter()
    details: Counter[str] = Counter()
    outcomes: Counter[str] = Counter()
    apis: Counter[int] = Counter()
    silent: Counter[str] = Counter()  # which requests went unanswered
    # Well-formed requests (schema-valid encodings) answered by closing the connection:
    # Kafka answers most of them with an error code; worth a look, not a violation.
    closed_well_formed: Counter[str] = Counter()
    crashes: list[str] = []
    hangs: list[str] = []
    damaged: list[str] = []
    rss_over: list[str] = []
    stored_invalid: list[str] = []
    generator_errors: list[str] = []
    server_errors: list[str] = []
    served_nulls: list[str] = []
    all_latencies: list[float] = []
    # The broker's event-loop delay samples, per histogram bucket, over every batch.
    loop_delays: Counter[float] = Counter()
    loop_delay_worst = 0.0
    rss_max = 0.0
    skip = {CONTROL_TOPIC, HEALTH_TOPIC}
    prober.start()
    watchdog.start()
    try:
        end = settings.first + settings.inputs
        for start in range(settings.first, end, settings.batch):
            stop = min(start + settings.batch, end)
            span = f"inputs {start}..{stop - 1}"
            batch_began = time.monotonic()
            delay_before = loop_delay.read_histogram(target.metrics_url)
            lock = threading.Lock()
            next_index = start

            def work(
                sender: Sender,
                lock: threading.Lock = lock,
                stop: int = stop,
                batch_began: float = batch_began,
            ) -> None:
                nonlocal next_index
                while True:
                    with lock:
                        index = next_index
                        next_index += 1
                    if index >= stop or time.monotonic() - batch_began > settings.batch_budget_s:
                        return
                    try:
                        item = make_input(settings.seed, index, pairs)
                    except Exception as error:  # a generator bug, not a broker bug
                        generator_errors.append(f"input {index}: {error!r:.200}")
                        continue
                    outcome = sender.send(item)
                    with lock:
                        kinds[item.kind] += 1
                        apis[item.api_key] += 1
                        if item.kind in ("batch_lie", "connection_abuse"):
                            details[f"{item.kind}:{item.detail.split(' ')[0]}"] += 1
                        outcomes[outcome] += 1
                        if outcome == "silent":
                            silent[f"{item.kind} api {item.api_key}"] += 1
                        well_formed = item.kind in ("structured", "unknown_tag")
                        if outcome == "closed" and well_formed and not item.null_where_not_allowed:
                            closed_well_formed[item.detail.split(" (")[0]] += 1
                        if outcome == "server_error":
                            server_errors.append(f"input {index}: {item.detail}")
                        if outcome == "served_null":
                            served_nulls.append(f"input {index}: {item.detail}")
                        if not target.broker.is_running():
                            _bring_back(index, item)

            def _bring_back(index: int, item: Any) -> None:
                """Killed by the watchdog (RSS) or crashed: note it, start it again."""
                nonlocal rss_max
                killed = watchdog.take()
                if killed:
                    rss_max = max(rss_max, *killed)
                    rss_over.append(
                        f"around input {index} (last sent: {item.kind} {item.detail}): RSS "
                        f"reached {max(killed):.0f} MB; the watchdog killed the broker"
                    )
                    log(f"RSS OVER: {rss_over[-1]}")
                    target.restart()
                else:
                    tail = target.restart()
                    crashes.append(
                        f"around input {index} (last sent: {item.kind} {item.detail}): "
                        f"broker died; log tail:\n{tail}"
                    )
                    log(f"CRASH: {crashes[-1]}")
                prober.take()  # its timeouts while the broker was down are not hangs

            senders = [target.sender() for _ in range(settings.workers)]
            threads = [threading.Thread(target=work, args=(s,)) for s in senders]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            for sender in senders:
                sender.close()
            if next_index < stop:
                hangs.append(f"{span}: the batch did not finish in {settings.batch_budget_s} s")
                log(f"SLOW: {hangs[-1]}")
            latencies, failures = prober.take()
            all_latencies += latencies
            worst = max(latencies, default=0.0)
            delays = loop_delay.delta(delay_before, loop_delay.read_histogram(target.metrics_url))
            for bound, count in delays.items():
                loop_delays[bound] += count
            worst_delay = loop_delay.worst_bound(delays)
            loop_delay_worst = max(loop_delay_worst, worst_delay)
            health = target.health()
            rss_max = max(rss_max, health.rss_mb)
            if not health.alive:
                tail = target.restart()
                crashes.append(f"{span}: broker died; log tail:\n{tail}")
                log(f"CRASH during {span}")
                continue
            slow_control = "control records in 10 s" in health.problem
            if (
                worst > settings.latency_limit_s
                or failures
                or health.round_trip_s is None
                or slow_control
            ):
                hangs.append(
                    f"{span}: another client's ApiVersions took up to {worst:.2f} s "
                    f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs) "
                    f"({failures} failed); broker's own loop delay "
                    f"{loop_delay.describe(worst_delay)}; round trip "
                    + (f"{health.round_trip_s:.2f} s" if health.round_trip_s else "FAILED")
                    + (f"; {health.problem}" if health.problem else "")
                )
                log(f"HANG during {span}: {hangs[-1]}")
                if health.round_trip_s is None:
                    target.restart()
            if not health.control_intact and health.round_trip_s is not None:
                damaged.append(f"{span}: {health.problem}")
            if health.rss_mb > settings.rss_limit_mb:
                rss_over.append(f"{span}: RSS {health.rss_mb:.0f} MB")
            found = batches.invalid_stored(target.broker.log_dir, skip)
            new = [problem for problem in found if problem not in stored_invalid]
            for problem in new:
                stored_invalid.append(problem)
                log(f"STORED INVALID after {span}: {problem}")
            trip = health.round_trip_s
            log(
                f"{span}: round trip {'FAILED' if trip is None else f'{trip:.2f} s'}, "
                f"ApiVersions max {worst * 1000:.0f} ms, "
                f"loop delay {loop_delay.describe(worst_delay)}, RSS {health.rss_mb:.0f} MB, "
                f"stored-invalid {len(stored_invalid)}"
            )
    finally:
        watchdog.stop()
        prober.stop()
        target.stop()
    latencies_sorted = sorted(all_latencies)
    result = {
        "seed": settings.seed,
        "first": settings.first,
        "inputs": sum(kinds.values()),
        "requested": settings.inputs,
        "kinds": dict(kinds.most_common()),
        "lies_and_abuses": dict(sorted(details.items())),
        "outcomes": dict(outcomes.most_common()),
        "silent_by_api": dict(silent.most_common(20)),
        "closed_well_formed": dict(closed_well_formed.most_common(40)),
        "apis_covered": len([k for k in apis if k >= 0]),
        "advertised_pairs": len(pairs),
        "crashes": len(crashes),
        "hangs": len(hangs),
        "control_damaged": len(damaged),
        "rss_over": len(rss_over),
        "stored_invalid": len(stored_invalid),
        "generator_errors": len(generator_errors),
        "server_errors": len(server_errors),
        "served_nulls": len(served_nulls),
        "rss_max_mb": round(rss_max, 1),
        "rss_limit_mb": settings.rss_limit_mb,
        "other_client_latency_ms": {
            "median": round(statistics.median(latencies_sorted) * 1000, 1)
            if latencies_sorted
            else None,
            "p99": round(latencies_sorted[int(len(latencies_sorted) * 0.99)] * 1000, 1)
            if latencies_sorted
            else None,
            "max": round(latencies_sorted[-1] * 1000, 1) if latencies_sorted else None,
            "samples": len(latencies_sorted),
        },
        "broker_loop_delay": {
            "samples_per_bucket_s": {
                ("+Inf" if math.isinf(b) else f"{b:g}"): c for b, c in sorted(loop_delays.items())
            },
            "worst_bucket_s": "+Inf" if math.isinf(loop_delay_worst) else loop_delay_worst,
        },
        "broker_restarts": target.restarts,
        "details": {
            "crashes": crashes[:10],
            "hangs": hangs[:20],
            "control_damaged": damaged[:10],
            "rss_over": rss_over[:10],
            "stored_invalid": stored_invalid[:50],
            "generator_errors": generator_errors[:20],
            "server_errors": server_errors[:20],
            "served_nulls": served_nulls[:20],
        },
        "directory": str(directory),
        "elapsed_s": round(time.monotonic() - began, 1),
    }
    result["violations"] = (
        len(crashes)
        + len(hangs)
        + len(damaged)
        + len(rss_over)
        + len(stored_invalid)
        + len(server_errors)
        + len(served_nulls)
    )
    return result


def summary(result: dict[str, Any]) -> str:
    lines = [
        f"seed {result['seed']}: {result['inputs']} inputs in {result['elapsed_s']} s, "
        f"{result['apis_covered']} APIs / {result['advertised_pairs']} advertised versions",
        "",
        f"{'input kind':34s} {'count':>7s}",
    ]
    lines += [f"{kind:34s} {count:7d}" for kind, count in result["kinds"].items()]
    lines += [f"  {kind:32s} {count:7d}" for kind, count in result["lies_and_abuses"].items()]
    lines += ["", f"{'outcome':34s} {'count':>7s}"]
    lines += [f"{name:34s} {count:7d}" for name, count in result["outcomes"].items()]
    if result["closed_well_formed"]:
        lines += ["", "well-formed requests answered by a closed connection (not violations):"]
        lines += [
            f"  {name:32s} {count:7d}" for name, count in result["closed_well_formed"].items()
        ]
    latency = result["other_client_latency_ms"]
    lines += [
        "",
        f"{'crashes':34s} {result['crashes']:7d}",
        f"{'hangs (other client > limit)':34s} {result['hangs']:7d}",
        f"{'control topic damaged':34s} {result['control_damaged']:7d}",
        f"{'RSS over limit':34s} {result['rss_over']:7d}",
        f"{'stored invalid batches':34s} {result['stored_invalid']:7d}",
        f"{'UNKNOWN_SERVER_ERROR answers':34s} {result['server_errors']:7d}",
        f"{'nulls Kafka refuses, answered':34s} {result['served_nulls']:7d}",
        f"{'generator errors (not violations)':34s} {result['generator_errors']:7d}",
        f"RSS max {result['rss_max_mb']} MB (limit {result['rss_limit_mb']} MB); other client's "
        f"ApiVersions median {latency['median']} ms, p99 {latency['p99']} ms, "
        f"max {latency['max']} ms over {latency['samples']} samples",
    ]
    delay = result["broker_loop_delay"]
    lines.append(
        f"broker's event-loop delay samples per bucket (s): {delay['samples_per_bucket_s']}; "
        f"worst bucket {delay['worst_bucket_s']}"
    )
    for name, examples in result["details"].items():
        for example in examples[:5]:
            lines.append(f"  {name}: {example.splitlines()[0]}")
    lines.append(
        f"reproduce: make fuzz SEED={result['seed']} INPUTS={result['requested']}"
        f" (a range: FUZZ_ARGS='--first N')"
    )
    lines.append(
        f"{'PASS' if result['violations'] == 0 else 'FAIL'}: {result['violations']} violations"
    )
    return "\n".join(lines)
