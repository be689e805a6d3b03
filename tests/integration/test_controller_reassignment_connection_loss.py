"""A reassignment whose completion meets a ZooKeeper connection loss still leaves
``/admin/reassign_partitions``.

The controller completed the move (topic znode rewritten, "complete" logged), forgot it,
then lost the connection while removing the partition from the request node: nothing
retried, and the request stayed listed (so ``kafka-reassign-partitions --verify`` and the
chaos campaign saw the move in progress) until some unrelated event, 20 s and more under
ZooKeeper faults. Kafka's controller client waits for the connection to come back. Now
the move is forgotten only after its request is removed; a failure is retried on the
next tick.

Real ZooKeeper and the real controller; the connection loss is ZooKeeper's client's
(kazoo) answer to the first read of the request node after the move completed.
"""

from __future__ import annotations

from gregor_broker.cluster import zk_paths
from gregor_broker.cluster.admin import ZkAdmin
from gregor_broker.cluster.controller import Controller
from gregor_broker.devtools.local_cluster import zookeeper_client

from .broker_helpers import lose_connection_once, register_broker_znode, wait_for

TOPIC = "moving"
TARGET = (1, 2)


def test_a_connection_loss_while_forgetting_a_completed_move_is_retried(zk_connect) -> None:
    controller_client = zookeeper_client(zk_connect)
    clients = [zookeeper_client(zk_connect) for _ in range(3)]
    observer = ZkAdmin(clients[2])
    controller = None
    try:
        admin = ZkAdmin(controller_client)
        admin.ensure_paths()
        register_broker_znode(admin, 1)
        register_broker_znode(ZkAdmin(clients[0]), 2)
        register_broker_znode(ZkAdmin(clients[1]), 3)
        admin.create_topic(TOPIC, {0: [1, 2, 3]}, {})
        # The first read of the request node once the topic znode shows the target: the
        # controller removing the completed move from it.
        lost = lose_connection_once(
            controller_client,
            "get",
            zk_paths.ADMIN_REASSIGN_PARTITIONS,
            when=lambda: tuple(observer.get_topic(TOPIC).partitions[0]) == TARGET,
        )
        controller = Controller(controller_client, 1)
        controller.start()

        def led() -> bool:
            found = observer.get_partition_state(TOPIC, 0)
            return found is not None and found[0].leader > 0

        assert wait_for(led, 60)
        observer.merge_reassignment({(TOPIC, 0): TARGET})

        def done() -> bool:
            pending = observer.get_reassignment()
            return pending is None or (TOPIC, 0) not in pending.partitions

        assert wait_for(done, 30), "the completed move is still requested"
        assert lost, "the connection loss was never injected"
        assert tuple(observer.get_topic(TOPIC).partitions[0]) == TARGET
    finally:
        if controller is not None:
            controller.stop()
        for client in [controller_client, *clients]:
            client.stop()
            client.close()
