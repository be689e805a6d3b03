"""The nemesis: a seeded schedule of faults, each applied, undone, and waited out.

Every fault kind is one function ``(Fault) -> str`` (the string describes what it did)
that leaves what it touched whole again when it returns: killed processes restarted and
registered, paused ones resumed, partitions healed, reassignments finished.

**One at a time** (``concurrency=1``): between faults the nemesis waits for every broker
to be registered and every partition to have a leader and its full ISR (bounded), then
pauses under load.

**Overlapping** (``concurrency=N``): N workers draw kinds from one shared shuffled deck
and run their faults at the same time. A fault first takes *claims* on what it will
touch, so two faults never fight over one process: a broker for kill, zombie and
torn-tail faults; a broker host's network for the network faults (they may overlap a
process fault on the same broker); ZooKeeper for the ZooKeeper faults; every broker for
``crash_all``; its partition for ``reassign``. Claims are granted in the
order they were asked for, so ``crash_all`` is not starved by single-broker faults. A
worker waits only a short pause between its faults (no cluster-wide settle); the
campaign settles once at the end, before the checker.

All randomness comes from one ``random.Random(seed)``: each drawn fault gets its kind,
its pause and a seed for its own choices (victim, durations, bytes cut) from it, in deck
order. A seed therefore replays the same schedule of choices; timings under load still
differ, and with overlapping faults so does which worker runs which fault and which
faults overlap (the seed reproduces the schedule, not the interleaving).
"""

from __future__ import annotations

import contextlib
import itertools
import random
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from gregor_broker.cluster.models import PartitionState

from .cluster import ChaosCluster

SETTLE_TIMEOUT_S = 45.0
CLAIM_TIMEOUT_S = 180.0
TORN_TAIL_WAIT_S = 20.0
REASSIGN_STEP_TIMEOUT_S = 120.0
# How long a killed broker stays down before its restart: shorter than its session, so
# the new run usually starts while the old session still holds the broker's registration
# and waits for ZooKeeper to expire it, as a broker restarted by a supervisor does.
KILLED_DOWN_S = (0.2, 1.5)
ZOOKEEPER = "zookeeper"


def broker_claim(broker_id: int) -> str:
    return f"broker {broker_id}"


def network_claim(broker_id: int) -> str:
    """A broker host's network: the network faults cut it, the process faults leave it
    alone, so the two kinds may hit one broker at once (a broker killed, restarted or
    stopped while cut off is a fault a real network gives too)."""
    return f"network {broker_id}"


def partition_claim(partition: int) -> str:
    return f"partition {partition}"


class CampaignOver(Exception):
    """The campaign's time ran out while a fault waited for its claims."""


@dataclass
class FaultRecord:
    kind: str
    drawn: float  # time.monotonic() when a worker took it from the deck
    started: float = 0.0  # its claims granted, the fault applied from here
    ended: float = 0.0  # the fault undone, its claims released
    settled: float = 0.0  # one at a time: the cluster whole again (or the settle timed out)
    settled_ok: bool = True
    what: str = ""
    worker: int = 0
    number: int = 0  # position in the schedule (1-based)
    claims: tuple[str, ...] = ()


class Claims:
    """Named resources a fault holds while it runs; granted first come, first served.

    ``acquire`` waits until every named resource is free and no earlier waiter wants any
    of them, then takes them all at once (no fault ever holds some while waiting for
    others, so there is no deadlock). ``try_acquire`` takes them only if that is possible
    right now. ``acquire_moving`` waits in the same line for one resource that may change
    while it waits (the controller, a partition's leader): without a place in line such a
    fault lost every race to the queued ones and waited minutes (106 s seen) for a leader.
    """

    def __init__(self) -> None:
        self._held: set[str] = set()
        # [ticket, resources]: a moving waiter's resources change while it waits.
        self._waiting: list[list] = []
        self._tickets = itertools.count()
        self._condition = threading.Condition()

    def _free(self, wanted: frozenset[str], ticket: int | None) -> bool:
        if wanted & self._held:
            return False
        return not any(
            earlier < (ticket if ticket is not None else 1 << 62) and wanted & resources
            for earlier, resources in self._waiting
        )

    def try_acquire(self, resources: Iterable[str]) -> bool:
        wanted = frozenset(resources)
        with self._condition:
            if not self._free(wanted, None):
                return False
            self._held |= wanted
            return True

    def acquire(self, resources: Iterable[str], timeout: float = CLAIM_TIMEOUT_S) -> None:
        wanted = frozenset(resources)
        deadline = time.monotonic() + timeout
        with self._condition:
            ticket = next(self._tickets)
            entry = [ticket, wanted]
            self._waiting.append(entry)
            try:
                while not self._free(wanted, ticket):
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise TimeoutError(f"claims {sorted(wanted)} not free in {timeout:.0f} s")
                    self._condition.wait(min(remaining, 1.0))
                self._held |= wanted
            finally:
                self._waiting.remove(entry)
                self._condition.notify_all()

    def acquire_moving(self, target: Callable[[], str | None], timeout: float) -> str:
        """Wait in line for the resource ``target()`` names (asked again every 0.2 s and
        whenever a claim changes; None or an exception: nothing to claim right now), take
        it and return it. The place in line is kept while the target moves."""
        deadline = time.monotonic() + timeout
        with self._condition:
            ticket = next(self._tickets)
            entry: list = [ticket, frozenset()]
            self._waiting.append(entry)
        try:
            while True:
                try:
                    resource = target()
                except Exception:  # e.g. ZooKeeper down: ask again
                    resource = None
                with self._condition:
                    if resource is not None:
                        wanted = frozenset([resource])
                        if entry[1] != wanted:
                            entry[1] = wanted
                            self._condition.notify_all()  # a resource it no longer wants
                        if self._free(wanted, ticket):
                            self._held |= wanted
                            return resource
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise TimeoutError(
                            f"no {resource or 'resource'} to claim in {timeout:.0f} s"
                        )
                    self._condition.wait(min(remaining, 0.2))
        finally:
            with self._condition:
                self._waiting.remove(entry)
                self._condition.notify_all()

    def release(self, resources: Iterable[str]) -> None:
        with self._condition:
            self._held -= set(resources)
            self._condition.notify_all()


@dataclass
class Fault:
    """One fault being applied: its own random choices, its claims, its record."""

    nemesis: Nemesis
    rng: random.Random
    record: FaultRecord
    held: list[str] = field(default_factory=list)

    @property
    def cluster(self) -> ChaosCluster:
        return self.nemesis.cluster

    # claims ----------------------------------------------------------------------------
    def claim(self, *resources: str) -> None:
        timeout = self.nemesis.claim_timeout()
        try:
            self.nemesis.claims.acquire(resources, timeout)
        except TimeoutError:
            self.nemesis.check_campaign_over()
            raise
        self._granted(resources)

    def claim_broker_of(
        self, victim: Callable[[], int], claim_of: Callable[[int], str] = broker_claim
    ) -> int:
        """Claim the broker ``victim()`` names now (asked again while it is claimed, since
        the controller or a leader moves meanwhile), or with ``claim_of=network_claim`` its
        network; returns it."""
        claims: dict[str, int] = {}

        def target() -> str | None:
            broker_id = victim()
            if broker_id is None:
                return None
            claims[claim_of(broker_id)] = broker_id
            return claim_of(broker_id)

        try:
            claimed = self.nemesis.claims.acquire_moving(target, self.nemesis.claim_timeout())
        except TimeoutError:
            self.nemesis.check_campaign_over()
            raise
        self._granted([claimed])
        return claims[claimed]

    def _granted(self, resources: Iterable[str]) -> None:
        self.held.extend(resources)
        self.record.claims = tuple(self.held)
        self.record.started = time.monotonic()

    def release(self) -> None:
        self.nemesis.claims.release(self.held)
        self.held = []

    def restore(self) -> None:
        """Undo whatever a fault that failed left of what it claimed."""
        cluster = self.cluster
        if ZOOKEEPER in self.held:
            cluster.signal_zookeeper(signal.SIGCONT)
            with contextlib.suppress(Exception):
                cluster.start_zookeeper()
        for broker_id, broker in cluster.brokers.items():
            if network_claim(broker_id) in self.held and cluster.network is not None:
                with contextlib.suppress(Exception):
                    cluster.heal(broker_id)
            if broker_claim(broker_id) not in self.held:
                continue
            broker.resume()
            if not broker.is_running():
                with contextlib.suppress(Exception):
                    cluster.restart(broker_id)

    # helpers for faults ----------------------------------------------------------------
    def random_broker(self) -> int:
        return self.rng.choice(sorted(self.cluster.brokers))

    def claim_random_broker(self) -> int:
        victim = self.random_broker()
        self.claim(broker_claim(victim))
        return victim

    def claim_leader_of_random_partition(
        self, claim_of: Callable[[int], str] = broker_claim
    ) -> tuple[int, int]:
        """A random partition and its leader (a random broker while it has none), claimed
        (the process, or with ``claim_of=network_claim`` the network of its host)."""
        partition = self.rng.randrange(self.nemesis.partitions)
        fallback = self.random_broker()

        def leader() -> int:
            state = self.cluster.partition_state(self.nemesis.topic, partition)
            return fallback if state is None or state.leader < 0 else state.leader

        return partition, self.claim_broker_of(leader, claim_of)

    def down_for(self, low: float, high: float) -> float:
        seconds = self.rng.uniform(low, high)
        time.sleep(seconds)
        return seconds


@dataclass
class Nemesis:
    cluster: ChaosCluster
    topic: str
    partitions: int
    rng: random.Random
    log: Callable[[str], None] = print
    kinds: list[str] = field(default_factory=list)
    concurrency: int = 1
    pause_s: tuple[float, float] = (0.5, 2.0)  # between one worker's faults
    history: list[FaultRecord] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    claims: Claims = field(default_factory=Claims)

    def __post_init__(self) -> None:
        wanted = self.kinds or list(FAULTS)
        unknown = [kind for kind in wanted if kind not in FAULTS]
        if unknown:
            raise ValueError(f"unknown fault kinds {unknown}; known: {sorted(FAULTS)}")
        if self.concurrency < 1:
            raise ValueError("concurrency must be at least 1")
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
        self._deck: list[str] = []
        self._deadline: float | None = None
        self._draw_lock = threading.Lock()

    # the schedule ----------------------------------------------------------------------
    def draw(self, worker: int) -> tuple[FaultRecord, random.Random, float]:
        """The next fault of the schedule: its kind (from a shuffled deck, so every kind
        comes up about equally often), the pause before it and its own random source."""
        with self._draw_lock:
            if not self._deck:
                self._deck = list(self.kinds)
                self.rng.shuffle(self._deck)
            kind = self._deck.pop()
            pause = self.rng.uniform(*self.pause_s)
            fault_rng = random.Random(self.rng.getrandbits(64))
            record = FaultRecord(kind, time.monotonic(), worker=worker)
            self.history.append(record)
            record.number = len(self.history)
        return record, fault_rng, pause

    def claim_timeout(self) -> float:
        """How long a fault may wait for its claims: not past the end of the campaign (a
        fault still waiting then is dropped, see ``check_campaign_over``)."""
        if self._deadline is None:
            return CLAIM_TIMEOUT_S
        return min(CLAIM_TIMEOUT_S, max(self._deadline - time.monotonic(), 0.0))

    def check_campaign_over(self) -> None:
        if self._deadline is not None and time.monotonic() >= self._deadline:
            raise CampaignOver

    def run(self, duration: float) -> None:
        """Apply faults until ``duration`` seconds have passed: faults under way finish,
        faults still waiting for their claims then are dropped (not counted)."""
        deadline = self._deadline = time.monotonic() + duration
        if self.concurrency == 1:
            self._work(0, deadline, settle=True)
            return
        workers = [
            threading.Thread(
                target=self._work, args=(n, deadline, False), name=f"nemesis-{n}", daemon=True
            )
            for n in range(self.concurrency)
        ]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()

    def _work(self, worker: int, deadline: float, settle: bool) -> None:
        while time.monotonic() < deadline:
            record, fault_rng, pause = self.draw(worker)
            time.sleep(pause)
            if not self.apply(record, fault_rng):
                self.log(
                    f"fault {record.number:3d} [w{worker}] {record.kind} dropped: {record.what}"
                )
                continue
            if settle:
                record.settled_ok = self.settle()
                record.settled = time.monotonic()
            started = record.started or record.drawn
            self.log(
                f"fault {record.number:3d} [w{worker}] {record.kind:25s} {record.what} "
                f"(claims waited {started - record.drawn - pause:.1f} s, "
                f"undone after {record.ended - started:.1f} s"
                + (
                    f", {'settled' if record.settled_ok else 'NOT settled'} after "
                    f"{record.settled - record.ended:.1f} s)"
                    if settle
                    else ")"
                )
            )

    def apply(self, record: FaultRecord, fault_rng: random.Random) -> bool:
        """Apply one fault; False when it was dropped (the campaign ended first)."""
        fault = Fault(self, fault_rng, record)
        record.started = time.monotonic()  # moved on when its claims are granted
        try:
            record.what = FAULTS[record.kind](fault)
        except CampaignOver:
            record.what = "the campaign ended while it waited for its claims"
            with self._draw_lock:
                self.history.remove(record)
            return False
        except Exception as error:  # a fault that could not be applied is reported
            first_line = (str(error).splitlines() or [""])[0]
            record.what = f"failed to apply: {type(error).__name__}: {first_line}"
            fault.restore()
        finally:
            record.ended = time.monotonic()
            fault.release()
        return True

    def restore(self) -> None:
        """Whatever the faults left: every process running, network healed."""
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

    # the report ------------------------------------------------------------------------
    def overlaps(self) -> dict[int, list[int]]:
        """For each fault (by number), the faults that were applied while it was."""
        spans = [(r.number, r.started, r.ended) for r in self.history if r.ended]
        result: dict[int, list[int]] = {number: [] for number, _, _ in spans}
        for (a, a_start, a_end), (b, b_start, b_end) in itertools.combinations(spans, 2):
            if a_start < b_end and b_start < a_end:
                result[a].append(b)
                result[b].append(a)
        return result

    def overlap_summary(self) -> dict[str, object]:
        """How many faults of each kind overlapped another, which kinds overlapped which,
        and the most faults applied at once."""
        overlaps = self.overlaps()
        by_number = {r.number: r for r in self.history}
        overlapped: Counter[str] = Counter()
        pairs: Counter[str] = Counter()
        for number, others in overlaps.items():
            if others:
                overlapped[by_number[number].kind] += 1
            for other in others:
                if other > number:
                    pair = sorted((by_number[number].kind, by_number[other].kind))
                    pairs[" + ".join(pair)] += 1
        applied = [r for r in self.history if r.ended]
        events = sorted([(r.ended, -1) for r in applied] + [(r.started, 1) for r in applied])
        most = current = 0
        for _, step in events:
            current += step
            most = max(most, current)
        return {
            "overlapped_by_kind": dict(sorted(overlapped.items())),
            "overlapping_pairs": dict(pairs.most_common()),
            "most_at_once": most,
        }


# fault kinds ---------------------------------------------------------------------------
def kill_broker(fault: Fault) -> str:
    victim = fault.claim_random_broker()
    return _kill_and_restart(fault, victim, f"broker {victim}")


def kill_controller(fault: Fault) -> str:
    fallback = fault.random_broker()
    victim = fault.claim_broker_of(lambda: fault.cluster.controller() or fallback)
    return _kill_and_restart(fault, victim, f"controller {victim}")


def kill_leader(fault: Fault) -> str:
    partition, victim = fault.claim_leader_of_random_partition()
    return _kill_and_restart(fault, victim, f"leader {victim} of partition {partition}")


def _kill_and_restart(fault: Fault, victim: int, who: str) -> str:
    fault.cluster.kill(victim)
    down = fault.down_for(*KILLED_DOWN_S)
    fault.cluster.restart(victim)
    return f"kill -9 {who}, down {down:.1f} s"


def zombie_leader(fault: Fault) -> str:
    partition, victim = fault.claim_leader_of_random_partition()
    fault.cluster.pause(victim)
    # Past the session timeout, so the leader's registration expires while it is stopped.
    session = fault.cluster.session_s
    stopped = fault.down_for(session + 0.3, session + 1.5)
    fault.cluster.resume(victim)
    return f"SIGSTOP leader {victim} of partition {partition} for {stopped:.1f} s"


def crash_all(fault: Fault) -> str:
    cluster = fault.cluster
    fault.claim(*(broker_claim(broker_id) for broker_id in cluster.brokers))
    for broker_id in cluster.brokers:
        cluster.kill(broker_id)
    down = fault.down_for(*KILLED_DOWN_S)
    for broker in cluster.brokers.values():
        broker.start()
    cluster.wait_registered(list(cluster.brokers), 90)
    return f"kill -9 every broker, down {down:.1f} s"


def zookeeper_kill(fault: Fault) -> str:
    fault.claim(ZOOKEEPER)
    fault.cluster.kill_zookeeper()
    # Sometimes shorter, sometimes longer than the brokers' session timeout (the restart
    # adds its JVM start, 1-2.5 s, to the time ZooKeeper is away).
    down = fault.down_for(0.5, fault.cluster.session_s + 0.5)
    fault.cluster.start_zookeeper()
    return f"kill -9 ZooKeeper, down {down:.1f} s"


def zookeeper_pause(fault: Fault) -> str:
    fault.claim(ZOOKEEPER)
    fault.cluster.signal_zookeeper(signal.SIGSTOP)
    stopped = fault.down_for(0.5, fault.cluster.session_s + 0.5)
    fault.cluster.signal_zookeeper(signal.SIGCONT)
    return f"SIGSTOP ZooKeeper for {stopped:.1f} s"


def zookeeper_flap(fault: Fault) -> str:
    fault.claim(ZOOKEEPER)
    # Each restart is a JVM start (1-2.5 s) before ZooKeeper serves again; up for a
    # moment, enough for clients to reconnect and sessions to resume, then killed again.
    flaps = fault.rng.randint(2, 3)
    for flap in range(flaps):
        fault.cluster.kill_zookeeper()
        fault.down_for(0.1, 1.0)
        fault.cluster.start_zookeeper()
        if flap < flaps - 1:
            fault.down_for(0.2, 1.0)
    return f"ZooKeeper killed and restarted {flaps} times"


def may_leave_an_isr(victim: int, states: list[PartitionState | None]) -> bool:
    """Whether some ISR of ``victim``'s partitions can drop it while it is down. An ISR
    never drops its last member (no unclean election), and only a leader grows one, so a
    broker that is the only in-sync replica of each of its partitions stays in all of
    them however long it is down. A partition without a state, or whose ISR already left
    the victim out, counts as one that can."""
    return not states or any(
        state is None or victim not in state.isr or len(state.isr) > 1 for state in states
    )


def torn_tail(fault: Fault) -> str:
    """kill -9 of a broker and the last bytes of one of its partitions' active segment
    cut: what a power loss leaves of data not yet flushed.

    Kafka does not fsync on acknowledgement: acks=all keeps data through the loss of
    one replica's unflushed tail because other in-sync replicas hold it. A tear of a
    replica that is still in the ISR can destroy the last copy when other faults took the
    other replicas away meanwhile (the ISR shrunk to the victim alone; Kafka loses such
    data too, the case KIP-966 addresses), so the nemesis tears only a partition whose
    ISR in ZooKeeper no longer holds the victim: that replica can lead again only after
    catching up, whatever else fails. The victim stays down until the controller or the
    leader has dropped it from some ISR (its session timeout, or the replica lag time).
    """
    victim = fault.claim_random_broker()
    cluster = fault.cluster
    cluster.kill(victim)
    topic = fault.nemesis.topic
    # Only live replica directories: a moved replica's ``<topic>-<n>.<id>-delete`` is not.
    present = sorted(
        int(suffix)
        for d in cluster.brokers[victim].log_dir.glob(f"{topic}-*")
        if (suffix := d.name.rsplit("-", 1)[1]).isdigit() and any(d.glob("*.log"))
    )
    out_of_sync: list[int] = []

    def dropped() -> bool:
        out_of_sync[:] = [
            p
            for p in present
            if (state := cluster.partition_state(topic, p)) is not None and victim not in state.isr
        ]
        return bool(out_of_sync)

    states = [cluster.partition_state(topic, p) for p in present]
    if not may_leave_an_isr(victim, states):
        # Waiting could only hold every one of its partitions offline for the full wait
        # (chaos seed 42: twice, every partition, 20 s each): down as a killed broker is.
        down = fault.down_for(*KILLED_DOWN_S)
        what = f"nothing torn: the only ISR member of its partitions (down {down:.1f} s)"
    elif cluster.wait(dropped, TORN_TAIL_WAIT_S):
        partition = fault.rng.choice(out_of_sync)
        what = cluster.tear_tail(victim, fault.rng, topic, partition)
    else:
        what = f"nothing torn: no ISR dropped broker {victim} within {TORN_TAIL_WAIT_S:.0f} s"
    cluster.restart(victim)
    return f"kill -9 broker {victim}, {what}"


def torn_leader(fault: Fault) -> str:
    """kill -9 of a partition's leader, the last bytes of that partition's active segment
    cut (a power loss), and a restart at once, while ZooKeeper still names it leader.

    Kafka keeps acks=all writes through this: the other in-sync replicas hold what the
    leader lost, and a restarted broker leads nothing until the controller has elected
    it in its new run, which it does only after another in-sync replica, if one is live.
    So the fault claims every broker, every broker's network and ZooKeeper: no other
    fault takes those copies away meanwhile, or makes the controller count them dead (a
    ZooKeeper outage that expired the other members' sessions left the restarted leader
    the only live member of its ISR, and it was elected, seed 20261207; Kafka's
    controller elects a live in-sync replica too). It tears the leader only while
    another member of its ISR is in sync in its current run (registered before the
    state was written: a member restarted since, say by the ``crash_all`` just before,
    is not yet known to the controller, and two restarted members of one ISR are the
    KIP-966 case, whichever is elected may be the one that lost data). The claims are
    held until the victim is in sync again in its new run, at most ``TORN_TAIL_WAIT_S``
    each way.
    """
    cluster = fault.cluster
    fault.claim(
        ZOOKEEPER,
        *(broker_claim(broker_id) for broker_id in cluster.brokers),
        *(network_claim(broker_id) for broker_id in cluster.brokers),
    )
    topic = fault.nemesis.topic
    partition = fault.rng.randrange(fault.nemesis.partitions)
    found: list[int] = []

    def led_with_a_copy_elsewhere() -> bool:
        state, members = cluster.in_sync_in_current_runs(topic, partition)
        if state is None or state.leader not in members or len(members) < 2:
            return False
        found[:] = [state.leader]
        return True

    if not cluster.wait(led_with_a_copy_elsewhere, TORN_TAIL_WAIT_S):
        return (
            f"nothing torn: partition {partition} had no leader with another in-sync replica "
            f"in its current run within {TORN_TAIL_WAIT_S:.0f} s"
        )
    victim = found[0]
    cluster.kill(victim)
    # Up to 64 KiB: the batches of the last moments before the power went.
    what = cluster.tear_tail(victim, fault.rng, topic, partition, max_cut=65536)
    cluster.restart(victim)
    waited = time.monotonic()
    back = cluster.wait(
        lambda: victim in cluster.in_sync_in_current_runs(topic, partition)[1], TORN_TAIL_WAIT_S
    )
    waited = time.monotonic() - waited
    return f"kill -9 leader {victim} of partition {partition}, {what}, restarted; " + (
        f"in sync again after {waited:.1f} s" if back else f"not in sync after {waited:.0f} s"
    )


def network_partition(fault: Fault) -> str:
    return _cut_off(fault, inbound_only=False)


def network_partition_inbound(fault: Fault) -> str:
    return _cut_off(fault, inbound_only=True)


def _cut_off(fault: Fault, *, inbound_only: bool) -> str:
    partition, victim = fault.claim_leader_of_random_partition(network_claim)
    fault.cluster.cut_off(victim, inbound_only=inbound_only)
    try:
        # Sometimes shorter, sometimes longer than the session timeout.
        cut = fault.down_for(1.0, fault.cluster.session_s + 2.0)
    finally:
        fault.cluster.heal(victim)
    way = "inbound traffic of" if inbound_only else "both ways"
    return f"cut off {way} leader {victim} of partition {partition} for {cut:.1f} s"


def reassign(fault: Fault) -> str:
    """Move a partition to two replicas, then back to three in a new order: the replica
    that left copies the log again from scratch, and leadership may move."""
    cluster = fault.cluster
    nemesis = fault.nemesis
    partition = fault.rng.randrange(nemesis.partitions)
    smaller_picks = fault.rng.sample(range(len(fault.cluster.brokers)), 2)
    larger = fault.rng.sample(sorted(cluster.brokers), len(cluster.brokers))
    fault.claim(partition_claim(partition))
    admin = cluster.admin()
    key = (nemesis.topic, partition)
    current = _with_zookeeper(cluster, lambda: admin.get_topic(nemesis.topic))
    assert current is not None
    replicas = list(current.partitions[partition])
    # A reassignment that timed out (brokers kept failing) may have left two replicas.
    smaller = [replicas[i % len(replicas)] for i in smaller_picks]
    if smaller[0] == smaller[1]:
        smaller = replicas[:2]

    def done() -> bool:
        pending = admin.get_reassignment()
        return pending is None or key not in pending.partitions

    late = ""
    for target in (smaller, larger):
        # Merged into /admin/reassign_partitions: other partitions may be moving too. A
        # move still in flight is re-targeted (KIP-455), so the partition always ends
        # up asked for three replicas again.
        _with_zookeeper(
            cluster, lambda target=target: admin.merge_reassignment({key: tuple(target)})
        )
        if not cluster.wait(done, REASSIGN_STEP_TIMEOUT_S):
            if target is larger:
                raise TimeoutError(f"reassignment of partition {partition} to {target} not done")
            late = f" (the move to {smaller} not done in {REASSIGN_STEP_TIMEOUT_S:.0f} s)"
    return f"partition {partition}: {replicas} -> {smaller} -> {larger}{late}"


def _with_zookeeper(cluster: ChaosCluster, action: Callable[[], object], timeout: float = 60):
    """``action()``, tried again while ZooKeeper is down (another fault may have it)."""
    result: list[object] = []

    def attempt() -> bool:
        result.append(action())
        return True

    if not cluster.wait(attempt, timeout):
        raise TimeoutError(f"ZooKeeper unreachable for {timeout:.0f} s")
    return result[-1]


FAULTS: dict[str, Callable[[Fault], str]] = {
    "kill_broker": kill_broker,
    "kill_controller": kill_controller,
    "kill_leader": kill_leader,
    "zombie_leader": zombie_leader,
    "crash_all": crash_all,
    "zookeeper_kill": zookeeper_kill,
    "zookeeper_pause": zookeeper_pause,
    "zookeeper_flap": zookeeper_flap,
    "torn_tail": torn_tail,
    "torn_leader": torn_leader,
    "network_partition": network_partition,
    "network_partition_inbound": network_partition_inbound,
    "reassign": reassign,
}
NETWORK_FAULTS = {"network_partition", "network_partition_inbound"}
SINGLE_BROKER_FAULTS = {
    "kill_broker",
    "kill_controller",
    "kill_leader",
    "zombie_leader",
    "torn_tail",
    "network_partition",
    "network_partition_inbound",
}
