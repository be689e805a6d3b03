"""Broker and topic configuration behave like Kafka's KafkaConfig and LogConfig."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import pytest

from gregor_broker.config import (
    BROKER_CONFIG_KEYS,
    LONG_MAX,
    TOPIC_CONFIGS,
    BrokerConfig,
    ConfigError,
    ConfigSource,
    ConfigType,
    InvalidConfig,
    describe_broker_configs,
    describe_topic_configs,
    load_broker_config,
    log_config_for,
    log_configs_of,
    parse_listener,
    parse_properties,
    validate_topic_configs,
)
from gregor_broker.log.log_config import LogConfig

REQUIRED = {"broker.id": "1", "zookeeper.connect": "127.0.0.1:2181/gregor"}


def load(overrides=None, *, text: str | None = None, tmp_path: Path | None = None, env=None):
    path = None
    if text is not None:
        assert tmp_path is not None
        path = tmp_path / "server.properties"
        path.write_text(text)
    return load_broker_config(path, overrides or {}, env or {})


# --- properties files ------------------------------------------------------------------


def test_properties_syntax_follows_java_properties():
    text = (
        "# comment\n"
        "! also a comment\n"
        "\n"
        "   broker.id = 3\n"
        "listeners:PLAINTEXT://:9092\n"
        "log.dirs /data/a,\\\n"
        "         /data/b\n"
        "key\\=with\\:escapes = value with spaces  \n"
        "unicode=caf\\u00e9\n"
        "empty=\n"
        "broker.id=4\n"
    )
    assert parse_properties(text) == {
        "broker.id": "4",
        "listeners": "PLAINTEXT://:9092",
        "log.dirs": "/data/a,/data/b",
        "key=with:escapes": "value with spaces  ",
        "unicode": "café",
        "empty": "",
    }


def test_comment_lines_do_not_continue():
    assert parse_properties("# a comment \\\nbroker.id=1\n") == {"broker.id": "1"}


def test_escaped_trailing_backslash_is_not_a_continuation():
    assert parse_properties("path=C:\\\\\nnext=1\n") == {"path": "C:\\", "next": "1"}


# --- loading the broker config ---------------------------------------------------------


def test_defaults_are_kafkas(tmp_path):
    config = load(REQUIRED)
    assert config.broker_id == 1
    assert config.listeners == "PLAINTEXT://:9092"
    assert config.advertised_listeners == "PLAINTEXT://:9092"
    assert config.log_dirs == ("/tmp/kafka-logs",)
    assert config.zookeeper_session_timeout_ms == 18000
    assert config.zookeeper_connection_timeout_ms == 18000
    assert config.broker_rack is None
    assert config.num_partitions == 1
    assert config.default_replication_factor == 1
    assert config.auto_create_topics_enable is True
    assert config.delete_topic_enable is True
    assert config.message_max_bytes == 1048588
    assert config.socket_request_max_bytes == 104857600
    assert config.log_segment_bytes == 1073741824
    assert config.log_roll_ms == 168 * 3600 * 1000
    assert config.log_retention_ms == 168 * 3600 * 1000
    assert config.log_retention_bytes == -1
    assert config.log_retention_check_interval_ms == 300000
    assert config.log_flush_interval_messages == LONG_MAX
    assert config.log_flush_interval_ms == LONG_MAX
    assert config.log_flush_offset_checkpoint_interval_ms == 60000
    assert config.log_index_interval_bytes == 4096
    assert config.log_cleanup_policy == ("delete",)
    assert config.log_message_timestamp_type == "CreateTime"
    assert config.log_segment_delete_delay_ms == 60000
    assert config.min_insync_replicas == 1
    assert config.unclean_leader_election_enable is False
    assert config.replica_lag_time_max_ms == 30000
    assert config.fetch_max_bytes == 57671680
    assert config.offsets_topic_num_partitions == 50
    assert config.offsets_topic_replication_factor == 3
    assert config.group_initial_rebalance_delay_ms == 3000
    assert config.metrics_port == 0


def test_precedence_is_defaults_file_env_overrides(tmp_path):
    text = "broker.id=1\nzookeeper.connect=zk:2181\nnum.partitions=2\nmin.insync.replicas=2\n"
    env = {"GREGOR_NUM_PARTITIONS": "3", "GREGOR_MIN_INSYNC_REPLICAS": "3", "HOME": "/root"}
    config = load({"num.partitions": "4"}, text=text, tmp_path=tmp_path, env=env)
    assert config.num_partitions == 4
    assert config.min_insync_replicas == 3
    assert config.zookeeper_connect == "zk:2181"
    assert config.extra == {}


def test_env_overrides_use_gregor_prefix_and_underscores(tmp_path):
    env = {
        "GREGOR_BROKER_ID": "3",
        "GREGOR_ZOOKEEPER_CONNECT": "zk:2181",
        "GREGOR_LOG_DIRS": "/data/0, /data/1",
        "GREGOR_BROKER_RACK": "eu-1a",
    }
    config = load(env=env)
    assert config.broker_id == 3
    assert config.log_dirs == ("/data/0", "/data/1")
    assert config.broker_rack == "eu-1a"
    assert BROKER_CONFIG_KEYS["log.dirs"].env_var == "GREGOR_LOG_DIRS"


def test_unknown_keys_are_logged_and_kept(caplog):
    with caplog.at_level(logging.WARNING, logger="gregor_broker.config"):
        config = load({**REQUIRED, "sasl.kerberos.service.name": "/x"})
    assert config.extra == {"sasl.kerberos.service.name": "/x"}
    assert "sasl.kerberos.service.name" in caplog.text


def test_thread_counts_are_accepted_and_ignored():
    config = load({**REQUIRED, "num.network.threads": "16", "num.io.threads": "32"})
    assert config.num_io_threads == 32
    assert config.extra == {}


@pytest.mark.parametrize("missing", ["broker.id", "zookeeper.connect"])
def test_required_keys_must_be_set(missing):
    values = {k: v for k, v in REQUIRED.items() if k != missing}
    with pytest.raises(ConfigError, match=f"Missing required configuration {missing}"):
        load(values)


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("broker.id", "one", "integer"),
        ("num.partitions", "0", ">= 1"),
        ("auto.create.topics.enable", "yes", "boolean"),
        ("log.cleanup.policy", "delete,shred", "delete, compact"),
        ("log.message.timestamp.type", "NowTime", "CreateTime, LogAppendTime"),
        ("message.max.bytes", "3000000000", "integer between"),
        ("log.segment.bytes", "13", ">= 14"),
        ("log.cleaner.min.cleanable.ratio", "1.5", "between"),
        ("listeners", "localhost:9092", "NAME://host:port"),
        ("listeners", "FOO://:9092", "listener.security.protocol.map"),
        ("advertised.listeners", "PLAINTEXT://0.0.0.0:9092", "0.0.0.0"),
    ],
)
def test_invalid_values_name_key_value_and_expectation(key, value, expected):
    with pytest.raises(ConfigError) as error:
        load({**REQUIRED, key: value})
    message = str(error.value)
    assert key in message
    assert value in message
    assert expected in message


def test_booleans_and_numbers_are_trimmed_and_case_insensitive():
    config = load({**REQUIRED, "delete.topic.enable": " FALSE ", "num.partitions": " 6 "})
    assert config.delete_topic_enable is False
    assert config.num_partitions == 6


def test_retention_precedence_is_ms_then_minutes_then_hours():
    assert load({**REQUIRED, "log.retention.hours": "1"}).log_retention_ms == 3600000
    both = load({**REQUIRED, "log.retention.hours": "1", "log.retention.minutes": "2"})
    assert both.log_retention_ms == 120000
    all_three = {"log.retention.hours": "1", "log.retention.minutes": "2", "log.retention.ms": "5"}
    assert load({**REQUIRED, **all_three}).log_retention_ms == 5
    assert load({**REQUIRED, "log.retention.ms": "-7"}).log_retention_ms == -1


def test_roll_and_flush_fallbacks():
    config = load({**REQUIRED, "log.roll.hours": "2", "log.flush.scheduler.interval.ms": "1000"})
    assert config.log_roll_ms == 7200000
    assert config.log_flush_interval_ms == 1000
    assert load({**REQUIRED, "log.roll.ms": "5", "log.roll.hours": "2"}).log_roll_ms == 5


def test_log_dir_is_used_when_log_dirs_is_unset():
    assert load({**REQUIRED, "log.dir": "/var/kafka"}).log_dirs == ("/var/kafka",)
    both = load({**REQUIRED, "log.dir": "/var/kafka", "log.dirs": "/a,/b"})
    assert both.log_dirs == ("/a", "/b")


def test_replace_recomputes_fallbacks():
    config = load(REQUIRED)
    assert dataclasses.replace(config, log_retention_hours=1).log_retention_ms == 3600000


def test_config_can_be_built_directly():
    config = BrokerConfig(broker_id=0, zookeeper_connect="zk:2181", log_retention_hours=24)
    assert config.log_retention_ms == 86400000
    assert config.is_set("log.retention.hours")
    assert not config.is_set("log.retention.ms")


# --- listeners ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("listener", "parsed"),
    [
        ("PLAINTEXT://:9092", ("PLAINTEXT", "", 9092)),
        ("PLAINTEXT://broker-0.kafka:9092", ("PLAINTEXT", "broker-0.kafka", 9092)),
        ("INTERNAL://[::1]:19092", ("INTERNAL", "::1", 19092)),
        ("plaintext://0.0.0.0:0", ("PLAINTEXT", "0.0.0.0", 0)),
    ],
)
def test_parse_listener(listener, parsed):
    assert parse_listener(listener) == parsed


@pytest.mark.parametrize("bad", ["localhost:9092", "PLAINTEXT://host", "://h:1", "X://h:99999"])
def test_parse_listener_rejects_malformed(bad):
    with pytest.raises(ConfigError, match="listener"):
        parse_listener(bad)


def test_advertised_endpoint_is_first_plaintext_listener():
    config = load(
        {
            **REQUIRED,
            "listeners": "SSL://:9093,PLAINTEXT://:9092,INTERNAL://:9094",
            "advertised.listeners": "SSL://a:9093,PLAINTEXT://b:9092,INTERNAL://c:9094",
            "listener.security.protocol.map": "SSL:SSL,PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
        }
    )
    assert config.advertised_endpoint == ("b", 9092)
    assert config.security_protocol_map["INTERNAL"] == "PLAINTEXT"


def test_empty_advertised_host_is_the_machines_host_name(monkeypatch):
    monkeypatch.setattr("socket.getfqdn", lambda: "node-7.example")
    assert load(REQUIRED).advertised_endpoint == ("node-7.example", 9092)


def test_advertised_listeners_default_to_listeners():
    config = load({**REQUIRED, "listeners": "PLAINTEXT://127.0.0.1:19092"})
    assert config.advertised_endpoint == ("127.0.0.1", 19092)


# --- topic configs -----------------------------------------------------------------------

REQUIRED_TOPIC_CONFIGS = [
    "cleanup.policy",
    "compression.type",
    "delete.retention.ms",
    "file.delete.delay.ms",
    "flush.messages",
    "flush.ms",
    "index.interval.bytes",
    "max.message.bytes",
    "message.timestamp.type",
    "min.insync.replicas",
    "retention.bytes",
    "retention.ms",
    "segment.bytes",
    "segment.index.bytes",
    "segment.ms",
    "unclean.leader.election.enable",
    "leader.replication.throttled.replicas",
    "follower.replication.throttled.replicas",
    "min.cleanable.dirty.ratio",
    "min.compaction.lag.ms",
    "max.compaction.lag.ms",
    "message.timestamp.before.max.ms",
    "message.timestamp.after.max.ms",
    "preallocate",
]


def test_every_kafka_topic_config_is_defined():
    assert set(REQUIRED_TOPIC_CONFIGS) <= set(TOPIC_CONFIGS)


def test_topic_defaults_shown_equal_what_the_default_broker_supplies():
    broker = load(REQUIRED)
    for name, definition in TOPIC_CONFIGS.items():
        assert definition.default_from(broker) == definition.default, name
    for definition in TOPIC_CONFIGS.values():
        for key in definition.broker_synonyms:
            assert key in BROKER_CONFIG_KEYS, (definition.name, key)


@pytest.mark.parametrize(
    "configs",
    [
        {"cleanup.policy": "compact"},
        {"cleanup.policy": "compact, delete"},
        {"compression.type": "zstd"},
        {"retention.ms": "-1"},
        {"retention.bytes": "-1"},
        {"segment.bytes": "14"},
        {"min.cleanable.dirty.ratio": "0.1"},
        {"unclean.leader.election.enable": "True"},
        {"leader.replication.throttled.replicas": "0:1,1:2"},
        {"follower.replication.throttled.replicas": "*"},
        {"message.timestamp.type": "LogAppendTime"},
        {"retention.ms": None},
    ],
)
def test_valid_topic_configs_pass(configs):
    validate_topic_configs(configs)


@pytest.mark.parametrize(
    ("configs", "message"),
    [
        ({"retention.hours": "1"}, "Unknown topic config name: retention.hours"),
        ({"cleanup.policy": "shred"}, "cleanup.policy"),
        ({"compression.type": "brotli"}, "compression.type"),
        ({"retention.ms": "a week"}, "retention.ms"),
        ({"retention.ms": "-2"}, ">= -1"),
        ({"segment.bytes": "13"}, ">= 14"),
        ({"segment.bytes": "2147483648"}, "segment.bytes"),
        ({"min.insync.replicas": "0"}, "min.insync.replicas"),
        ({"min.cleanable.dirty.ratio": "2"}, "between"),
        ({"preallocate": "1"}, "boolean"),
        ({"leader.replication.throttled.replicas": "0-1"}, "[partitionId]:[brokerId]"),
        ({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}, "conflict"),
    ],
)
def test_invalid_topic_configs_raise_invalid_config(configs, message):
    with pytest.raises(InvalidConfig) as error:
        validate_topic_configs(configs)
    assert message in str(error.value)
    assert isinstance(error.value, ConfigError)


def test_log_config_uses_overrides_then_broker_defaults():
    broker = load(
        {
            **REQUIRED,
            "log.retention.hours": "24",
            "log.segment.bytes": "1048576",
            "min.insync.replicas": "2",
            "log.flush.interval.messages": "1",
            "message.max.bytes": "2000000",
        }
    )
    config = log_config_for(broker, {"retention.ms": "1000", "cleanup.policy": "compact,delete"})
    assert config == LogConfig(
        segment_bytes=1048576,
        retention_ms=1000,
        flush_messages=1,
        max_message_bytes=2000000,
        cleanup_policy="compact,delete",
        min_insync_replicas=2,
    )
    assert config.compacted and config.deletes_by_retention
    assert log_config_for(broker, {}).retention_ms == 86400000


def test_log_config_defaults_equal_log_config_class_defaults():
    assert log_config_for(load(REQUIRED), {}) == LogConfig()


def test_log_config_rejects_bad_overrides():
    with pytest.raises(InvalidConfig):
        log_config_for(load(REQUIRED), {"segment.ms": "0"})


def test_remembered_log_configs_equal_fresh_ones_and_refuse_the_same():
    broker = load(REQUIRED)
    configs = log_configs_of(broker)
    overrides = {"retention.ms": "1000", "cleanup.policy": "compact"}
    first = configs(overrides)
    assert first == log_config_for(broker, overrides)
    assert configs(dict(reversed(list(overrides.items())))) is first  # shared, immutable
    assert configs({}) == log_config_for(broker, {}) != first
    for _ in range(2):
        with pytest.raises(InvalidConfig):
            configs({"segment.ms": "0"})


# --- DescribeConfigs ------------------------------------------------------------------------


def by_name(entries):
    return {entry.name: entry for entry in entries}


def test_topic_entry_without_override_is_default_config():
    entry = by_name(describe_topic_configs(load(REQUIRED), {}))["retention.ms"]
    assert entry.value == "604800000"
    assert entry.source == ConfigSource.DEFAULT_CONFIG == 5
    assert entry.config_type == ConfigType.LONG == 5
    assert entry.synonyms == (("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG),)
    assert not entry.read_only and not entry.is_sensitive


def test_topic_entry_from_broker_file_is_static_broker_config(tmp_path):
    text = "broker.id=1\nzookeeper.connect=zk\nlog.retention.ms=86400000\n"
    entry = by_name(describe_topic_configs(load(text=text, tmp_path=tmp_path), {}))["retention.ms"]
    assert entry.value == "86400000"
    assert entry.source == ConfigSource.STATIC_BROKER_CONFIG == 4
    assert entry.synonyms[0] == ("log.retention.ms", "86400000", ConfigSource.STATIC_BROKER_CONFIG)
    assert entry.synonyms[-1] == ("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG)


def test_topic_entry_from_broker_hours_shows_the_value_in_ms():
    entry = by_name(describe_topic_configs(load({**REQUIRED, "log.retention.hours": "24"}), {}))
    assert entry["retention.ms"].value == "86400000"
    assert entry["retention.ms"].source == ConfigSource.STATIC_BROKER_CONFIG


def test_topic_override_is_topic_config_with_broker_synonyms_after_it():
    broker = load({**REQUIRED, "log.cleanup.policy": "compact"})
    entries = by_name(describe_topic_configs(broker, {"cleanup.policy": "delete"}))
    entry = entries["cleanup.policy"]
    assert entry.value == "delete"
    assert entry.source == ConfigSource.TOPIC_CONFIG == 1
    assert entry.config_type == ConfigType.LIST
    assert [s[2] for s in entry.synonyms] == [
        ConfigSource.TOPIC_CONFIG,
        ConfigSource.STATIC_BROKER_CONFIG,
        ConfigSource.DEFAULT_CONFIG,
    ]
    assert entries["leader.replication.throttled.replicas"].value == ""
    assert entries["unclean.leader.election.enable"].config_type == ConfigType.BOOLEAN


def test_describe_topic_configs_lists_every_topic_config_once():
    names = [entry.name for entry in describe_topic_configs(load(REQUIRED), {})]
    assert names == sorted(TOPIC_CONFIGS)


def test_broker_entries_show_source_and_raw_value(tmp_path):
    text = "broker.id=1\nzookeeper.connect=zk\nlog.retention.hours=24\n"
    entries = by_name(describe_broker_configs(load(text=text, tmp_path=tmp_path)))
    assert entries["broker.id"].value == "1"
    assert entries["broker.id"].source == ConfigSource.STATIC_BROKER_CONFIG
    assert entries["log.retention.hours"].value == "24"
    assert entries["num.partitions"].source == ConfigSource.DEFAULT_CONFIG
    assert entries["num.partitions"].value == "1"
    assert entries["advertised.listeners"].value is None
    assert entries["log.retention.ms"].value is None
    assert entries["log.retention.ms"].source == ConfigSource.STATIC_BROKER_CONFIG
    assert entries["offsets.topic.replication.factor"].config_type == ConfigType.SHORT
    assert all(entry.read_only for entry in entries.values())
    assert set(entries) == set(BROKER_CONFIG_KEYS)


def test_every_key_is_documented():
    for key in BROKER_CONFIG_KEYS.values():
        assert key.doc, key.name
    for definition in TOPIC_CONFIGS.values():
        assert definition.doc, definition.name


def test_configuration_docs_list_every_key():
    docs = Path(__file__).resolve().parents[3] / "docs" / "configuration.md"
    text = docs.read_text()
    for name in [*BROKER_CONFIG_KEYS, *TOPIC_CONFIGS]:
        assert f"`{name}`" in text, name


def test_configuration_docs_tables_are_generated_from_the_definitions():
    from gregor_broker.config import render_config_tables

    docs = Path(__file__).resolve().parents[3] / "docs" / "configuration.md"
    text = docs.read_text()
    generated = text.split("<!-- BEGIN GENERATED -->\n", 1)[1].split("<!-- END GENERATED -->")[0]
    assert generated == render_config_tables(), (
        "regenerate the tables: python -c 'from gregor_broker.config import "
        "render_config_tables as r; print(r())'"
    )


def test_inter_broker_listener_follows_kafkas_rule():
    two = {
        **REQUIRED,
        "listeners": "CLIENT://:9092,REPLICATION://:9093",
        "listener.security.protocol.map": "CLIENT:SASL_PLAINTEXT,REPLICATION:PLAINTEXT",
    }
    assert load({**two, "inter.broker.listener.name": "client"}).inter_broker_listener == "CLIENT"
    # Unset: the listener named like security.inter.broker.protocol, else the first with it.
    assert load(two).inter_broker_listener == "REPLICATION"
    assert (
        load({**two, "security.inter.broker.protocol": "SASL_PLAINTEXT"}).inter_broker_listener
        == "CLIENT"
    )
    with pytest.raises(ConfigError, match=r"security\.inter\.broker\.protocol=SSL"):
        load({**two, "security.inter.broker.protocol": "SSL"})


def test_listener_prefixed_settings_override_the_broker_wide_ones(caplog):
    with caplog.at_level(logging.WARNING, logger="gregor_broker.config"):
        config = load(
            {
                **REQUIRED,
                "ssl.client.auth": "requested",
                "listener.name.internal.ssl.client.auth": "required",
                "listener.name.client.plain.sasl.jaas.config": "x required;",
            }
        )
    assert "Unknown" not in caplog.text
    assert config.for_listener("INTERNAL", "ssl.client.auth") == "required"
    assert config.for_listener("CLIENT", "ssl.client.auth") == "requested"
    assert config.for_listener("CLIENT", "plain.sasl.jaas.config") == "x required;"
    assert config.for_listener("CLIENT", "scram-sha-256.sasl.jaas.config") is None
    with pytest.raises(ConfigError, match=r"ssl\.client\.auth"):
        load({**REQUIRED, "listener.name.x.ssl.client.auth": "always"}).for_listener(
            "X", "ssl.client.auth"
        )
