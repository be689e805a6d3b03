"""Quota resources for every entity kind Kafka has, written in Kafka's format, enforced by a
real broker, removed with the resource."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from gregor_broker.cluster.admin import ZkAdmin
from gregor_broker.devtools.local_cluster import zookeeper_client
from tests.integration.broker_helpers import create_topic
from tests.integration.quota_helpers import ProducerLoop

# The three longest operator scenarios (real brokers, the operator and client load each)
# take turns on one xdist worker: run at the same time on CI's two cores they starved the
# workers' ZooKeepers (2 s sessions expired, connects timed out).
pytestmark = [pytest.mark.xdist_group("kube-heavy")]


API = "gregor.dev/v1alpha1"
QUOTA = 256 * 1024
# A throttled client's measured rate may fall this far below its quota, and no further,
# but never rise more than 20 % above it. The rise is the quota failing; a fall is a
# throttle held too long, which load alone also causes: every delayed answer and every
# late timer of the broker, ZooKeeper and the producer's thread on 2 busy cores pushes the
# rate down, never up (CI's full suite: 195 KiB/s under a 256 KiB/s quota, 0.76).
SLOWEST_UNDER_LOAD = 0.7

# (resource name, spec entity, ZooKeeper path under /config)
ENTITIES = [
    ("user", {"user": "alice"}, "users/alice"),
    ("client", {"clientId": "reports"}, "clients/reports"),
    ("user-client", {"user": "bob", "clientId": "etl job"}, "users/bob/clients/etl%20job"),
    ("default-user", {"user": "<default>"}, "users/<default>"),
    ("default-client", {"clientId": "<default>"}, "clients/<default>"),
    ("user-dc", {"user": "carol", "clientId": "<default>"}, "users/carol/clients/<default>"),
    ("du-client", {"user": "<default>", "clientId": "svc"}, "users/<default>/clients/svc"),
    ("du-dc", {"user": "<default>", "clientId": "<default>"}, "users/<default>/clients/<default>"),
    # Most specific for an unauthenticated client "bulk": this one is enforced below.
    ("bulk", {"user": "ANONYMOUS", "clientId": "bulk"}, "users/ANONYMOUS/clients/bulk"),
]  # fmt: skip


def quota(name: str, entity: dict[str, str], **rates: Any) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "Quota",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {**entity, **rates},
    }


def test_quotas_of_every_entity_kind_are_written_enforced_and_removed(
    kube, run_operator, broker, zk_connect
):
    run_operator(zookeeper_connect=zk_connect)
    client = kube.client
    zk = zookeeper_client(zk_connect)
    admin = ZkAdmin(zk)
    try:
        for name, entity, _ in ENTITIES:
            rate = QUOTA if name == "bulk" else 50 * QUOTA
            spec = {"producerByteRate": rate, "consumerByteRate": 2 * rate}
            if name == "client":
                spec["requestPercentage"] = 50
            client.create(quota(name, entity, **spec), "quotas")
        for name, _, path in ENTITIES:
            node = f"/config/{path}"
            data = client.wait_for(node, lambda node=node: zk.exists(node) and zk.get(node)[0])
            rate = QUOTA if name == "bulk" else 50 * QUOTA
            expected = {"producer_byte_rate": str(rate), "consumer_byte_rate": str(2 * rate)}
            if name == "client":
                expected["request_percentage"] = "50.0"
            assert json.loads(data) == {"version": 1, "config": expected}, path
        notified = {
            json.loads(zk.get(f"/config/changes/{child}")[0])["entity_path"]
            for child in zk.get_children("/config/changes")
        }
        assert {path for _, _, path in ENTITIES} <= notified
        client.wait_for(
            "the status of Quota bulk",
            lambda: (
                (client.get(API, "quotas", "default", "bulk").get("status") or {}).get("entityPath")
                == "users/ANONYMOUS/clients/bulk"
            ),
        )

        # The broker holds client "bulk" to its quota (at most 20 % above it).
        create_topic(broker.bootstrap, "bulk-topic")
        bulk = ProducerLoop(broker.bootstrap, "bulk-topic", "bulk")
        bulk.start()
        try:
            time.sleep(3)  # past the first window's burst
            start = time.monotonic()
            time.sleep(8)
            rate = bulk.timeline.rate(start, time.monotonic())
        finally:
            bulk.stop()
        print(f"bulk produced {rate / 1024:.0f} KiB/s under a {QUOTA / 1024:.0f} KiB/s quota")
        assert bulk.errors == []
        assert SLOWEST_UNDER_LOAD * QUOTA <= rate <= 1.2 * QUOTA, rate

        # Updating changes the node; deleting the resource empties it (node deleted).
        client.patch(API, "quotas", "default", "user", {"spec": {"consumerByteRate": None}})
        client.wait_for(
            "alice without consumer_byte_rate",
            lambda: (
                admin.get_entity_config("users/alice") == {"producer_byte_rate": str(50 * QUOTA)}
            ),
        )
        for name, _, _ in ENTITIES:
            client.delete(API, "quotas", "default", name)
        for _, _, path in ENTITIES:
            client.wait_for(
                f"{path} removed", lambda path=path: admin.get_entity_config(path) == {}, 90
            )
        # Leaf nodes are gone; parents that hold client nodes stay as Kafka leaves them.
        assert zk.exists("/config/users/alice") is None
        assert zk.exists("/config/clients/reports") is None
        assert zk.exists("/config/users/ANONYMOUS/clients/bulk") is None
    finally:
        zk.stop()
        zk.close()


# Each of Kafka's eight levels for an unauthenticated client "meter", most specific first
# ("meter" becomes "meter-<level>": each level's client starts without the byte history
# a quota sensor keeps for a client across quota changes, as Kafka's does).
LEVELS = [
    {"user": "ANONYMOUS", "clientId": "meter"},
    {"user": "ANONYMOUS", "clientId": "<default>"},
    {"user": "ANONYMOUS"},
    {"user": "<default>", "clientId": "meter"},
    {"user": "<default>", "clientId": "<default>"},
    {"user": "<default>"},
    {"clientId": "meter"},
    {"clientId": "<default>"},
]


def test_a_quota_of_each_entity_kind_throttles_its_clients(kube, run_operator, broker, zk_connect):
    """One Quota resource at a time, at each entity kind: the broker holds the client it
    names (directly or through a default) to its producer byte rate (at most 20 % above
    it, and at least ``SLOWEST_UNDER_LOAD`` of it). The rate
    alternates between 256 and 128 KiB/s, so a quota left over from the level before would
    show."""
    run_operator(zookeeper_connect=zk_connect)
    client = kube.client
    zk = zookeeper_client(zk_connect)
    admin = ZkAdmin(zk)
    create_topic(broker.bootstrap, "meter-topic")
    rates = []
    try:
        for index, entity in enumerate(LEVELS):
            name = f"level-{index}"
            limit = QUOTA if index % 2 == 0 else QUOTA // 2
            client_id = f"meter-{index}"
            named = {k: client_id if v == "meter" else v for k, v in entity.items()}
            client.create(quota(name, named, producerByteRate=limit), "quotas")
            path = client.wait_for(
                f"{name} applied",
                lambda n=name: (client.get(API, "quotas", "default", n).get("status") or {}).get(
                    "entityPath"
                ),
                timeout=90,
            )
            meter = ProducerLoop(broker.bootstrap, "meter-topic", client_id)
            meter.start()
            try:
                time.sleep(3)  # past the first window's burst
                start = time.monotonic()
                time.sleep(6)
                rate = meter.timeline.rate(start, time.monotonic())
            finally:
                meter.stop()
            assert meter.errors == []
            rates.append((named, limit, rate))
            client.delete(API, "quotas", "default", name)
            # 90 s: under CI's load the operator's delete handler met an unreachable
            # ZooKeeper and waited for its retry (a 30 s wait timed out).
            client.wait_for(f"{path} removed", lambda p=path: admin.get_entity_config(p) == {}, 90)
        print(
            "KiB/s per level (quota, measured):",
            [(limit // 1024, round(rate / 1024)) for _, limit, rate in rates],
        )
        for entity, limit, rate in rates:
            assert SLOWEST_UNDER_LOAD * limit <= rate <= 1.2 * limit, (entity, limit, rate)
    finally:
        zk.stop()
        zk.close()
