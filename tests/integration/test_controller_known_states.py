"""The controller decides a failover from states it already knows, never wrongly.

A failover of thousands of partitions decides from the broker's metadata cache instead
of reading every state znode, and writes in ZooKeeper transactions. The cache can lag
(its watches deliver thousands of changes): a partition whose ISR shrank behind the
controller's back must not be given to the replica that left the ISR. Every write is
conditional on the version the decision saw, so the stale decision is refused and the
partition is decided again from ZooKeeper.

Real ZooKeeper and the real controller; the known states come from a snapshot taken
before the ISR change (a metadata cache that has not seen it yet).
"""

from __future__ import annotations

from gregor_broker.cluster.admin import ZkAdmin
from gregor_broker.cluster.controller import STATE_WRITE_BATCH, Controller
from gregor_broker.cluster.models import PartitionState
from gregor_broker.devtools.local_cluster import zookeeper_client

from .broker_helpers import register_broker_znode, wait_for

TOPIC = "known"
# More than two transactions' worth, so that the stale partition's batch is one of several.
PARTITIONS = STATE_WRITE_BATCH * 2 + 50
STALE = 7  # replicas (2, 1, 3): broker 2 leads it


def _states(admin: ZkAdmin, partitions: list[int]) -> dict[int, tuple[PartitionState, int]]:
    read = admin.get_partition_states(TOPIC, partitions, 30)
    return {index: state for index, state in read.items() if state is not None}


def test_a_stale_known_state_never_elects_a_replica_out_of_the_isr(zk_connect) -> None:
    controller_client = zookeeper_client(zk_connect)
    broker2 = zookeeper_client(zk_connect)
    broker3 = zookeeper_client(zk_connect)
    admin = ZkAdmin(controller_client)
    controller = None
    try:
        admin.ensure_paths()
        register_broker_znode(admin, 1)
        register_broker_znode(ZkAdmin(broker2), 2)
        register_broker_znode(ZkAdmin(broker3), 3)
        assignment = {p: [1, 2, 3] for p in range(PARTITIONS)}
        assignment[STALE] = [2, 1, 3]
        admin.create_topic(TOPIC, assignment, {})
        topic_id = admin.get_topic(TOPIC).topic_id
        snapshot: dict[int, tuple[PartitionState, int]] = {}

        def known(topic: str, known_topic_id: str | None, index: int):
            if topic != TOPIC or known_topic_id != topic_id:
                return None
            return snapshot.get(index)

        controller = Controller(controller_client, 1, known_partition_state=known)
        controller.start()

        def all_led() -> bool:
            states = _states(admin, list(range(PARTITIONS)))
            return len(states) == PARTITIONS and all(s[0].leader > 0 for s in states.values())

        assert wait_for(all_led, 60)
        # The cache's view: every state as first written.
        snapshot.update(_states(admin, list(range(PARTITIONS))))
        state, version = snapshot[STALE]
        assert state.leader == 2 and set(state.isr) == {1, 2, 3}
        # Behind the controller's back (the leader's own ISR shrink): broker 1 fell out.
        admin.set_partition_state(
            TOPIC,
            STALE,
            PartitionState(state.controller_epoch, 2, state.leader_epoch, (2, 3)),
            version,
        )

        broker2.stop()  # broker 2 dies: its registration goes with its session
        broker2.close()

        def settled() -> bool:
            states = _states(admin, list(range(PARTITIONS)))
            return len(states) == PARTITIONS and all(
                2 not in s.isr and s.leader in (1, 3) for s, _ in states.values()
            )

        assert wait_for(settled, 60)
        final, _ = admin.get_partition_state(TOPIC, STALE)
        # From the real state only broker 3 is in sync: broker 1 must not lead.
        assert final.leader == 3
        assert final.isr == (3,)
        others = _states(admin, [p for p in range(PARTITIONS) if p != STALE])
        assert all(s.leader == 1 and s.isr == (1, 3) for s, _ in others.values())
    finally:
        if controller is not None:
            controller.stop()
        for client in (controller_client, broker2, broker3):
            client.stop()
            client.close()
