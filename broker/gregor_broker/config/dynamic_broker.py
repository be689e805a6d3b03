"""Dynamic broker configs (``/config/brokers/<id>`` and ``<default>``): the keys Gregor
applies at run time (Kafka's ``DynamicConfig.Broker`` subset) and their validation;
DescribeConfigs shows them through ``describe.py``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from .broker import BROKER_CONFIG_KEYS
from .topic import _LONG_MAX_S
from .values import (
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
