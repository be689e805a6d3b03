"""One broker's services without sockets or ZooKeeper, for tests of handlers and
coordinators: its config, a metadata cache that knows only this broker, the log
manager and the replica manager, and partitions led here as a metadata watcher would
deliver them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gregor_broker.cluster.metadata_cache import BrokerInfo, MetadataCache
from gregor_broker.cluster.models import PartitionState, TopicAssignment
from gregor_broker.config import BrokerConfig, load_broker_config
from gregor_broker.config.topic import log_config_for
from gregor_broker.log.log_manager import LogManager
from gregor_broker.replication.replica_manager import ReplicaManager

BROKER_ID = 1


@dataclass
class OneBroker:
    config: BrokerConfig
    metadata: MetadataCache
    logs: LogManager
    replicas: ReplicaManager

    def lead(self, topic: str, partitions: int) -> None:
        """``topic`` with ``partitions`` partitions, each led by this broker at epoch 0."""
        self.metadata.set_topic(
            topic, TopicAssignment.of({p: [BROKER_ID] for p in range(partitions)})
        )
        state = PartitionState(controller_epoch=1, leader=BROKER_ID, leader_epoch=0, isr=(1,))
        for p in range(partitions):
            self.metadata.set_partition_state(topic, p, state, version=0)


def one_broker(tmp_path: Path, properties: dict[str, str]) -> OneBroker:
    """Broker ``BROKER_ID`` with its logs under ``tmp_path`` and these properties."""
    config = load_broker_config(
        None,
        {
            "broker.id": str(BROKER_ID),
            "log.dirs": str(tmp_path / "logs"),
            "zookeeper.connect": "127.0.0.1:1",
            **properties,
        },
        env={},
    )
    metadata = MetadataCache()
    metadata.set_brokers({BROKER_ID: BrokerInfo(BROKER_ID, "127.0.0.1", 9092, None)})
    logs = LogManager([tmp_path / "logs"], default_config=log_config_for(config, {}))
    replicas = ReplicaManager(
        BROKER_ID, logs, metadata, lambda overrides: log_config_for(config, overrides)
    )
    return OneBroker(config, metadata, logs, replicas)
