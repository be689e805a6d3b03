"""Failover time with thousands of partitions: how long until every partition leads again.

Starts ZooKeeper and a 3-broker Gregor cluster, creates topics with 2,000 partitions in
all (replication factor 3), kills the broker leading about a third of them with SIGKILL,
and measures, by watching the partition state znodes in ZooKeeper:

- detection: from the kill until ZooKeeper expires the broker's session (its
  ``/brokers/ids/<id>`` vanishes) -- set by ``zookeeper.session.timeout.ms``;
- election: from then until every partition has a live leader again.

Run: ``.venv/bin/python -m bench.failover [--partitions 2000] [--repeat 3]``. Writes
``bench/results/failover-<timestamp>.json`` and prints a table with medians. The harness
(``python -m bench``, group ``failover``) calls ``run_once`` too and puts the figures in
its own results.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import statistics
import tempfile
import time
from pathlib import Path

from gregor_broker.cluster import zk_paths
from gregor_broker.cluster.admin import ZkAdmin
from gregor_broker.cluster.models import ControllerRegistration, PartitionState
from gregor_broker.devtools.local_cluster import LocalCluster, zookeeper_client

RESULTS = Path(__file__).parent / "results"
SESSION_TIMEOUT_MS = 6000
PARTITIONS_PER_TOPIC = 100


def _states_of(
    admin: ZkAdmin, partitions: list[tuple[str, int]]
) -> dict[tuple[str, int], PartitionState]:
    """The states of ``partitions``, read with pipelined requests."""
    client = admin.client
    reads = [(key, client.get_async(zk_paths.partition_state_path(*key))) for key in partitions]
    return {key: PartitionState.from_json(read.get()[0]) for key, read in reads}


def _leaders_of(admin: ZkAdmin, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """The leaders of ``partitions``, read with pipelined requests."""
    return {key: state.leader for key, state in _states_of(admin, partitions).items()}


def _write_times_unix(admin: ZkAdmin, partitions: list[tuple[str, int]]) -> list[float]:
    """When each of ``partitions``' state znodes was last written (ZooKeeper's mtime, the
    same machine's wall clock), in seconds."""
    client = admin.client
    reads = [client.get_async(zk_paths.partition_state_path(*key)) for key in partitions]
    return [read.get()[1].mtime / 1000 for read in reads]


def _last_write_unix(admin: ZkAdmin, partitions: list[tuple[str, int]]) -> float:
    """When the last of ``partitions``' state znodes was written, in seconds."""
    return max(_write_times_unix(admin, partitions))


def _log_lines_after(path: Path, since_unix: float, marker: str) -> list[tuple[float, str]]:
    """The lines of a broker's log containing ``marker`` logged at or after
    ``since_unix``, with their times (the broker logs its local time to the
    millisecond; same machine, same clock)."""
    found = []
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return found
    for line in text.splitlines():
        if marker not in line:
            continue
        try:
            stamp = time.mktime(time.strptime(line[:19], "%Y-%m-%d %H:%M:%S"))
            stamp += int(line[20:23]) / 1000
        except ValueError:
            continue
        if stamp >= since_unix - 0.001:
            found.append((stamp, line))
    return found


def _leaders(admin: ZkAdmin, topics: list[str]) -> dict[tuple[str, int], int]:
    """Every partition's leader, read with pipelined requests: one sweep costs a few
    round trips, not one per partition (2,000 reads one after the other took seconds on
    a loaded machine, which the election time then included)."""
    client = admin.client
    listings = [
        (topic, client.get_children_async(zk_paths.topic_partitions_path(topic)))
        for topic in topics
    ]
    reads = [
        ((topic, int(child)), client.get_async(zk_paths.partition_state_path(topic, int(child))))
        for topic, listing in listings
        for child in listing.get()
    ]
    return {key: PartitionState.from_json(read.get()[0]).leader for key, read in reads}


class FailoverTimedOut(RuntimeError):
    pass


def _wait_for_logs(cluster: LocalCluster, hosted: dict[int, int], deadline: float) -> None:
    """Until every broker's log dir holds a directory per replica it hosts."""
    while True:
        missing = {
            broker.broker_id: hosted[broker.broker_id]
            - sum(1 for entry in broker.log_dir.iterdir() if entry.is_dir())
            for broker in cluster.brokers
        }
        if all(count <= 0 for count in missing.values()):
            return
        if time.monotonic() > deadline:
            raise FailoverTimedOut(f"logs not created in time (missing per broker: {missing})")
        time.sleep(0.5)


def run_once(
    partitions: int,
    work_dir: Path,
    session_timeout_ms: int = SESSION_TIMEOUT_MS,
    timeout: float = 300,
    *,
    shutdown: bool = False,
    profile_dir: Path | None = None,
) -> dict[str, float]:
    """One cluster, one kill (or with ``shutdown``, one controlled shutdown: SIGTERM).
    Every wait gives up after ``timeout`` seconds (``FailoverTimedOut``); the cluster is
    stopped whatever happens."""
    setup_started = time.monotonic()
    cluster = LocalCluster(
        work_dir,
        3,
        racks="a,b,c",
        properties={
            "zookeeper.session.timeout.ms": str(session_timeout_ms),
            "auto.leader.rebalance.enable": "false",
        },
    )
    cluster.start(120)
    client = zookeeper_client(cluster.zookeeper_connect)
    admin = ZkAdmin(client)
    try:
        from gregor_broker.cluster.placement import assign_replicas

        sizes = [PARTITIONS_PER_TOPIC] * (partitions // PARTITIONS_PER_TOPIC)
        if partitions % PARTITIONS_PER_TOPIC:
            sizes.append(partitions % PARTITIONS_PER_TOPIC)
        topics = [f"failover-{i}" for i in range(len(sizes))]
        brokers = {b.broker_id: b.rack for b in cluster.brokers}
        hosted = dict.fromkeys(brokers, 0)
        for topic, size in zip(topics, sizes, strict=True):
            plan = assign_replicas(brokers, size, 3)
            admin.create_topic(topic, {p: list(r) for p, r in plan.items()}, {})
            for replicas in plan.values():
                for broker_id in replicas:
                    hosted[broker_id] += 1
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                leaders = _leaders(admin, topics)
            except Exception:  # state znodes still being created
                leaders = {}
            if len(leaders) == partitions and all(v > 0 for v in leaders.values()):
                break
            time.sleep(0.5)
        else:
            raise FailoverTimedOut(
                f"{partitions} partitions did not all get leaders within {timeout:.0f} s"
            )
        if shutdown:
            # A rolling restart stops a broker in a settled cluster: wait until every
            # broker has created the logs of all its replicas (its metadata applied), or
            # the SIGTERM lands in the middle of thousands of log creations.
            _wait_for_logs(cluster, hosted, deadline)
        counts: dict[int, int] = {}
        for leader in leaders.values():
            counts[leader] = counts.get(leader, 0) + 1
        controller_data, _ = client.get(zk_paths.CONTROLLER)
        controller_id = ControllerRegistration.from_json(controller_data).broker_id
        if shutdown:
            # The handover itself, not a controller move as well: the controller's own
            # shutdown first hands the controller role over (a new one reads everything).
            counts = {b: n for b, n in counts.items() if b != controller_id} or counts
        victim_id = max(counts, key=counts.get)
        victim = cluster.broker(victim_id)
        setup_s = time.monotonic() - setup_started
        if shutdown:
            return _controlled_shutdown(
                cluster, admin, topics, leaders, victim_id, setup_s, timeout, profile_dir
            )
        last_present_wall = time.time()
        killed_at = time.monotonic()
        victim.kill()
        deadline = killed_at + timeout
        while True:
            # Taken before the read that still finds the registration: the expiry (and the
            # controller's first write, which ZooKeeper times on this machine's clock) is
            # after it; the time of the read that finds it gone can already be later than
            # the new leaders' writes.
            present_wall = time.time()
            if client.exists(zk_paths.broker_path(victim_id)) is None:
                break
            last_present_wall = present_wall
            if time.monotonic() > deadline:
                raise FailoverTimedOut(
                    f"broker {victim_id}'s session did not expire within {timeout:.0f} s"
                )
            time.sleep(0.01)
        expired_at = time.monotonic()
        expired_wall = time.time()
        live = {b.broker_id for b in cluster.brokers} - {victim_id}
        deadline = expired_at + timeout
        # Each sweep reads only the partitions the victim led (a third of the reads: the
        # sweep's own length is how late the end is seen), then every partition once.
        orphans = [key for key, leader in leaders.items() if leader == victim_id]
        while True:
            sweep_started = time.monotonic()
            if all(leader in live for leader in _leaders_of(admin, orphans).values()) and all(
                leader in live for leader in _leaders(admin, topics).values()
            ):
                break
            if time.monotonic() > deadline:
                raise FailoverTimedOut(
                    f"partitions of broker {victim_id} had no live leader {timeout:.0f} s "
                    "after its session expired"
                )
            time.sleep(0.05)
        done_at = time.monotonic()
        # The sweeps above see the end late by up to a sweep (thousands of reads on a
        # loaded machine); the znodes' own modification times say when it happened.
        elected_unix = _last_write_unix(admin, orphans)
        return {
            "partitions": partitions,
            "session_timeout_ms": session_timeout_ms,
            "setup_s": setup_s,
            "led_by_victim": counts[victim_id],
            # Killing the controller adds a controller election (and its full read of
            # every partition) to the partitions' election.
            "victim_was_controller": float(controller_id == victim_id),
            "detection_s": expired_at - killed_at,
            "expired_at_unix": expired_wall,
            "election_s": done_at - expired_at,
            # From the expiry (its lower bound: the last read that found the broker) to
            # the last new leader's write in ZooKeeper.
            "election_written_s": elected_unix - last_present_wall,
            # The sweep that saw every partition led: the client sees the end up to this
            # late (on a busy machine the reads of 2,000 znodes take a while).
            "last_sweep_s": done_at - sweep_started,
            "total_s": done_at - killed_at,
        }
    finally:
        client.stop()
        cluster.stop()


def _controlled_shutdown(
    cluster: LocalCluster,
    admin: ZkAdmin,
    topics: list[str],
    leaders: dict[tuple[str, int], int],
    victim_id: int,
    setup_s: float,
    timeout: float,
    profile_dir: Path | None = None,
) -> dict[str, float | str]:
    """SIGTERM to ``victim_id``: its controlled shutdown hands every partition it leads
    to another in-sync replica before it exits. Times the handover (until every one of
    them has a live leader in ZooKeeper) and the exit. With ``profile_dir``, py-spy
    samples every broker meanwhile (``shutdown-broker<id>-<role>.txt``, collapsed
    stacks of the threads holding the GIL)."""
    orphans = [key for key, leader in leaders.items() if leader == victim_id]
    with contextlib.ExitStack() as profiling:
        if profile_dir is not None:
            from bench.profiling import Recorder

            for broker in cluster.brokers:
                assert broker.pid is not None
                role = "stopping" if broker.broker_id == victim_id else "live"
                raw = profile_dir / f"shutdown-broker{broker.broker_id}-{role}.txt"
                profiling.enter_context(Recorder(broker.pid, raw, rate=100))
            time.sleep(1)  # py-spy attached
        return _time_the_shutdown(cluster, admin, leaders, victim_id, setup_s, timeout, orphans)


def _time_the_shutdown(
    cluster: LocalCluster,
    admin: ZkAdmin,
    leaders: dict[tuple[str, int], int],
    victim_id: int,
    setup_s: float,
    timeout: float,
    orphans: list[tuple[str, int]],
) -> dict[str, float | str]:
    victim = cluster.broker(victim_id)
    assert victim.process is not None
    live = {b.broker_id for b in cluster.brokers} - {victim_id}
    started = time.monotonic()
    started_unix = time.time()
    victim.signal(signal.SIGTERM)
    handover_s = exit_s = None
    deadline = started + timeout
    while handover_s is None or exit_s is None:
        now = time.monotonic()
        if now > deadline:
            raise FailoverTimedOut(
                f"controlled shutdown of broker {victim_id}: after {timeout:.0f} s, "
                f"handover {'not done' if handover_s is None else f'{handover_s:.2f} s'}, "
                f"exit {'not yet' if exit_s is None else f'{exit_s:.2f} s'}"
            )
        if exit_s is None and victim.process.poll() is not None:
            exit_s = now - started
        # Done when every partition it led is led elsewhere, or has no other live
        # in-sync replica to go to (Kafka's controlled shutdown leaves those: a
        # follower that fell out of the ISR on a starved machine cannot lead).
        if handover_s is None and all(
            state.leader in live or not live.intersection(state.isr)
            for state in _states_of(admin, orphans).values()
        ):
            handover_s = time.monotonic() - started
            written = _write_times_unix(admin, orphans)
            handover_written_s = max(written) - started_unix
            # Partitions that stayed (no other in-sync replica) were written before.
            moved = [w for w in written if w >= started_unix - 0.001]
            first_written_s = min(moved, default=max(written)) - started_unix
        time.sleep(0.01)
    states = _states_of(admin, orphans)
    result = {
        "stayed_without_other_isr": sum(1 for s in states.values() if s.leader not in live),
        "partitions": len(leaders),
        "setup_s": setup_s,
        "led_by_victim": len(orphans),
        "handover_s": handover_s,
        "handover_written_s": handover_written_s,
        "exit_s": exit_s,
    }
    result.update(_shutdown_breakdown(cluster, victim_id, started_unix, first_written_s))
    return result


def _shutdown_breakdown(
    cluster: LocalCluster, victim_id: int, started_unix: float, first_written_s: float
) -> dict[str, float | str]:
    """Where a controlled shutdown's time went, from the brokers' logs and ZooKeeper's
    write times, each in seconds after the SIGTERM: the stopping broker's read of what it
    leads and its deregistration, the controller's first write (the time it took to
    notice and decide), and when the stopping broker's own metadata showed it had
    nothing left to hand over. The controller's ``reconciled ...`` line says how its
    reconcile split between reads and writes."""
    breakdown: dict[str, float | str] = {"first_written_s": first_written_s}
    victim_log = cluster.broker(victim_id).log_path
    for key, marker in (
        ("deregistered_s", "controlled shutdown: deregistered"),
        ("nothing_left_s", "controlled shutdown: nothing left to hand over"),
    ):
        lines = _log_lines_after(victim_log, started_unix, marker)
        if lines:
            breakdown[key] = lines[0][0] - started_unix
            if key == "deregistered_s" and "says ZooKeeper: " in lines[0][1]:
                # How it learnt what it led: its cache's states checked as it
                # deregistered, or a read of the states.
                breakdown["led_from"] = lines[0][1].split("says ZooKeeper: ", 1)[1].split(";")[0]
    for broker in cluster.brokers:
        if broker.broker_id == victim_id:
            continue
        lines = _log_lines_after(broker.log_path, started_unix, "reconciled ")
        if lines:
            breakdown["controller_reconcile"] = lines[0][1].split(": ", 1)[-1]
    return breakdown


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--controlled-shutdown",
        action="store_true",
        help="SIGTERM the broker leading the most (not the controller) instead of "
        "SIGKILL, and time its handover of leadership and its exit, e.g. "
        "--controlled-shutdown --partitions 3000 (about 1,000 led by each broker)",
    )
    parser.add_argument(
        "--keep",
        type=Path,
        metavar="DIR",
        help="keep each run's cluster (its brokers' logs) under DIR/run-<n> instead of "
        "a temporary directory, e.g. --keep /tmp/shutdown-logs",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="with --controlled-shutdown and --keep: py-spy samples every broker during the "
        "shutdown (collapsed stacks in the kept directory)",
    )
    args = parser.parse_args()

    def work_dir(prefix: str, index: int) -> contextlib.AbstractContextManager[str]:
        if args.keep is None:
            return tempfile.TemporaryDirectory(prefix=prefix)
        kept = args.keep / f"run-{index + 1}"
        kept.mkdir(parents=True, exist_ok=False)
        return contextlib.nullcontext(str(kept))

    if args.controlled_shutdown:
        runs = []
        for index in range(args.repeat):
            with work_dir("gregor-shutdown-", index) as directory:
                profile_dir = Path(directory) if args.profile else None
                runs.append(
                    run_once(
                        args.partitions, Path(directory), shutdown=True, profile_dir=profile_dir
                    )
                )
            print(f"run {index + 1}: {json.dumps(runs[-1])}", flush=True)
        for key in (
            "deregistered_s",
            "first_written_s",
            "handover_written_s",
            "handover_s",
            "nothing_left_s",
            "exit_s",
            "led_by_victim",
        ):
            values = [r[key] for r in runs if key in r]
            if not values:
                continue
            print(
                f"{key}: median {statistics.median(values):.2f} "
                f"[{min(values):.2f}-{max(values):.2f}]"
            )
        return
    runs = []
    for index in range(args.repeat):
        with work_dir("gregor-failover-", index) as directory:
            result = run_once(args.partitions, Path(directory))
        runs.append(result)
        print(f"run {index + 1}: {json.dumps(result)}", flush=True)
    summary = {
        key: {
            "median": statistics.median(r[key] for r in runs),
            "min": min(r[key] for r in runs),
            "max": max(r[key] for r in runs),
        }
        for key in ("detection_s", "election_s", "election_written_s", "last_sweep_s", "total_s")
    }
    RESULTS.mkdir(exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    out = RESULTS / f"failover-{stamp}.json"
    out.write_text(
        json.dumps(
            {"session_timeout_ms": SESSION_TIMEOUT_MS, "runs": runs, "summary": summary}, indent=2
        )
    )
    print(f"\n| {args.partitions} partitions, 3 brokers, RF 3 | median | min | max |")
    print("| --- | --- | --- | --- |")
    for key, label in (
        ("detection_s", "session expiry (detection)"),
        ("election_s", "all leaders re-elected after expiry (seen by a client)"),
        ("election_written_s", "... the last election written in ZooKeeper"),
        ("last_sweep_s", "... the client's last sweep of every partition's state"),
        ("total_s", "kill to every partition led"),
    ):
        s = summary[key]
        print(f"| {label} | {s['median']:.2f} s | {s['min']:.2f} s | {s['max']:.2f} s |")
    print(f"\nsaved {out}")


if __name__ == "__main__":
    main()
