"""What DescribeConfigs shows: ``ConfigEntry`` for topic and broker configs, with their
sources and synonyms as Kafka reports them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from .broker import BROKER_CONFIG_KEYS, BrokerConfig, _attr
from .dynamic_broker import DYNAMIC_BROKER_CONFIGS
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

    def response_fields(self) -> dict[str, Any]:
        """The fields CreateTopics and DescribeConfigs responses both give an entry, under
        kio's names."""
        return {
            "name": self.name,
            "value": self.value,
            "read_only": self.read_only,
            "config_source": int(self.source),
            "is_sensitive": self.is_sensitive,
        }


class _Definition(Protocol):
    """What an entry takes from a config's definition (topic, static or dynamic broker)."""

    @property
    def config_type(self) -> ConfigType: ...

    @property
    def doc(self) -> str: ...


def _entry(
    name: str,
    definition: _Definition,
    value: str | None,
    synonyms: list[ConfigSynonym],
    *,
    read_only: bool,
    is_sensitive: bool = False,
) -> ConfigEntry:
    """The one way an entry is built: its source is that of its most specific synonym
    (the first, as Kafka orders them), the default's when it has none."""
    return ConfigEntry(
        name=name,
        value=value,
        source=synonyms[0][2] if synonyms else ConfigSource.DEFAULT_CONFIG,
        read_only=read_only,
        is_sensitive=is_sensitive,
        synonyms=tuple(synonyms),
        config_type=definition.config_type,
        documentation=definition.doc,
    )


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
            synonyms.insert(0, (name, override, ConfigSource.TOPIC_CONFIG))
        else:
            value = definition.default_from(broker)
        entries.append(_entry(name, definition, value, synonyms, read_only=False))
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
        # Kafka never returns a password's value, not even its default.
        shown = None if sensitive else value
        entries.append(
            _entry(name, definition, shown, synonyms, read_only=True, is_sensitive=sensitive)
        )
    return entries


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
        entries.append(_entry(name, definition, synonyms[0][1], synonyms, read_only=False))
    return entries
