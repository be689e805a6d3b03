"""The steps the e2e scenarios are made of, shared by the full suite (e2e/test_e2e.py, both
modes) and its short variant in ``make test`` (tests/e2e_local/test_e2e_short.py), so both
check the same things the same way.

A step talks to a platform (``LocalPlatform`` or ``KindPlatform``: the same interface)
and asserts what a user would look at: the custom resources' status, the objects the
operator made, and what Kafka clients see.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from .values import BROKER_VALUES

API = "gregor.dev/v1alpha1"
MIN_ISR = 2
RELEASE = "gregor"
ZONE = "topology.kubernetes.io/zone"
# Kinds whose custom resources carry the operator's finalizers.
CUSTOM_KINDS = ("GregorCluster", "Topic", "Quota", "GregorRebalance", "User")


def wait(what: str, probe: Callable[[], Any], timeout: float = 180, interval: float = 0.5) -> Any:
    """``probe()`` until it returns something true (and not an exception), or fail."""
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


def running_with(platform, replicas: int) -> Callable[[], Any]:
    """A probe: the GregorCluster Running with ``replicas`` ready brokers, and its
    StatefulSet at that size (returns the status)."""

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


def ready_condition(platform, kind: str, name: str) -> Callable[[], Any]:
    """A probe: the custom resource's Ready condition is True (returns its status)."""

    def probe():
        status = (platform.get(API, kind, name) or {}).get("status") or {}
        conditions = {c["type"]: c["status"] for c in status.get("conditions", [])}
        return conditions.get("Ready") == "True" and status

    return probe


def install(platform, summary: dict[str, Any]) -> dict[str, Any]:
    """helm install with the platform's values, until three brokers are Running."""
    started = time.monotonic()
    objects = platform.install(platform.values())
    status = wait("3 ready brokers", running_with(platform, 3), timeout=240)
    summary["install_seconds"] = round(time.monotonic() - started, 1)
    summary["rendered_kinds"] = sorted({o["kind"] for o in objects})
    return {"objects": objects, "status": status}


def check_installed(platform, installed: dict[str, Any]) -> None:
    """One broker per zone, and the objects the operator makes from the chart's
    GregorCluster: the StatefulSet of the broker image, its Service and PDB."""
    status = installed["status"]
    racks = sorted(b.get("rack") for b in status["brokers"])
    assert racks == ["a", "b", "c"], status["brokers"]
    sts = platform.get("apps/v1", "StatefulSet", RELEASE)
    image = sts["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image.startswith("gregor/gregor-broker:"), image
    assert platform.get("v1", "Service", RELEASE) is not None
    assert platform.get("policy/v1", "PodDisruptionBudget", RELEASE) is not None
    check_placement(platform, replicas=3)


def check_placement(platform, replicas: int) -> None:
    """The broker pods carry the placement of the chart's values (through the
    GregorCluster and the operator's StatefulSet) and run on nodes of the pool it asks for:
    the nodeSelector and tolerations as given, the values' pod anti-affinity, and the
    zones as a required node affinity."""
    placement = BROKER_VALUES
    for ordinal in range(replicas):
        pod = platform.get("v1", "Pod", f"{RELEASE}-{ordinal}")
        assert pod is not None, f"no pod {RELEASE}-{ordinal}"
        spec = pod["spec"]
        assert spec.get("nodeSelector") == placement["nodeSelector"], spec.get("nodeSelector")
        for toleration in placement["tolerations"]:
            assert toleration in (spec.get("tolerations") or []), spec.get("tolerations")
        affinity = spec.get("affinity") or {}
        assert affinity.get("podAntiAffinity") == placement["affinity"]["podAntiAffinity"]
        terms = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        for term in terms["nodeSelectorTerms"]:
            assert {"key": ZONE, "operator": "In", "values": placement["zones"]} in term[
                "matchExpressions"
            ], term
        node = platform.get("v1", "Node", spec["nodeName"])
        labels = node["metadata"]["labels"]
        assert placement["nodeSelector"].items() <= labels.items(), (spec["nodeName"], labels)
        assert labels[ZONE] in placement["zones"], labels


def topic(name: str, partitions: int = 6, replicas: int = 3) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "Topic",
        "metadata": {"name": name},
        "spec": {
            "partitions": partitions,
            "replicas": replicas,
            "cluster": RELEASE,
            "config": {"min.insync.replicas": MIN_ISR},
        },
    }


def create_topic(platform, name: str, partitions: int = 6) -> dict[str, Any]:
    """kubectl apply a Topic and wait for Ready; returns its status."""
    platform.apply(topic(name, partitions))
    status = wait(f"Topic {name} Ready", ready_condition(platform, "Topic", name), timeout=120)
    assert len(status["partitions"]) == partitions, status
    return status


def round_trip(platform, name: str, count: int) -> dict[str, int]:
    """Produce ``count`` values with acks=all, read them all back from the beginning."""
    producer = platform.producer(name)
    producer.run_for(count=count)
    received = platform.consume_all(name, wanted=producer.acknowledged)
    assert len(producer.acknowledged) == count, f"{len(producer.acknowledged)} of {count} acked"
    assert producer.acknowledged <= received, (
        f"{len(producer.acknowledged - received)} acknowledged values not read back"
    )
    return {"acknowledged": len(producer.acknowledged), "consumed": len(received)}


@dataclass
class LoadResult:
    """What ``under_load`` saw: filled in when its block ends."""

    sent: int = 0
    acknowledged: int = 0
    lost: list[str] = field(default_factory=list)
    isr_samples: int = 0
    below_min_isr: list[tuple[str, int, list[int]]] = field(default_factory=list)
    smallest_isr: int | None = None
    seconds: float = 0.0

    def summary(self) -> dict[str, Any]:
        return {
            "sent": self.sent,
            "acknowledged": self.acknowledged,
            "lost": len(self.lost),
            "isr_samples": self.isr_samples,
            "below_min_isr": len(self.below_min_isr),
            "smallest_isr": self.smallest_isr,
            "seconds": round(self.seconds, 1),
        }

    def assert_clean(self, min_acknowledged: int = 100) -> None:
        """Nothing acknowledged lost, no partition seen below min ISR, and enough load and
        samples for that to mean something."""
        assert self.acknowledged > min_acknowledged, self.summary()
        assert not self.lost, f"{len(self.lost)} acknowledged messages lost, e.g. {self.lost[:5]}"
        assert self.isr_samples > 10, self.summary()
        assert not self.below_min_isr, self.below_min_isr[:5]


@contextlib.contextmanager
def under_load(
    platform, produce_to: str, watch: list[str], settle: float = 2.0
) -> Iterator[LoadResult]:
    """An acks=all idempotent producer on ``produce_to`` and an ISR watcher on ``watch``
    for the duration of the block; afterwards every acknowledged value is read back and
    the result filled in (``LoadResult.assert_clean`` checks it)."""
    result = LoadResult()
    watcher = platform.isr_watcher(watch, MIN_ISR)
    producer = platform.producer(produce_to)
    started = time.monotonic()
    watcher.start()
    producer.start()
    try:
        time.sleep(settle)
        yield result
        time.sleep(settle)
    finally:
        producer.stop()
        watcher.stop()
    received = platform.consume_all(produce_to, wanted=producer.acknowledged, timeout=180)
    result.sent = producer.sent
    result.acknowledged = len(producer.acknowledged)
    result.lost = sorted(producer.acknowledged - received)
    result.isr_samples = watcher.samples
    result.below_min_isr = list(watcher.below_min_isr)
    result.smallest_isr = watcher.smallest_isr
    result.seconds = time.monotonic() - started


def none_left(platform, api_version: str, kind: str) -> Callable[[], bool]:
    """A probe: no object of ``kind`` in the namespace (else it fails naming them and
    their finalizers, which is what keeps a deleted object)."""

    def probe() -> bool:
        left = [
            f"{o['metadata']['name']} (finalizers: {o['metadata'].get('finalizers') or []})"
            for o in platform.list(api_version, kind)
        ]
        assert not left, f"{kind} left: {left}"
        return True

    return probe


def uninstall_leaves_nothing(platform, topics: list[str]) -> dict[str, Any]:
    """Delete the Topics (the operator deletes them in Kafka), ``helm uninstall``, and
    check nothing is left: no broker pods, no custom resource, nothing holding a
    finalizer, and the namespace deletes."""
    started = time.monotonic()
    for name in topics:
        platform.delete({"apiVersion": API, "kind": "Topic", "metadata": {"name": name}})
    wait("Topics deleted", lambda: not platform.list(API, "Topic"), timeout=120)
    topics_deleted = time.monotonic()
    platform.uninstall()
    for kind in CUSTOM_KINDS:
        wait(f"no {kind} left", none_left(platform, API, kind), timeout=120)
    wait("no broker pods", lambda: not platform.pods(), timeout=180)
    uninstalled = time.monotonic()
    for api_version, kind in (
        ("apps/v1", "StatefulSet"),
        ("apps/v1", "Deployment"),
        ("v1", "Pod"),
        ("v1", "Service"),
        ("policy/v1", "PodDisruptionBudget"),
    ):
        none_left(platform, api_version, kind)()
    released = platform.release_objects()
    assert not released, f"objects of the release left: {released}"
    # The namespace controller waits for every finalizer in the namespace; none may be left.
    platform.delete_namespace(timeout=120)
    return {
        "topics_deleted_seconds": round(topics_deleted - started, 1),
        "uninstall_seconds": round(uninstalled - topics_deleted, 1),
        "seconds": round(time.monotonic() - started, 1),
    }
