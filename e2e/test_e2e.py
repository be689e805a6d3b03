"""Gregor on Kubernetes, end to end, as a user runs it: install the chart, create a Topic,
produce and consume, scale the brokers 3 -> 5 -> 3 through the GregorCluster's scale
subresource (as an HPA would) under acks=all load, kill a broker pod, upgrade the release
(a health-gated rolling restart onto a new image tag and broker config), uninstall.

The scenarios run in file order on one installation (module scope): each builds on the
previous one, as the steps of a real rollout do. Counts and durations go to the summary
(build/e2e-<mode>-summary.json).
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from .scenarios import (
    API,
    RELEASE,
    check_installed,
    create_topic,
    install,
    ready_condition,
    round_trip,
    running_with,
    under_load,
    uninstall_leaves_nothing,
    wait,
)

pytestmark = pytest.mark.timeout(1200)


@pytest.fixture(scope="module")
def installed(platform, summary) -> dict[str, Any]:
    return install(platform, summary)


def test_install_runs_three_brokers_one_per_zone(platform, installed) -> None:
    check_installed(platform, installed)


def test_topic_resource_makes_a_topic_clients_produce_to_and_consume_from(
    platform, installed, summary
) -> None:
    create_topic(platform, "orders")
    summary["produce_consume"] = round_trip(platform, "orders", count=500)


def test_quota_resource_is_applied(platform, installed) -> None:
    quota = {
        "apiVersion": API,
        "kind": "Quota",
        "metadata": {"name": "e2e-client"},
        "spec": {"clientId": "e2e-client", "producerByteRate": 1048576, "cluster": RELEASE},
    }
    platform.apply(quota)
    wait("Quota e2e-client Ready", ready_condition(platform, "Quota", "e2e-client"), timeout=120)
    platform.delete(quota)
    wait("Quota deleted", lambda: platform.get(API, "Quota", "e2e-client") is None, timeout=120)


def test_user_resource_gets_a_generated_secret_and_is_removed(platform, installed) -> None:
    """A User with quotas and an ACL: Ready, its password in a generated Secret owned by
    it; deleting it releases the finalizer (credentials, quotas and ACLs removed)."""
    user = {
        "apiVersion": API,
        "kind": "User",
        "metadata": {"name": "e2e-user"},
        "spec": {
            "cluster": RELEASE,
            "quotas": {"producerByteRate": 1048576},
            "authorization": {
                "acls": [{"resource": {"type": "topic", "name": "orders"}, "operations": ["Read"]}]
            },
        },
    }
    platform.apply(user)
    wait("User e2e-user Ready", ready_condition(platform, "User", "e2e-user"), timeout=120)
    secret = platform.get("v1", "Secret", "e2e-user")
    assert secret is not None and secret["data"]["password"], secret
    assert secret["metadata"]["ownerReferences"][0]["kind"] == "User"
    platform.delete(user)
    wait("User deleted", lambda: platform.get(API, "User", "e2e-user") is None, timeout=120)


def test_scale_3_to_5_to_3_under_acks_all_load_loses_nothing(platform, installed, summary) -> None:
    create_topic(platform, "load")
    started = time.monotonic()
    with under_load(platform, produce_to="load", watch=["load", "orders"]) as load:
        platform.scale(RELEASE, 5)
        status = wait("5 brokers Running", running_with(platform, 5), timeout=300)
        held = {b["id"]: b.get("partitionsHeld", 0) for b in status["brokers"]}
        assert held.get(3, 0) > 0 and held.get(4, 0) > 0, status["brokers"]
        scaled_up = time.monotonic()

        platform.scale(RELEASE, 3)
        status = wait("3 brokers Running", running_with(platform, 3), timeout=300)
        assert sorted(b["id"] for b in status["brokers"]) == [0, 1, 2]
    summary["scale"] = {**load.summary(), "up_seconds": round(scaled_up - started, 1)}
    load.assert_clean()


def test_a_killed_broker_pod_comes_back_and_rejoins(platform, installed, summary) -> None:
    name = f"{RELEASE}-1"

    def incarnation():
        pod = platform.pods().get(name)
        return None if pod is None else (pod.uid, pod.restarts)

    before = incarnation()
    started = time.monotonic()
    platform.kill_pod(name)
    wait(f"{name} restarted", lambda: incarnation() not in (None, before), timeout=120)
    wait("3 ready brokers after a kill", running_with(platform, 3), timeout=180)
    wait(
        "every ISR full again",
        lambda: platform.all_in_sync(["orders"], replicas=3),
        timeout=180,
    )
    summary["kill_recovery_seconds"] = round(time.monotonic() - started, 1)


def test_rebalance_shows_its_plan_and_waits_for_approval(platform, installed) -> None:
    rebalance = {
        "apiVersion": API,
        "kind": "GregorRebalance",
        "metadata": {"name": "leaders"},
        "spec": {"cluster": RELEASE, "mode": "full", "excludedTopics": ["__consumer_offsets"]},
    }
    platform.apply(rebalance)

    def planned():
        status = (platform.get(API, "GregorRebalance", "leaders") or {}).get("status") or {}
        return status.get("phase") and status

    status = wait("GregorRebalance leaders has a phase", planned, timeout=120)
    # Not approved: it waits with its plan (or refuses, or has nothing to move); nothing runs.
    assert status["phase"] != "Executing", status
    assert status["phase"] in ("PendingApproval", "Refused", "Completed"), status
    platform.delete(rebalance)
    wait("GregorRebalance deleted", lambda: platform.get(API, "GregorRebalance", "leaders") is None)


def test_upgrade_rolls_brokers_one_at_a_time_never_below_min_isr(
    platform, installed, summary
) -> None:
    """helm upgrade to a new image tag and a changed broker config: the operator restarts
    the brokers one at a time (every pod a new incarnation, on the new image and config)
    while an acks=all producer runs; nothing acknowledged is lost and no partition is
    seen below min ISR."""
    before = {name: pod.uid for name, pod in platform.pods().items()}
    most_unavailable = 0  # broker pods missing or not ready at once, sampled every second
    upgrade = {"brokers": {"image": {"tag": "e2e-upgrade"}, "config": {"log.retention.hours": 72}}}
    with under_load(platform, produce_to="load", watch=["load", "orders"]) as load:
        platform.upgrade(platform.values(upgrade))

        def rolled():
            nonlocal most_unavailable
            pods = platform.pods()
            unavailable = len(before) - sum(1 for p in pods.values() if p.ready)
            most_unavailable = max(most_unavailable, unavailable)
            sts = platform.get("apps/v1", "StatefulSet", RELEASE)
            image = sts["spec"]["template"]["spec"]["containers"][0]["image"]
            return (
                image.endswith(":e2e-upgrade")
                and sorted(pods) == sorted(before)
                and all(pods[name].uid != uid for name, uid in before.items())
                and running_with(platform, 3)()
            )

        wait("every broker restarted on the new image", rolled, timeout=480, interval=1)
    summary["upgrade"] = {**load.summary(), "most_brokers_unavailable": most_unavailable}
    load.assert_clean()
    assert most_unavailable <= 1, f"{most_unavailable} brokers were down at once"
    config = platform.get("v1", "ConfigMap", f"{RELEASE}-config")
    assert "log.retention.hours=72" in config["data"]["server.properties"]
    for name, pod in platform.pods().items():
        assert pod.image.endswith(":e2e-upgrade"), (name, pod.image)


def test_uninstall_removes_every_object_and_stops_the_brokers(platform, installed, summary) -> None:
    summary["uninstall"] = uninstall_leaves_nothing(platform, topics=["orders", "load"])


def test_operator_used_exactly_the_rbac_the_chart_grants(platform, installed, summary) -> None:
    """Every Kubernetes API call the operator made during the run is granted by the
    chart's Role/ClusterRole, and every grant was used (nothing more). Runs last: the run
    above exercised install, Topics, a Quota, scaling, a rolling restart and deletions."""
    record = getattr(platform, "api_calls", None)
    if record is None:
        pytest.skip("API calls are recorded by the local mode's emulator only")
    from tests.chart.operator_api_use import granted

    from .recording_emulator import recorded_grants

    used = recorded_grants(record)
    namespaced, cluster = granted(installed["objects"])
    allowed = namespaced | cluster
    summary["operator_api_calls"] = sorted("/".join(g) for g in used)
    assert used, "no API call of the operator was recorded"
    assert sorted(used - allowed) == [], "the operator used verbs the chart does not grant"
    assert sorted(allowed - used) == [], "the chart grants verbs the operator never used"
