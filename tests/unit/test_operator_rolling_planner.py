"""The rolling-restart planner: one broker at a time, never below min.insync.replicas,
the controller last, refusals named (no Kubernetes or brokers needed)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gregor_operator.planners.rolling import BrokerPod, RollObservation, plan_roll, restart_blockers

NEW, OLD = "new", "old"


def observe(
    hashes: dict[int, str],
    isr: dict[tuple[str, int], tuple[int, ...]],
    *,
    assignment: dict[tuple[str, int], tuple[int, ...]] | None = None,
    ready: dict[int, bool] | None = None,
    controller: int | None = 0,
    min_isr: int = 2,
) -> RollObservation:
    ready = ready or {}
    return RollObservation(
        desired_hash=NEW,
        replicas=len(hashes),
        pods={b: BrokerPod(f"gregor-{b}", h, ready.get(b, True)) for b, h in hashes.items()},
        registered=frozenset(b for b in hashes if ready.get(b, True)),
        controller=controller,
        assignment=assignment or {k: (0, 1, 2) for k in isr},
        isr=isr,
        min_isr={t: min_isr for t, _ in isr},
    )


FULL = {("t", p): (0, 1, 2) for p in range(3)}


def test_nothing_to_do_when_every_pod_runs_the_template():
    assert plan_roll(observe({0: NEW, 1: NEW, 2: NEW}, FULL)) is None


def test_the_controller_goes_last_and_one_broker_at_a_time():
    step = plan_roll(observe({0: OLD, 1: OLD, 2: OLD}, FULL, controller=1))
    assert step.restart == 0 and step.pending == (0, 1, 2)
    # Broker 0 restarted but not back in the ISR yet: wait, restart nobody.
    isr = {k: (1, 2) for k in FULL}
    step = plan_roll(observe({0: NEW, 1: OLD, 2: OLD}, isr, controller=1))
    assert step.restart is None and "rejoin the ISR" in step.message
    step = plan_roll(observe({0: NEW, 1: OLD, 2: OLD}, FULL, controller=1))
    assert step.restart == 2
    step = plan_roll(observe({0: NEW, 1: OLD, 2: NEW}, FULL, controller=1))
    assert step.restart == 1


def test_a_restarted_broker_that_is_not_ready_stops_the_roll():
    step = plan_roll(observe({0: NEW, 1: OLD, 2: OLD}, FULL, ready={0: False}))
    assert step.restart is None and "broker 0 (restarted) to be Ready" in step.message


def test_brokers_that_are_not_ready_go_first():
    isr = {k: (0, 2) for k in FULL}
    step = plan_roll(observe({0: OLD, 1: OLD, 2: OLD}, isr, ready={1: False}, controller=2))
    assert step.restart == 1


def test_a_short_isr_makes_it_wait():
    isr = dict(FULL)
    isr[("t", 0)] = (0, 1)  # broker 2 lags: restarting 0 or 1 would leave one in sync
    step = plan_roll(observe({0: OLD, 1: OLD, 2: OLD}, isr, controller=0))
    assert step.restart == 2  # the one not in that ISR is safe
    step = plan_roll(observe({0: OLD, 1: OLD, 2: NEW}, isr, controller=0))
    assert step.restart is None and step.refused is None
    assert "waiting for broker 2 to rejoin" in step.message


def test_a_restart_that_takes_a_partition_offline_is_refused_by_name():
    assignment = {**FULL, ("single", 0): (0,), ("single", 1): (1,), ("single", 2): (2,)}
    isr = {**FULL, ("single", 0): (0,), ("single", 1): (1,), ("single", 2): (2,)}
    step = plan_roll(observe({0: OLD, 1: OLD, 2: OLD}, isr, assignment=assignment, min_isr=1))
    assert step.restart is None
    assert "single-1 offline" in step.refused and "single-2 offline" in step.refused
    assert "replication factor" in step.refused


def test_too_few_replicas_for_min_isr_is_refused():
    assignment = {("t", 0): (0, 1)}
    step = plan_roll(observe({0: OLD, 1: OLD}, {("t", 0): (0, 1)}, assignment=assignment))
    assert step.restart is None and "below min.insync.replicas" in step.refused


@given(
    brokers=st.integers(3, 5),
    data=st.data(),
)
def test_a_chosen_restart_never_leaves_a_partition_below_min_isr(brokers, data):
    ids = list(range(brokers))
    assignment, isr = {}, {}
    for p in range(data.draw(st.integers(1, 8))):
        replicas = tuple(data.draw(st.permutations(ids))[: data.draw(st.integers(1, 3))])
        assignment[("t", p)] = replicas
        isr[("t", p)] = tuple(r for r in replicas if data.draw(st.booleans()) or r == replicas[0])
    hashes = {b: data.draw(st.sampled_from([OLD, NEW])) for b in ids}
    controller = data.draw(st.sampled_from(ids))
    o = observe(hashes, isr, assignment=assignment, controller=controller)
    step = plan_roll(o)
    if step is None:
        assert all(h == NEW for h in hashes.values())
        return
    if step.restart is None:
        return
    b = step.restart
    assert hashes[b] == OLD
    assert b != controller or step.pending == (b,)
    assert restart_blockers(b, o) == ([], [], [])
    for key in assignment:
        if b in isr[key]:
            assert len(set(isr[key]) - {b}) >= 2


def test_a_roll_is_over_only_once_the_last_restarted_broker_is_back_in_sync():
    isr = {k: (0, 2) for k in FULL}
    o = observe({0: NEW, 1: NEW, 2: NEW}, isr)
    assert plan_roll(o) is None  # nothing was rolling: nothing to wait for
    step = plan_roll(o, rolling=True)
    assert step.pending == () and step.restart is None
    assert "waiting for broker 1 to rejoin the ISR" in step.message
    assert plan_roll(observe({0: NEW, 1: NEW, 2: NEW}, FULL), rolling=True) is None
