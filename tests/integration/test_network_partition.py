"""The replication promise under network partitions: nothing acknowledged is lost.

The SIGKILL test (``test_replication_faults``) kills leaders; here the leader keeps
running but the network cuts it off, which is harder on a broker: the old leader does
not know it was deposed, still holds its connections and its ZooKeeper session (until
ZooKeeper expires it), and comes back later with a log that may have a tail the new
leader never saw.

Every broker and ZooKeeper run in their own network namespace (``netns``), each with its
own address on one bridge; the producer and consumer in this process reach them through
an uplink to the same bridge. Three brokers on racks a, b, c hold a topic with
replication factor 3 and min.insync.replicas=2. While a confluent-kafka producer writes
numbered messages with acks=all, the partition leader's host is cut off from everything
(ZooKeeper, the other brokers, the clients) several times; each time a new leader must
take over, and after the partition heals the old leader must rejoin the ISR. Afterwards
every message the producer saw acknowledged must be in the log at the offset it was
acknowledged with.

Skips only when network namespaces cannot be created (not root, ``ip netns add`` fails).
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gregor_broker.cluster.admin import ZkAdmin
from gregor_broker.cluster.models import PartitionState
from gregor_broker.devtools.local_cluster import BrokerProcess, log_tail, zookeeper_client
from gregor_broker.devtools.zookeeper_server import ZooKeeperServer

from . import netns
from .broker_helpers import create_topic, wait_for
from .durability import NumberedProducer, lost_messages

TOPIC = "durable"
BROKER_PORT = 9092  # every broker has its own address, so they can share the port
CHROOT = "/gregor"
BROKER_PROPERTIES = {
    "zookeeper.session.timeout.ms": "4000",
    "replica.lag.time.max.ms": "5000",
}


@pytest.fixture(scope="session")
def _networks_closed_at_session_end() -> Iterator[None]:
    """Whatever a failed test left open is deleted before the session ends."""
    yield
    netns.close_all()


@pytest.fixture
def network(_networks_closed_at_session_end: None) -> Iterator[netns.Network]:
    reason = netns.unavailable_reason()
    if reason is not None:
        pytest.skip(f"network namespaces unavailable: {reason}")
    with netns.Network() as network:
        yield network


@dataclass
class NamespacedCluster:
    """ZooKeeper and brokers, each in its own namespace of ``network``."""

    network: netns.Network
    zookeeper: ZooKeeperServer
    brokers: dict[int, BrokerProcess]

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(broker.bootstrap for broker in self.brokers.values())

    @property
    def zookeeper_connect(self) -> str:
        return f"{self.zookeeper.connect_string}{CHROOT}"

    def host_of(self, broker_id: int) -> str:
        return f"broker{broker_id}"

    def logs(self) -> str:
        return "\n".join(
            f"--- broker {broker_id} ---\n{log_tail(broker.log_path, 60)}"
            for broker_id, broker in self.brokers.items()
        )


@pytest.fixture
def namespaced_cluster(
    network: netns.Network, tmp_path: Path
) -> Iterator[Callable[..., NamespacedCluster]]:
    clusters: list[NamespacedCluster] = []

    def start(racks: tuple[str, ...] = ("a", "b", "c"), **properties: str) -> NamespacedCluster:
        zookeeper_host = network.add_host("zookeeper")
        zookeeper = ZooKeeperServer(
            tmp_path / "zookeeper",
            host=zookeeper_host.address,
            command_prefix=network.command_prefix(zookeeper_host),
        )
        cluster = NamespacedCluster(network, zookeeper, {})
        clusters.append(cluster)
        zookeeper.start()
        for index, rack in enumerate(racks):
            broker_id = index + 1
            host = network.add_host(cluster.host_of(broker_id))
            cluster.brokers[broker_id] = BrokerProcess(
                broker_id=broker_id,
                directory=tmp_path / f"broker-{broker_id}",
                zookeeper_connect=cluster.zookeeper_connect,
                port=BROKER_PORT,
                rack=rack,
                properties=properties,
                host=host.address,
                command_prefix=network.command_prefix(host),
            )
        for broker in cluster.brokers.values():
            broker.start()
        for broker in cluster.brokers.values():
            broker.wait_registered(30)
        return cluster

    yield start
    for cluster in clusters:
        # Reconnect everyone first, so that controlled shutdown can hand leadership over.
        for name in list(network.hosts):
            network.heal(name)
        for broker in cluster.brokers.values():
            broker.signal(signal.SIGCONT)
            broker.signal(signal.SIGTERM)
        for broker in cluster.brokers.values():
            broker.stop()
        cluster.zookeeper.stop()


def _partition_state(admin: ZkAdmin) -> PartitionState:
    current = admin.get_partition_state(TOPIC, 0)
    assert current is not None, f"{TOPIC}-0 has no state znode"
    return current[0]


@pytest.mark.parametrize("fault", ["partition", "inbound_only"])
def test_no_acknowledged_write_is_lost_while_leaders_are_partitioned(
    namespaced_cluster: Callable[..., NamespacedCluster], fault: str
) -> None:
    """``partition``: the leader's host is cut off both ways. ``inbound_only``: a one-way
    partition, the leader still sends (to ZooKeeper, followers, clients) but receives
    nothing, so its packets arrive while every answer is lost."""
    cluster = namespaced_cluster(**BROKER_PROPERTIES)
    bootstrap = cluster.bootstrap_servers
    create_topic(
        bootstrap, TOPIC, partitions=1, replication_factor=3, config={"min.insync.replicas": "2"}
    )
    zk = zookeeper_client(cluster.zookeeper_connect)
    admin = ZkAdmin(zk)
    partitions = 0
    started = time.monotonic()
    timeline: list[str] = []

    def note(event: str) -> None:
        timeline.append(f"{time.monotonic() - started:6.1f}s {event}")

    try:
        assert wait_for(lambda: len(_partition_state(admin).isr) == 3, 30)
        with NumberedProducer(
            bootstrap,
            TOPIC,
            message_timeout_ms=15000,
            request_timeout_ms=5000,
            # A partitioned broker answers nothing: give up on its connection soon.
            socket_timeout_ms=5000,
            socket_connection_setup_timeout_ms=3000,
        ) as producer:
            for _round in range(3):
                assert producer.wait_for_progress(300, 30), (
                    f"no progress after {partitions} partitions: acked={producer.acked()}\n"
                    + "\n".join(timeline)
                    + "\n"
                    + cluster.logs()
                )
                state = _partition_state(admin)
                victim = state.leader
                if fault == "partition":
                    cluster.network.partition(cluster.host_of(victim))
                else:
                    cluster.network.isolate_inbound(cluster.host_of(victim))
                partitions += 1
                note(
                    f"{fault}: cut off leader {victim} at epoch {state.leader_epoch} "
                    f"(acked={producer.acked()})"
                )
                # Its ZooKeeper session expires; the controller elects from the live ISR.
                assert wait_for(
                    lambda v=victim: _partition_state(admin).leader not in (v, -1), 30, 0.1
                ), f"no new leader while {victim} is partitioned\n" + cluster.logs()
                note(f"new leader {_partition_state(admin).leader}")
                # The two remaining in-sync replicas satisfy min.insync.replicas=2.
                assert producer.wait_for_progress(100, 30), (
                    f"no progress while {victim} is partitioned\n" + cluster.logs()
                )
                note(f"progress without {victim} (acked={producer.acked()})")
                cluster.network.heal(cluster.host_of(victim))
                note(f"healed {victim}")
                assert wait_for(lambda v=victim: v in _partition_state(admin).isr, 45, 0.1), (
                    f"broker {victim} did not rejoin the ISR after healing\n" + cluster.logs()
                )
                note(f"{victim} rejoined the ISR {list(_partition_state(admin).isr)}")
            assert producer.wait_for_progress(300, 30)
    finally:
        zk.stop()
        zk.close()

    lost = lost_messages(producer.acknowledged, bootstrap, TOPIC)
    print("\n".join(timeline))
    counts = {
        "partitions": partitions,
        "sent": producer.sent,
        "acknowledged": len(producer.acknowledged),
        "failed": producer.failures,
        "lost": len(lost),
    }
    print(f"fault={fault} " + " ".join(f"{name}={value}" for name, value in counts.items()))
    assert partitions == 3
    assert lost == [], f"{len(lost)} acknowledged messages lost, e.g. {lost[:5]}"
