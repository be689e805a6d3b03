"""A broker that restarts before the controller notices is handled as failed, then back.

A broker killed with SIGKILL keeps its ``/brokers/ids/<id>`` until ZooKeeper expires its
session; restarted meanwhile, it registers again the moment that happens. The controller's
children watch then re-reads ``/brokers/ids`` and, when the new registration is already
there, sees the same ids as before: the restart was invisible, so the restarted process
(which lost its in-memory replication state) kept leadership and ISR membership at the same
leader epoch. Kafka's controller compares each broker's epoch (its registration's czxid)
and handles a changed one as a failure then a startup (``bouncedBrokerIds``): leaders
elsewhere, a new leader epoch, the restarted broker rejoining as a follower.

The race is made certain: the controller is frozen (SIGSTOP, well within its own session
timeout) from the kill until the new registration exists, so the watch event it then
handles already lists the restarted broker.
"""

from __future__ import annotations

from gregor_broker.cluster import zk_paths
from gregor_broker.cluster.admin import ZkAdmin
from gregor_broker.devtools.local_cluster import zookeeper_client

from .broker_helpers import controller_id, registered_again, wait_for

SHORT_SESSION_MS = 2000  # the restarted broker's: its old session expires quickly
LONG_SESSION_MS = 20000  # the others': the frozen controller keeps its session


def test_a_restart_within_the_session_timeout_moves_leadership_and_bumps_the_epoch(
    broker_factory, zk_connect
):
    controller = broker_factory(**{"zookeeper.session.timeout.ms": str(LONG_SESSION_MS)})
    observer = zookeeper_client(zk_connect)
    admin = ZkAdmin(observer)
    try:
        assert wait_for(lambda: controller_id(observer) == 1, 30)
        bounced = broker_factory(**{"zookeeper.session.timeout.ms": str(SHORT_SESSION_MS)})
        broker_factory(**{"zookeeper.session.timeout.ms": str(LONG_SESSION_MS)})
        # Broker 2 is the preferred (first) replica, hence the leader, of every partition.
        admin.create_topic("bounce", {p: [2, 1, 3] for p in range(3)}, {})

        def states():
            found = {p: admin.get_partition_state("bounce", p) for p in range(3)}
            return {p: s[0] for p, s in found.items() if s is not None}

        assert wait_for(
            lambda: (
                len(states()) == 3
                and all(s.leader == 2 and set(s.isr) == {1, 2, 3} for s in states().values())
            ),
            60,
        ), states()
        before = states()
        path = zk_paths.broker_path(2)
        old_czxid = observer.exists(path).czxid

        bounced.kill()
        controller.pause()
        try:
            bounced.start()
            assert registered_again(observer, 2, old_czxid), "broker 2 did not register again"
        finally:
            controller.resume()

        # The controller handles the restart as a failure then a startup: every partition
        # broker 2 led gets a new leader epoch (and, while broker 2 is out of the ISR,
        # another leader).
        assert wait_for(
            lambda: all(states()[p].leader_epoch > before[p].leader_epoch for p in range(3)),
            30,
        ), (before, states())
        # And the restarted broker catches up and rejoins every ISR.
        assert wait_for(lambda: all(2 in s.isr for s in states().values()), 60), states()
        assert controller_id(observer) == 1, "the frozen controller must have kept its session"
    finally:
        controller.resume()
        observer.stop()
        observer.close()
