"""Client quota arithmetic: Kafka's precedence, sampled rates and throttle times (no I/O)."""

from __future__ import annotations

import pytest

from gregor_broker.cluster.client_quotas import (
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    entity_path,
    parse_entity_path,
)
from gregor_broker.protocol.fetch_response import EmptyFetchResponse
from gregor_broker.protocol.response import BodyResponse
from gregor_broker.server.quotas import ANONYMOUS, ClientQuotaManager, QuotaConfigs
from gregor_broker.stats import SampledRate, throttle_time_ms

D = "<default>"
# Kafka's eight levels, most specific first, for user "alice" and client id "bulk".
LEVELS = [
    (("alice", "bulk"), ("alice", "bulk")),
    (("alice", D), ("alice", "bulk")),
    (("alice", None), ("alice", "")),
    ((D, "bulk"), ("alice", "bulk")),
    ((D, D), ("alice", "bulk")),
    ((D, None), ("alice", "")),
    ((None, "bulk"), ("", "bulk")),
    ((None, D), ("", "bulk")),
]


@pytest.mark.parametrize("level", range(len(LEVELS)), ids=lambda i: f"level-{i + 1}")
def test_each_level_beats_every_less_specific_level(level: int) -> None:
    entity, tags = LEVELS[level]
    # The level under test and every level below it are configured; the level wins.
    configs = QuotaConfigs(
        {other: {PRODUCER_BYTE_RATE: 1000.0 + i} for i, (other, _) in enumerate(LEVELS)}
        | {entity: {PRODUCER_BYTE_RATE: 7.0}}
    )
    for above, _ in LEVELS[:level]:
        del configs.entities[above]
    assert configs.resolve("alice", "bulk", PRODUCER_BYTE_RATE) == (tags, 7.0)


def test_precedence_is_per_quota_key() -> None:
    configs = QuotaConfigs(
        {
            ("alice", "bulk"): {PRODUCER_BYTE_RATE: 1.0},
            (None, D): {CONSUMER_BYTE_RATE: 2.0},
        }
    )
    assert configs.resolve("alice", "bulk", PRODUCER_BYTE_RATE) == (("alice", "bulk"), 1.0)
    assert configs.resolve("alice", "bulk", CONSUMER_BYTE_RATE) == (("", "bulk"), 2.0)
    assert configs.resolve("alice", "bulk", REQUEST_PERCENTAGE) is None


def test_a_user_quota_is_shared_by_the_users_clients_and_a_default_one_is_not() -> None:
    configs = QuotaConfigs({(D, None): {PRODUCER_BYTE_RATE: 5.0}})
    assert configs.resolve("alice", "a", PRODUCER_BYTE_RATE) == (("alice", ""), 5.0)
    assert configs.resolve("alice", "b", PRODUCER_BYTE_RATE) == (("alice", ""), 5.0)
    assert configs.resolve("bob", "a", PRODUCER_BYTE_RATE) == (("bob", ""), 5.0)


def test_configs_come_from_zookeeper_strings_with_sanitized_names() -> None:
    configs = QuotaConfigs.from_entity_configs(
        {
            "users/CN%3Dalice/clients/my%20app": {PRODUCER_BYTE_RATE: "1048576"},
            "clients/<default>": {CONSUMER_BYTE_RATE: "2048", "unrelated": "x"},
            "users/<default>": {REQUEST_PERCENTAGE: "not a number"},
        }
    )
    assert configs.entities == {
        ("CN=alice", "my app"): {PRODUCER_BYTE_RATE: 1048576.0},
        (None, D): {CONSUMER_BYTE_RATE: 2048.0},
    }


@pytest.mark.parametrize(
    ("entity", "path"),
    [
        (("alice", None), "users/alice"),
        ((None, "my app*"), "clients/my%20app%2A"),
        ((D, D), "users/<default>/clients/<default>"),
        (("CN=a,O=b", "c"), "users/CN%3Da%2CO%3Db/clients/c"),
    ],
)
def test_entity_paths_round_trip(entity: tuple[str | None, str | None], path: str) -> None:
    assert entity_path(*entity) == path
    assert parse_entity_path(path) == entity


def test_throttle_time_is_kafkas_formula() -> None:
    # (observed - quota) / quota * window: 2 MB/s against 1 MB/s over 10 s -> 10 s.
    assert throttle_time_ms(2_000_000, 1_000_000, 10.0) == 10_000
    assert throttle_time_ms(1_100_000, 1_000_000, 11.0) == 1_100
    assert throttle_time_ms(1_000_000, 1_000_000, 11.0) == 0
    assert throttle_time_ms(10, 1_000_000, 11.0) == 0


def test_rate_sums_samples_over_the_time_they_cover() -> None:
    rate = SampledRate(samples=11, window_s=1.0, now=0.0)
    for second in range(20):
        rate.record(1000, second + 0.5)
    # 11 samples are kept; the window spans from the oldest sample's start.
    assert rate.window_size(20.0) == pytest.approx(10.5)
    assert rate.measure(20.0) == pytest.approx(11_000 / 10.5)


def test_a_new_rate_is_padded_to_one_window_not_measured_over_milliseconds() -> None:
    rate = SampledRate(samples=11, window_s=1.0, now=0.0)
    rate.record(500, 0.001)
    assert rate.window_size(0.001) == pytest.approx(1.001)
    assert rate.measure(0.001) == pytest.approx(500 / 1.001)


def test_samples_older_than_the_whole_window_expire() -> None:
    rate = SampledRate(samples=3, window_s=1.0, now=0.0)
    rate.record(9000, 0.0)
    assert rate.measure(0.5) > 0
    assert rate.measure(3.0) == 0


def test_kafka_padding_is_available_for_comparison() -> None:
    rate = SampledRate(samples=11, window_s=1.0, now=0.0, min_full_windows=10)
    rate.record(1000, 0.0)
    assert rate.window_size(0.0) == pytest.approx(10.0)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _body() -> BodyResponse:
    """A response of no consequence to the quota arithmetic (its API key is not read)."""
    return BodyResponse(0, {})


def _manager(configs: dict, clock: Clock, samples: int = 11) -> ClientQuotaManager:
    manager = ClientQuotaManager(samples=samples, window_s=1.0, clock=clock)
    manager.update(QuotaConfigs.from_entity_configs(configs))
    return manager


def test_a_producer_over_its_quota_is_throttled_and_the_response_says_so() -> None:
    clock = Clock()
    manager = _manager({"clients/bulk": {PRODUCER_BYTE_RATE: "1000"}}, clock)
    response = BodyResponse(0, {"responses": [], "throttle_time": 0})
    result, throttle = manager.enforce(0, "bulk", None, 3000, response, 0.0)
    # 3000 bytes over the one-window minimum: 3000 B/s, twice over -> 2 s (capped at 11 s).
    assert throttle == 2000
    assert result.throttle_time == 2000
    result, throttle = manager.enforce(0, "other", None, 3000, _body(), 0.0)
    assert throttle == 0


def test_bandwidth_throttles_are_capped_at_the_quota_window() -> None:
    clock = Clock()
    manager = _manager({"clients/bulk": {PRODUCER_BYTE_RATE: "10"}}, clock)
    _result, throttle = manager.enforce(0, "bulk", None, 10**6, _body(), 0.0)
    assert throttle == 11_000


def test_a_throttled_fetch_returns_nothing_and_is_not_counted() -> None:
    clock = Clock()
    manager = _manager({"clients/<default>": {CONSUMER_BYTE_RATE: "1000"}}, clock)

    class Response:
        size = 5000
        throttle_time = 0

        def throttled(self, throttle_ms: int) -> EmptyFetchResponse:
            return EmptyFetchResponse(throttle_time=throttle_ms)

    class Request:
        replica_id = -1

    result, throttle = manager.enforce(1, "c", Request(), 100, Response(), 0.0)  # type: ignore[arg-type]
    assert throttle == 4000
    assert result == EmptyFetchResponse(throttle_time=4000)  # the throttled (empty) response
    sensor = manager.sensors_for(ANONYMOUS, "c").fetch
    assert sensor is not None and sensor.rate.measure(clock.now) == 0


def test_follower_fetches_are_never_throttled() -> None:
    manager = _manager({"clients/<default>": {CONSUMER_BYTE_RATE: "1"}}, Clock())

    class Response:
        size = 10**6

    class Request:
        replica_id = 2

    response = Response()
    assert manager.enforce(1, "broker-2", Request(), 100, response, 0.0) == (  # type: ignore[arg-type]
        response,
        0,
    )


def test_request_percentage_counts_handler_time_and_throttles_at_most_one_window() -> None:
    clock = Clock()
    manager = _manager({"users/ANONYMOUS": {REQUEST_PERCENTAGE: "10"}}, clock)
    # 50 ms of handler time in a one-second window: 5 % of a thread, within 10 %.
    assert manager.enforce(3, "x", None, 100, _body(), 0.05)[1] == 0
    # Another 150 ms: 20 % -> (20 - 10) / 10 * 1 s = 1 s.
    assert manager.enforce(3, "x", None, 100, _body(), 0.15)[1] == 1000
    # ApiVersions is exempt.
    assert manager.enforce(18, "x", None, 100, _body(), 5.0)[1] == 0


def test_raising_a_quota_applies_to_the_rate_already_measured() -> None:
    clock = Clock()
    manager = _manager({"clients/bulk": {PRODUCER_BYTE_RATE: "1000"}}, clock)
    assert manager.enforce(0, "bulk", None, 2000, _body(), 0.0)[1] > 0
    manager.update(QuotaConfigs.from_entity_configs({"clients/bulk": {PRODUCER_BYTE_RATE: "5000"}}))
    assert manager.enforce(0, "bulk", None, 2000, _body(), 0.0)[1] == 0
    sensor = manager.sensors_for(ANONYMOUS, "bulk").produce
    assert sensor is not None and sensor.rate.measure(clock.now) == pytest.approx(4000)


def test_nothing_is_recorded_without_quotas() -> None:
    manager = ClientQuotaManager()
    assert not manager.active
    manager.update(QuotaConfigs.from_entity_configs({"clients/bulk": {}}))
    assert not manager.active


def test_fetch_size_is_bounded_by_the_quota_window() -> None:
    manager = _manager({"clients/c": {CONSUMER_BYTE_RATE: "1000"}}, Clock())
    assert manager.fetch_max_bytes(ANONYMOUS, "c", 50_000_000) == 10_000
    assert manager.fetch_max_bytes(ANONYMOUS, "other", 50_000_000) == 50_000_000
