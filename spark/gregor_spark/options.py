"""The data source's options: parsed, validated and typed, with Spark's Kafka source rules.

Owns the option names and their meaning, exactly as Spark's ``KafkaSourceProvider`` reads
them (names are case-insensitive; ``kafka.*`` goes to the client with the prefix dropped),
and the rejections Spark makes, with Spark's messages, so that a job written for
``format("kafka")`` fails or runs the same way on ``format("gregor")``. Pure: no client, no
Spark session; the reader and writer classes call ``source_options``/``sink_options``.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

log = logging.getLogger("gregor_spark")

TopicPartition = tuple[str, int]

# Kafka's ListOffsets sentinels, as Spark's per-partition JSON uses them.
EARLIEST = -2
LATEST = -1

SUBSCRIBE, SUBSCRIBE_PATTERN, ASSIGN = "subscribe", "subscribepattern", "assign"
# Spark lists them in this order in its messages (a Scala Set of three keeps insertion order).
STRATEGY_KEYS = (SUBSCRIBE, SUBSCRIBE_PATTERN, ASSIGN)

CUSTOM_GROUP_ID_WARNING = (
    "Kafka option 'kafka.group.id' has been set on this query, it is not recommended to set "
    "this option. This option is unsafe to use since multiple concurrent queries or sources "
    "using the same group id will interfere with each other as they are part of the same "
    "consumer group."
)

AUTO_OFFSET_RESET_ERROR = (
    "\nKafka option 'auto.offset.reset' is not supported.\n"
    "Instead set the source option 'startingoffsets' to 'earliest' or 'latest'\n"
    "to specify where to start. Structured Streaming manages which offsets are consumed\n"
    "internally, rather than relying on the kafkaConsumer to do it. This will ensure that no\n"
    "data is missed when new topics/partitions are dynamically subscribed. Note that\n"
    "'startingoffsets' only applies when a new Streaming query is started, and\n"
    "that resuming will always pick up from where the query left off. See the docs for more\n"
    "details.\n"
)

EXACTLY_ONCE_REFUSED = (
    "Option 'exactlyOnce' needs Kafka transactions, which Gregor does not implement yet "
    "(issue 15, transactions): a replayed micro-batch could not be committed only once. "
    "Remove the option to write with the idempotent producer (at-least-once delivery)."
)

OFFSETS_EXAMPLE = '{"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}'
TIMESTAMPS_EXAMPLE = (
    '{"topicA": {"0": 123456789, "1": 123456789}, "topicB": {"0": 123456789, "1": 123456789}}'
)
ASSIGN_EXAMPLE = '{"topicA":[0,1],"topicB":[0,1]}'


@dataclass(frozen=True)
class OffsetLimit:
    """Where a read starts or ends, before it is resolved against the brokers.

    ``kind`` is ``earliest``, ``latest``, ``offsets`` (per partition, -2/-1 allowed),
    ``timestamp`` (one timestamp for every partition) or ``timestamps`` (per partition).
    """

    kind: str
    offsets: Mapping[TopicPartition, int] = field(default_factory=dict)
    timestamp: int | None = None


@dataclass(frozen=True)
class SourceOptions:
    strategy: str  # subscribe | subscribepattern | assign
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assigned: tuple[TopicPartition, ...] = ()
    starting: OffsetLimit = OffsetLimit("earliest")
    ending: OffsetLimit = OffsetLimit("latest")
    # What a timestamp that matches no record means for the start: error or latest.
    timestamp_strategy: str = "error"
    fail_on_data_loss: bool = True
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60 * 1000
    include_headers: bool = False
    group_id: str = ""
    commit_offsets_to_group: str | None = None
    poll_timeout_ms: int = 120_000
    kafka: Mapping[str, str] = field(default_factory=dict)

    def matches(self, topic: str) -> bool:
        """Whether a topic from the cluster's metadata is one this source reads."""
        if self.strategy == SUBSCRIBE:
            return topic in self.topics
        if self.strategy == SUBSCRIBE_PATTERN:
            return re.fullmatch(self.pattern or "", topic) is not None
        return any(t == topic for t, _ in self.assigned)


@dataclass(frozen=True)
class SinkOptions:
    topic: str | None
    kafka: Mapping[str, str]


def lowercase(options: Mapping[str, str]) -> dict[str, str]:
    return {key.lower(): value for key, value in options.items()}


def kafka_params(options: Mapping[str, str]) -> dict[str, str]:
    """``kafka.*`` options with the prefix dropped, as Spark's convertToSpecifiedParams."""
    return {key[6:]: value for key, value in options.items() if key.lower().startswith("kafka.")}


def parse_bool(value: str, name: str) -> bool:
    lowered = value.strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError(f"Option '{name}' must be true or false, got '{value}'")
    return lowered == "true"


def parse_duration_ms(value: str) -> int:
    """Spark's time strings for maxTriggerDelay: ``15m``, ``30s``, ``500ms``, ``1h``, ``2d``."""
    match = re.fullmatch(r"\s*(\d+)\s*(ms|s|m|min|h|d)?\s*", value.lower())
    if match is None:
        raise ValueError(f"Invalid time string for maxTriggerDelay: '{value}'")
    number, unit = int(match.group(1)), match.group(2) or "ms"
    scale = {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}
    return number * scale[unit]


def _json_object(text: str, example: str) -> dict:
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        raise ValueError(f"Expected e.g. {example}, got {text}")
    return parsed


def partition_numbers(text: str, example: str) -> dict[TopicPartition, int]:
    """``{"topic": {"0": 23}}`` as ``{("topic", 0): 23}`` (Spark's JsonUtils)."""
    parsed = _json_object(text, example)
    result: dict[TopicPartition, int] = {}
    try:
        for topic, partitions in parsed.items():
            for partition, number in partitions.items():
                if isinstance(number, bool) or not isinstance(number, int):
                    raise TypeError(number)
                result[(topic, int(partition))] = number
    except (AttributeError, TypeError, ValueError):
        raise ValueError(f"Expected e.g. {example}, got {text}") from None
    return result


def assigned_partitions(text: str) -> tuple[TopicPartition, ...]:
    parsed = _json_object(text, ASSIGN_EXAMPLE)
    try:
        return tuple(
            (topic, int(partition)) for topic, parts in parsed.items() for partition in parts
        )
    except (TypeError, ValueError):
        raise ValueError(f"Expected e.g. {ASSIGN_EXAMPLE}, got {text}") from None


def offset_limit(
    options: Mapping[str, str], timestamp_key: str, by_timestamp_key: str, offsets_key: str
) -> OffsetLimit | None:
    """Spark's preference order: one timestamp, then per-partition timestamps, then offsets."""
    if timestamp_key in options:
        text = options[timestamp_key].strip()
        try:
            return OffsetLimit("timestamp", timestamp=int(text))
        except ValueError:
            raise ValueError(f"Expected a single long value, got {text}") from None
    if by_timestamp_key in options:
        return OffsetLimit(
            "timestamps", partition_numbers(options[by_timestamp_key].strip(), TIMESTAMPS_EXAMPLE)
        )
    if offsets_key in options:
        text = options[offsets_key].strip()
        if text.lower() in ("earliest", "latest"):
            return OffsetLimit(text.lower())
        return OffsetLimit("offsets", partition_numbers(text, OFFSETS_EXAMPLE))
    return None


def _positive(options: Mapping[str, str], key: str, name: str) -> int | None:
    if key not in options:
        return None
    value = int(options[key])
    if value <= 0:
        raise ValueError(f"{name} must be positive")
    return value


def _validate_general(options: Mapping[str, str]) -> None:
    """Spark's validateGeneralOptions, message for message."""
    strategies = [key for key in STRATEGY_KEYS if key in options]
    names = ", ".join(STRATEGY_KEYS)
    if not strategies:
        raise ValueError(
            f"One of the following options must be specified for Kafka source: {names}. "
            "See the docs for more details."
        )
    if len(strategies) > 1:
        raise ValueError(
            f"Only one of the following options can be specified for Kafka source: {names}. "
            "See the docs for more details."
        )
    strategy, value = strategies[0], options[strategies[0]]
    if strategy == ASSIGN and not value.strip().startswith("{"):
        raise ValueError(
            f"No topicpartitions to assign as specified value for option 'assign' is '{value}'"
        )
    if strategy == SUBSCRIBE and not [t for t in value.split(",") if t.strip()]:
        raise ValueError(
            f"No topics to subscribe to as specified value for option 'subscribe' is '{value}'"
        )
    if strategy == SUBSCRIBE_PATTERN and not value.strip():
        raise ValueError(
            "Pattern to subscribe is empty as specified value for option "
            f"'subscribePattern' is '{value}'"
        )
    _positive(options, "minpartitions", "minPartitions")
    _positive(options, "maxrecordsperpartition", "maxRecordsPerPartition")
    if "kafka.group.id" in options:
        log.warning(CUSTOM_GROUP_ID_WARNING)
        if "groupidprefix" in options:
            log.warning(
                "Option groupIdPrefix will be ignored as option kafka.group.id has been set."
            )
    if "kafka.auto.offset.reset" in options:
        raise ValueError(AUTO_OFFSET_RESET_ERROR)
    if "kafka.key.deserializer" in options:
        raise ValueError(
            "Kafka option 'key.deserializer' is not supported as keys are deserialized as byte "
            "arrays with ByteArrayDeserializer. Use DataFrame operations to explicitly "
            "deserialize the keys."
        )
    if "kafka.value.deserializer" in options:
        raise ValueError(
            "Kafka option 'value.deserializer' is not supported as values are deserialized as "
            "byte arrays with ByteArrayDeserializer. Use DataFrame operations to explicitly "
            "deserialize the values."
        )
    for unsupported in ("enable.auto.commit", "interceptor.classes"):
        if f"kafka.{unsupported}" in options:
            raise ValueError(f"Kafka option '{unsupported}' is not supported")
    if "kafka.bootstrap.servers" not in options:
        raise ValueError(
            "Option 'kafka.bootstrap.servers' must be specified for configuring Kafka consumer"
        )
    if "minoffsetspertrigger" in options and "maxoffsetspertrigger" in options:
        low, high = int(options["minoffsetspertrigger"]), int(options["maxoffsetspertrigger"])
        if low > high:
            raise ValueError(
                f"The value of minOffsetPerTrigger({low}) is higher than the "
                f"maxOffsetsPerTrigger({high})."
            )


def _validate_batch(starting: OffsetLimit, ending: OffsetLimit) -> None:
    """Spark's validateBatchOptions and checkOffsetLimitValidity."""
    if starting.kind == "latest":
        raise ValueError("starting offset can't be latest for batch queries on Kafka")
    for (topic, partition), offset in starting.offsets.items():
        if starting.kind == "offsets" and offset == LATEST:
            raise ValueError(
                f"startingOffsets for {topic}-{partition} can't be latest for batch queries "
                "on Kafka"
            )
    if ending.kind == "earliest":
        raise ValueError("ending offset can't be earliest for batch queries on Kafka")
    for (topic, partition), offset in ending.offsets.items():
        if ending.kind == "offsets" and offset == EARLIEST:
            raise ValueError(
                f"ending offset for {topic}-{partition} can't be earliest for batch queries "
                "on Kafka"
            )
    if starting.kind == ending.kind and starting.kind in ("offsets", "timestamps"):
        if set(starting.offsets) != set(ending.offsets):
            raise ValueError(
                "The start and end offsets/timestamps name different topic partitions: "
                f"{sorted(starting.offsets)} and {sorted(ending.offsets)}"
            )
        for tp, start in starting.offsets.items():
            end = ending.offsets[tp]
            # Sentinels (negative) are resolved later and not compared, as in Spark.
            if start > end >= 0 and start >= 0:
                raise ValueError(
                    f"The start {'offset' if starting.kind == 'offsets' else 'timestamp'} "
                    f"{start} is greater than the end one {end} for topic partition "
                    f"{tp[0]}-{tp[1]}"
                )


def source_options(raw: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    """Validate ``raw`` as Spark's Kafka source does for a batch or a streaming read."""
    options = lowercase(raw)
    if streaming:
        if "endingoffsets" in options:
            raise ValueError("ending offset not valid in streaming queries")
        if "endingoffsetsbytimestamp" in options:
            raise ValueError("ending timestamp not valid in streaming queries")
    else:
        starting = offset_limit(
            options, "startingtimestamp", "startingoffsetsbytimestamp", "startingoffsets"
        )
        ending = offset_limit(
            options, "endingtimestamp", "endingoffsetsbytimestamp", "endingoffsets"
        )
        _validate_batch(starting or OffsetLimit("earliest"), ending or OffsetLimit("latest"))
    _validate_general(options)
    if not streaming:
        for ignored in ("maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay"):
            if ignored.lower() in options:
                log.warning("%s option ignored in batch queries", ignored)

    strategy = next(key for key in STRATEGY_KEYS if key in options)
    starting = offset_limit(
        options, "startingtimestamp", "startingoffsetsbytimestamp", "startingoffsets"
    ) or OffsetLimit("latest" if streaming else "earliest")
    ending = offset_limit(
        options, "endingtimestamp", "endingoffsetsbytimestamp", "endingoffsets"
    ) or OffsetLimit("latest")
    timestamp_strategy = options.get("startingoffsetsbytimestampstrategy", "error").lower()
    if timestamp_strategy not in ("error", "latest"):
        raise ValueError(
            "Option startingOffsetsByTimestampStrategy must be 'error' or 'latest', "
            f"got '{options['startingoffsetsbytimestampstrategy']}'"
        )
    kafka = kafka_params(options)
    prefix = "spark-kafka-source" if streaming else "spark-kafka-relation"
    group_id = kafka.get("group.id") or f"{options.get('groupidprefix', prefix)}-{uuid.uuid4()}"
    return SourceOptions(
        strategy=strategy,
        topics=tuple(t.strip() for t in options.get(SUBSCRIBE, "").split(",") if t.strip()),
        pattern=options.get(SUBSCRIBE_PATTERN, "").strip() or None,
        assigned=assigned_partitions(options[ASSIGN]) if strategy == ASSIGN else (),
        starting=starting,
        ending=ending,
        timestamp_strategy=timestamp_strategy,
        fail_on_data_loss=parse_bool(options.get("failondataloss", "true"), "failOnDataLoss"),
        min_partitions=_positive(options, "minpartitions", "minPartitions"),
        max_records_per_partition=_positive(
            options, "maxrecordsperpartition", "maxRecordsPerPartition"
        ),
        max_offsets_per_trigger=_positive(options, "maxoffsetspertrigger", "maxOffsetsPerTrigger"),
        min_offsets_per_trigger=_positive(options, "minoffsetspertrigger", "minOffsetsPerTrigger"),
        max_trigger_delay_ms=parse_duration_ms(options.get("maxtriggerdelay", "15m")),
        include_headers=parse_bool(options.get("includeheaders", "false"), "includeHeaders"),
        group_id=group_id,
        commit_offsets_to_group=options.get("commitoffsetstogroup") or None,
        poll_timeout_ms=int(options.get("kafkaconsumer.polltimeoutms", "120000")),
        kafka=kafka,
    )


def sink_options(raw: Mapping[str, str]) -> SinkOptions:
    """Spark's kafkaParamsForProducer checks, plus the refused ``exactlyOnce``."""
    options = lowercase(raw)
    if "kafka.key.serializer" in options:
        raise ValueError(
            "Kafka option 'key.serializer' is not supported as keys are serialized with "
            "ByteArraySerializer."
        )
    if "kafka.value.serializer" in options:
        raise ValueError(
            "Kafka option 'value.serializer' is not supported as value are serialized with "
            "ByteArraySerializer."
        )
    if parse_bool(options.get("exactlyonce", "false"), "exactlyOnce"):
        raise ValueError(EXACTLY_ONCE_REFUSED)
    if "kafka.bootstrap.servers" not in options:
        raise ValueError(
            "Option 'kafka.bootstrap.servers' must be specified for configuring Kafka producer"
        )
    topic = options.get("topic")
    return SinkOptions(topic=topic.strip() if topic else None, kafka=kafka_params(options))
