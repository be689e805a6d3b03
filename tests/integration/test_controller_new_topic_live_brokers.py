"""A new topic's first leader is elected from brokers read after the topic was listed.

Kafka elects a new partition's first leader as the first live replica in assignment
order. The controller decided every topic it listed with a live-broker set read before
the list: at its start-up (the registered brokers, then its watches, then every topic)
and on a broker change (the registered brokers as the watch saw them, maybe seconds
earlier on a busy controller, then every topic as listed now). A broker that registered
in between, followed by a topic naming it first, was counted dead for that topic, and
its first leader was the next replica; with ``auto.leader.rebalance.enable=false``
leadership never came back (an operator test waited 90 s in a CI run for a partition
assigned (1, 2, 3) to be led by 1, on a cluster starting on a loaded machine).

Real ZooKeeper and the real controller. "The controller is slow here" is the controller
client's read of ``/brokers/ids`` (``late_arrival_after_read``): once it has answered,
before the controller can act on the answer, broker 2 registers and then a topic
assigned (2, 1, 3) is created. Broker 2 was registered before the topic existed, so it
must lead it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gregor_broker.cluster import zk_paths
from gregor_broker.cluster.admin import ZkAdmin
from gregor_broker.cluster.controller import Controller
from gregor_broker.cluster.models import PartitionState
from gregor_broker.devtools.local_cluster import zookeeper_client

from .broker_helpers import register_broker_znode, wait_for

TOPIC = "late"


def late_arrival_after_read(
    client: Any, arrive: Callable[[], None], when: Callable[[], bool]
) -> list[str]:
    """Run ``arrive`` right after the first ``client.get_children(/brokers/ids)`` made
    while ``when()`` holds has been answered, before its caller gets the answer. Returns
    a list that records that it ran."""
    ran: list[str] = []
    real = client.get_children

    def get_children(path: str, *args: Any, **kwargs: Any) -> Any:
        children = real(path, *args, **kwargs)
        if path == zk_paths.BROKER_IDS and not ran and when():
            ran.append(path)
            arrive()
        return children

    client.get_children = get_children
    return ran


def _state(admin: ZkAdmin) -> PartitionState | None:
    found = admin.get_partition_state(TOPIC, 0)
    return found[0] if found is not None else None


def _run(zk_connect: str, before_start: list[int], registered_later: list[int]) -> None:
    """Brokers ``before_start`` registered, the controller (broker 1) started; then
    brokers ``registered_later`` register, and the controller's first read of
    ``/brokers/ids`` after that (``late_arrival_after_read``) is followed by broker 2's
    registration and the topic's creation. Asserts broker 2 leads the topic."""
    controller_client = zookeeper_client(zk_connect)
    others = {broker: zookeeper_client(zk_connect) for broker in (2, 3)}
    admin = ZkAdmin(controller_client)
    observer = ZkAdmin(others[3])
    controller = None
    armed = not registered_later

    def arrive() -> None:
        register_broker_znode(ZkAdmin(others[2]), 2)
        observer.create_topic(TOPIC, {0: [2, 1, 3]}, {})

    try:
        admin.ensure_paths()
        for broker in before_start:
            register_broker_znode(ZkAdmin(others[broker]) if broker != 1 else admin, broker)
        ran = late_arrival_after_read(
            controller_client,
            arrive,
            when=lambda: armed and admin.get_controller() is not None,
        )
        controller = Controller(controller_client, 1)
        controller.start()
        # Its start-up done (its watches set), not only won: ``active`` comes first.
        assert wait_for(lambda: controller._started_epoch is not None, 30), "no controller"
        if registered_later:
            armed = True
            for broker in registered_later:
                register_broker_znode(ZkAdmin(others[broker]), broker)
        assert wait_for(lambda: ran, 30), "the late arrival never happened"
        assert wait_for(lambda: _state(observer) is not None, 30), "the topic was never led"
        # Settled: broker 2 leads, as the first replica registered when the topic came.
        assert wait_for(lambda: (s := _state(observer)) is not None and s.leader == 2, 10), _state(
            observer
        )
        assert _state(observer).leader_epoch == 0, _state(observer)
    finally:
        if controller is not None:
            controller.stop()
        for client in [controller_client, *others.values()]:
            client.stop()
            client.close()


def test_a_topic_created_during_the_controllers_start_up_counts_brokers_registered_before_it(
    zk_connect,
) -> None:
    """The controller's start-up reads ``/brokers/ids`` (only broker 1 then); broker 2
    registers and the topic is created before the start-up lists the topics."""
    _run(zk_connect, before_start=[1], registered_later=[])


def test_a_topic_created_while_a_broker_change_waits_counts_brokers_registered_before_it(
    zk_connect,
) -> None:
    """Broker 3 registers; the controller's watch reads ``/brokers/ids`` (1 and 3); broker
    2 registers and the topic is created before the controller handles that change."""
    _run(zk_connect, before_start=[1], registered_later=[3])
