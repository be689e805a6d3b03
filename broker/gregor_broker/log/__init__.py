"""Partition log storage in Kafka's on-disk layout: segments, indexes, checkpoints,
recovery and retention. See ``docs/design/log-storage.md``.

The names below load on first use (PEP 562): ``gregor_broker.config`` needs only
``log_config``, and the tools and the operator that read topic configs must not pay for
the whole storage stack (the record codecs, the protocol library) at start-up.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .checkpoints import LeaderEpochCache
    from .log_config import LogConfig
    from .log_manager import InconsistentBrokerMetadata, LogManager
    from .partition_log import (
        AppendResult,
        FileSlice,
        OffsetOutOfRange,
        PartitionLog,
        UnexpectedAppendOffset,
    )

_HOMES = {
    "AppendResult": "partition_log",
    "FileSlice": "partition_log",
    "InconsistentBrokerMetadata": "log_manager",
    "LeaderEpochCache": "checkpoints",
    "LogConfig": "log_config",
    "LogManager": "log_manager",
    "OffsetOutOfRange": "partition_log",
    "PartitionLog": "partition_log",
    "UnexpectedAppendOffset": "partition_log",
}

__all__ = [
    "AppendResult",
    "FileSlice",
    "InconsistentBrokerMetadata",
    "LeaderEpochCache",
    "LogConfig",
    "LogManager",
    "OffsetOutOfRange",
    "PartitionLog",
    "UnexpectedAppendOffset",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{home}", __name__), name)
    globals()[name] = value
    return value
