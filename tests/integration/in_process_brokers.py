"""Real brokers inside the test's own process (``Broker`` objects on the test's event
loop), for tests that look at a broker's insides: its calls (``test_layered_paths``) or
its tasks while it stops (``test_broker_stop``). Other tests run broker processes
(``broker_factory``)."""

from __future__ import annotations

from pathlib import Path

from gregor_broker.config import load_broker_config
from gregor_broker.devtools.zookeeper_server import free_port
from gregor_broker.server.broker import Broker


async def start_broker(
    broker_id: int, zk_connect: str, directory: Path, **properties: str
) -> tuple[Broker, int]:
    """A started broker on a free port, and that port. Small internal topics (one
    partition, replication factor 1); ``properties`` (Kafka's names) win."""
    port = free_port()
    config = {
        "broker.id": str(broker_id),
        "zookeeper.connect": zk_connect,
        "listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "log.dirs": str(directory / f"logs-{broker_id}"),
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "1",
        **properties,
    }
    broker = Broker(load_broker_config(None, config, env={}))
    await broker.start()
    return broker, port
