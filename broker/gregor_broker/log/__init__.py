"""Partition log storage in Kafka's on-disk layout: segments, indexes, checkpoints,
recovery and retention. See ``docs/design/log-storage.md``."""

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
