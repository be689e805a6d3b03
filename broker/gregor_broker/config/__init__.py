"""Broker and topic configuration, with Kafka's property names, defaults and validation.

Owns: reading ``server.properties``-style files (``properties.py``), ``GREGOR_*``
environment overrides and the typed ``BrokerConfig`` (``broker.py``), the table of topic
configs with Kafka's defaults and validators and the log's ``LogConfig`` of a topic
(``topic.py``), the dynamic broker configs (``dynamic_broker.py``), the entries
DescribeConfigs shows (``describe.py``) and the tables of docs/configuration.md
(``docs.py``), over one set of value types and validators (``values.py``).

Does not own: where overrides are stored (``cluster.admin`` reads ``/config/topics`` and
``/config/brokers``). The names below are the package's interface.
"""

from __future__ import annotations

from .broker import (
    BROKER_CONFIG_KEYS,
    LEADER_SELECTOR,
    RACK_AWARE_REPLICA_SELECTOR,
    BrokerConfig,
    BrokerConfigKey,
    load_broker_config,
    parse_listener,
)
from .describe import (
    ConfigEntry,
    describe_broker_configs,
    describe_dynamic_broker_configs,
    describe_topic_configs,
)
from .docs import render_config_tables
from .dynamic_broker import DYNAMIC_BROKER_CONFIGS, validate_dynamic_broker_configs
from .properties import parse_properties
from .topic import (
    TOPIC_CONFIGS,
    effective_topic_configs,
    log_config_for,
    log_configs_of,
    validate_topic_configs,
)
from .values import INT_MAX, LONG_MAX, ConfigError, ConfigSource, ConfigType, InvalidConfig

__all__ = [
    "BROKER_CONFIG_KEYS",
    "DYNAMIC_BROKER_CONFIGS",
    "INT_MAX",
    "LEADER_SELECTOR",
    "LONG_MAX",
    "RACK_AWARE_REPLICA_SELECTOR",
    "TOPIC_CONFIGS",
    "BrokerConfig",
    "BrokerConfigKey",
    "ConfigEntry",
    "ConfigError",
    "ConfigSource",
    "ConfigType",
    "InvalidConfig",
    "describe_broker_configs",
    "describe_dynamic_broker_configs",
    "describe_topic_configs",
    "effective_topic_configs",
    "load_broker_config",
    "log_config_for",
    "log_configs_of",
    "parse_listener",
    "parse_properties",
    "render_config_tables",
    "validate_dynamic_broker_configs",
    "validate_topic_configs",
]
