"""A GregorCluster config change rolls the brokers: real brokers under the kubelet stand-in,
an acks=all producer throughout. One broker at a time, the controller last, each back in
every ISR before the next; nothing acknowledged lost, no partition ever below
min.insync.replicas or leaderless; progress in status; and a roll that would take
partitions offline is refused with the partitions named, restarting nothing."""

from __future__ import annotations

import itertools
import re
import threading
import time
from typing import Any

import pytest

from gregor_broker.cluster.admin import ZkAdmin
from gregor_broker.devtools.local_cluster import zookeeper_client
from gregor_operator.planners.cluster_objects import CONFIG_HASH_ANNOTATION
from tests.operator.load import (
    API,
    MIN_ISR,
    Producer,
    Watcher,
    cluster_resource,
    read_back,
    status_of,
    wait_phase,
)

# The three longest operator scenarios (real brokers, the operator and client load each)
# take turns on one xdist worker: run at the same time on CI's two cores they starved the
# workers' ZooKeepers (2 s sessions expired, connects timed out).
pytestmark = [pytest.mark.xdist_group("kube-heavy")]


def pods(client: Any) -> dict[str, dict[str, Any]]:
    return {
        p["metadata"]["name"]: p
        for p in client.list("v1", "pods", "default")
        if p["metadata"]["name"].startswith("gregor-")
    }


def hashes(client: Any) -> set[str]:
    return {p["metadata"]["annotations"][CONFIG_HASH_ANNOTATION] for p in pods(client).values()}


def every_isr_full(admin: ZkAdmin) -> bool:
    for topic in admin.list_topics():
        for partition, replicas in admin.get_topic(topic).partitions.items():
            state = admin.get_partition_state(topic, partition)
            if state is None or set(state[0].isr) != set(replicas):
                return False
    return True


class StatusSampler(threading.Thread):
    """Every status the GregorCluster shows while rolling (phase, pending brokers)."""

    def __init__(self, kube: Any) -> None:
        super().__init__(daemon=True)
        self.kube = kube
        self.seen: list[tuple[str, tuple[int, ...]]] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            try:
                status = status_of(self.kube)
            except (TimeoutError, OSError):
                continue
            rolling = status.get("rollingRestart") or {}
            sample = (status.get("phase"), tuple(rolling.get("brokersPending") or ()))
            if not self.seen or self.seen[-1] != sample:
                self.seen.append(sample)
            time.sleep(0.2)


class ControllerAtRestarts(threading.Thread):
    """Who left ``/brokers/ids`` each time the cluster went short of a broker, and the
    controller ZooKeeper named while all were registered just before: the operator
    restarts the controller of that moment last. Under load a ZooKeeper hiccup can move
    the controller mid-roll (CI: recorded controller 0, the roll's last broker 1, the
    controller by then), and a broker whose session expired re-registers: a departure
    the operator did not cause (CI: four departures for three restarts). A stopping
    broker resigns as controller before it deregisters (so that another controller moves
    its leadership away), so the brokers can elect a new controller while all are still
    registered: each departure keeps every controller seen since the cluster was last
    whole (CI: broker 1, the controller, restarted last, but ZooKeeper named broker 2 in
    the last 0.1 s sample before broker 1 left)."""

    def __init__(self, zk_connect: str, brokers: int) -> None:
        super().__init__(daemon=True)
        self.zk_connect = zk_connect
        self.brokers = brokers
        self.departures: list[tuple[frozenset[int], frozenset[int]]] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        zk = zookeeper_client(self.zk_connect)
        admin = ZkAdmin(zk)
        controllers, everyone = set[int](), frozenset[int]()
        try:
            while not self.stopping.is_set():
                try:
                    registered = frozenset(admin.list_brokers())
                    current = admin.get_controller()
                except Exception:  # ZooKeeper busy: sample again
                    time.sleep(0.2)
                    continue
                if len(registered) >= self.brokers:
                    everyone = registered
                    if current is not None:
                        controllers.add(current.broker_id)
                elif everyone and controllers:
                    self.departures.append((everyone - registered, frozenset(controllers)))
                    everyone, controllers = frozenset(), set()
                time.sleep(0.1)
        finally:
            zk.stop()
            zk.close()

    def at_restarts(self, order: list[int]) -> list[frozenset[int]]:
        """The controllers seen before each restart of ``order`` (the operator's order):
        each broker's first departure after the previous one's, departures in between (a
        re-registration after a ZooKeeper blip) skipped."""
        controllers, position = [], 0
        for broker in order:
            while position < len(self.departures) and broker not in self.departures[position][0]:
                position += 1
            if position == len(self.departures):
                break
            controllers.append(self.departures[position][1])
            position += 1
        return controllers


def restart_events(client: Any) -> list[int]:
    """Brokers in the order the operator restarted them (its RollingRestart events)."""
    events = sorted(
        (e for e in client.list("v1", "events", "default") if e.get("reason") == "RollingRestart"),
        key=lambda e: (e.get("firstTimestamp") or "", e["metadata"].get("resourceVersion", "")),
    )
    order = []
    for event in events:
        match = re.match(r"restarting broker (\d+)", event["message"])
        if match:
            order.append(int(match.group(1)))
    return order


# About 2-4 minutes on an idle 2-core machine.
@pytest.mark.timeout(900)
def test_a_config_change_rolls_the_brokers_safely_under_acks_all_load(
    kube, kubelet, run_operator, zk_connect
):
    run_operator()
    client = kube.client
    client.create(cluster_resource("gregor", zk_connect, 3), "gregorclusters")
    wait_phase(kube, "Running", 3)
    zk = zookeeper_client(zk_connect)
    admin = ZkAdmin(zk)
    watcher = Watcher(zk_connect, kube)
    sampler = StatusSampler(kube)
    controllers = ControllerAtRestarts(zk_connect, 3)
    producer = None
    try:
        brokers = admin.list_brokers()
        bootstrap = ",".join(f"{r.host}:{r.port}" for r in brokers.values())
        client.create(
            {"apiVersion": API, "kind": "Topic",
             "metadata": {"name": "load", "namespace": "default"},
             "spec": {"partitions": 6, "replicas": 3, "cluster": "gregor",
                      "config": {"min.insync.replicas": str(MIN_ISR)}}},
            "topics",
        )  # fmt: skip
        client.wait_for("topic load", lambda: admin.get_topic("load"))
        client.wait_for("full ISRs", lambda: every_isr_full(admin), timeout=60)
        watcher.start()
        producer = Producer(bootstrap, "load")
        producer.start()
        time.sleep(2)
        before = {name: p["metadata"]["uid"] for name, p in pods(client).items()}
        old_hash = {
            p["metadata"]["annotations"][CONFIG_HASH_ANNOTATION] for p in pods(client).values()
        }
        controller = client.wait_for("the controller", admin.get_controller).broker_id
        controllers.start()

        sampler.start()
        client.patch(API, "gregorclusters", "default", "gregor",
                     {"spec": {"config": {"log.retention.hours": "100"}}})  # fmt: skip

        def rolled() -> bool:
            now = pods(client)
            return (
                len(now) == 3
                and all(now[n]["metadata"]["uid"] != before[n] for n in before if n in now)
                and status_of(kube).get("phase") == "Running"
                and every_isr_full(admin)
            )

        try:
            client.wait_for("every broker restarted", rolled, timeout=400, interval=0.5)
        except AssertionError as error:
            raise AssertionError(f"{error}; status: {status_of(kube)}") from None
        time.sleep(2)
    finally:
        if producer is not None:
            producer.stopping.set()
            producer.join(150)
        for thread in (watcher, sampler, controllers):
            thread.stopping.set()
            if thread.ident is not None:  # started (a failure may come before)
                thread.join(10)
    try:
        # Restarted pods listen on new ports here (the stand-in's pods share one host).
        bootstrap = ",".join(f"{r.host}:{r.port}" for r in admin.list_brokers().values())
        seen = read_back(bootstrap, "load", producer.acked)
        order = restart_events(client)
        new_hash = {
            p["metadata"]["annotations"][CONFIG_HASH_ANNOTATION] for p in pods(client).values()
        }
        for ordinal in range(3):
            running = kubelet.pod("default", f"gregor-{ordinal}")
            properties = (
                running.directory / "volumes" / "config" / "server.properties"
            ).read_text()
            assert "log.retention.hours=100" in properties, properties
        lost = producer.acked - seen
        print(
            f"acknowledged {len(producer.acked)}, lost {len(lost)}, watcher samples "
            f"{watcher.samples}, below min ISR {len(watcher.below_min_isr)}, leaderless "
            f"{len(watcher.leaderless)}, restart order {order} (controller {controller}, "
            f"departures {controllers.departures}), "
            f"status seen {sampler.seen}"
        )
        assert len(new_hash) == 1 and new_hash.isdisjoint(old_hash)
        assert sorted(order) == [0, 1, 2], order  # each broker once
        # The controller last: one ZooKeeper named while the cluster was whole, just
        # before the last broker left.
        at_restarts = controllers.at_restarts(order)
        assert len(at_restarts) == 3, ("each restart seen leaving", order, controllers.departures)
        assert order[-1] in at_restarts[-1], (order, controllers.departures)
        assert len(producer.acked) > 100
        assert lost == set()
        assert watcher.below_min_isr == []
        assert watcher.leaderless == []
        # Progress showed in status: pending brokers went down one at a time.
        pending = [p for phase, p in sampler.seen if phase == "RollingRestart"]
        # (A sampler on a loaded machine can miss the first step, so the first pending
        # set seen may already be short of the whole cluster.)
        assert pending and len(pending[0]) >= 2, sampler.seen
        assert all(set(b) <= set(a) for a, b in itertools.pairwise(pending)), sampler.seen
        assert pending[-1] == (), sampler.seen
        assert {len(p) for p in pending} >= {2, 1}, sampler.seen

        # A topic with one replica per partition on every broker: any restart takes some of
        # its partitions offline, so the next roll is refused and nothing restarts.
        client.create(
            {"apiVersion": API, "kind": "Topic",
             "metadata": {"name": "single", "namespace": "default"},
             "spec": {"partitions": 6, "replicas": 1, "cluster": "gregor"}},
            "topics",
        )  # fmt: skip
        client.wait_for("topic single", lambda: admin.get_topic("single"))
        held = {r for rs in admin.get_topic("single").partitions.values() for r in rs}
        assert held == {0, 1, 2}, held
        uids = {name: p["metadata"]["uid"] for name, p in pods(client).items()}
        client.patch(API, "gregorclusters", "default", "gregor",
                     {"spec": {"config": {"log.retention.hours": "101"}}})  # fmt: skip
        try:
            refused = client.wait_for(
                "the refusal",
                lambda: (s := status_of(kube)).get("phase") == "RollingRestartRefused" and s,
                timeout=60,
            )
        except AssertionError as error:
            raise AssertionError(f"{error}; status: {status_of(kube)}") from None
        error = next(c for c in refused["conditions"] if c["type"] == "Error")
        assert error["status"] == "True"
        assert re.search(r"single-\d offline", error["message"]), error["message"]
        assert "replication factor" in error["message"]
        time.sleep(3)
        assert {name: p["metadata"]["uid"] for name, p in pods(client).items()} == uids
    finally:
        zk.stop()
        zk.close()
