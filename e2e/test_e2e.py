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

API = "gregor.dev/v1alpha1"
MIN_ISR = 2
RELEASE = "gregor"

pytestmark = pytest.mark.timeout(1200)


def wait(what: str, probe, timeout: float = 180, interval: float = 0.5) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = probe()
        except Exception as error:  # a transient API or client error while things settle
            last = error
        if last and not isinstance(last, Exception):
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}; last: {last!r}")


def cluster_status(platform) -> dict[str, Any]:
    return (platform.get(API, "GregorCluster", RELEASE) or {}).get("status") or {}


def running_with(platform, replicas: int):
    def probe():
        status = cluster_status(platform)
        sts = platform.get("apps/v1", "StatefulSet", RELEASE)
        return (
            status.get("phase") == "Running"
            and status.get("readyReplicas") == replicas
            and sts is not None
            and sts["spec"]["replicas"] == replicas
            and status
        )

    return probe


@pytest.fixture(scope="module")
def installed(platform, summary) -> dict[str, Any]:
    started = time.monotonic()
    objects = platform.install(platform.values())
    kinds = sorted({o["kind"] for o in objects})
    status = wait("3 ready brokers", running_with(platform, 3), timeout=240)
    summary["install_seconds"] = round(time.monotonic() - started, 1)
    summary["rendered_kinds"] = kinds
    return {"objects": objects, "status": status}


def test_install_runs_three_brokers_one_per_zone(platform, installed) -> None:
    status = installed["status"]
    racks = sorted(b.get("rack") for b in status["brokers"])
    assert racks == ["a", "b", "c"], status["brokers"]
    # The operator made the owned objects from the chart's GregorCluster.
    sts = platform.get("apps/v1", "StatefulSet", RELEASE)
    assert sts["spec"]["template"]["spec"]["containers"][0]["image"].startswith(
        "gregor/gregor-broker:"
    )
    assert platform.get("v1", "Service", RELEASE) is not None
    assert platform.get("policy/v1", "PodDisruptionBudget", RELEASE) is not None


def test_topic_resource_makes_a_topic_clients_produce_to_and_consume_from(
    platform, installed, summary
) -> None:
    topic = {
        "apiVersion": API,
        "kind": "Topic",
        "metadata": {"name": "orders"},
        "spec": {
            "partitions": 6,
            "replicas": 3,
            "cluster": RELEASE,
            "config": {"min.insync.replicas": MIN_ISR},
        },
    }
    platform.apply(topic)

    def ready():
        status = (platform.get(API, "Topic", "orders") or {}).get("status") or {}
        conditions = {c["type"]: c["status"] for c in status.get("conditions", [])}
        return conditions.get("Ready") == "True" and status

    status = wait("Topic orders Ready", ready, timeout=120)
    assert len(status["partitions"]) == 6
    producer = platform.producer("orders")
    producer.run_for(count=500)
    received = platform.consume_all("orders", expected=len(producer.acknowledged))
    assert producer.acknowledged and producer.acknowledged <= received
    summary["produce_consume"] = {
        "acknowledged": len(producer.acknowledged),
        "consumed": len(received),
    }


def test_quota_resource_is_applied(platform, installed) -> None:
    platform.apply(
        {
            "apiVersion": API,
            "kind": "Quota",
            "metadata": {"name": "e2e-client"},
            "spec": {"clientId": "e2e-client", "producerByteRate": 1048576, "cluster": RELEASE},
        }
    )

    def ready():
        status = (platform.get(API, "Quota", "e2e-client") or {}).get("status") or {}
        conditions = {c["type"]: c["status"] for c in status.get("conditions", [])}
        return conditions.get("Ready") == "True"

    wait("Quota e2e-client Ready", ready, timeout=120)
    platform.delete({"apiVersion": API, "kind": "Quota", "metadata": {"name": "e2e-client"}})
    wait("Quota deleted", lambda: platform.get(API, "Quota", "e2e-client") is None, timeout=120)


def test_scale_3_to_5_to_3_under_acks_all_load_loses_nothing(platform, installed, summary) -> None:
    platform.apply(
        {
            "apiVersion": API,
            "kind": "Topic",
            "metadata": {"name": "load"},
            "spec": {
                "partitions": 6,
                "replicas": 3,
                "cluster": RELEASE,
                "config": {"min.insync.replicas": MIN_ISR},
            },
        }
    )
    wait("Topic load", lambda: (platform.get(API, "Topic", "load") or {}).get("status"))
    watcher = platform.isr_watcher(["load", "orders"], MIN_ISR)
    producer = platform.producer("load")
    started = time.monotonic()
    watcher.start()
    producer.start()
    try:
        time.sleep(3)
        platform.scale(RELEASE, 5)
        status = wait("5 brokers Running", running_with(platform, 5), timeout=300)
        held = {b["id"]: b.get("partitionsHeld", 0) for b in status["brokers"]}
        assert held.get(3, 0) > 0 and held.get(4, 0) > 0, status["brokers"]
        scaled_up = time.monotonic()

        platform.scale(RELEASE, 3)
        status = wait("3 brokers Running", running_with(platform, 3), timeout=300)
        assert sorted(b["id"] for b in status["brokers"]) == [0, 1, 2]
        time.sleep(2)
    finally:
        producer.stop()
        watcher.stop()
    received = platform.consume_all("load", expected=len(producer.acknowledged), timeout=180)
    lost = producer.acknowledged - received
    summary["scale"] = {
        "sent": producer.sent,
        "acknowledged": len(producer.acknowledged),
        "lost": len(lost),
        "isr_samples": watcher.samples,
        "below_min_isr": len(watcher.below_min_isr),
        "smallest_isr": watcher.smallest_isr,
        "up_seconds": round(scaled_up - started, 1),
        "total_seconds": round(time.monotonic() - started, 1),
    }
    assert len(producer.acknowledged) > 100
    assert not lost, f"{len(lost)} acknowledged messages lost, e.g. {sorted(lost)[:5]}"
    assert watcher.samples > 10
    assert not watcher.below_min_isr, watcher.below_min_isr[:5]


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
    platform.apply(
        {
            "apiVersion": API,
            "kind": "GregorRebalance",
            "metadata": {"name": "leaders"},
            "spec": {"cluster": RELEASE, "mode": "full", "excludedTopics": ["__consumer_offsets"]},
        }
    )

    def planned():
        status = (platform.get(API, "GregorRebalance", "leaders") or {}).get("status") or {}
        return status.get("phase") and status

    status = wait("GregorRebalance leaders has a phase", planned, timeout=120)
    # Not approved: it waits with its plan (or refuses, or has nothing to move); nothing runs.
    assert status["phase"] != "Executing", status
    assert status["phase"] in ("PendingApproval", "Refused", "Completed"), status
    platform.delete({"apiVersion": API, "kind": "GregorRebalance", "metadata": {"name": "leaders"}})
    wait("GregorRebalance deleted", lambda: platform.get(API, "GregorRebalance", "leaders") is None)


def test_upgrade_rolls_brokers_one_at_a_time_never_below_min_isr(
    platform, installed, summary
) -> None:
    before = {name: pod.uid for name, pod in platform.pods().items()}
    watcher = platform.isr_watcher(["load", "orders"], MIN_ISR)
    producer = platform.producer("load")
    started = time.monotonic()
    watcher.start()
    producer.start()
    try:
        time.sleep(2)
        values = platform.values(
            {
                "brokers": {
                    "image": {"tag": "e2e-upgrade"},
                    "config": {"log.retention.hours": 72},
                }
            }
        )
        platform.upgrade(values)

        def rolled():
            pods = platform.pods()
            image_ok = platform.get("apps/v1", "StatefulSet", RELEASE)["spec"]["template"]["spec"][
                "containers"
            ][0]["image"].endswith(":e2e-upgrade")
            return (
                image_ok
                and len(pods) == 3
                and all(pods[name].uid != uid for name, uid in before.items() if name in pods)
                and running_with(platform, 3)()
            )

        wait("every broker restarted on the new image", rolled, timeout=480, interval=1)
        time.sleep(2)
    finally:
        producer.stop()
        watcher.stop()
    received = platform.consume_all("load", expected=len(producer.acknowledged), timeout=180)
    lost = producer.acknowledged - received
    summary["upgrade"] = {
        "acknowledged": len(producer.acknowledged),
        "lost": len(lost),
        "below_min_isr": len(watcher.below_min_isr),
        "smallest_isr": watcher.smallest_isr,
        "seconds": round(time.monotonic() - started, 1),
    }
    assert not lost, f"{len(lost)} acknowledged messages lost"
    assert not watcher.below_min_isr, watcher.below_min_isr[:5]
    config = platform.get("v1", "ConfigMap", f"{RELEASE}-config")
    assert "log.retention.hours=72" in config["data"]["server.properties"]


def test_uninstall_removes_every_object_and_stops_the_brokers(platform, installed) -> None:
    for name in ("orders", "load"):
        platform.delete({"apiVersion": API, "kind": "Topic", "metadata": {"name": name}})
    wait("Topics deleted", lambda: not platform.list(API, "Topic"), timeout=120)
    platform.uninstall()
    wait("no broker pods", lambda: not platform.pods(), timeout=120)
    for api_version, kind in (
        (API, "GregorCluster"),
        ("apps/v1", "StatefulSet"),
        ("apps/v1", "Deployment"),
        ("v1", "Pod"),
        ("v1", "Service"),
        ("v1", "ConfigMap"),
    ):
        assert not platform.list(api_version, kind), kind


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
