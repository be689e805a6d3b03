"""The nemesis: a seeded schedule of faults, each applied, undone, and waited out.

Every fault kind is one function ``(Nemesis) -> str`` (the string describes what it did)
that leaves the cluster whole again when it returns: killed processes restarted, paused
ones resumed, partitions healed, reassignments finished. Between faults the nemesis
waits for every broker to be registered and every partition to have a leader and its
full ISR (bounded), then a random pause under load. All randomness comes from one
``random.Random(seed)``, so a seed replays the same choices (timings under load still
differ: the seed reproduces the schedule, not the interleaving).
"""

from __future__ import annotations

import contextlib
import random
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from gregor_broker.cluster.models import PartitionReassignment

from .cluster import SESSION_TIMEOUT_MS, ChaosCluster

SESSION_S = SESSION_TIMEOUT_MS / 1000
SETTLE_TIMEOUT_S = 45.0


@dataclass
class FaultRecord:
    kind: str
    started: float  # time.monotonic()
    ended: float = 0.0  # the fault undone
    settled: float = 0.0  # the cluster whole again (or the settle timeout passed)
    settled_ok: bool = True
    what: str = ""


@dataclass
class Nemesis:
    cluster: ChaosCluster
    topic: str
    partitions: int
    rng: random.Random
    log: Callable[[str], None] = print
    kinds: list[str] = field(default_factory=list)
    history: list[FaultRecord] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        wanted = self.kinds or list(FAULTS)
        unknown = [kind for kind in wanted if kind not in FAULTS]
        if unknown:
            raise ValueError(f"unknown fault kinds {unknown}; known: {sorted(FAULTS)}")
        self.kinds = []
        for kind in wanted:
            if kind in NETWORK_FAULTS and self.cluster.network is None:
                self.skipped[kind] = (
                    f"network namespaces unavailable: {self.cluster.network_unavailable}"
                )
            else:
                self.kinds.append(kind)
        for kind, reason in self.skipped.items():
            self.log(f"skipping fault kind {kind}: {reason}")

    # the schedule ----------------------------------------------------------------------
    def run(self, duration: float) -> None:
        """Apply faults until ``duration`` seconds have passed (the last one completes).

        Kinds are drawn from a shuffled deck, so every kind comes up about equally often.
        """
        deadline = time.monotonic() + duration
        deck: list[str] = []
        while time.monotonic() < deadline:
            if not deck:
                deck = list(self.kinds)
                self.rng.shuffle(deck)
            kind = deck.pop()
            pause = self.rng.uniform(0.5, 2.0)
            time.sleep(pause)
            record = FaultRecord(kind, time.monotonic())
            self.history.append(record)
            try:
                record.what = FAULTS[kind](self)
            except Exception as error:  # a fault that could not be applied is reported
                record.what = f"failed to apply: {error!r}"
                self.restore()
            record.ended = time.monotonic()
            record.settled_ok = self.settle()
            record.settled = time.monotonic()
            self.log(
                f"fault {len(self.history):3d} {kind:18s} {record.what} "
                f"(undone after {record.ended - record.started:.1f} s, "
                f"{'settled' if record.settled_ok else 'NOT settled'} after "
                f"{record.settled - record.ended:.1f} s)"
            )

    # helpers for faults ----------------------------------------------------------------
    def leader_of_random_partition(self) -> tuple[int, int]:
        partition = self.rng.randrange(self.partitions)
        state = self.cluster.partition_state(self.topic, partition)
        if state is None or state.leader < 0:
            return partition, self.rng.choice(sorted(self.cluster.brokers))
        return partition, state.leader

    def random_broker(self) -> int:
        return self.rng.choice(sorted(self.cluster.brokers))

    def down_for(self, low: float, high: float) -> float:
        seconds = self.rng.uniform(low, high)
        time.sleep(seconds)
        return seconds

    def restore(self) -> None:
        """Whatever a failed fault left: every process running, network healed."""
        cluster = self.cluster
        cluster.signal_zookeeper(signal.SIGCONT)
        with contextlib.suppress(Exception):
            cluster.start_zookeeper()
        for broker_id, broker in cluster.brokers.items():
            if cluster.network is not None:
                with contextlib.suppress(Exception):
                    cluster.heal(broker_id)
            broker.resume()
            if not broker.is_running():
                with contextlib.suppress(Exception):
                    cluster.restart(broker_id)

    def settle(self) -> bool:
        """Every broker registered, every partition led with its full ISR (bounded)."""
        cluster = self.cluster
        everyone = set(cluster.brokers)

        def whole() -> bool:
            if cluster.registered() != everyone:
                return False
            for partition in range(self.partitions):
                state = cluster.partition_state(self.topic, partition)
                if state is None or state.leader < 0 or len(state.isr) < len(everyone):
                    return False
            return True

        return cluster.wait(whole, SETTLE_TIMEOUT_S)


# fault kinds ---------------------------------------------------------------------------
def kill_broker(nemesis: Nemesis) -> str:
    victim = nemesis.random_broker()
    return _kill_and_restart(nemesis, victim, f"broker {victim}")


def kill_controller(nemesis: Nemesis) -> str:
    victim = nemesis.cluster.controller() or nemesis.random_broker()
    return _kill_and_restart(nemesis, victim, f"controller {victim}")


def kill_leader(nemesis: Nemesis) -> str:
    partition, victim = nemesis.leader_of_random_partition()
    return _kill_and_restart(nemesis, victim, f"leader {victim} of partition {partition}")


def _kill_and_restart(nemesis: Nemesis, victim: int, who: str) -> str:
    nemesis.cluster.kill(victim)
    down = nemesis.down_for(0.2, 3.0)
    nemesis.cluster.restart(victim)
    return f"kill -9 {who}, down {down:.1f} s"


def zombie_leader(nemesis: Nemesis) -> str:
    partition, victim = nemesis.leader_of_random_partition()
    nemesis.cluster.pause(victim)
    stopped = nemesis.down_for(SESSION_S + 1.0, SESSION_S + 4.0)
    nemesis.cluster.resume(victim)
    return f"SIGSTOP leader {victim} of partition {partition} for {stopped:.1f} s"


def crash_all(nemesis: Nemesis) -> str:
    cluster = nemesis.cluster
    for broker_id in cluster.brokers:
        cluster.kill(broker_id)
    down = nemesis.down_for(0.2, 2.0)
    for broker in cluster.brokers.values():
        broker.start()
    for broker in cluster.brokers.values():
        broker.wait_registered(90)
    return f"kill -9 every broker, down {down:.1f} s"


def zookeeper_kill(nemesis: Nemesis) -> str:
    nemesis.cluster.kill_zookeeper()
    # Sometimes shorter, sometimes longer than the brokers' session timeout.
    down = nemesis.down_for(0.5, SESSION_S + 3.0)
    nemesis.cluster.start_zookeeper()
    return f"kill -9 ZooKeeper, down {down:.1f} s"


def zookeeper_pause(nemesis: Nemesis) -> str:
    nemesis.cluster.signal_zookeeper(signal.SIGSTOP)
    stopped = nemesis.down_for(1.0, SESSION_S + 3.0)
    nemesis.cluster.signal_zookeeper(signal.SIGCONT)
    return f"SIGSTOP ZooKeeper for {stopped:.1f} s"


def zookeeper_flap(nemesis: Nemesis) -> str:
    flaps = nemesis.rng.randint(3, 5)
    for _ in range(flaps):
        nemesis.cluster.kill_zookeeper()
        nemesis.down_for(0.1, 1.0)
        nemesis.cluster.start_zookeeper()
        nemesis.down_for(0.3, 1.5)
    return f"ZooKeeper killed and restarted {flaps} times"


def torn_tail(nemesis: Nemesis) -> str:
    victim = nemesis.random_broker()
    nemesis.cluster.kill(victim)
    what = nemesis.cluster.tear_tail(victim, nemesis.rng, nemesis.topic)
    nemesis.cluster.restart(victim)
    return f"kill -9 broker {victim}, {what}"


def network_partition(nemesis: Nemesis) -> str:
    return _cut_off(nemesis, inbound_only=False)


def network_partition_inbound(nemesis: Nemesis) -> str:
    return _cut_off(nemesis, inbound_only=True)


def _cut_off(nemesis: Nemesis, *, inbound_only: bool) -> str:
    partition, victim = nemesis.leader_of_random_partition()
    nemesis.cluster.cut_off(victim, inbound_only=inbound_only)
    try:
        cut = nemesis.down_for(1.0, SESSION_S + 4.0)
    finally:
        nemesis.cluster.heal(victim)
    way = "inbound traffic of" if inbound_only else "both ways"
    return f"cut off {way} leader {victim} of partition {partition} for {cut:.1f} s"


def reassign(nemesis: Nemesis) -> str:
    """Move a partition to two replicas, then back to three in a new order: the replica
    that left copies the log again from scratch, and leadership may move."""
    cluster = nemesis.cluster
    partition = nemesis.rng.randrange(nemesis.partitions)
    admin = cluster.admin()
    current = admin.get_topic(nemesis.topic)
    assert current is not None
    replicas = list(current.partitions[partition])
    smaller = nemesis.rng.sample(replicas, 2)
    larger = nemesis.rng.sample(sorted(cluster.brokers), len(cluster.brokers))
    for target in (smaller, larger):
        admin.request_reassignment(
            PartitionReassignment({(nemesis.topic, partition): tuple(target)})
        )
        if not cluster.wait(lambda: admin.get_reassignment() is None, 60):
            raise TimeoutError(f"reassignment of partition {partition} to {target} not done")
    return f"partition {partition}: {replicas} -> {smaller} -> {larger}"


FAULTS: dict[str, Callable[[Nemesis], str]] = {
    "kill_broker": kill_broker,
    "kill_controller": kill_controller,
    "kill_leader": kill_leader,
    "zombie_leader": zombie_leader,
    "crash_all": crash_all,
    "zookeeper_kill": zookeeper_kill,
    "zookeeper_pause": zookeeper_pause,
    "zookeeper_flap": zookeeper_flap,
    "torn_tail": torn_tail,
    "network_partition": network_partition,
    "network_partition_inbound": network_partition_inbound,
    "reassign": reassign,
}
NETWORK_FAULTS = {"network_partition", "network_partition_inbound"}
