"""GregorRebalance: the plan shows in status, nothing moves before approval, the approved
plan completes and clears its throttles; ``gregor-operator plan`` prints the same plan."""

from __future__ import annotations

import json
import time

from gregor_broker.cluster.admin import ZkAdmin
from gregor_broker.devtools.local_cluster import zookeeper_client
from gregor_operator.cli import main as operator_cli

API = "gregor.dev/v1alpha1"


def test_rebalance_plan_waits_for_approval_then_balances(kube, run_operator, cluster, capsys):
    zk = zookeeper_client(cluster.zookeeper_connect)
    admin = ZkAdmin(zk)
    try:
        # Six single-replica partitions, all on broker 1.
        admin.create_topic("skewed", {p: [1] for p in range(6)}, {})
        before = dict(admin.get_topic("skewed").partitions)
        assert operator_cli(["plan", "--zookeeper-connect", cluster.zookeeper_connect,
                             "--mode", "full", "--json"]) == 0  # fmt: skip
        cli_plan = json.loads(capsys.readouterr().out)
        assert cli_plan["replicaMoves"] == 4
        assert cli_plan["replicasPerBroker"] == {"1": 2, "2": 2, "3": 2}

        run_operator()
        client = kube.client
        client.create(
            {"apiVersion": API, "kind": "GregorCluster",
             "metadata": {"name": "gregor", "namespace": "default"},
             "spec": {"replicas": 3, "zookeeper": {"connect": cluster.zookeeper_connect},
                      "rebalancing": {"preferredLeaderCheckIntervalSeconds": 0}}},
            "gregorclusters",
        )  # fmt: skip
        client.create(
            {"apiVersion": API, "kind": "GregorRebalance",
             "metadata": {"name": "balance", "namespace": "default"},
             "spec": {"cluster": "gregor", "mode": "full", "throttleBytesPerSecond": 1048576}},
            "gregorrebalances",
        )  # fmt: skip

        def status():
            return client.get(API, "gregorrebalances", "default", "balance").get("status") or {}

        pending = client.wait_for(
            "the plan", lambda: status().get("phase") == "PendingApproval" and status(), 120
        )
        assert pending["plan"]["replicaMoves"] == 4
        assert pending["plan"]["replicasPerBroker"] == cli_plan["replicasPerBroker"]
        assert len(pending["plan"]["moves"]) == 4
        time.sleep(3)
        assert dict(admin.get_topic("skewed").partitions) == before  # nothing moved

        client.patch(API, "gregorrebalances", "default", "balance",
                     {"metadata": {"annotations": {"gregor.dev/approve": "true"}}})  # fmt: skip
        client.wait_for("completion", lambda: status().get("phase") == "Completed", 180)
        after = admin.get_topic("skewed").partitions
        counts = {b: sum(1 for r in after.values() if r == (b,)) for b in (1, 2, 3)}
        assert counts == {1: 2, 2: 2, 3: 2}
        assert status()["progress"] == {"partitionsMoved": 4, "partitionsTotal": 4}
        assert "leader.replication.throttled.replicas" not in admin.get_topic_config("skewed")
        assert admin.get_entity_config("brokers/1") == {}
    finally:
        zk.stop()
        zk.close()
