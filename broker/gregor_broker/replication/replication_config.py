"""The replica manager's and follower fetchers' settings, from the broker's config.

A module of its own so that the fetchers (which the replica manager drives) read them
without importing the replica manager.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class ReplicationConfig:
    replica_lag_time_max_ms: int = 30000
    fetch_wait_max_ms: int = 500
    fetch_min_bytes: int = 1
    fetch_max_bytes: int = 1048576
    fetch_response_max_bytes: int = 10485760
    replica_selector: str | None = None  # replica.selector.class (KIP-392)
    # Pre-KIP-101 follower truncation, kept only to demonstrate the loss it causes.
    truncate_to_high_watermark: bool = False
    # The listener followers reach leaders on (inter.broker.listener.name); None: the
    # leader's default endpoint.
    inter_broker_listener: str | None = None
    # How followers connect to it: a ``security.client.ClientSecurity`` (TLS context,
    # SASL mechanism and credentials); None for PLAINTEXT.
    client_security: Any = None
