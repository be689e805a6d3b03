"""What the coordinator needs from the rest of the broker, and nothing more.

Like Kafka's ``PartitionWriter`` (coordinator-common): the group coordinator writes its
records to ``__consumer_offsets`` as a leader appends any produced batch, waits for the
in-sync replicas to have them, and learns when this broker gains or loses a partition's
leadership. The replica manager satisfies ``PartitionWriter`` structurally; topic admin
satisfies ``InternalTopicCreator`` (creating ``__consumer_offsets`` on first use). The
coordinator never sees the broker object, so it sits below the server layer.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Protocol

from kio.schema.errors import ErrorCode

from ..log.partition_log import AppendResult
from ..protocol.errors import KafkaError
from ..replication.partition import Partition

log = logging.getLogger(__name__)


class PartitionWriter(Protocol):
    """Appends to a partition this broker leads, and waits for its high watermark."""

    leadership_listeners: list[Callable[[Partition], None]]
    # The partitions hosted here, by (topic, index): their local leader epochs.
    partitions: Mapping[tuple[str, int], Partition]

    def append(self, topic: str, index: int, records: bytes | None, acks: int) -> AppendResult:
        """Append as the leader; raises a ``KafkaError`` with the partition's error code."""
        ...

    async def wait_for_replication(
        self, topic: str, index: int, result: AppendResult, timeout_s: float
    ) -> ErrorCode:
        """Wait until the in-sync replicas have ``result`` (acks=all)."""
        ...


class InternalTopicCreator(Protocol):
    """Creates an internal topic (``__consumer_offsets``) and waits for its leaders."""

    def plan_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        assignments: Mapping[int, list[int]] | None,
        configs: Mapping[str, str | None],
    ) -> dict[int, list[int]]: ...

    async def create_topic(
        self, name: str, assignment: Mapping[int, list[int]], configs: Mapping[str, str | None]
    ) -> str: ...

    async def wait_for_leaders(self, names: list[str], timeout: float) -> bool: ...


async def create_internal_topic(
    creator: InternalTopicCreator,
    name: str,
    num_partitions: int,
    replication_factor: int,
    configs: Mapping[str, str | None],
) -> None:
    """Create ``__consumer_offsets`` / ``__transaction_state`` on first use; another
    broker creating it at the same time is fine. Raises the topic admin's ``KafkaError``
    otherwise."""
    try:
        plan = creator.plan_topic(name, num_partitions, replication_factor, None, configs)
        await creator.create_topic(name, plan, configs)
    except KafkaError as error:  # topic admin's TopicAdminError
        if error.error_code is not ErrorCode.topic_already_exists:
            raise
        return
    log.info(
        "created %s with %d partitions, replication factor %d",
        name,
        len(plan),
        replication_factor,
    )
