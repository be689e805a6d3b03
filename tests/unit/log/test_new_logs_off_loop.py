"""New partitions' files are made off the event loop, then adopted; small changes in place.

Real ``MetadataCache``, ``LogManager`` and ``ReplicaManager`` on a temporary directory,
driven the way the broker's ``SlicedReconcile`` drives them (``max_changes``, and
``logs_prepared`` handing topics back). Creating thousands of partitions used to make
every directory and segment file on the loop, one after another (issue 9: 10,000
partitions in 42.5 s, the loop blocked in mkdir and open for most of it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from log_helpers import batch, produce

from gregor_broker.cluster.metadata_cache import BrokerInfo, MetadataCache
from gregor_broker.cluster.models import PartitionState, TopicAssignment
from gregor_broker.config import load_broker_config, log_config_for
from gregor_broker.log.log_manager import LogManager
from gregor_broker.replication.replica_manager import INLINE_NEW_LOGS, ReplicaManager

BROKER_ID = 1
CHANGES_PER_CALL = 16  # as SlicedReconcile calls it


class Setup:
    def __init__(self, directory: Path) -> None:
        self.log_dir = directory / "logs"
        config = load_broker_config(
            None,
            {
                "broker.id": str(BROKER_ID),
                "log.dirs": str(self.log_dir),
                "zookeeper.connect": "127.0.0.1:1",  # never dialled
            },
            env={},
        )
        self.metadata = MetadataCache()
        self.metadata.set_brokers({BROKER_ID: BrokerInfo(BROKER_ID, "127.0.0.1", 9092, None)})
        self.logs = LogManager([self.log_dir], default_config=log_config_for(config, {}))
        self.replicas = ReplicaManager(
            BROKER_ID, self.logs, self.metadata, lambda overrides: log_config_for(config, overrides)
        )
        self.handed_back: asyncio.Queue[set[str]] = asyncio.Queue()
        self.replicas.logs_prepared = self.handed_back.put_nowait

    def add_topic(self, name: str, partitions: int) -> None:
        self.metadata.set_topic(
            name, TopicAssignment.of({p: [BROKER_ID] for p in range(partitions)}, None)
        )
        for p in range(partitions):
            state = PartitionState(
                controller_epoch=1, leader=BROKER_ID, leader_epoch=0, isr=(BROKER_ID,)
            )
            self.metadata.set_partition_state(name, p, state, version=0)

    def reconcile(self, topics: set[str]) -> set[str]:
        unfinished = set(topics)
        while unfinished:  # as SlicedReconcile: again until every change is applied
            unfinished = self.replicas.reconcile(unfinished, max_changes=CHANGES_PER_CALL)
        return unfinished

    def directories(self, topic: str) -> list[Path]:
        return sorted(self.log_dir.glob(f"{topic}-*"))


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[Setup]:
    made = Setup(tmp_path)
    yield made
    made.logs.close()


async def _many_new_partitions_are_made_off_the_loop_then_led(setup: Setup) -> None:
    setup.add_topic("bulk", 200)
    setup.reconcile({"bulk"})
    # The loop only chose where the logs go: no directory was made on it.
    assert setup.directories("bulk") == []
    assert not any(key[0] == "bulk" for key in setup.replicas.partitions)
    handed = await asyncio.wait_for(setup.handed_back.get(), 60)
    assert handed == {"bulk"}
    assert len(setup.directories("bulk")) == 200
    setup.reconcile(handed)
    leaders = [p for key, p in setup.replicas.partitions.items() if key[0] == "bulk"]
    assert len(leaders) == 200 and all(p.is_leader(BROKER_ID) for p in leaders)
    # An adopted log is a working log: it takes a batch and its files are there.
    log = setup.logs.get("bulk", 7)
    assert log is not None
    produce(log, batch())
    assert log.log_end_offset == 1
    files = sorted(p.name for p in (setup.log_dir / "bulk-7").iterdir())
    assert "00000000000000000000.log" in files and "00000000000000000000.index" in files


async def _a_few_new_partitions_are_made_at_once(setup: Setup) -> None:
    setup.add_topic("small", INLINE_NEW_LOGS)
    setup.reconcile({"small"})
    assert len(setup.directories("small")) == INLINE_NEW_LOGS
    assert sum(1 for key in setup.replicas.partitions if key[0] == "small") == INLINE_NEW_LOGS
    assert setup.handed_back.empty()


async def _a_topic_deleted_while_its_logs_are_made_leaves_no_directory(
    setup: Setup,
) -> None:
    setup.add_topic("gone", 100)
    setup.reconcile({"gone"})
    setup.metadata.set_topic("gone", None)
    handed = await asyncio.wait_for(setup.handed_back.get(), 60)
    setup.reconcile(handed)
    assert setup.logs.prepared_keys(None) == []
    for _ in range(100):  # the removal runs on the remover threads
        if not setup.directories("gone"):
            break
        await asyncio.sleep(0.1)
    assert setup.directories("gone") == []
    assert not any(key[0] == "gone" for key in setup.replicas.partitions)


def test_many_new_partitions_are_made_off_the_loop_then_led(setup: Setup) -> None:
    asyncio.run(_many_new_partitions_are_made_off_the_loop_then_led(setup))


def test_a_few_new_partitions_are_made_at_once(setup: Setup) -> None:
    asyncio.run(_a_few_new_partitions_are_made_at_once(setup))


def test_a_topic_deleted_while_its_logs_are_made_leaves_no_directory(setup: Setup) -> None:
    asyncio.run(_a_topic_deleted_while_its_logs_are_made_leaves_no_directory(setup))
