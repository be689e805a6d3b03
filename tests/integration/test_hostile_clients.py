"""No client can freeze the broker for the others (F5).

The broker runs every connection on one event loop. A hostile client (thousands of
pipelined requests in one write, one that never reads its answers, eight flooding
Metadata and DescribeConfigs) must not keep another client's ApiVersions waiting:
p99 of its round trips stays under 100 ms while each attack runs. The attack runs in
its own process (``hostile_clients``); the probe here sends an ApiVersions every 10 ms
on its own connection. On a machine busy with other work the probe is slow even with no
attack, so the limit is 100 ms over the probe's p99 measured just before the attack
(about a millisecond on an idle machine), and what the attack adds is counted in the
broker's own time: the round trips times the share of the CPU the broker's event loop got
while it wanted one (``/proc/<pid>/schedstat``), so that other work taking the cores from
a busy broker is not blamed on the broker. The broker's event-loop delay histogram is
checked to exist.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gregor_broker.devtools.zookeeper_server import free_port

from .broker_helpers import api_versions_request, host_port, read_response, scrape

ROOT = Path(__file__).resolve().parents[2]
ATTACK_SECONDS = 5.0
P99_LIMIT_S = 0.100
SCENARIOS = ["describe-burst", "api-versions-burst", "never-reads", "flood", "huge-group-ids"]


def _p99(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def _probe(bootstrap: str, attack: subprocess.Popen | None, minimum_s: float) -> list[float]:
    """ApiVersions round trips, one every 10 ms, while the attack runs (and for at least
    ``minimum_s``)."""
    samples = []
    started = time.monotonic()
    with socket.create_connection(host_port(bootstrap), timeout=30) as sock:
        correlation_id = 0
        while (attack is not None and attack.poll() is None) or (
            time.monotonic() - started < minimum_s
        ):
            correlation_id += 1
            sent = time.perf_counter()
            sock.sendall(api_versions_request(correlation_id))
            response = read_response(sock)
            samples.append(time.perf_counter() - sent)
            assert int.from_bytes(response[:4], "big") == correlation_id
            time.sleep(0.01)
    return samples


def _scheduled(pid: int) -> tuple[int, int]:
    """A process's main thread (the broker's event loop) so far: nanoseconds on a CPU,
    and nanoseconds runnable but waiting for one."""
    with open(f"/proc/{pid}/schedstat") as stat:
        running, waiting, _slices = stat.read().split()
    return int(running), int(waiting)


def _probe_under_attack(broker, attack, seconds: float) -> tuple[list[float], float]:
    """``_probe`` while ``attack`` runs, and the share of the CPU the broker's event loop
    got while it wanted one over that window (1 when it wanted none)."""
    before = _scheduled(broker.pid)
    samples = _probe(broker.bootstrap, attack, seconds)
    after = _scheduled(broker.pid)
    running, waiting = after[0] - before[0], after[1] - before[1]
    return samples, running / (running + waiting) if running + waiting else 1.0


def _attacked(broker, scenario: str) -> tuple[float, list[float], dict, float]:
    """The probe's p99 with no attack, then its round trips while ``scenario`` runs, what
    the attack reported, and the share of the CPU the broker got while it wanted one."""
    quiet_p99 = _p99(_probe(broker.bootstrap, None, 2.0))
    attack = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.integration.hostile_clients",
            scenario,
            broker.bootstrap,
            str(ATTACK_SECONDS),
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        time.sleep(0.5)  # the attack is under way
        samples, cpu_share = _probe_under_attack(broker, attack, ATTACK_SECONDS - 1)
        out, err = attack.communicate(timeout=60)
    finally:
        if attack.poll() is None:
            attack.kill()
    assert attack.returncode == 0, err[-2000:]
    outcome = json.loads(out.strip().splitlines()[-1])
    p99 = _p99(samples)
    print(
        f"{scenario}: {outcome}, {len(samples)} probes, p99 {p99 * 1000:.1f} ms "
        f"(without the attack {quiet_p99 * 1000:.1f} ms), the broker got {cpu_share:.0%} "
        "of the CPU it wanted"
    )
    assert len(samples) >= 100
    return quiet_p99, samples, outcome, cpu_share


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_a_hostile_client_does_not_delay_another_clients_api_versions(
    broker_factory, scenario: str
) -> None:
    """The same probe with no attack first: what this machine's own load costs a round
    trip (other test workers share the cores). The attack may add at most 100 ms to it,
    in the broker's own time.

    The broker and the attacker take both cores between them, so a burst of the other
    workers' load during the attack, which the probe before it did not see, costs the
    broker its share of a core while eight connections wait in line (CI: p99 110-155 ms
    in 3 of 8 runs of the suite, 11 ms beside six busy loops). So the round trips count
    at the share of the CPU the broker got while it wanted one, and a second attempt, on
    the same broker, is measured if the first fails: a broker that lets one client
    starve the others (or freezes, using no CPU) fails every attempt."""
    metrics_port = free_port()
    broker = broker_factory(**{"metrics.port": str(metrics_port)})
    failures = []
    outcomes = []
    for _attempt in range(2):
        quiet_p99, samples, outcome, cpu_share = _attacked(broker, scenario)
        outcomes.append(outcome)
        p99 = _p99(samples)
        if p99 * cpu_share < quiet_p99 + P99_LIMIT_S:
            break
        failures.append(
            f"{p99 * 1000:.0f} ms (max {max(samples) * 1000:.0f} ms, "
            f"{quiet_p99 * 1000:.0f} ms without the attack, the broker given "
            f"{cpu_share:.0%} of the CPU it wanted) over {len(samples)} requests"
        )
    else:
        pytest.fail(
            f"{scenario}: another client's ApiVersions p99 was "
            + " and then ".join(failures)
            + f"; attack: {outcome}"
        )
    metrics = scrape(metrics_port)
    if scenario in ("describe-burst", "api-versions-burst"):
        assert outcome["answered"] == outcome["sent"], outcome  # the attacker is served too
    if scenario == "never-reads":
        # Answers pile up only to the write high-water mark and the socket buffers;
        # the rest of what it sent stays unread in the kernel, not in the broker. (The
        # broker's count covers every attempt.)
        described = metrics.get('gregor_requests_total{api="DescribeConfigs"}', 0)
        sent = sum(o["sent_frames"] for o in outcomes)
        assert described < sent / 10, (described, outcomes)
    assert metrics["gregor_event_loop_delay_seconds_count"] > 0


FIRST_USE_LIMIT_S = 0.400


def _first_use_attack(broker_factory) -> tuple[list[float], list[float], float]:
    """A new broker's probe round trips without, then during, a client using every
    advertised version at once, and the share of the CPU the broker's event loop got
    while it wanted one during the attack: ``(quiet, during, share)``."""
    broker = broker_factory()
    quiet = _probe(broker.bootstrap, None, 2.0)
    attack = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.integration.hostile_clients",
            "every-version",
            broker.bootstrap,
            "0",
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        samples, cpu_share = _probe_under_attack(broker, attack, 1.0)
        out, err = attack.communicate(timeout=120)
    finally:
        if attack.poll() is None:
            attack.kill()
    assert attack.returncode == 0, err[-2000:]
    outcome = json.loads(out.strip().splitlines()[-1])
    ordered = sorted(samples)
    print(
        f"every-version: {outcome}, {len(samples)} probes, median "
        f"{ordered[len(ordered) // 2] * 1000:.1f} ms, p99 {_p99(samples) * 1000:.1f} ms, max "
        f"{ordered[-1] * 1000:.1f} ms (without: p99 {_p99(quiet) * 1000:.1f} ms, max "
        f"{max(quiet) * 1000:.1f} ms), the broker got {cpu_share:.0%} of the CPU it wanted"
    )
    assert outcome["answered"] > outcome["sent"] / 2, outcome
    return quiet, samples, cpu_share


def test_first_use_of_every_api_version_does_not_delay_another_client(broker_factory) -> None:
    """A fuzzer's start: every advertised version once, each on its own connection. Each
    version's first use (kio classes, generated checkers: 2 to 15 ms each) ran on the
    event loop, one after another, while another client waited (582-1205 ms); it now
    runs on a background thread (45-185 ms). That thread ran through its queue on its
    own and took the interpreter lock at each socket call of the loop, which then waited
    the 5 ms switch interval to get it back, and __consumer_offsets' 50 logs were created
    in slices of 20 ms (95-357 ms alone, six runs); the thread now takes one step per
    turn of the loop and the slices are of 5 ms (26-88 ms alone, six runs, 2026-11-27).
    The probe's worst round trip stays within 400 ms of its worst without the attack.

    Wall-clock round trips also carry the machine's own load (CI ran the rest of the
    suite beside it and saw 670-690 ms; 310-470 ms alone on the slower machine of
    2026-11-27), so they count at the share of the CPU the broker's event loop got while
    it wanted one, as in the scenarios above, and a second new broker gets a second
    attempt: first uses back on the event loop stall every attempt."""
    worst = []
    for _attempt in range(2):
        quiet, samples, cpu_share = _first_use_attack(broker_factory)
        if max(samples) * cpu_share < max(quiet) + FIRST_USE_LIMIT_S:
            return
        worst.append(
            f"{max(samples) * 1000:.0f} ms (without it {max(quiet) * 1000:.0f} ms; the broker "
            f"given {cpu_share:.0%} of the CPU it wanted)"
        )
    pytest.fail(
        "another client's ApiVersions took up to "
        + " and then ".join(worst)
        + " while a client used every API version, on two new brokers"
    )
