"""/metrics values move with traffic; /healthz and /readyz answer Kubernetes probes."""

from __future__ import annotations

import time
import urllib.error
import urllib.request

from gregor_broker.devtools.local_cluster import BrokerProcess
from gregor_broker.devtools.zookeeper_server import ZooKeeperServer, free_port

from .broker_helpers import consume_values, create_topic, produce_values, scrape, wait_for
from .quota_helpers import set_quota, zk_admin


def probe(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def test_metrics_move_when_traffic_flows(broker_factory, zk_connect) -> None:
    port = free_port()
    broker = broker_factory(**{"metrics.port": str(port)})
    create_topic(broker.bootstrap, "metered")
    before = scrape(port)
    values = [b"m" * 1000] * 200
    produce_values(broker.bootstrap, "metered", values)
    assert len(consume_values(broker.bootstrap, "metered", len(values))) == len(values)
    with zk_admin(zk_connect) as admin:
        # Every client id gets 1000 B/s (produce_values' producer is "rdkafka").
        set_quota(admin, None, "<default>", producer_byte_rate=1000)
        time.sleep(1)
    produce_values(broker.bootstrap, "metered", [b"q" * 20_000])
    after = scrape(port)

    def moved(name: str) -> float:
        return after.get(name, 0.0) - before.get(name, 0.0)

    topic = '{topic="metered"}'
    assert moved(f"gregor_topic_messages_in_total{topic}") == 201
    assert moved(f"gregor_topic_bytes_in_total{topic}") > 200 * 1000
    assert moved(f"gregor_topic_bytes_out_total{topic}") >= 200 * 1000
    assert moved("gregor_sendfile_bytes_total") >= 200 * 1000
    assert moved('gregor_requests_total{api="Produce"}') >= 2
    assert moved('gregor_request_duration_seconds_count{api="Produce"}') >= 2
    assert moved('gregor_request_duration_seconds_count{api="Fetch"}') >= 1
    assert after['gregor_log_size_bytes{partition="0",topic="metered"}'] > 220_000
    assert after["gregor_leader_partitions"] >= 1
    assert after["gregor_under_replicated_partitions"] == 0
    assert after["gregor_offline_partitions"] == 0
    assert after["gregor_active_controller"] == 1
    assert "gregor_produce_purgatory_size" in after and "gregor_fetch_purgatory_size" in after
    assert "gregor_isr_shrinks_total" in after and "gregor_isr_expands_total" in after
    entity = '{client_id="rdkafka",quota="producer_byte_rate",user=""}'
    assert after[f"gregor_client_quota_throttle_seconds_total{entity}"] > 0
    assert after[f"gregor_client_quota_limit{entity}"] == 1000
    assert after["gregor_event_loop_lag_seconds"] < 5


def test_healthz_and_readyz_answer_for_a_serving_broker(broker_factory) -> None:
    port = free_port()
    broker_factory(**{"metrics.port": str(port)})
    assert probe(port, "/healthz")[0] == 200
    assert wait_for(lambda: probe(port, "/readyz") == (200, "ready\n"), 10)


def test_readyz_turns_not_ready_while_zookeeper_is_unreachable(tmp_path) -> None:
    # A private ZooKeeper: the session-wide one is shared with other tests.
    zookeeper = ZooKeeperServer(tmp_path / "zookeeper")
    zookeeper.start()
    port = free_port()
    broker = BrokerProcess(
        broker_id=1,
        directory=tmp_path / "broker",
        zookeeper_connect=zookeeper.connect_string,
        properties={"metrics.port": str(port), "zookeeper.session.timeout.ms": "30000"},
    )
    try:
        broker.start()
        broker.wait_registered(30)
        assert wait_for(lambda: probe(port, "/readyz")[0] == 200, 10)

        zookeeper.stop()
        assert wait_for(lambda: probe(port, "/readyz")[0] == 503, 15)
        _status, reason = probe(port, "/readyz")
        assert "ZooKeeper" in reason
        assert probe(port, "/healthz")[0] == 200  # alive: no reason to restart it

        zookeeper.start()  # same port and data: the session survives
        # 90 s: a ZooKeeper JVM restarting on two loaded cores, then the broker's reconnect
        # (a CI simulation passed 30 s without it).
        assert wait_for(lambda: probe(port, "/readyz")[0] == 200, 90)
    finally:
        broker.stop()
        zookeeper.stop()
