"""Broker and topic configuration, with Kafka's property names, defaults and validation.

Owns: reading ``server.properties``-style files, ``GREGOR_*`` environment overrides, the
typed :class:`BrokerConfig`, the table of topic configs (:data:`TOPIC_CONFIGS`) with
Kafka's defaults and validators, turning topic overrides into the log package's
:class:`~gregor_broker.log.log_config.LogConfig`, and the entries DescribeConfigs shows.

Does not own: where topic overrides are stored (``cluster.admin`` reads ``/config/topics``)
or dynamic reconfiguration; every value here is static once loaded.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import re
import socket
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from pathlib import Path
from types import MappingProxyType
from typing import Any

from gregor_broker.log.log_config import LogConfig

log = logging.getLogger(__name__)

INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1
ENV_PREFIX = "GREGOR_"
_EMPTY: Mapping[str, str] = MappingProxyType({})


class ConfigError(ValueError):
    """A configuration value is missing or invalid; the message names key, value and fix."""


class InvalidConfig(ConfigError):
    """A topic config is unknown or invalid; Kafka answers INVALID_CONFIG (error code 40)."""


class ConfigType(IntEnum):
    """Kafka's ``DescribeConfigsResponse.ConfigType`` numbers."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigSource(IntEnum):
    """Kafka's ``DescribeConfigsResponse.ConfigSource`` numbers."""

    UNKNOWN = 0
    TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6


# --- parsing and validating single values, as Kafka's ConfigDef does ---------------------

Validator = Callable[[str, Any], None]

_TYPE_NAMES = {
    ConfigType.BOOLEAN: "a boolean (true or false)",
    ConfigType.STRING: "a string",
    ConfigType.INT: f"an integer between {-(2**31)} and {INT_MAX}",
    ConfigType.SHORT: "an integer between -32768 and 32767",
    ConfigType.LONG: f"an integer between {-(2**63)} and {LONG_MAX}",
    ConfigType.DOUBLE: "a number",
    ConfigType.LIST: "a comma-separated list",
}
_INT_RANGES = {
    ConfigType.SHORT: (-(2**15), 2**15 - 1),
    ConfigType.INT: (-(2**31), INT_MAX),
    ConfigType.LONG: (-(2**63), LONG_MAX),
}


def _invalid(key: str, value: Any, expected: str, error: type[ConfigError]) -> ConfigError:
    return error(f"Invalid value {value!r} for configuration {key}: expected {expected}")


def parse_value(
    key: str, text: str, config_type: ConfigType, error: type[ConfigError] = ConfigError
) -> Any:
    """Parse a property string to its typed value; like ``ConfigDef.parseType`` it trims first."""
    trimmed = text.strip()
    if config_type == ConfigType.BOOLEAN:
        # Matches Kafka: only "true"/"false", case-insensitively; not "yes" or "1".
        if trimmed.lower() in ("true", "false"):
            return trimmed.lower() == "true"
    elif config_type in _INT_RANGES:
        low, high = _INT_RANGES[config_type]
        if re.fullmatch(r"[+-]?[0-9]+", trimmed) and low <= int(trimmed) <= high:
            return int(trimmed)
    elif config_type == ConfigType.DOUBLE:
        try:
            number = float(trimmed)
        except ValueError:
            pass
        else:
            if math.isfinite(number):
                return number
    elif config_type == ConfigType.LIST:
        return tuple(item.strip() for item in trimmed.split(",")) if trimmed else ()
    else:
        return trimmed
    raise _invalid(key, text, _TYPE_NAMES[config_type], error)


def display_value(value: Any) -> str | None:
    """A typed value as Kafka's ``ConfigDef.convertToString`` shows it."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple | list):
        return ",".join(str(v) for v in value)
    return str(value)


def at_least(minimum: int | float) -> Validator:
    def check(key: str, value: Any) -> None:
        if value is not None and value < minimum:
            raise ConfigError(
                f"Invalid value {value} for configuration {key}: must be >= {minimum}"
            )

    check.__doc__ = f"[{minimum},...]"
    return check


def between(low: float, high: float) -> Validator:
    def check(key: str, value: Any) -> None:
        if value is not None and not low <= value <= high:
            raise ConfigError(
                f"Invalid value {value} for configuration {key}: must be between {low} and {high}"
            )

    check.__doc__ = f"[{low},...,{high}]"
    return check


def one_of(*allowed: str) -> Validator:
    def check(key: str, value: Any) -> None:
        if value is not None and value not in allowed:
            raise ConfigError(
                f"Invalid value {value!r} for configuration {key}: "
                f"expected one of {', '.join(allowed)}"
            )

    check.__doc__ = f"[{', '.join(allowed)}]"
    return check


_MESSAGE_FORMAT_VERSION = re.compile(r"\d+(\.\d+){1,3}(-IV\d+)?")


def message_format_version(key: str, value: Any) -> None:
    """A Kafka release or inter-broker protocol version such as ``0.10.0`` or ``3.0-IV1``."""
    if value is not None and not _MESSAGE_FORMAT_VERSION.fullmatch(value):
        raise ConfigError(
            f"Invalid value {value!r} for configuration {key}: expected a Kafka version "
            "such as 2.8 or 3.0-IV1"
        )


message_format_version.__doc__ = "[0.8.0, ..., 3.0-IV1]"


def list_of(*allowed: str, non_empty: bool = False) -> Validator:
    def check(key: str, value: Any) -> None:
        if value is None:
            return
        if non_empty and not value:
            raise ConfigError(f"Invalid value '' for configuration {key}: the list is empty")
        for item in value:
            if item not in allowed:
                raise ConfigError(
                    f"Invalid value {','.join(value)!r} for configuration {key}: {item!r} is "
                    f"not allowed, expected a list of {', '.join(allowed)}"
                )

    check.__doc__ = f"[{', '.join(allowed)}]"
    return check


def _throttled_replicas(key: str, value: Any) -> None:
    # Matches Kafka's ThrottledReplicaListValidator.
    items = [item.strip() for item in value or ()]
    if items == ["*"] or all(re.fullmatch(r"([0-9]+:[0-9]+)?", item) for item in items):
        return
    raise ConfigError(
        f"Invalid value {','.join(items)!r} for configuration {key}: must be the literal '*' "
        "or a list of replicas in the format [partitionId]:[brokerId],[partitionId]:[brokerId],..."
    )


_throttled_replicas.__doc__ = "[partitionId]:[brokerId],[partitionId]:[brokerId],..."

# --- Java properties files ------------------------------------------------------------------

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", text[i + 2 : i + 6]):
                out.append(chr(int(text[i + 2 : i + 6], 16)))
                i += 6
                continue
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        if char != "\\":
            out.append(char)
        i += 1
    return "".join(out)


def _logical_lines(text: str) -> Iterable[str]:
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].lstrip(" \t\f")
        i += 1
        if not line or line[0] in "#!":
            continue
        # A line ending in an odd number of backslashes continues on the next line,
        # whose leading whitespace is dropped (java.util.Properties.load).
        while (len(line) - len(line.rstrip("\\"))) % 2 == 1:
            line = line[:-1]
            if i >= len(lines):
                break
            line += lines[i].lstrip(" \t\f")
            i += 1
        yield line


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java properties text: ``key=value``, ``key: value``, ``key value``, ``#``/``!``
    comments, backslash line continuations and escapes. Later keys win."""
    result: dict[str, str] = {}
    for line in _logical_lines(text):
        i = 0
        while i < len(line):
            char = line[i]
            if char == "\\":
                i += 2
                continue
            if char in "=: \t\f":
                break
            i += 1
        key = line[:i]
        rest = line[i:].lstrip(" \t\f")
        if rest[:1] in ("=", ":"):
            rest = rest[1:].lstrip(" \t\f")
        result[_unescape(key)] = _unescape(rest)
    return result


# --- the broker configuration ----------------------------------------------------------------


# replica.selector.class values (Kafka's class names; replication/replica_selector.py).
RACK_AWARE_REPLICA_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
LEADER_SELECTOR = "org.apache.kafka.common.replica.LeaderSelector"


def _key(
    default: Any,
    config_type: ConfigType,
    doc: str,
    *,
    validator: Validator | None = None,
    required: bool = False,
    ignored: bool = False,
) -> Any:
    metadata = {
        "type": config_type,
        "doc": doc,
        "validator": validator,
        "required": required,
        "ignored": ignored,
    }
    if required:
        return field(metadata=metadata)
    return field(default=default, metadata=metadata)


_PROTOCOL_MAP_DEFAULT = (
    "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"
)
_SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_T = ConfigType


@dataclass(frozen=True, kw_only=True)
class BrokerConfig:
    """A broker's static configuration; field names are Kafka's keys with dots as underscores.

    Keys Kafka lets fall back to another key (``log.dirs`` → ``log.dir``,
    ``log.retention.ms`` → ``.minutes`` → ``.hours``, ``log.roll.ms`` → ``log.roll.hours``,
    ``log.flush.interval.ms`` → ``log.flush.scheduler.interval.ms``,
    ``advertised.listeners`` → ``listeners``, ``zookeeper.connection.timeout.ms`` →
    ``zookeeper.session.timeout.ms``) hold the *effective* value after construction.
    """

    # Identity and cluster membership
    broker_id: int = _key(
        None, _T.INT, "The id of this broker; unique in the cluster.", required=True,
        validator=at_least(0),
    )  # fmt: skip
    zookeeper_connect: str = _key(
        None, _T.STRING,
        "ZooKeeper connection string host:port[,host:port...][/chroot].",
        required=True,
    )  # fmt: skip
    zookeeper_session_timeout_ms: int = _key(18000, _T.INT, "ZooKeeper session timeout.")
    zookeeper_connection_timeout_ms: int | None = _key(
        None, _T.INT,
        "How long to wait for a ZooKeeper connection; defaults to zookeeper.session.timeout.ms.",
    )  # fmt: skip
    broker_rack: str | None = _key(
        None, _T.STRING, "Rack of this broker, used for rack-aware replica placement."
    )
    # Listeners
    listeners: str = _key(
        "PLAINTEXT://:9092", _T.STRING,
        "Comma-separated listeners NAME://host:port to bind; an empty host binds every "
        "interface.",
    )  # fmt: skip
    advertised_listeners: str | None = _key(
        None, _T.STRING,
        "Listeners published in ZooKeeper for clients; defaults to listeners. An empty "
        "host advertises the machine's canonical host name.",
    )  # fmt: skip
    listener_security_protocol_map: str = _key(
        _PROTOCOL_MAP_DEFAULT,
        _T.STRING,
        "Listener name to security protocol map, NAME:PROTOCOL,...",
    )
    inter_broker_listener_name: str | None = _key(
        None, _T.STRING,
        "Listener followers and the controller use between brokers; defaults to the "
        "PLAINTEXT listener.",
    )  # fmt: skip
    socket_request_max_bytes: int = _key(
        104857600, _T.INT, "Largest request the broker accepts.", validator=at_least(1)
    )
    socket_send_buffer_bytes: int = _key(102400, _T.INT, "SO_SNDBUF; -1 keeps the OS default.")
    socket_receive_buffer_bytes: int = _key(102400, _T.INT, "SO_RCVBUF; -1 keeps the OS default.")
    connections_max_idle_ms: int = _key(600000, _T.LONG, "Close connections idle this long.")
    num_network_threads: int = _key(
        3, _T.INT, "Accepted for compatibility and ignored (asyncio).", ignored=True
    )
    num_io_threads: int = _key(
        8, _T.INT, "Accepted for compatibility and ignored (asyncio).", ignored=True
    )
    # Log storage
    log_dirs: tuple[str, ...] | None = _key(
        None, _T.STRING, "Comma-separated log directories; defaults to log.dir."
    )
    log_dir: str = _key("/tmp/kafka-logs", _T.STRING, "Log directory, used when log.dirs is unset.")
    log_segment_bytes: int = _key(
        1073741824, _T.INT, "Largest size of a log segment file.", validator=at_least(14)
    )
    log_roll_ms: int | None = _key(
        None, _T.LONG, "Roll a new segment after this time; overrides log.roll.hours.",
        validator=at_least(1),
    )  # fmt: skip
    log_roll_hours: int = _key(
        168, _T.INT, "Roll a new segment after this many hours.", validator=at_least(1)
    )
    log_roll_jitter_ms: int | None = _key(
        None,
        _T.LONG,
        "Random jitter subtracted from the roll time; overrides log.roll.jitter.hours.",
    )
    log_roll_jitter_hours: int = _key(0, _T.INT, "Random jitter subtracted from the roll time.")
    log_retention_ms: int | None = _key(
        None, _T.LONG,
        "Delete segments older than this; -1 keeps them forever. Wins over .minutes and .hours.",
    )  # fmt: skip
    log_retention_minutes: int | None = _key(
        None, _T.INT, "Retention in minutes, used when log.retention.ms is unset."
    )
    log_retention_hours: int = _key(
        168, _T.INT, "Retention in hours, used when log.retention.ms and .minutes are unset."
    )
    log_retention_bytes: int = _key(
        -1, _T.LONG, "Delete old segments when a partition grows beyond this; -1: no limit."
    )
    log_retention_check_interval_ms: int = _key(
        300000, _T.LONG, "How often retention is checked.", validator=at_least(1)
    )
    log_index_interval_bytes: int = _key(
        4096, _T.INT, "Bytes between offset index entries.", validator=at_least(0)
    )
    log_index_size_max_bytes: int = _key(
        10485760, _T.INT, "Largest size of an offset index file.", validator=at_least(4)
    )
    log_flush_interval_messages: int = _key(
        LONG_MAX, _T.LONG, "fsync a log after this many messages.", validator=at_least(1)
    )
    log_flush_interval_ms: int | None = _key(
        None, _T.LONG,
        "fsync a log after a message has waited this long; defaults to "
        "log.flush.scheduler.interval.ms.",
    )  # fmt: skip
    log_flush_scheduler_interval_ms: int = _key(
        LONG_MAX, _T.LONG, "How often the flusher checks whether a log needs an fsync."
    )
    log_flush_offset_checkpoint_interval_ms: int = _key(
        60000, _T.INT, "How often the recovery point checkpoint is written.",
        validator=at_least(0),
    )  # fmt: skip
    log_flush_start_offset_checkpoint_interval_ms: int = _key(
        60000, _T.INT, "How often the log start offset checkpoint is written.",
        validator=at_least(0),
    )  # fmt: skip
    log_cleanup_policy: tuple[str, ...] = _key(
        ("delete",), _T.LIST, "Default cleanup policy for topics: delete, compact or both.",
        validator=list_of("delete", "compact"),
    )  # fmt: skip
    log_cleaner_enable: bool = _key(True, _T.BOOLEAN, "Run the log cleaner for compacted topics.")
    log_cleaner_delete_retention_ms: int = _key(
        86400000, _T.LONG, "How long compaction keeps tombstones.", validator=at_least(0)
    )
    log_cleaner_min_compaction_lag_ms: int = _key(
        0, _T.LONG, "Minimum age of a message before it can be compacted.", validator=at_least(0)
    )
    log_cleaner_max_compaction_lag_ms: int = _key(
        LONG_MAX, _T.LONG, "Maximum time a message stays uncompacted.", validator=at_least(1)
    )
    log_cleaner_min_cleanable_ratio: float = _key(
        0.5, _T.DOUBLE, "Dirty ratio above which a log is compacted.", validator=between(0, 1)
    )
    log_cleaner_backoff_ms: int = _key(
        15000, _T.LONG, "Sleep when no log needs cleaning.", validator=at_least(0)
    )
    log_cleaner_threads: int = _key(
        1, _T.INT, "Cleaner workers (asyncio tasks) compacting logs.", validator=at_least(0)
    )
    log_cleaner_dedupe_buffer_size: int = _key(
        134217728, _T.LONG, "Memory for the cleaners' key maps, all workers together.",
        validator=at_least(0),
    )  # fmt: skip
    log_cleaner_io_max_bytes_per_second: float = _key(
        1.7976931348623157e308, _T.DOUBLE, "Bytes per second the cleaners read and write at most.",
        validator=at_least(0),
    )  # fmt: skip
    log_message_timestamp_type: str = _key(
        "CreateTime", _T.STRING, "Default timestamp type: CreateTime or LogAppendTime.",
        validator=one_of("CreateTime", "LogAppendTime"),
    )  # fmt: skip
    log_message_timestamp_before_max_ms: int = _key(
        LONG_MAX, _T.LONG, "Reject records whose timestamp is this far before the broker's time.",
        validator=at_least(0),
    )  # fmt: skip
    log_message_timestamp_after_max_ms: int = _key(
        LONG_MAX, _T.LONG, "Reject records whose timestamp is this far after the broker's time.",
        validator=at_least(0),
    )  # fmt: skip
    log_message_downconversion_enable: bool = _key(
        True, _T.BOOLEAN, "Allow down-conversion of records for old fetch versions."
    )
    log_segment_delete_delay_ms: int = _key(
        60000, _T.LONG, "Wait this long before deleting a segment file from disk.",
        validator=at_least(0),
    )  # fmt: skip
    log_preallocate: bool = _key(False, _T.BOOLEAN, "Preallocate segment files.")
    log_max_open_files: int = _key(
        1000, _T.INT,
        "Gregor only: most segment .log files kept open at once; the least recently used "
        "are closed and reopened on demand (a file being sent is never closed).",
        validator=at_least(16),
    )  # fmt: skip
    compression_type: str = _key(
        "producer", _T.STRING, "Default topic compression; producer keeps the producer's codec.",
        validator=one_of("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"),
    )  # fmt: skip
    message_max_bytes: int = _key(
        1048588, _T.INT, "Largest record batch the broker accepts.", validator=at_least(0)
    )
    produce_decompressed_max_bytes: int = _key(
        104857600, _T.INT,
        "Gregor only: most bytes the compressed record batches of one Produce request may "
        "inflate to while the broker validates them (streamed, never held whole); past it "
        "the batch is refused with MESSAGE_TOO_LARGE. Defaults to socket.request.max.bytes' "
        "default, so a compressed request costs at most the work of the largest plain one.",
        validator=at_least(1),
    )  # fmt: skip
    num_recovery_threads_per_data_dir: int = _key(
        1, _T.INT, "Threads per log dir for recovery at start-up and flush at shutdown.",
        validator=at_least(1),
    )  # fmt: skip
    # Topics
    num_partitions: int = _key(
        1, _T.INT, "Partitions of auto-created topics.", validator=at_least(1)
    )
    default_replication_factor: int = _key(
        1, _T.INT, "Replication factor of auto-created topics.", validator=at_least(1)
    )
    auto_create_topics_enable: bool = _key(
        True, _T.BOOLEAN, "Create a topic when a client asks for its metadata."
    )
    delete_topic_enable: bool = _key(True, _T.BOOLEAN, "Allow topic deletion.")
    max_partitions_per_request: int = _key(
        10000, _T.INT,
        "Gregor only (Kafka's controller hard-codes 10000): most partitions one CreateTopics "
        "or CreatePartitions request may add; more is refused with POLICY_VIOLATION.",
        validator=at_least(1),
    )  # fmt: skip
    # Replication
    min_insync_replicas: int = _key(
        1, _T.INT, "Replicas that must acknowledge an acks=all write.", validator=at_least(1)
    )
    unclean_leader_election_enable: bool = _key(
        False, _T.BOOLEAN, "Allow a replica outside the ISR to become leader (may lose data)."
    )
    replica_lag_time_max_ms: int = _key(
        30000, _T.LONG, "A follower not caught up for this long leaves the ISR."
    )
    replica_selector_class: str | None = _key(
        None,
        _T.STRING,
        "Which replica consumers read from (KIP-392): unset or "
        "org.apache.kafka.common.replica.LeaderSelector for the leader, "
        "org.apache.kafka.common.replica.RackAwareReplicaSelector for a replica in the "
        "consumer's client.rack.",
        validator=one_of(RACK_AWARE_REPLICA_SELECTOR, LEADER_SELECTOR),
    )
    replica_fetch_max_bytes: int = _key(
        1048576, _T.INT, "Bytes per partition a follower fetches.", validator=at_least(0)
    )
    replica_fetch_response_max_bytes: int = _key(
        10485760, _T.INT, "Bytes a follower fetch response may carry.", validator=at_least(0)
    )
    replica_fetch_wait_max_ms: int = _key(500, _T.INT, "Follower fetch max wait.")
    replica_fetch_min_bytes: int = _key(1, _T.INT, "Follower fetch min bytes.")
    replica_fetch_backoff_ms: int = _key(
        1000, _T.INT, "Sleep after a failed follower fetch.", validator=at_least(0)
    )
    replica_socket_timeout_ms: int = _key(30000, _T.INT, "Follower fetch socket timeout.")
    replica_high_watermark_checkpoint_interval_ms: int = _key(
        5000, _T.LONG, "How often high watermarks are checkpointed."
    )
    num_replica_fetchers: int = _key(1, _T.INT, "Fetcher connections per source broker.")
    fetch_max_bytes: int = _key(
        57671680, _T.INT, "Largest fetch response the broker returns.", validator=at_least(1024)
    )
    max_incremental_fetch_session_cache_slots: int = _key(
        1000, _T.INT,
        "Most incremental fetch sessions (KIP-227) the broker keeps; 0 turns them off. When "
        "the cache is full, a new session replaces one unused for "
        "min.incremental.fetch.session.eviction.ms or else a smaller one (a follower's may "
        "also replace a consumer's).",
        validator=at_least(0),
    )  # fmt: skip
    min_incremental_fetch_session_eviction_ms: int = _key(
        120000, _T.LONG,
        "Gregor only (Kafka hard-codes 120000): how long an incremental fetch session must "
        "go unused before any new session may take its slot.",
        validator=at_least(0),
    )  # fmt: skip
    # Controller
    controlled_shutdown_enable: bool = _key(
        True, _T.BOOLEAN, "Move leadership away before a broker shuts down."
    )
    auto_leader_rebalance_enable: bool = _key(
        True, _T.BOOLEAN, "Periodically move leadership back to preferred leaders."
    )
    leader_imbalance_check_interval_seconds: int = _key(
        300, _T.LONG, "How often the controller checks leader imbalance.", validator=at_least(1)
    )
    leader_imbalance_per_broker_percentage: int = _key(
        10, _T.INT, "Allowed share of non-preferred leaders per broker, in percent."
    )
    controller_socket_timeout_ms: int = _key(30000, _T.INT, "Controller to broker timeout.")
    # Group coordinator and transactions
    offsets_topic_num_partitions: int = _key(
        50, _T.INT, "Partitions of __consumer_offsets.", validator=at_least(1)
    )
    offsets_topic_replication_factor: int = _key(
        3, _T.SHORT, "Replication factor of __consumer_offsets.", validator=at_least(1)
    )
    offsets_topic_segment_bytes: int = _key(
        104857600, _T.INT, "Segment size of __consumer_offsets.", validator=at_least(1)
    )
    offsets_retention_minutes: int = _key(
        10080, _T.INT, "Keep committed offsets of empty groups this long.", validator=at_least(1)
    )
    offsets_commit_timeout_ms: int = _key(
        5000, _T.INT, "Offset commit waits this long for replication.", validator=at_least(1)
    )
    offsets_retention_check_interval_ms: int = _key(
        600000,
        _T.LONG,
        "How often the group coordinator removes expired offsets.",
        validator=at_least(1),
    )
    offset_metadata_max_bytes: int = _key(
        4096, _T.INT, "Largest metadata string an offset commit may carry."
    )
    group_initial_rebalance_delay_ms: int = _key(
        3000, _T.INT, "Wait for more members before the first rebalance of a new group."
    )
    group_min_session_timeout_ms: int = _key(6000, _T.INT, "Smallest allowed session timeout.")
    group_max_session_timeout_ms: int = _key(1800000, _T.INT, "Largest allowed session timeout.")
    transaction_state_log_num_partitions: int = _key(
        50, _T.INT, "Partitions of __transaction_state.", validator=at_least(1)
    )
    transaction_state_log_replication_factor: int = _key(
        3, _T.SHORT, "Replication factor of __transaction_state.", validator=at_least(1)
    )
    transaction_state_log_min_isr: int = _key(
        2, _T.INT, "min.insync.replicas of __transaction_state.", validator=at_least(1)
    )
    transactional_id_expiration_ms: int = _key(
        604800000, _T.INT, "Expire idle transactional ids after this long.", validator=at_least(1)
    )
    transaction_max_timeout_ms: int = _key(
        900000, _T.INT, "Largest transaction timeout a producer may ask for.",
        validator=at_least(1),
    )  # fmt: skip
    # Quotas
    quota_window_num: int = _key(
        11, _T.INT, "Samples kept for client quotas.", validator=at_least(1)
    )
    quota_window_size_seconds: int = _key(
        1, _T.INT, "Time span of each quota sample.", validator=at_least(1)
    )
    # Gregor's own
    metrics_port: int = _key(
        0, _T.INT,
        "Gregor only: HTTP port for Prometheus /metrics and health endpoints; 0 disables it.",
        validator=between(0, 65535),
    )  # fmt: skip

    # Bookkeeping, not configuration keys.
    raw: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)
    """The strings set explicitly (file, environment, overrides) for known keys."""
    extra: Mapping[str, str] = field(default_factory=dict)
    """Unknown keys, kept as strings (a warning is logged for each)."""
    resolved_defaults: frozenset[str] = field(default=frozenset(), repr=False, compare=False)
    """Fallback keys that were unset and now hold the value of the key they fall back to."""

    def __post_init__(self) -> None:
        # Keys resolved before (dataclasses.replace passes them back in) are resolved again,
        # so that replace(config, log_retention_hours=1) changes log_retention_ms too.
        stale = self.resolved_defaults
        resolved: set[str] = set()

        def fill(key: str, value: Any) -> None:
            if getattr(self, _attr(key)) is None or key in stale:
                object.__setattr__(self, _attr(key), value)
                resolved.add(key)

        fill("log.dirs", (self.log_dir,))
        fill("advertised.listeners", self.listeners)
        fill("zookeeper.connection.timeout.ms", self.zookeeper_session_timeout_ms)
        fill("log.roll.ms", self.log_roll_hours * 3600 * 1000)
        fill("log.roll.jitter.ms", self.log_roll_jitter_hours * 3600 * 1000)
        fill("log.flush.interval.ms", self.log_flush_scheduler_interval_ms)
        # Matches Kafka's logRetentionTimeMillis: ms, else minutes, else hours; negative: -1.
        if self.log_retention_minutes is not None:
            retention = self.log_retention_minutes * 60 * 1000
        else:
            retention = self.log_retention_hours * 3600 * 1000
        fill("log.retention.ms", retention)
        if self.log_retention_ms is not None and self.log_retention_ms < 0:
            object.__setattr__(self, "log_retention_ms", -1)
        object.__setattr__(self, "resolved_defaults", frozenset(resolved))
        self._check_listeners()

    # -- derived values

    @property
    def security_protocol_map(self) -> dict[str, str]:
        return _parse_protocol_map(self.listener_security_protocol_map)

    @property
    def listener_list(self) -> list[tuple[str, str, int]]:
        """``(name, host, port)`` of each listener to bind."""
        return _parse_listeners("listeners", self.listeners)

    @property
    def advertised_listener_list(self) -> list[tuple[str, str, int]]:
        """``(name, host, port)`` to publish; an empty host becomes the canonical host name."""
        return [
            (name, host or _canonical_hostname(), port)
            for name, host, port in _parse_listeners(
                "advertised.listeners", self.advertised_listeners or self.listeners
            )
        ]

    @property
    def advertised_endpoint(self) -> tuple[str, int]:
        """``(host, port)`` clients should use: the first PLAINTEXT advertised listener.

        Falls back to the first advertised listener when none uses PLAINTEXT.
        """
        advertised = self.advertised_listener_list
        protocols = self.security_protocol_map
        for name, host, port in advertised:
            if protocols.get(name) == "PLAINTEXT":
                return host, port
        _, host, port = advertised[0]
        return host, port

    @property
    def retention_ms(self) -> int:
        assert self.log_retention_ms is not None
        return self.log_retention_ms

    def is_set(self, key: str) -> bool:
        """Whether ``key`` was configured, as opposed to holding its (or a fallback's) default."""
        if key in self.raw:
            return True
        if key in self.resolved_defaults or key not in BROKER_CONFIG_KEYS:
            return False
        return getattr(self, _attr(key)) != BROKER_CONFIG_KEYS[key].default

    def _check_listeners(self) -> None:
        protocols = _parse_protocol_map(self.listener_security_protocol_map)
        for key, value in (("listeners", self.listeners), ("advertised.listeners", None)):
            text = value if value is not None else self.advertised_listeners or self.listeners
            parsed = _parse_listeners(key, text)
            names = [name for name, _, _ in parsed]
            if len(set(names)) != len(names):
                raise ConfigError(
                    f"Invalid value {text!r} for {key}: listener names must be unique"
                )
            for name, host, _ in parsed:
                if name not in protocols:
                    raise ConfigError(
                        f"Invalid value {text!r} for {key}: listener {name} has no security "
                        f"protocol; add {name}:PLAINTEXT to listener.security.protocol.map"
                    )
                if key == "advertised.listeners" and host == "0.0.0.0":
                    raise ConfigError(
                        f"Invalid value {text!r} for advertised.listeners: cannot advertise the "
                        "non-routable meta-address 0.0.0.0; use a host name clients can reach"
                    )
        if self.inter_broker_listener_name is not None and self.inter_broker_listener_name not in [
            n for n, _, _ in self.listener_list
        ]:
            raise ConfigError(
                f"Invalid value {self.inter_broker_listener_name!r} for inter.broker.listener.name:"
                f" it must be one of the listeners ({self.listeners})"
            )


def _attr(key: str) -> str:
    return key.replace(".", "_")


def _canonical_hostname() -> str:
    # Matches Kafka: an empty advertised host is InetAddress.getLocalHost.getCanonicalHostName.
    return socket.getfqdn()


@dataclass(frozen=True, slots=True)
class BrokerConfigKey:
    """One supported broker key: its Kafka name, type, default, validator and description."""

    name: str
    config_type: ConfigType
    default: Any
    doc: str
    validator: Validator | None = None
    required: bool = False
    ignored: bool = False

    @property
    def env_var(self) -> str:
        return ENV_PREFIX + self.name.upper().replace(".", "_")


def _collect_keys() -> dict[str, BrokerConfigKey]:
    keys: dict[str, BrokerConfigKey] = {}
    for f in dataclasses.fields(BrokerConfig):
        if "type" not in f.metadata:
            continue
        default = None if f.default is dataclasses.MISSING else f.default
        keys[f.name.replace("_", ".")] = BrokerConfigKey(
            name=f.name.replace("_", "."),
            config_type=f.metadata["type"],
            default=default,
            doc=f.metadata["doc"],
            validator=f.metadata["validator"],
            required=f.metadata["required"],
            ignored=f.metadata["ignored"],
        )
    return keys


BROKER_CONFIG_KEYS: Mapping[str, BrokerConfigKey] = MappingProxyType(_collect_keys())
"""Every supported broker key, by Kafka name, in documentation order."""

_ENV_TO_KEY = {definition.env_var: name for name, definition in BROKER_CONFIG_KEYS.items()}

_LISTENER_RE = re.compile(r"^(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)$")


def parse_listener(listener: str) -> tuple[str, str, int]:
    """``"PLAINTEXT://host:9092"`` → ``("PLAINTEXT", "host", 9092)``; IPv6 hosts in brackets.

    An empty host (``PLAINTEXT://:9092``) is returned as ``""``.
    """
    match = _LISTENER_RE.match(listener.strip())
    if not match or not match.group(1):
        raise ConfigError(
            f"Invalid listener {listener!r}: expected NAME://host:port, e.g. PLAINTEXT://:9092"
        )
    name, host, port = match.group(1), match.group(2), int(match.group(3))
    if not 0 <= port <= 65535:
        raise ConfigError(f"Invalid listener {listener!r}: port {port} is not in 0..65535")
    return name.upper(), host, port


def _parse_listeners(key: str, text: str) -> list[tuple[str, str, int]]:
    items = [item for item in (part.strip() for part in text.split(",")) if item]
    if not items:
        raise ConfigError(f"Invalid value {text!r} for {key}: expected at least one listener")
    try:
        return [parse_listener(item) for item in items]
    except ConfigError as exc:
        raise ConfigError(f"Invalid value {text!r} for {key}: {exc}") from None


def _parse_protocol_map(text: str) -> dict[str, str]:
    result: dict[str, str] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, sep, protocol = item.partition(":")
        if not sep or protocol.strip().upper() not in _SECURITY_PROTOCOLS:
            raise ConfigError(
                f"Invalid value {text!r} for listener.security.protocol.map: expected "
                f"NAME:PROTOCOL pairs with PROTOCOL one of {', '.join(_SECURITY_PROTOCOLS)}"
            )
        result[name.strip().upper()] = protocol.strip().upper()
    return result


def _parse_broker_value(key: BrokerConfigKey, text: str) -> Any:
    if key.name == "log.dirs":
        dirs = tuple(d.strip() for d in text.split(",") if d.strip())
        if not dirs:
            raise ConfigError(f"Invalid value {text!r} for configuration log.dirs: expected a path")
        return dirs
    value = parse_value(key.name, text, key.config_type)
    if key.validator is not None:
        key.validator(key.name, value)
    return value


def load_broker_config(
    path: Path | None,
    overrides: Mapping[str, str] = _EMPTY,
    env: Mapping[str, str] = os.environ,
) -> BrokerConfig:
    """Load a broker config: defaults < properties file < ``GREGOR_*`` env < ``overrides``.

    ``GREGOR_`` + the key upper-cased with dots as underscores overrides a key
    (``GREGOR_BROKER_ID=3`` sets ``broker.id``); only known keys can be set this way.
    Unknown keys from the file or overrides are logged and kept in ``extra``.
    """
    settings: dict[str, str] = {}
    if path is not None:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"Cannot read broker config file {path}: {exc.strerror}") from exc
        settings.update(parse_properties(text))
    for variable, value in env.items():
        if variable in _ENV_TO_KEY:
            settings[_ENV_TO_KEY[variable]] = value
    settings.update(overrides)

    values: dict[str, Any] = {}
    raw: dict[str, str] = {}
    extra: dict[str, str] = {}
    for name, text in settings.items():
        definition = BROKER_CONFIG_KEYS.get(name)
        if definition is None:
            log.warning("Unknown broker config %s=%r: kept but not used", name, text)
            extra[name] = text
            continue
        if definition.ignored:
            log.info("Broker config %s is accepted for compatibility and ignored", name)
        values[_attr(name)] = _parse_broker_value(definition, text)
        raw[name] = text
    for name in ("broker.id", "zookeeper.connect"):
        if values.get(_attr(name)) in ("", None):
            raise ConfigError(
                f"Missing required configuration {name}: set it in the properties file, "
                f"with {BROKER_CONFIG_KEYS[name].env_var}, or as an override"
            )
    return BrokerConfig(**values, raw=raw, extra=extra)


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
        value = parse_value(self.name, text, self.config_type, InvalidConfig)
        if self.validator is not None:
            try:
                self.validator(self.name, value)
            except InvalidConfig:
                raise
            except ConfigError as exc:
                raise InvalidConfig(str(exc)) from None
        return value

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


# --- DescribeConfigs --------------------------------------------------------------------------

ConfigSynonym = tuple[str, str | None, ConfigSource]


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    """One entry of a DescribeConfigs response, in Kafka's terms."""

    name: str
    value: str | None
    source: ConfigSource
    read_only: bool
    is_sensitive: bool
    synonyms: tuple[ConfigSynonym, ...]
    config_type: ConfigType
    documentation: str


def _broker_synonyms(broker: BrokerConfig, keys: Iterable[str]) -> list[ConfigSynonym]:
    """Kafka's synonym order: for each key, most specific first, its static value (if the
    broker config sets it) and then its default (if it has one)."""
    synonyms: list[ConfigSynonym] = []
    for key in keys:
        definition = BROKER_CONFIG_KEYS[key]
        if broker.is_set(key):
            shown = broker.raw.get(key, display_value(getattr(broker, _attr(key))))
            synonyms.append((key, shown, ConfigSource.STATIC_BROKER_CONFIG))
        if definition.default is not None:
            synonyms.append((key, display_value(definition.default), ConfigSource.DEFAULT_CONFIG))
    return synonyms


def describe_topic_configs(broker: BrokerConfig, overrides: Mapping[str, str]) -> list[ConfigEntry]:
    """Entries for every topic config of a topic with these overrides, sorted by name."""
    validate_topic_configs(overrides)
    entries = []
    for name, definition in sorted(TOPIC_CONFIGS.items()):
        synonyms = _broker_synonyms(broker, definition.broker_synonyms)
        override = overrides.get(name)
        if override is not None:
            value: str | None = override
            source = ConfigSource.TOPIC_CONFIG
            synonyms.insert(0, (name, override, ConfigSource.TOPIC_CONFIG))
        else:
            value = definition.default_from(broker)
            source = synonyms[0][2] if synonyms else ConfigSource.DEFAULT_CONFIG
        entries.append(
            ConfigEntry(
                name=name,
                value=value,
                source=source,
                read_only=False,
                is_sensitive=False,
                synonyms=tuple(synonyms),
                config_type=definition.config_type,
                documentation=definition.doc,
            )
        )
    return entries


def _broker_key_synonyms() -> dict[str, tuple[str, ...]]:
    result: dict[str, tuple[str, ...]] = {}
    for definition in TOPIC_CONFIGS.values():
        for key in definition.broker_synonyms:
            result[key] = definition.broker_synonyms
    return result


_BROKER_KEY_SYNONYMS = _broker_key_synonyms()


def describe_broker_configs(broker: BrokerConfig) -> list[ConfigEntry]:
    """Entries for every static broker key, sorted by name.

    Every entry is read-only; the keys that change at run time are described by
    :func:`describe_dynamic_broker_configs`.
    """
    entries = []
    for name, definition in sorted(BROKER_CONFIG_KEYS.items()):
        synonyms = _broker_synonyms(broker, _BROKER_KEY_SYNONYMS.get(name, (name,)))
        if broker.is_set(name):
            value = broker.raw.get(name, display_value(getattr(broker, _attr(name))))
        else:
            value = display_value(definition.default)
        entries.append(
            ConfigEntry(
                name=name,
                value=value,
                source=synonyms[0][2] if synonyms else ConfigSource.DEFAULT_CONFIG,
                read_only=True,
                is_sensitive=definition.config_type == ConfigType.PASSWORD,
                synonyms=tuple(synonyms),
                config_type=definition.config_type,
                documentation=definition.doc,
            )
        )
    return entries


# --- dynamic broker configs (/config/brokers/<id> and <default>) -------------------------------


@dataclass(frozen=True, slots=True)
class DynamicBrokerConfigDef:
    """A broker config that AlterConfigs may change at run time, as Kafka's
    ``DynamicConfig.Broker`` lists it, with the default a broker shows when none is set."""

    name: str
    config_type: ConfigType
    default: str
    validator: Validator | None
    doc: str

    def parse(self, text: str) -> Any:
        value = parse_value(self.name, text, self.config_type, InvalidConfig)
        if self.validator is not None:
            try:
                self.validator(self.name, value)
            except ConfigError as exc:
                raise InvalidConfig(str(exc)) from None
        return value


# Only what Gregor applies live (the replication throttles read /config/brokers on every
# use); any other broker key is static and refused, never stored and ignored.
DYNAMIC_BROKER_CONFIGS: Mapping[str, DynamicBrokerConfigDef] = MappingProxyType(
    {
        d.name: d
        for d in (
            DynamicBrokerConfigDef(
                "follower.replication.throttled.rate", ConfigType.LONG, _LONG_MAX_S,
                at_least(0),
                "bytes/s a follower copies for its follower.replication.throttled.replicas"),
            DynamicBrokerConfigDef(
                "leader.replication.throttled.rate", ConfigType.LONG, _LONG_MAX_S,
                at_least(0),
                "bytes/s a leader sends for its leader.replication.throttled.replicas"),
        )
    }
)  # fmt: skip


def validate_dynamic_broker_configs(configs: Mapping[str, str | None]) -> None:
    """Raise :class:`InvalidConfig` naming a key that cannot change at run time, or a bad value.

    Matches Kafka's answer to AlterConfigs on a broker resource (INVALID_CONFIG).
    """
    static = sorted(name for name in configs if name not in DYNAMIC_BROKER_CONFIGS)
    if static:
        known = [name for name in static if name in BROKER_CONFIG_KEYS]
        unknown = [name for name in static if name not in BROKER_CONFIG_KEYS]
        problems = []
        if known:
            problems.append(f"cannot update these configs dynamically: {', '.join(known)}")
        if unknown:
            problems.append(f"unknown broker configs: {', '.join(unknown)}")
        raise InvalidConfig(
            "; ".join(problems)
            + f" (dynamic broker configs: {', '.join(sorted(DYNAMIC_BROKER_CONFIGS))})"
        )
    for name, text in configs.items():
        if text is not None:
            DYNAMIC_BROKER_CONFIGS[name].parse(text)


def describe_dynamic_broker_configs(
    per_broker: Mapping[str, str], cluster_default: Mapping[str, str]
) -> list[ConfigEntry]:
    """Entries for the dynamic keys: this broker's value, else the cluster-wide default, else
    Kafka's default, with synonyms in that order (most specific first)."""
    entries = []
    for name, definition in sorted(DYNAMIC_BROKER_CONFIGS.items()):
        synonyms: list[ConfigSynonym] = []
        if name in per_broker:
            synonyms.append((name, per_broker[name], ConfigSource.DYNAMIC_BROKER_CONFIG))
        if name in cluster_default:
            synonyms.append(
                (name, cluster_default[name], ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
            )
        synonyms.append((name, definition.default, ConfigSource.DEFAULT_CONFIG))
        _, value, source = synonyms[0]
        entries.append(
            ConfigEntry(
                name=name,
                value=value,
                source=source,
                read_only=False,
                is_sensitive=False,
                synonyms=tuple(synonyms),
                config_type=definition.config_type,
                documentation=definition.doc,
            )
        )
    return entries


# --- documentation ----------------------------------------------------------------------------


def _md(value: str | None) -> str:
    if value is None:
        return "(unset)"
    if value == "":
        return '`""`'
    return f"`{value}`"


def render_config_tables() -> str:
    """The Markdown tables of ``docs/configuration.md``, generated from the definitions."""
    lines = [
        "### Broker keys",
        "",
        "| key | type | default | environment variable | meaning |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, key in BROKER_CONFIG_KEYS.items():
        default = "required" if key.required else _md(display_value(key.default))
        doc = key.doc.replace("|", "\\|")
        lines.append(f"| `{name}` | {key.config_type.name} | {default} | `{key.env_var}` | {doc} |")
    lines += [
        "",
        "### Dynamic broker configs",
        "",
        "Changed at run time with AlterConfigs/IncrementalAlterConfigs on a broker resource",
        "(`/config/brokers/<id>`, or `<default>` for every broker); no other broker key can be.",
        "",
        "| key | type | default | valid values | meaning |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, dynamic in sorted(DYNAMIC_BROKER_CONFIGS.items()):
        valid = (dynamic.validator.__doc__ if dynamic.validator else "") or ""
        lines.append(
            f"| `{name}` | {dynamic.config_type.name} | {_md(dynamic.default)} | "
            f"{valid} | {dynamic.doc} |"
        )
    lines += [
        "",
        "### Topic configs",
        "",
        "| config | type | Kafka default | default from broker key | valid values | meaning |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for name, definition in sorted(TOPIC_CONFIGS.items()):
        synonyms = ", ".join(f"`{s}`" for s in definition.broker_synonyms) or "-"
        valid = definition.validator.__doc__ if definition.validator else ""
        valid = (valid or "").replace("|", "\\|")
        lines.append(
            f"| `{name}` | {definition.config_type.name} | {_md(definition.default)} | "
            f"{synonyms} | {valid} | {definition.doc} |"
        )
    return "\n".join(lines) + "\n"
