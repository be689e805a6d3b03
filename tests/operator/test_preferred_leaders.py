"""Preferred-leader rebalancing by the operator: after a broker is killed (its leadership
moves away) and comes back, the operator's periodic check elects the preferred replicas again
within one check interval. The brokers' own auto leader rebalance is off, so only the
operator can do it."""

from __future__ import annotations

import time

import pytest

from gregor_broker.cluster.admin import ZkAdmin
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


@pytest.mark.timeout(600)
def test_leadership_returns_to_the_preferred_replicas_within_one_check_interval(
    kube, kubelet, run_operator, zk_connect
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
        back = time.monotonic()
        client.wait_for("preferred leaders again", balanced, timeout=INTERVAL + 30)
        took = time.monotonic() - back
        events = [e["message"] for e in client.list("v1", "events", "default")]
        print(f"leadership restored {took:.1f} s after broker {victim} rejoined the ISRs")
        assert any("preferred leader election for" in m for m in events), events
        # Within one check interval (plus a status step and the election itself).
        assert took <= INTERVAL + 5, took
    finally:
        zk.stop()
        zk.close()
