"""The Markdown tables of docs/configuration.md, generated from the config tables
(``render_config_tables``; a unit test fails when the doc drifts)."""

from __future__ import annotations

from .broker import BROKER_CONFIG_KEYS
from .dynamic_broker import DYNAMIC_BROKER_CONFIGS
from .topic import TOPIC_CONFIGS
from .values import display_value

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
