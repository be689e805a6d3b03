"""Topic configs: Kafka's table of topic keys with defaults and validators
(``TOPIC_CONFIGS``), their validation, and the log's ``LogConfig`` of a topic (its overrides,
else the broker's defaults). Where overrides are stored is ``cluster.admin``'s concern.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from gregor_broker.log.log_config import LogConfig

from .broker import _T, BrokerConfig, _attr
from .values import (
    LONG_MAX,
    ConfigType,
    InvalidConfig,
    Validator,
    _throttled_replicas,
    at_least,
    between,
    display_value,
    list_of,
    message_format_version,
    one_of,
    parse_validated,
)

# --- topic configs ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TopicConfigDef:
    """A topic config: Kafka's name, type, default as Kafka shows it, the broker keys that
    supply the default (most specific first), validator and description."""

    name: str
    config_type: ConfigType
    default: str | None
    broker_synonyms: tuple[str, ...]
    validator: Validator | None
    doc: str

    def parse(self, text: str) -> Any:
        return parse_validated(self.name, text, self.config_type, self.validator)

    def default_from(self, broker: BrokerConfig) -> str | None:
        """The value a topic without an override gets from this broker, as Kafka shows it."""
        if not self.broker_synonyms:
            return self.default
        return display_value(getattr(broker, _attr(self.broker_synonyms[0])))


_LONG_MAX_S = str(LONG_MAX)


def _topic(
    name: str,
    config_type: ConfigType,
    default: str | None,
    synonyms: tuple[str, ...],
    doc: str,
    validator: Validator | None = None,
) -> TopicConfigDef:
    return TopicConfigDef(name, config_type, default, synonyms, validator, doc)


TOPIC_CONFIGS: Mapping[str, TopicConfigDef] = MappingProxyType(
    {
        d.name: d
        for d in (
            _topic("cleanup.policy", _T.LIST, "delete", ("log.cleanup.policy",),
                   "delete old segments, compact to the latest value per key, or both",
                   list_of("delete", "compact")),
            _topic("compression.type", _T.STRING, "producer", ("compression.type",),
                   "codec batches are stored with; producer keeps what the producer sent",
                   one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")),
            _topic("delete.retention.ms", _T.LONG, "86400000",
                   ("log.cleaner.delete.retention.ms",),
                   "how long compaction keeps tombstones", at_least(0)),
            _topic("file.delete.delay.ms", _T.LONG, "60000", ("log.segment.delete.delay.ms",),
                   "wait before deleting a segment file from disk", at_least(0)),
            _topic("flush.messages", _T.LONG, _LONG_MAX_S, ("log.flush.interval.messages",),
                   "fsync after this many messages", at_least(1)),
            _topic("flush.ms", _T.LONG, _LONG_MAX_S, ("log.flush.interval.ms",),
                   "fsync after a message has waited this long", at_least(0)),
            _topic("follower.replication.throttled.replicas", _T.LIST, "", (),
                   "replicas throttled on the follower side while data moves: "
                   "p:broker,... or *", _throttled_replicas),
            _topic("index.interval.bytes", _T.INT, "4096", ("log.index.interval.bytes",),
                   "bytes between offset index entries", at_least(0)),
            _topic("leader.replication.throttled.replicas", _T.LIST, "", (),
                   "replicas throttled on the leader side while data moves: "
                   "p:broker,... or *", _throttled_replicas),
            _topic("max.compaction.lag.ms", _T.LONG, _LONG_MAX_S,
                   ("log.cleaner.max.compaction.lag.ms",),
                   "maximum time a message stays uncompacted", at_least(1)),
            _topic("max.message.bytes", _T.INT, "1048588", ("message.max.bytes",),
                   "largest record batch accepted", at_least(0)),
            _topic("message.downconversion.enable", _T.BOOLEAN, "true",
                   ("log.message.downconversion.enable",),
                   "allow down-conversion for old fetch versions"),
            # Deprecated in Kafka 3.0 and ignored from then on (every batch is v2), but still
            # accepted, as clients and tools still set it (librdkafka's 0092 mixed_msgver).
            _topic("message.format.version", _T.STRING, "3.0-IV1", (),
                   "deprecated, ignored: every batch is stored in the v2 format",
                   message_format_version),
            _topic("message.timestamp.after.max.ms", _T.LONG, _LONG_MAX_S,
                   ("log.message.timestamp.after.max.ms",),
                   "reject records timestamped this far after the broker's time", at_least(0)),
            _topic("message.timestamp.before.max.ms", _T.LONG, _LONG_MAX_S,
                   ("log.message.timestamp.before.max.ms",),
                   "reject records timestamped this far before the broker's time", at_least(0)),
            _topic("message.timestamp.type", _T.STRING, "CreateTime",
                   ("log.message.timestamp.type",),
                   "CreateTime keeps the producer's timestamp, LogAppendTime uses the broker's",
                   one_of("CreateTime", "LogAppendTime")),
            _topic("min.cleanable.dirty.ratio", _T.DOUBLE, "0.5",
                   ("log.cleaner.min.cleanable.ratio",),
                   "dirty ratio above which the log is compacted", between(0, 1)),
            _topic("min.compaction.lag.ms", _T.LONG, "0", ("log.cleaner.min.compaction.lag.ms",),
                   "minimum age of a message before it can be compacted", at_least(0)),
            _topic("min.insync.replicas", _T.INT, "1", ("min.insync.replicas",),
                   "replicas that must have an acks=all write", at_least(1)),
            _topic("preallocate", _T.BOOLEAN, "false", ("log.preallocate",),
                   "preallocate segment files"),
            _topic("retention.bytes", _T.LONG, "-1", ("log.retention.bytes",),
                   "delete old segments beyond this partition size; -1: no limit"),
            _topic("retention.ms", _T.LONG, "604800000",
                   ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
                   "delete segments older than this; -1: keep forever", at_least(-1)),
            _topic("segment.bytes", _T.INT, "1073741824", ("log.segment.bytes",),
                   "largest segment file size", at_least(14)),
            _topic("segment.index.bytes", _T.INT, "10485760", ("log.index.size.max.bytes",),
                   "largest offset index file size", at_least(4)),
            _topic("segment.jitter.ms", _T.LONG, "0",
                   ("log.roll.jitter.ms", "log.roll.jitter.hours"),
                   "random jitter subtracted from segment.ms", at_least(0)),
            _topic("segment.ms", _T.LONG, "604800000", ("log.roll.ms", "log.roll.hours"),
                   "roll a new segment after this time", at_least(1)),
            _topic("unclean.leader.election.enable", _T.BOOLEAN, "false",
                   ("unclean.leader.election.enable",),
                   "allow a replica outside the ISR to become leader (may lose data)"),
        )
    }
)  # fmt: skip


def validate_topic_configs(configs: Mapping[str, str | None]) -> None:
    """Raise :class:`InvalidConfig` for an unknown topic config name or a bad value.

    ``None`` values (a config being reset) are accepted for known names.
    """
    parsed = _parse_topic_configs(configs)
    low = parsed.get("min.compaction.lag.ms")
    high = parsed.get("max.compaction.lag.ms")
    if low is not None and high is not None and low > high:
        # Matches Kafka's LogConfig.validateValues.
        raise InvalidConfig(
            f"conflict topic config setting min.compaction.lag.ms ({low}) > "
            f"max.compaction.lag.ms ({high})"
        )


def _parse_topic_configs(configs: Mapping[str, str | None]) -> dict[str, Any]:
    parsed: dict[str, Any] = {}
    for name, text in configs.items():
        definition = TOPIC_CONFIGS.get(name)
        if definition is None:
            raise InvalidConfig(f"Unknown topic config name: {name}")
        if text is not None:
            parsed[name] = definition.parse(text)
    return parsed


def effective_topic_configs(broker: BrokerConfig, overrides: Mapping[str, str]) -> dict[str, str]:
    """Every topic config's value for a topic with these overrides, as strings."""
    validate_topic_configs(overrides)
    return {
        name: overrides[name]
        if overrides.get(name) is not None
        else definition.default_from(broker)
        for name, definition in TOPIC_CONFIGS.items()
    }  # type: ignore[misc]


def log_config_for(broker: BrokerConfig, overrides: Mapping[str, str]) -> LogConfig:
    """The typed LogConfig of a topic: its overrides, else the broker's defaults.

    Raises :class:`InvalidConfig` for bad overrides.
    """
    values = effective_topic_configs(broker, overrides)
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(LogConfig):
        name = f.name.replace("_", ".")
        value = TOPIC_CONFIGS[name].parse(values[name] or "")
        kwargs[f.name] = ",".join(value) if isinstance(value, tuple) else value
    return LogConfig(**kwargs)


def log_configs_of(broker: BrokerConfig) -> Callable[[Mapping[str, str]], LogConfig]:
    """``log_config_for`` with ``broker``'s defaults, remembered per distinct set of
    overrides. The replica manager asks for it at every topic it reconciles, several
    times per topic while thousands of partitions are created: parsing every config of
    every topic took a tenth of the event loop's time then (profile of issue 9's scale
    bench). LogConfig is immutable, so topics with the same overrides share one."""

    @functools.lru_cache(maxsize=4096)
    def cached(overrides: frozenset[tuple[str, str]]) -> LogConfig:
        return log_config_for(broker, dict(overrides))

    return lambda overrides: cached(frozenset(overrides.items()))
