"""A new controller that resumes a reassignment in flight bumps the leader epoch.

Kafka's new controller runs onPartitionReassignment for every reassignment it finds in
flight at failover, and its phase A bumps the leader epoch. Ours only bumped it when a
reassignment started: a controller that died between writing the new replica set and
bumping the epoch left the move unfenced, and a resumed move never fenced the fetches
made under the old controller (issue 9).

Real ZooKeeper and two real controllers; the brokers are registrations only, so the
added replica never catches up and the move stays in flight across the failover.
"""

from __future__ import annotations

from gregor_broker.cluster.admin import ZkAdmin
from gregor_broker.cluster.controller import Controller
from gregor_broker.devtools.local_cluster import zookeeper_client

from .broker_helpers import register_broker_znode, wait_for

TOPIC = "resumed"
TARGET = (1, 3)


def test_a_resumed_reassignment_is_fenced_by_a_new_leader_epoch(zk_connect) -> None:
    clients = [zookeeper_client(zk_connect) for _ in range(4)]
    broker1, broker2, broker3, observing = clients
    observer = ZkAdmin(observing)
    first = second = None
    try:
        observer.ensure_paths()
        register_broker_znode(ZkAdmin(broker1), 1)
        register_broker_znode(ZkAdmin(broker2), 2)
        register_broker_znode(ZkAdmin(broker3), 3)
        observer.create_topic(TOPIC, {0: [1, 2]}, {})
        first = Controller(broker1, 1)
        first.start()
        assert wait_for(lambda: first.active, 60)

        def led() -> bool:
            found = observer.get_partition_state(TOPIC, 0)
            return found is not None and found[0].leader == 1

        assert wait_for(led, 60)
        observer.merge_reassignment({(TOPIC, 0): TARGET})

        def in_flight() -> bool:
            assignment = observer.get_topic(TOPIC)
            return tuple(assignment.adding_replicas.get(0, ())) == (3,)

        assert wait_for(in_flight, 30), "the reassignment never started"
        started = observer.get_partition_state(TOPIC, 0)[0]
        assert started.leader == 1 and 3 not in started.isr

        # Failover: the first controller resigns, broker 2's takes over and resumes.
        second = Controller(broker2, 2)
        second.start()
        first.stop()
        assert wait_for(lambda: second.active, 60), "broker 2 never became the controller"
        assert wait_for(lambda: (TOPIC, 0) in second.reassignments, 30)

        def fenced() -> bool:
            return observer.get_partition_state(TOPIC, 0)[0].leader_epoch > started.leader_epoch

        assert wait_for(fenced, 30), "the resumed reassignment kept the old leader epoch"
        resumed = observer.get_partition_state(TOPIC, 0)[0]
        assert resumed.leader == 1
        assert resumed.controller_epoch == second.epoch
        # Fenced once, not on every tick while the move waits for broker 3.
        assert not wait_for(
            lambda: observer.get_partition_state(TOPIC, 0)[0].leader_epoch > resumed.leader_epoch,
            3,
        )
        assert tuple(observer.get_topic(TOPIC).adding_replicas.get(0, ())) == (3,)
    finally:
        for controller in (second, first):
            if controller is not None:
                controller.stop()
        for client in clients:
            client.stop()
            client.close()
