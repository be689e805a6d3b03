"""A coordinator's internal topic: created on first use, its partitions loaded when this
broker becomes their leader and unloaded when it stops being.

The group coordinator (``__consumer_offsets``) and the transaction coordinator
(``__transaction_state``) do the same steps, as Kafka's ``CoordinatorRuntime`` does for
both over one ``CoordinatorLoader``: create the topic once (a lock, then the topic admin),
schedule a partition's load on the event loop's next turn when its leadership arrives,
read it (a partition that cannot be read loads empty, logged), hand the result to the
coordinator, and drop the partition when the leadership goes. What a partition loads
into, and what unloading it means, stay with each coordinator.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from typing import TypeVar

from ..cluster.metadata_cache import MetadataCache
from ..protocol.errors import KafkaError
from ..replication.partition import Partition
from .partition_writer import InternalTopicCreator, create_internal_topic

log = logging.getLogger(__name__)

Loaded = TypeVar("Loaded")


class InternalTopic:
    """``name``'s creation and its partitions' loading for one coordinator.

    ``loading`` is the coordinator's own set of partitions being loaded (it answers
    COORDINATOR_LOAD_IN_PROGRESS from it); ``unavailable`` the error its callers get when
    the topic cannot be created.
    """

    def __init__(
        self,
        name: str,
        broker_id: int,
        metadata: MetadataCache,
        creator: InternalTopicCreator,
        loading: set[int],
        unavailable: type[Exception],
    ) -> None:
        self.name = name
        self.broker_id = broker_id
        self.metadata = metadata
        self.creator = creator
        self.loading = loading
        self.unavailable = unavailable
        self._create_lock = asyncio.Lock()

    # -- creation ---------------------------------------------------------------------------
    async def ensure(
        self,
        num_partitions: int,
        replication_factor: int,
        configs: Callable[[int], Mapping[str, str | None]],
        timeout_s: float,
    ) -> bool:
        """Create the topic if needed (``replication_factor`` at most the live brokers;
        ``configs`` of the factor used); True once every partition has a leader."""
        if self.name not in self.metadata.topics:
            async with self._create_lock:
                if self.name not in self.metadata.topics:
                    await self._create(num_partitions, replication_factor, configs)
        return await self.creator.wait_for_leaders([self.name], timeout_s)

    async def _create(
        self,
        num_partitions: int,
        replication_factor: int,
        configs: Callable[[int], Mapping[str, str | None]],
    ) -> None:
        factor = min(replication_factor, max(len(self.metadata.brokers), 1))
        try:
            await create_internal_topic(
                self.creator, self.name, num_partitions, factor, configs(factor)
            )
        except KafkaError as error:  # topic admin's TopicAdminError
            raise self.unavailable(str(error)) from error

    def partition_count(self) -> int | None:
        """The topic's partitions as the metadata knows them (None before it exists)."""
        topic = self.metadata.topics.get(self.name)
        return len(topic.partitions) if topic is not None and topic.partitions else None

    # -- loading ----------------------------------------------------------------------------
    def leadership_changed(
        self,
        partition: Partition,
        loaded: bool,
        read: Callable[[Partition], Loaded],
        empty: Callable[[], Loaded],
        install: Callable[[Partition, Loaded, float], None],
        unload: Callable[[int], None],
    ) -> None:
        """This broker leads ``partition`` now: load it (``read``, then ``install`` with
        the seconds it took) unless it is ``loaded`` at this leadership or loading. It
        does not: ``unload`` it if it was loaded or loading."""
        index = partition.index
        if partition.leader == self.broker_id:
            if loaded or index in self.loading:
                return
            self.loading.add(index)
            asyncio.get_running_loop().call_soon(self._load, partition, read, empty, install)
        elif loaded or index in self.loading:
            log.info("no longer coordinator for %s-%d; unloading it", self.name, index)
            self.loading.discard(index)
            unload(index)

    def _load(
        self,
        partition: Partition,
        read: Callable[[Partition], Loaded],
        empty: Callable[[], Loaded],
        install: Callable[[Partition, Loaded, float], None],
    ) -> None:
        index = partition.index
        if index not in self.loading:
            return  # leadership moved away again before loading started
        started = time.monotonic()
        try:
            loaded = read(partition)
        except Exception:
            log.exception("loading %s-%d failed", self.name, index)
            loaded = empty()
        self.loading.discard(index)
        install(partition, loaded, time.monotonic() - started)
