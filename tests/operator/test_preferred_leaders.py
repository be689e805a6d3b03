"""Preferred-leader rebalancing by the operator: after a broker is killed (its leadership
moves away) and comes back, the operator's periodic check elects the preferred replicas again
within one check interval. The brokers' own auto leader rebalance is off, so only the
operator can do it. The operator's part is timed on its own: when it wrote
``/admin/preferred_replica_election`` (a ZooKeeper watch), apart from the controller's
election that follows."""

from __future__ import annotations

import datetime
import itertools
import logging
import statistics
import subprocess
import sys
import time
from typing import Any

import pytest
from kazoo.protocol.states import EventType

from gregor_broker.cluster.admin import ZkAdmin
from gregor_broker.cluster.models import PartitionReassignment
from gregor_broker.devtools.local_cluster import zookeeper_client
from tests.operator.load import API, cluster_resource, wait_phase

INTERVAL = 8  # spec.rebalancing.preferredLeaderCheckIntervalSeconds


def leaders(admin: ZkAdmin) -> dict[tuple[str, int], tuple[int, tuple[int, ...], tuple[int, ...]]]:
    """(leader, replicas, ISR) per partition of topic ``lead``."""
    found = {}
    for partition, replicas in admin.get_topic("lead").partitions.items():
        state = admin.get_partition_state("lead", partition)
        if state is not None:
            found[("lead", partition)] = (state[0].leader, tuple(replicas), tuple(state[0].isr))
    return found


def record_elections(zk: Any, requested: list[float]) -> None:
    """Append ``time.monotonic()`` to ``requested`` each time the election node is created
    from now on (an exists watch, re-armed after every event: the controller deletes the
    node within moments, often before a read of it could see it)."""
    path = "/admin/preferred_replica_election"

    def watch(event: Any) -> None:
        if event.type == EventType.CREATED:
            requested.append(time.monotonic())
        zk.exists_async(path, watch=watch)

    zk.exists(path, watch=watch)


@pytest.mark.timeout(600)
def test_leadership_returns_to_the_preferred_replicas_within_one_check_interval(
    kube, kubelet, run_operator, zk_connect, caplog
):
    run_operator()
    client = kube.client
    resource = cluster_resource("gregor", zk_connect, 3)
    resource["spec"]["config"]["auto.leader.rebalance.enable"] = "false"
    resource["spec"]["rebalancing"].update(
        preferredLeaderCheckIntervalSeconds=INTERVAL, imbalanceThresholdPercent=0
    )
    client.create(resource, "gregorclusters")
    wait_phase(kube, "Running", 3)
    zk = zookeeper_client(zk_connect)
    admin = ZkAdmin(zk)
    try:
        client.create(
            {"apiVersion": API, "kind": "Topic",
             "metadata": {"name": "lead", "namespace": "default"},
             "spec": {"partitions": 6, "replicas": 3, "cluster": "gregor"}},
            "topics",
        )  # fmt: skip
        client.wait_for("topic lead", lambda: admin.get_topic("lead"))

        def balanced() -> bool:
            state = leaders(admin)
            return len(state) == 6 and all(
                leader == replicas[0] and set(isr) == set(replicas)
                for leader, replicas, isr in state.values()
            )

        client.wait_for("preferred leaders and full ISRs", balanced, timeout=60)
        # The victim is not the controller: a controller that dies takes its watches with
        # it, and its successor (like Kafka's) cannot tell a broker that restarted before
        # the election from one that stayed up, so leadership would rightly stay put.
        victim = next(b for b in range(3) if b != admin.get_controller().broker_id)
        preferred_here = [k for k, (_, r, _) in leaders(admin).items() if r[0] == victim]
        assert preferred_here, leaders(admin)

        # Kill the victim (SIGKILL: no controlled shutdown; the controller moves its
        # leadership once its ZooKeeper session expires); the kubelet stand-in starts it
        # again (restartPolicy: Always).
        kubelet.runtime.kill(kubelet.pod("default", f"gregor-{victim}"))
        client.wait_for(
            f"leadership to move off broker {victim}",
            lambda: all(leaders(admin)[k][0] != victim for k in preferred_here),
            timeout=60,
            interval=0.05,
        )
        client.wait_for(
            f"broker {victim} back in every ISR",
            lambda: all(victim in isr for _, _, isr in leaders(admin).values()),
            timeout=120,
        )
        back, back_wall = time.monotonic(), time.time()
        requested: list[float] = []
        record_elections(zk, requested)
        client.wait_for("preferred leaders again", balanced, timeout=INTERVAL + 30)
        took = time.monotonic() - back
        acted = requested[0] - back if requested else None
        print(
            f"leadership restored {took:.1f} s after broker {victim} rejoined the ISRs; the "
            f"operator requested the election after "
            f"{acted if acted is None else round(acted, 1)} s"
        )

        # The operator posts its event after the ZooKeeper write the controller acts on,
        # so the election can finish before the event is posted (CI: both within 1.7 s).
        def posted() -> str | None:
            events = [e["message"] for e in client.list("v1", "events", "default")]
            return next((m for m in events if "preferred leader election for" in m), None)

        client.wait_for("the operator's election event", posted, timeout=15)
        # The operator checks every INTERVAL s on a fixed schedule: its election request
        # comes within one interval of the broker's return (1 s for the check's ZooKeeper
        # reads), or one more for each time the operator could not reach ZooKeeper
        # meanwhile (it says so, and a check that failed waits for the next; the session
        # the check shares with the cluster's steps takes up to 5 s to connect: CI under
        # load, 23 s after three such warnings). None: one before the return already did
        # it, and took is small.
        zookeeper_trouble = [
            r.getMessage()
            for r in caplog.records
            if r.name.startswith("gregor_operator")
            and r.levelno >= logging.WARNING
            and r.created >= back_wall
        ]
        if acted is not None:
            allowed = INTERVAL * (1 + len(zookeeper_trouble)) + 1
            assert acted <= allowed, (acted, requested, zookeeper_trouble)
            # Then the controller's election, which is not the operator's.
            assert took - acted <= 4, (took, acted)
        # Within one check interval, plus the controller's election.
        assert took <= INTERVAL + 3, took
    finally:
        zk.stop()
        zk.close()


SCHEDULE_INTERVAL = 4  # seconds between checks in the schedule test


@pytest.mark.timeout(300)
def test_checks_run_every_interval_on_a_fixed_schedule(kube, run_operator, cluster_factory):
    """Kept imbalanced (after each election the test swaps the partition's first two
    replicas, so its leader is no longer the preferred one), the cluster shows every
    check the operator makes: each one elects. A check comes one interval after the last,
    not an interval plus however long the reconcile steps around it took (what made
    leadership come back 10.9 s after a broker's return with an 8 s interval)."""
    cluster = cluster_factory(**{"auto.leader.rebalance.enable": "false"})
    zk = zookeeper_client(cluster.zookeeper_connect)
    admin = ZkAdmin(zk)
    try:
        admin.create_topic("spin", {0: [1, 2, 3]}, {})
        client = kube.client

        def state() -> tuple[int, tuple[int, ...], tuple[int, ...]] | None:
            found, current = admin.get_topic("spin"), admin.get_partition_state("spin", 0)
            if found is None or current is None or admin.get_reassignment() is not None:
                return None
            return current[0].leader, tuple(found.partitions[0]), tuple(current[0].isr)

        # Broker 1, the first replica, leads from the start (see the next test's first wait).
        client.wait_for(
            "spin led by 1, ISR full",
            lambda: state() == (1, (1, 2, 3), (1, 2, 3)),
            90,
            show=state,
        )
        requested: list[float] = []
        record_elections(zk, requested)
        run_operator()
        client.create(
            {"apiVersion": API, "kind": "GregorCluster",
             "metadata": {"name": "gregor", "namespace": "default"},
             "spec": {"replicas": 3, "zookeeper": {"connect": cluster.zookeeper_connect},
                      "rebalancing": {"preferredLeaderCheckIntervalSeconds": SCHEDULE_INTERVAL,
                                      "imbalanceThresholdPercent": 0}}},
            "gregorclusters",
        )  # fmt: skip
        imbalanced_at: list[float] = []  # when each imbalance was in place
        for _ in range(7):
            # Swap the first two replicas: the leader stays, no longer the preferred one.
            leader, replicas, _isr = client.wait_for("no reassignment in flight", state, 30)
            swapped = (replicas[1], replicas[0], *replicas[2:])
            # Counted before the swap: the operator may elect as soon as the swap lands,
            # before this loop sees the swapped replicas under the old leader (CI: the
            # swap's wait timed out with the election already done).
            count = len(requested)
            admin.request_reassignment(PartitionReassignment({("spin", 0): swapped}))
            client.wait_for(
                "the swap",
                lambda s=swapped, was=leader: (now := state()) is not None
                and now[1] == s and now[0] in (was, s[0]) and set(now[2]) == set(s),
                30, interval=0.05,
            )  # fmt: skip
            imbalanced_at.append(time.monotonic())
            # Generous: a late check only leaves its gap out of the timely ones below
            # (a CI simulation waited more than 3 intervals once, at load 12-15).
            client.wait_for(
                "the next election", lambda c=count: len(requested) > c, 8 * SCHEDULE_INTERVAL,
                interval=0.05,
            )  # fmt: skip
            client.wait_for(
                "the preferred leader", lambda s=swapped: (state() or (None,))[0] == s[0], 30,
                interval=0.05,
            )  # fmt: skip
        gaps = [b - a for a, b in itertools.pairwise(requested)]
        print(f"elections {SCHEDULE_INTERVAL} s apart: gaps {[round(g, 2) for g in gaps]}")
        # Gaps where the imbalance was in place well before the next check was due: that
        # check found it, so its gap is the check's period. Not the first: the first check
        # runs as the operator sees the GregorCluster, beside kopf's creation handler
        # rendering every owned object, and the event it posts may wait for that.
        timely = [
            gap
            for gap, ready, previous in zip(gaps, imbalanced_at[1:], requested, strict=False)
            if ready < previous + SCHEDULE_INTERVAL - 0.5
        ][1:]
        assert len(timely) >= 4, (gaps, imbalanced_at, requested)
        # The median: on a loaded machine one check can come late and the next one early,
        # back on the schedule (CI simulation: 4.0, 4.0, 4.0, 10.5, 1.9); a period of an
        # interval plus the reconcile's own time moves the median.
        assert abs(statistics.median(timely) - SCHEDULE_INTERVAL) <= 0.5, timely
    finally:
        zk.stop()
        zk.close()


def test_the_operator_starts_without_the_protocol_library():
    """What made the first check late: an operator process spent seconds importing before
    its first check (the check itself comes at once), most of it the Kafka protocol
    library (kio, and hypothesis through it) and the broker's storage stack, which only a
    rebalance plan's DescribeLogDirs needs. Loading ``gregor-operator run``'s modules
    loads neither."""
    probe = (
        "import sys, gregor_operator.cli, gregor_operator.operator\n"
        "heavy = ('kio', 'hypothesis', 'gregor_broker.log.partition_log',"
        " 'gregor_broker.replication.client')\n"
        "print(sorted(m for m in heavy if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def _logged_at(line: str) -> float:
    """The wall-clock time of a ``gregor-operator run`` log line (``%(asctime)s`` first)."""
    stamp = datetime.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")
    return stamp.timestamp()


@pytest.mark.timeout(300)
def test_first_check_comes_as_the_operator_process_starts(kube, cluster_factory, tmp_path):
    """An operator process (as deployed) that starts with a GregorCluster in place and a
    partition led by the wrong replica requests the election as soon as it is running, not
    an interval later: the time from the operator's start-up line to the election request
    is far below the 8 s interval. Prints how long the process took to get there."""
    cluster = cluster_factory(**{"auto.leader.rebalance.enable": "false"})
    zk = zookeeper_client(cluster.zookeeper_connect)
    admin = ZkAdmin(zk)
    operator = None
    try:
        admin.create_topic("first", {0: [1, 2, 3]}, {})
        client = kube.client

        def state() -> tuple[int, tuple[int, ...], tuple[int, ...]] | None:
            found, current = admin.get_topic("first"), admin.get_partition_state("first", 0)
            if found is None or current is None or admin.get_reassignment() is not None:
                return None
            return current[0].leader, tuple(found.partitions[0]), tuple(current[0].isr)

        # Broker 1, the first replica, leads from the start: every broker registered before
        # the topic came. A controller that read the brokers before the topics could count
        # one dead and elect the next, for good with no auto rebalance (the likely cause of
        # a CI timeout here, fixed in the controller). ``show``: the state if not.
        client.wait_for(
            "first led by 1, ISR full",
            lambda: state() == (1, (1, 2, 3), (1, 2, 3)),
            90,
            show=state,
        )
        admin.request_reassignment(PartitionReassignment({("first", 0): (2, 1, 3)}))
        client.wait_for(
            "1 leading, 2 preferred",
            lambda: (now := state()) is not None and now[:2] == (1, (2, 1, 3))
            and set(now[2]) == {1, 2, 3},
            60,
        )  # fmt: skip
        client.create(
            {"apiVersion": API, "kind": "GregorCluster",
             "metadata": {"name": "gregor", "namespace": "default"},
             "spec": {"replicas": 3, "zookeeper": {"connect": cluster.zookeeper_connect},
                      "rebalancing": {"preferredLeaderCheckIntervalSeconds": INTERVAL,
                                      "imbalanceThresholdPercent": 0}}},
            "gregorclusters",
        )  # fmt: skip
        requested: list[float] = []
        record_elections(zk, requested)
        log_path = tmp_path / "operator.log"
        launched = time.time()
        operator = subprocess.Popen(
            [sys.executable, "-m", "gregor_operator.cli", "run", "--kube-server", kube.url,
             "--http-port", "0", "--status-interval", "1"],
            stdout=log_path.open("wb"), stderr=subprocess.STDOUT,
        )  # fmt: skip
        client.wait_for("the election request", lambda: requested, 180, interval=0.05)
        elected = time.time() - (time.monotonic() - requested[0])
        lines = log_path.read_text().splitlines()
        started = next(_logged_at(line) for line in lines if "operator started" in line)
        print(
            f"operator process: started {started - launched:.1f} s after launch, "
            f"election requested {elected - started:.2f} s after its start"
        )
        # Due at once: the check's ZooKeeper session and reads, never an interval's wait.
        assert elected - started <= INTERVAL / 2, (elected - started, lines[-20:])
        client.wait_for("2 leading", lambda: (state() or (None,))[0] == 2, 60)
    finally:
        if operator is not None:
            operator.terminate()
            operator.wait(30)
        zk.stop()
        zk.close()
