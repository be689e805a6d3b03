"""/readyz's partition rule and the latency histogram, without a broker process."""

from __future__ import annotations

from types import SimpleNamespace

from gregor_broker.server.metrics import MetricsServer
from gregor_broker.stats import LATENCY_BUCKETS, LatencyHistogram


def _partition(leader: int, isr: tuple[int, ...], min_isr: int) -> SimpleNamespace:
    config = SimpleNamespace(min_insync_replicas=min_isr)
    return SimpleNamespace(leader=leader, isr=isr, log=SimpleNamespace(config=config))


def _server(partitions: dict) -> MetricsServer:
    broker = SimpleNamespace(broker_id=2, replica_manager=SimpleNamespace(partitions=partitions))
    server = MetricsServer.__new__(MetricsServer)
    server.broker = broker  # type: ignore[assignment]
    return server


def test_not_ready_while_a_partition_is_under_min_isr_because_this_broker_lags() -> None:
    server = _server(
        {
            ("orders", 0): _partition(leader=1, isr=(1,), min_isr=2),  # waiting for us
            ("orders", 1): _partition(leader=2, isr=(2,), min_isr=2),  # we lead: not our lag
            ("orders", 2): _partition(leader=1, isr=(1, 3), min_isr=2),  # fine without us
            ("orders", 3): _partition(leader=-1, isr=(1,), min_isr=2),  # offline: not ours
        }
    )
    problems = server._caught_up_problems()
    assert len(problems) == 1
    assert problems[0].startswith("orders-0: ISR [1] is under min.insync.replicas=2")


def test_ready_when_every_partition_has_enough_in_sync_replicas() -> None:
    server = _server({("t", 0): _partition(leader=1, isr=(1, 2), min_isr=2)})
    assert server._caught_up_problems() == []


def test_latency_histogram_buckets_are_cumulative_like_prometheus() -> None:
    histogram = LatencyHistogram()
    for seconds in (0.0001, 0.0005, 0.003, 100.0):
        histogram.observe(seconds)
    buckets = dict(histogram.buckets())
    assert buckets[repr(LATENCY_BUCKETS[0])] == 2  # le is inclusive
    assert buckets["0.005"] == 3
    assert buckets["30.0"] == 3
    assert buckets["+Inf"] == 4
    assert abs(histogram.sum - 100.0036) < 1e-9
