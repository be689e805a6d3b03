"""GregorCluster scaling against real brokers run by the kubelet stand-in, under an acks=all
producer: 3 -> 5 -> 3 with replicas moved before any broker goes, a refused scale-down,
nothing acknowledged lost, no partition ever below min.insync.replicas."""

from __future__ import annotations

import json
import time

import pytest

from gregor_broker.cluster.admin import ZkAdmin
from gregor_broker.devtools.local_cluster import zookeeper_client
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


# About 2-3 minutes on an idle 2-core machine; 9 minutes at a load average of 25.
@pytest.mark.timeout(1200)
def test_scale_3_to_5_to_3_under_acks_all_load_and_refuse_going_below_rf(
    kube, kubelet, run_operator, zk_connect
):
    run_operator()
    client = kube.client
    client.create(cluster_resource("gregor", zk_connect, 3), "gregorclusters")
    status = wait_phase(kube, "Running", 3)
    # Owned objects, and the scale subresource's selector.
    for plural, name in [("configmaps", "gregor-config"), ("services", "gregor"),
                         ("services", "gregor-brokers")]:  # fmt: skip
        assert client.find("v1", plural, "default", name) is not None
    assert client.find("policy/v1", "poddisruptionbudgets", "default", "gregor") is not None
    assert (
        status["labelSelector"]
        == "app.kubernetes.io/name=gregor,app.kubernetes.io/instance=gregor,"
        "app.kubernetes.io/component=broker"
    )
    zk = zookeeper_client(zk_connect)
    admin = ZkAdmin(zk)
    watcher = Watcher(zk_connect, kube)
    producer = None
    try:
        brokers = admin.list_brokers()
        assert {b: r.rack for b, r in brokers.items()} == {0: "a", 1: "b", 2: "c"}
        client.create(
            {"apiVersion": API, "kind": "Topic",
             "metadata": {"name": "load", "namespace": "default"},
             "spec": {"partitions": 6, "replicas": 3, "cluster": "gregor",
                      "config": {"min.insync.replicas": str(MIN_ISR)}}},
            "topics",
        )  # fmt: skip
        client.wait_for("topic load", lambda: admin.get_topic("load"))
        bootstrap = ",".join(f"{r.host}:{r.port}" for r in brokers.values())
        watcher.start()
        producer = Producer(bootstrap, "load")
        producer.start()
        time.sleep(2)

        # Scale up through the scale subresource, as an HPA would.
        client.patch(API, "gregorclusters", "default", "gregor", {"spec": {"replicas": 5}},
                     subresource="scale")  # fmt: skip
        status = wait_phase(kube, "Running", 5, timeout=360)
        held = {b["id"]: b["partitionsHeld"] for b in status["brokers"]}
        assert sorted(held) == [0, 1, 2, 3, 4], status
        assert held[3] > 0 and held[4] > 0, status["brokers"]
        assert sorted(held) == [0, 1, 2, 3, 4]
        events = [e["message"] for e in client.list("v1", "events", "default")]
        assert any("onto brokers [3, 4]" in m for m in events), events

        # Scale down: replicas leave brokers 3 and 4 before the StatefulSet shrinks.
        client.patch(API, "gregorclusters", "default", "gregor", {"spec": {"replicas": 3}})
        wait_phase(kube, "Running", 3, timeout=360)
        assignment = client.read(
            "the assignment",
            lambda: {
                p: r for t in admin.list_topics() for p, r in admin.get_topic(t).partitions.items()
            },
        )
        assert all(set(r) <= {0, 1, 2} for r in assignment.values()), assignment

        # 3 -> 2 would leave replication factor 3 on 2 brokers: refused, nothing changes.
        before = client.read(
            "the assignment",
            lambda: {t: admin.get_topic(t).partitions for t in admin.list_topics()},
        )
        client.patch(API, "gregorclusters", "default", "gregor", {"spec": {"replicas": 2}})
        try:
            refused = client.wait_for(
                "the refusal",
                lambda: (s := status_of(kube)).get("phase") == "ScaleDownRefused" and s,
                timeout=120,
            )
        except AssertionError as error:
            raise AssertionError(f"{error}; status: {status_of(kube)}") from None
        error = next(c for c in refused["conditions"] if c["type"] == "Error")
        assert error["status"] == "True"
        assert "3 replicas but only 2 brokers would remain" in error["message"]
        assert "set spec.replicas back to 3" in error["message"]
        time.sleep(3)
        assert client.get("apps/v1", "statefulsets", "default", "gregor")["spec"]["replicas"] == 3
        after = client.read(
            "the assignment",
            lambda: {t: admin.get_topic(t).partitions for t in admin.list_topics()},
        )
        assert after == before
        client.patch(API, "gregorclusters", "default", "gregor", {"spec": {"replicas": 3}})
        wait_phase(kube, "Running", 3)
        time.sleep(1)
    finally:
        if producer is not None:
            producer.stopping.set()
            producer.join(150)
        watcher.stopping.set()
        watcher.join(10)
    try:
        # Nothing acknowledged is lost: read everything back.
        seen = read_back(bootstrap, "load", producer.acked)
    finally:
        zk.stop()
        zk.close()
    lost = producer.acked - seen
    print(
        f"acknowledged {len(producer.acked)}, lost {len(lost)}, watcher samples "
        f"{watcher.samples}, below min ISR {len(watcher.below_min_isr)}, "
        f"held by StatefulSet size: { {k: sorted(v) for k, v in watcher.held_when.items()} }"
    )
    assert len(producer.acked) > 100
    assert lost == set()
    assert watcher.below_min_isr == []
    # Status showed the phases in order: up (register, then move onto the new brokers),
    # down (move off, then shrink), and the refusal; and progress in partitions and bytes.
    print(f"phases {watcher.phases}; progress samples {len(watcher.progress)}: "
          f"{watcher.progress[:1]} ... {watcher.progress[-1:]}")  # fmt: skip
    # Running between the stages is waited for above (wait_phase), in order; the sampler
    # (10 a second, behind the API on a loaded machine) can miss a short one, as CI saw
    # between ScalingDown and ScaleDownRefused.
    order = ["ScalingUp", "MovingReplicasOn", "MovingReplicasOff", "ScalingDown",
             "ScaleDownRefused"]  # fmt: skip
    seen = iter(watcher.phases)
    # A subsequence (the message a string: pytest cuts a list's repr short).
    assert all(phase in seen for phase in order), f"phases seen: {watcher.phases}"
    moving = [
        p for p in watcher.progress if p["phase"] in ("MovingReplicasOn", "MovingReplicasOff")
    ]
    assert moving, watcher.progress
    for progress in moving:
        assert 0 <= progress["partitionsMoved"] <= progress["partitionsTotal"], progress
        assert 0 <= progress["bytesMoved"] <= progress["bytesTotal"], progress
    assert max(p["bytesTotal"] for p in moving) > 0, moving
    # Whenever the StatefulSet had 3 brokers, no replica was on brokers 3 or 4.
    assert watcher.held_when[3] <= {0, 1, 2}, json.dumps(sorted(watcher.held_when[3]))
