"""Dynamic broker configs (``/config/brokers/<id>`` and ``<default>``): the keys Gregor
applies at run time (Kafka's ``DynamicConfig.Broker`` subset), their validation and how
DescribeConfigs shows them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from .broker import BROKER_CONFIG_KEYS
from .describe import ConfigEntry, ConfigSynonym
from .topic import _LONG_MAX_S
from .values import (
    ConfigSource,
    ConfigType,
    InvalidConfig,
    Validator,
    at_least,
    parse_validated,
)

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
        return parse_validated(self.name, text, self.config_type, self.validator)


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
