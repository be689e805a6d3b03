"""Config values as Kafka's ``ConfigDef`` handles them: types, parsing, validators, errors.

The base of the config package: ``ConfigType``/``ConfigSource``, ``parse_value`` and
``display_value`` for one value, and the validators (``at_least``, ``between``, ``one_of``,
``list_of``, ...) that the broker and topic tables use.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from enum import IntEnum
from types import MappingProxyType
from typing import Any

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


def parse_validated(
    name: str, text: str, config_type: ConfigType, validator: Validator | None
) -> Any:
    """Parse one config value and run its validator; every failure is ``InvalidConfig``
    (what AlterConfigs and CreateTopics answer INVALID_CONFIG with)."""
    value = parse_value(name, text, config_type, InvalidConfig)
    if validator is not None:
        try:
            validator(name, value)
        except InvalidConfig:
            raise
        except ConfigError as exc:
            raise InvalidConfig(str(exc)) from None
    return value


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
