"""A controller election whose start-up meets a ZooKeeper connection loss still ends
with a working controller.

Found by the chaos campaign (seed 22): broker 3 won ``/controller`` (epoch 150), lost
the connection on its next read (the registered brokers), and retried the election
once reconnected; the retry found ``/controller`` taken (by itself) and stopped there.
No watches, no elections: every partition stayed without a leader for minutes with all
three brokers registered, until the campaign gave up. Kafka's controller treats a
``/controller`` its own session holds as its win (``checkControllerAndEpoch``); ours
now does too, and finishes the start-up it had begun.

Real ZooKeeper and the real controller; the connection loss is ZooKeeper's client's
(kazoo) answer to the controller's first read of ``/brokers/ids`` after it won.
"""

from __future__ import annotations

from gregor_broker.cluster import zk_paths
from gregor_broker.cluster.admin import ZkAdmin
from gregor_broker.cluster.controller import Controller
from gregor_broker.devtools.local_cluster import zookeeper_client

from .broker_helpers import lose_connection_once, register_broker_znode, wait_for

TOPIC = "orphan"


def test_a_connection_loss_right_after_winning_the_election_is_not_a_lost_election(
    zk_connect,
) -> None:
    controller_client = zookeeper_client(zk_connect)
    other_client = zookeeper_client(zk_connect)
    observer = ZkAdmin(other_client)
    controller = None
    try:
        admin = ZkAdmin(controller_client)
        admin.ensure_paths()
        register_broker_znode(admin, 1)
        register_broker_znode(observer, 2)
        admin.create_topic(TOPIC, {0: [1, 2], 1: [2, 1]}, {})
        # The controller's first read once it holds /controller: the broker list.
        lost = lose_connection_once(
            controller_client,
            "get_children",
            zk_paths.BROKER_IDS,
            when=lambda: admin.get_controller() is not None,
        )
        controller = Controller(controller_client, 1)
        controller.start()

        def led() -> bool:
            states = [observer.get_partition_state(TOPIC, p) for p in (0, 1)]
            return all(found is not None and found[0].leader > 0 for found in states)

        assert wait_for(led, 30), "no leader elected: the controller never finished starting"
        assert lost, "the connection loss was never injected"
        assert controller.active and controller.epoch == observer.get_controller_epoch()[0]
        assert observer.get_controller().broker_id == 1
    finally:
        if controller is not None:
            controller.stop()
        for client in [controller_client, other_client]:
            client.stop()
            client.close()
