"""What DescribeConfigs shows: ``ConfigEntry`` for topic and broker configs, with their
sources and synonyms as Kafka reports them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .broker import BROKER_CONFIG_KEYS, BrokerConfig, _attr
from .topic import TOPIC_CONFIGS, validate_topic_configs
from .values import ConfigSource, ConfigType, display_value

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
            if definition.config_type == ConfigType.PASSWORD:
                shown = None
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
        sensitive = definition.config_type == ConfigType.PASSWORD
        entries.append(
            ConfigEntry(
                name=name,
                # Kafka never returns a password's value, not even its default.
                value=None if sensitive else value,
                source=synonyms[0][2] if synonyms else ConfigSource.DEFAULT_CONFIG,
                read_only=True,
                is_sensitive=sensitive,
                synonyms=tuple(synonyms),
                config_type=definition.config_type,
                documentation=definition.doc,
            )
        )
    return entries
