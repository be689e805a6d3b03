"""Driver-side talk with the cluster: which partitions a source reads, where offsets are, and
committing a streaming query's progress to a consumer group.

Everything goes through confluent-kafka's AdminClient and Consumer with the source's
``kafka.*`` options, so TLS/SASL settings reach every connection. Offsets are looked up when a
batch is planned ("resolved late"), never when the DataFrame is defined.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from gregor_spark.options import (
    ASSIGN,
    EARLIEST,
    LATEST,
    OffsetLimit,
    SourceOptions,
)
from gregor_spark.options import (
    TopicPartition as TP,
)

TIMEOUT = 30.0


def client_config(options: SourceOptions, **overrides: Any) -> dict[str, Any]:
    config: dict[str, Any] = dict(options.kafka)
    config.update(overrides)
    return config


def consumer_config(options: SourceOptions) -> dict[str, Any]:
    """A consumer that reads what it is told: no group membership, no commits, no resets."""
    # librdkafka's default fetch.queue.backoff.ms (1000) stalls a fast reader for a second
    # whenever its queue fills; a task reads as fast as it can. A task reads one partition,
    # so the per-partition fetch size is the whole fetch: 8 MiB per Fetch instead of 1 MiB
    # makes a task's fetches as large as a consumer's of several partitions (fewer round
    # trips, less per-request work on the broker). ``kafka.*`` options override both.
    tuned = {
        "fetch.queue.backoff.ms": 1,
        "max.partition.fetch.bytes": 8 * 1024 * 1024,
        **options.kafka,
    }
    return {
        **tuned,
        **{
            "group.id": options.group_id,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "error",
            "enable.partition.eof": True,
        },
    }


class ClusterView:
    """The driver's long-lived AdminClient for metadata and ListOffsets."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        admin_config = {
            k: v for k, v in client_config(options).items() if not k.startswith("group.")
        }
        self.admin = AdminClient(admin_config)

    def partitions(self) -> list[TP]:
        """The topic partitions the source reads now (new ones appear as topics grow)."""
        if self.options.strategy == ASSIGN:
            return list(self.options.assigned)
        metadata = self.admin.list_topics(timeout=TIMEOUT)
        return sorted(
            (name, partition)
            for name, topic in metadata.topics.items()
            if topic.error is None and self.options.matches(name)
            for partition in topic.partitions
        )

    def list_offsets(self, specs: Mapping[TP, int]) -> dict[TP, int]:
        """ListOffsets: -2 earliest, -1 latest (the high watermark), else a timestamp in ms.
        A timestamp that no record reaches gives -1."""
        if not specs:
            return {}
        request = {}
        for (topic, partition), spec in specs.items():
            if spec == EARLIEST:
                offset_spec = OffsetSpec.earliest()
            elif spec == LATEST:
                offset_spec = OffsetSpec.latest()
            else:
                offset_spec = OffsetSpec.for_timestamp(spec)
            request[TopicPartition(topic, partition)] = offset_spec
        futures = self.admin.list_offsets(request, request_timeout=TIMEOUT)
        return {(tp.topic, tp.partition): f.result().offset for tp, f in futures.items()}

    def earliest(self, partitions: Iterable[TP]) -> dict[TP, int]:
        return self.list_offsets(dict.fromkeys(partitions, EARLIEST))

    def latest(self, partitions: Iterable[TP]) -> dict[TP, int]:
        return self.list_offsets(dict.fromkeys(partitions, LATEST))

    def resolve(self, limit: OffsetLimit, partitions: list[TP], *, is_start: bool) -> dict[TP, int]:
        """Concrete offsets for ``limit`` on ``partitions``, clipped to what the log holds.

        Partitions that a per-partition JSON leaves out default to earliest (start) or latest
        (end); a start timestamp that no record reaches fails with strategy ``error`` and
        means latest with ``latest``; an end timestamp that no record reaches means latest.
        """
        default = EARLIEST if is_start else LATEST
        if limit.kind in ("earliest", "latest"):
            specs = dict.fromkeys(partitions, EARLIEST if limit.kind == "earliest" else LATEST)
        elif limit.kind == "timestamp":
            specs = dict.fromkeys(partitions, limit.timestamp)
        else:
            if limit.kind == "offsets" and set(limit.offsets) != set(partitions):
                # Spark's KafkaOffsetReader asserts the same.
                raise ValueError(
                    "If startingOffsets contains specific offsets, you must specify all "
                    "TopicPartitions.\nUse -1 for latest, -2 for earliest.\n"
                    f"Specified: {sorted(limit.offsets)} Assigned: {sorted(partitions)}"
                )
            specs = {tp: limit.offsets.get(tp, default) for tp in partitions}
        if limit.kind == "offsets":
            concrete = {tp: o for tp, o in specs.items() if o >= 0}
            looked_up = self.list_offsets({tp: o for tp, o in specs.items() if o < 0})
            resolved = {**concrete, **looked_up}
        else:
            resolved = self.list_offsets(specs)
            for tp, offset in resolved.items():
                if offset < 0 and specs[tp] not in (EARLIEST, LATEST):
                    if is_start and self.options.timestamp_strategy == "error":
                        raise ValueError(
                            f"No offset matched the timestamp {specs[tp]} in partition "
                            f"{tp[0]}-{tp[1]}; set startingOffsetsByTimestampStrategy to "
                            "'latest' to start at the end of such partitions"
                        )
                    resolved[tp] = LATEST
            resolved.update(self.latest([tp for tp, o in resolved.items() if o == LATEST]))
        return resolved

    def close(self) -> None:
        self.admin = None  # type: ignore[assignment]


def commit_to_group(options: SourceOptions, group: str, offsets: Mapping[TP, int]) -> None:
    """Commit ``offsets`` (next offsets to read) for ``group``, as a consumer outside any
    generation does (Kafka accepts that while the group has no members), so lag tools see
    the query's progress."""
    consumer = Consumer(client_config(options, **{"group.id": group, "enable.auto.commit": False}))
    try:
        result = consumer.commit(
            offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()],
            asynchronous=False,
        )
        failed = [tp for tp in result or [] if tp.error is not None]
        if failed:
            raise KafkaException(failed[0].error)
    finally:
        consumer.close()
