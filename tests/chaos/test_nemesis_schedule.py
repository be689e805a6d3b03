"""The overlapping nemesis's bookkeeping: claims, the seeded schedule, overlaps (no
cluster: the cluster object is never started)."""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path

from gregor_broker.cluster.models import PartitionState

from .cluster import ChaosCluster
from .nemesis import Claims, FaultRecord, Nemesis, may_leave_an_isr


def test_a_claimed_resource_is_granted_again_only_after_release() -> None:
    claims = Claims()
    claims.acquire(["broker 1"])
    granted = threading.Event()

    def second() -> None:
        claims.acquire(["broker 1", "broker 2"])
        granted.set()

    thread = threading.Thread(target=second, daemon=True)
    thread.start()
    assert not granted.wait(0.3)
    assert claims.try_acquire(["broker 3"])  # unrelated resources stay free
    claims.release(["broker 1"])
    assert granted.wait(5)
    assert not claims.try_acquire(["broker 2"])
    thread.join(5)


def test_an_earlier_waiter_is_served_first() -> None:
    """crash_all waiting for every broker is not starved by single-broker faults."""
    claims = Claims()
    claims.acquire(["broker 1"])
    everyone_granted = threading.Event()

    def crash_all() -> None:
        claims.acquire(["broker 1", "broker 2", "broker 3"])
        everyone_granted.set()

    thread = threading.Thread(target=crash_all, daemon=True)
    thread.start()
    deadline = time.monotonic() + 5
    while not claims._waiting and time.monotonic() < deadline:
        time.sleep(0.01)
    # broker 2 is free, but the waiter asked for it first.
    assert not claims.try_acquire(["broker 2"])
    claims.release(["broker 1"])
    assert everyone_granted.wait(5)
    thread.join(5)


def _wait_until(condition, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)


def test_a_waiter_for_a_moving_victim_keeps_its_place_in_line() -> None:
    """A leader fault waiting for its leader is served before a later fault that asks for
    the same broker (it used to lose every such race and starve)."""
    claims = Claims()
    claims.acquire(["broker 1"])
    got: list[str] = []

    def leader_fault() -> None:
        got.append(claims.acquire_moving(lambda: "broker 1", timeout=10))

    def kill_broker() -> None:
        claims.acquire(["broker 1"], timeout=10)
        got.append("later")

    first = threading.Thread(target=leader_fault, daemon=True)
    first.start()
    _wait_until(lambda: any(entry[1] for entry in claims._waiting))
    second = threading.Thread(target=kill_broker, daemon=True)
    second.start()
    _wait_until(lambda: len(claims._waiting) == 2)
    claims.release(["broker 1"])
    _wait_until(lambda: bool(got))
    assert got == ["broker 1"]
    claims.release(["broker 1"])
    first.join(5)
    second.join(5)
    assert got == ["broker 1", "later"]


def test_a_waiter_follows_its_victim_when_it_moves() -> None:
    claims = Claims()
    claims.acquire(["broker 1"])
    leader = ["broker 1"]
    got: list[str] = []
    thread = threading.Thread(
        target=lambda: got.append(claims.acquire_moving(lambda: leader[0], timeout=10)),
        daemon=True,
    )
    thread.start()
    _wait_until(lambda: any(entry[1] for entry in claims._waiting))
    assert not got
    leader[0] = "broker 2"  # leadership moved to a free broker
    thread.join(5)
    assert got == ["broker 2"]
    assert not claims.try_acquire(["broker 2"])
    assert not claims._waiting


def _nemesis(tmp_path: Path, seed: int) -> Nemesis:
    return Nemesis(
        ChaosCluster(tmp_path),
        "chaos",
        6,
        random.Random(seed),
        log=lambda line: None,
        concurrency=4,
    )


def test_a_seed_replays_the_schedule_whichever_worker_draws(tmp_path: Path) -> None:
    first, second = _nemesis(tmp_path, 7), _nemesis(tmp_path, 7)
    drawn_first = [first.draw(worker=n % 4) for n in range(30)]
    drawn_second = [second.draw(worker=(n * 3) % 4) for n in range(30)]
    for (a, a_rng, a_pause), (b, b_rng, b_pause) in zip(drawn_first, drawn_second, strict=True):
        assert (a.kind, a_pause) == (b.kind, b_pause)
        assert a_rng.random() == b_rng.random()
    # Network kinds are skipped without namespaces; every other kind comes up each deck.
    kinds = [record.kind for record, _, _ in drawn_first[: len(first.kinds)]]
    assert sorted(kinds) == sorted(first.kinds)
    other = _nemesis(tmp_path, 8)
    assert [other.draw(0)[2] for _ in range(30)] != [pause for _, _, pause in drawn_first]


def test_overlaps_are_counted_per_kind_and_pair(tmp_path: Path) -> None:
    nemesis = _nemesis(tmp_path, 1)
    spans = [
        ("kill_broker", 0, 10),
        ("zookeeper_kill", 5, 8),
        ("reassign", 7, 20),
        ("kill_leader", 30, 31),
    ]
    for number, (kind, started, ended) in enumerate(spans, start=1):
        nemesis.history.append(
            FaultRecord(kind, drawn=started, started=started, ended=ended, number=number)
        )
    assert nemesis.overlaps() == {1: [2, 3], 2: [1, 3], 3: [1, 2], 4: []}
    summary = nemesis.overlap_summary()
    assert summary["most_at_once"] == 3
    assert summary["overlapped_by_kind"] == {"kill_broker": 1, "reassign": 1, "zookeeper_kill": 1}
    assert summary["overlapping_pairs"] == {
        "kill_broker + zookeeper_kill": 1,
        "kill_broker + reassign": 1,
        "reassign + zookeeper_kill": 1,
    }


def test_a_torn_tail_never_picks_a_moved_replicas_delete_directory(tmp_path: Path) -> None:
    """A replica moved away leaves ``<topic>-<n>.<id>-delete`` until the broker removes it:
    not a partition to tear (its name made the fault fail with ValueError: 'delete')."""
    from gregor_broker.devtools.local_cluster import BrokerProcess

    cluster = ChaosCluster(tmp_path)
    broker = BrokerProcess(broker_id=1, directory=tmp_path / "broker-1", zookeeper_connect="")
    cluster.brokers[1] = broker
    for name in ("chaos-1", "chaos-2.0a1b-delete"):
        (broker.log_dir / name).mkdir(parents=True)
        (broker.log_dir / name / "00000000000000000000.log").write_bytes(b"x" * 10_000)
    for seed in range(20):
        what = cluster.tear_tail(1, random.Random(seed), "chaos")
        assert "chaos-1/" in what, what
    assert (
        broker.log_dir / "chaos-2.0a1b-delete" / "00000000000000000000.log"
    ).stat().st_size == 10_000


def test_a_torn_tail_waits_for_an_isr_only_when_one_can_drop_its_victim() -> None:
    """An ISR never drops its last member, so a victim that is the only in-sync replica
    of each of its partitions would be held down for the whole wait with every one of
    them offline (chaos seed 42: 20 s, twice, all partitions): no wait then."""

    def state(*isr: int) -> PartitionState:
        return PartitionState(controller_epoch=1, leader=isr[0], leader_epoch=3, isr=isr)

    assert not may_leave_an_isr(2, [state(2), state(2)])
    assert may_leave_an_isr(2, [state(2), state(2, 3)])  # the second can drop it
    assert may_leave_an_isr(2, [state(2), state(1, 3)])  # already dropped from one
    assert may_leave_an_isr(2, [state(2), None])  # a partition without a state yet
    assert may_leave_an_isr(2, [])  # nothing known: wait as before
