"""Per-log settings, typed, with Kafka's defaults.

``gregor_broker.config`` turns topic configs (strings, Kafka's names) into a LogConfig;
the log package only ever sees this typed form.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = 1024 * 1024 * 1024  # segment.bytes
    segment_ms: int = 7 * 24 * 3600 * 1000  # segment.ms
    segment_index_bytes: int = 10 * 1024 * 1024  # segment.index.bytes
    index_interval_bytes: int = 4096  # index.interval.bytes
    retention_ms: int = 7 * 24 * 3600 * 1000  # retention.ms (-1: unlimited)
    retention_bytes: int = -1  # retention.bytes (-1: unlimited)
    flush_messages: int = 2**63 - 1  # flush.messages
    flush_ms: int = 2**63 - 1  # flush.ms
    max_message_bytes: int = 1048588  # max.message.bytes
    cleanup_policy: str = "delete"  # cleanup.policy: delete, compact or "compact,delete"
    message_timestamp_type: str = "CreateTime"  # message.timestamp.type
    file_delete_delay_ms: int = 60000  # file.delete.delay.ms
    min_insync_replicas: int = 1  # min.insync.replicas
    # Compaction (cleanup.policy=compact); see cleaner.py.
    min_cleanable_dirty_ratio: float = 0.5  # min.cleanable.dirty.ratio
    min_compaction_lag_ms: int = 0  # min.compaction.lag.ms
    max_compaction_lag_ms: int = 2**63 - 1  # max.compaction.lag.ms
    delete_retention_ms: int = 24 * 3600 * 1000  # delete.retention.ms

    @property
    def compacted(self) -> bool:
        return "compact" in self.cleanup_policy.split(",")

    @property
    def deletes_by_retention(self) -> bool:
        return "delete" in self.cleanup_policy.split(",")
