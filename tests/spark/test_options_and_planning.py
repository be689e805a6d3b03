"""The pure parts, without Spark or a broker: option validation with Spark's messages,
offset JSON, task planning and admission control as Spark's Kafka source computes them."""

from __future__ import annotations

import pytest

from gregor_spark.fetch import DataLossError, report_data_loss
from gregor_spark.options import (
    EXACTLY_ONCE_REFUSED,
    OffsetLimit,
    parse_duration_ms,
    sink_options,
    source_options,
)
from gregor_spark.planning import OffsetRange, plan_partitions, rate_limit, should_delay

BOOTSTRAP = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


@pytest.mark.parametrize(
    ("options", "streaming", "message"),
    [
        (
            {},
            False,
            "One of the following options must be specified for Kafka source: "
            "subscribe, subscribepattern, assign. See the docs for more details.",
        ),
        (
            {"subscribe": "a", "subscribePattern": "b"},
            False,
            "Only one of the following options can be specified for Kafka source: subscribe, "
            "subscribepattern, assign. See the docs for more details.",
        ),
        (
            {"subscribe": " , "},
            False,
            "No topics to subscribe to as specified value for option 'subscribe' is ' , '",
        ),
        ({"subscribePattern": " "}, False, "Pattern to subscribe is empty"),
        (
            {"assign": "a"},
            False,
            "No topicpartitions to assign as specified value for option 'assign' is 'a'",
        ),
        (
            {"subscribe": "a", "kafka.auto.offset.reset": "latest"},
            False,
            "Kafka option 'auto.offset.reset' is not supported.",
        ),
        (
            {"subscribe": "a", "kafka.key.deserializer": "x"},
            False,
            "Kafka option 'key.deserializer' is not supported as keys are deserialized as byte "
            "arrays with ByteArrayDeserializer.",
        ),
        (
            {"subscribe": "a", "kafka.value.deserializer": "x"},
            False,
            "Kafka option 'value.deserializer' is not supported",
        ),
        (
            {"subscribe": "a", "kafka.interceptor.classes": "x"},
            False,
            "Kafka option 'interceptor.classes' is not supported",
        ),
        ({"subscribe": "a", "minPartitions": "-1"}, False, "minPartitions must be positive"),
        (
            {"subscribe": "a", "maxRecordsPerPartition": "0"},
            False,
            "maxRecordsPerPartition must be positive",
        ),
        (
            {"subscribe": "a", "startingOffsets": "latest"},
            False,
            "starting offset can't be latest for batch queries on Kafka",
        ),
        (
            {"subscribe": "a", "startingOffsets": '{"a":{"0":-1}}'},
            False,
            "startingOffsets for a-0 can't be latest for batch queries on Kafka",
        ),
        (
            {"subscribe": "a", "endingOffsets": "earliest"},
            False,
            "ending offset can't be earliest for batch queries on Kafka",
        ),
        (
            {"subscribe": "a", "endingOffsets": '{"a":{"0":-2}}'},
            False,
            "ending offset for a-0 can't be earliest for batch queries on Kafka",
        ),
        (
            {"subscribe": "a", "startingOffsets": "{oops"},
            False,
            'Expected e.g. {"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}, got {oops',
        ),
        (
            {"subscribe": "a", "startingTimestamp": "soon"},
            False,
            "Expected a single long value, got soon",
        ),
        (
            {"subscribe": "a", "endingOffsets": "latest"},
            True,
            "ending offset not valid in streaming queries",
        ),
        (
            {"subscribe": "a", "endingOffsetsByTimestamp": "{}"},
            True,
            "ending timestamp not valid in streaming queries",
        ),
        (
            {"subscribe": "a", "minOffsetsPerTrigger": "10", "maxOffsetsPerTrigger": "5"},
            True,
            "The value of minOffsetPerTrigger(10) is higher than the maxOffsetsPerTrigger(5).",
        ),
    ],
)
def test_spark_rejections_with_sparks_messages(options, streaming, message) -> None:
    with pytest.raises(ValueError) as raised:
        source_options({**BOOTSTRAP, **options}, streaming=streaming)
    assert message in str(raised.value)


def test_bootstrap_servers_are_required() -> None:
    with pytest.raises(ValueError, match=r"Option 'kafka.bootstrap.servers' must be specified"):
        source_options({"subscribe": "a"}, streaming=False)


def test_options_are_case_insensitive_and_kafka_options_pass_through() -> None:
    parsed = source_options(
        {
            **BOOTSTRAP,
            "SUBSCRIBE": "a, b",
            "StartingOffsets": '{"a":{"0":5,"1":-2},"b":{"0":-2}}',
            "kafka.security.protocol": "PLAINTEXT",
            "includeHeaders": "TRUE",
            "groupIdPrefix": "nightly",
        },
        streaming=False,
    )
    assert parsed.topics == ("a", "b")
    assert parsed.starting == OffsetLimit("offsets", {("a", 0): 5, ("a", 1): -2, ("b", 0): -2})
    assert parsed.ending == OffsetLimit("latest")
    assert parsed.kafka == {"bootstrap.servers": "127.0.0.1:9092", "security.protocol": "PLAINTEXT"}
    assert parsed.include_headers
    assert parsed.group_id.startswith("nightly-")
    streaming = source_options({**BOOTSTRAP, "subscribe": "a"}, streaming=True)
    assert streaming.starting == OffsetLimit("latest")  # Spark's streaming default
    assert streaming.group_id.startswith("spark-kafka-source-")


def test_timestamp_options_win_over_offsets_in_sparks_order() -> None:
    parsed = source_options(
        {
            **BOOTSTRAP,
            "subscribe": "a",
            "startingOffsets": "earliest",
            "startingOffsetsByTimestamp": '{"a":{"0":1000}}',
            "startingTimestamp": "2000",
        },
        streaming=False,
    )
    assert parsed.starting == OffsetLimit("timestamp", timestamp=2000)


def test_sink_refuses_exactly_once_until_transactions_exist() -> None:
    with pytest.raises(ValueError) as raised:
        sink_options({**BOOTSTRAP, "exactlyOnce": "true"})
    assert str(raised.value) == EXACTLY_ONCE_REFUSED
    assert "transactions" in EXACTLY_ONCE_REFUSED
    with pytest.raises(ValueError, match=r"'key.serializer' is not supported"):
        sink_options({**BOOTSTRAP, "kafka.key.serializer": "x"})
    assert sink_options({**BOOTSTRAP, "topic": " out "}).topic == "out"


def test_trigger_delay_strings() -> None:
    assert parse_duration_ms("15m") == 900_000
    assert parse_duration_ms("30s") == 30_000
    assert parse_duration_ms("250") == 250


def test_one_task_per_partition_and_sparks_splits() -> None:
    ranges = [OffsetRange("t", 0, 0, 100), OffsetRange("t", 1, 10, 40), OffsetRange("t", 2, 5, 5)]
    assert plan_partitions(ranges) == ranges[:2]  # empty ranges run no task
    # maxRecordsPerPartition: ceil(size / max) pieces, the last takes the rest.
    assert plan_partitions(ranges, max_records_per_partition=30) == [
        OffsetRange("t", 0, 0, 25),
        OffsetRange("t", 0, 25, 50),
        OffsetRange("t", 0, 50, 75),
        OffsetRange("t", 0, 75, 100),
        OffsetRange("t", 1, 10, 40),
    ]
    # minPartitions: pieces in proportion to each range's share (100:30 of 130 over 5).
    split = plan_partitions(ranges, min_partitions=5)
    assert [(r.partition, r.size) for r in split] == [(0, 25), (0, 25), (0, 25), (0, 25), (1, 30)]
    assert plan_partitions(ranges, min_partitions=2) == ranges[:2]


def test_max_offsets_per_trigger_splits_by_backlog_without_starving_small_partitions() -> None:
    start = {("t", 0): 0, ("t", 1): 0, ("t", 2): 100}
    latest = {("t", 0): 900, ("t", 1): 99, ("t", 2): 101}
    ends = rate_limit(start, latest, 100)
    assert ends == {("t", 0): 90, ("t", 1): 9, ("t", 2): 101}
    assert rate_limit(start, {("t", 0): 0, ("t", 1): 0, ("t", 2): 100}, 10) == {
        ("t", 0): 0,
        ("t", 1): 0,
        ("t", 2): 100,
    }


def test_min_offsets_per_trigger_waits_at_most_max_trigger_delay() -> None:
    assert should_delay(
        backlog=5, min_offsets=10, now_ms=1_000, last_trigger_ms=0, max_delay_ms=60_000
    )
    assert not should_delay(
        backlog=10, min_offsets=10, now_ms=1_000, last_trigger_ms=0, max_delay_ms=60_000
    )
    assert not should_delay(
        backlog=5, min_offsets=10, now_ms=61_000, last_trigger_ms=1_000, max_delay_ms=60_000
    )


def test_data_loss_fails_or_logs_the_skipped_range(caplog) -> None:
    gone = OffsetRange("clicks", 3, 100, 500)
    strict = source_options({**BOOTSTRAP, "subscribe": "clicks"}, streaming=True)
    with pytest.raises(DataLossError, match=r"Offsets \[100, 250\) of clicks-3 are no longer"):
        report_data_loss(strict, gone, 250)
    lenient = source_options(
        {**BOOTSTRAP, "subscribe": "clicks", "failOnDataLoss": "false"}, streaming=True
    )
    with caplog.at_level("WARNING", logger="gregor_spark"):
        report_data_loss(lenient, gone, 250)
    assert "Offsets [100, 250) of clicks-3 are no longer in the log" in caplog.text
    assert "skipping them (failOnDataLoss is false)" in caplog.text
