"""What a Quota resource writes: the entity path under ``/config`` and its config in Kafka's
format (``producer_byte_rate`` and ``consumer_byte_rate`` as longs, ``request_percentage``
as a double). Entity naming (sanitising, ``<default>``) is the broker's own
``gregor_broker.cluster.client_quotas.entity_path``; value formatting its
``format_quota_value``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gregor_broker.cluster.client_quotas import (
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    entity_path,
    format_quota_value,
)

SPEC_KEYS = {
    "producerByteRate": PRODUCER_BYTE_RATE,
    "consumerByteRate": CONSUMER_BYTE_RATE,
    "requestPercentage": REQUEST_PERCENTAGE,
}


@dataclass(frozen=True)
class QuotaPlan:
    entity_path: str | None
    config: dict[str, str]
    refused: str | None = None


def plan_quota(namespace: str, name: str, spec: Mapping[str, Any]) -> QuotaPlan:
    """The entity path and config a Quota's spec asks for (refused: why not)."""
    user, client_id = spec.get("user"), spec.get("clientId")
    if not user and not client_id:
        return QuotaPlan(
            None,
            {},
            f"Quota {namespace}/{name}: set spec.user, spec.clientId or both "
            "('<default>' for every user or client id)",
        )
    config = {}
    for field, key in SPEC_KEYS.items():
        value = spec.get(field)
        if value is None:
            continue
        if float(value) <= 0:
            return QuotaPlan(
                None, {}, f"Quota {namespace}/{name}: spec.{field} must be positive, not {value}"
            )
        config[key] = format_quota_value(key, float(value))
    if not config:
        return QuotaPlan(
            None,
            {},
            f"Quota {namespace}/{name}: set at least one of producerByteRate, "
            "consumerByteRate, requestPercentage",
        )
    return QuotaPlan(entity_path(user or None, client_id or None), config)
