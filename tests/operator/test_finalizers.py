"""GregorCluster and GregorRebalance carry no finalizer, so deleting them never needs a
running operator (``helm uninstall`` deletes the operator first; a finalizer left behind
wedges the resource and its namespace), and one left by an earlier version is dropped."""

from __future__ import annotations

import time
from typing import Any

API = "gregor.dev/v1alpha1"
FINALIZER = "gregor.dev/finalizer"


def cluster(zk_connect: str, finalizers: list[str] | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "gregor", "namespace": "default"}
    if finalizers:
        metadata["finalizers"] = finalizers
    return {
        "apiVersion": API,
        "kind": "GregorCluster",
        "metadata": metadata,
        "spec": {"replicas": 3, "zookeeper": {"connect": zk_connect}},
    }


def rebalance() -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "GregorRebalance",
        "metadata": {"name": "balance", "namespace": "default"},
        "spec": {"cluster": "gregor", "mode": "full"},
    }


def phase(client: Any, plural: str, name: str) -> str | None:
    return (client.get(API, plural, "default", name).get("status") or {}).get("phase")


def test_deleting_a_cluster_and_a_rebalance_with_the_operator_stopped_leaves_nothing(
    kube, run_operator, zk_connect
):
    client = kube.client
    run_operator()
    client.create(cluster(zk_connect), "gregorclusters")
    client.create(rebalance(), "gregorrebalances")
    # Reconciled several times, periodic steps included (status interval 1 s).
    client.wait_for("the cluster's phase", lambda: phase(client, "gregorclusters", "gregor"))
    # No broker runs here: the plan is refused, and that is a reconciled state too.
    client.wait_for("the rebalance's phase", lambda: phase(client, "gregorrebalances", "balance"))
    time.sleep(2)  # a few periodic steps (status interval 1 s) run meanwhile
    for plural, name in (("gregorclusters", "gregor"), ("gregorrebalances", "balance")):
        obj = client.get(API, plural, "default", name)
        assert FINALIZER not in (obj["metadata"].get("finalizers") or []), obj["metadata"]

    run_operator.stop()
    client.delete(API, "gregorclusters", "default", "gregor")
    client.delete(API, "gregorrebalances", "default", "balance")
    assert client.find(API, "gregorclusters", "default", "gregor") is None
    assert client.find(API, "gregorrebalances", "default", "balance") is None


def test_a_finalizer_left_by_an_earlier_operator_is_released(kube, run_operator, zk_connect):
    client = kube.client
    client.create(cluster(zk_connect, finalizers=[FINALIZER]), "gregorclusters")
    run_operator()
    client.wait_for(
        "the old finalizer to go",
        lambda: (
            not client.get(API, "gregorclusters", "default", "gregor")["metadata"].get("finalizers")
        ),
    )
    run_operator.stop()
    client.delete(API, "gregorclusters", "default", "gregor")
    assert client.find(API, "gregorclusters", "default", "gregor") is None
