"""After a ZooKeeper session loss a broker registers again, however long that takes.

Issue 9, A2: ``_register_again`` tried once; when that try failed (ZooKeeper dropped the
connection, or the old node was still there) the broker stayed out of ``/brokers/ids``
for good, kept serving, and could even be controller while unregistered. Kafka registers
again after every session expiry and only then stands for controller election.

The failed first try is made real: while the broker is frozen past its session timeout,
another ZooKeeper session takes its ephemeral ``/brokers/ids/<id>``; the broker wakes, finds
the node held by someone else, and must keep trying until that session goes away. While
its own registration is missing it must never be the controller.
"""

from __future__ import annotations

import signal
import time

from gregor_broker.cluster import zk_paths
from gregor_broker.devtools.local_cluster import zookeeper_client

from .broker_helpers import controller_id, wait_for

SESSION_TIMEOUT_MS = 2000


def test_a_broker_registers_again_once_a_squatting_session_is_gone(broker_factory, zk_connect):
    broker = broker_factory(**{"zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS)})
    path = zk_paths.broker_path(1)
    observer = zookeeper_client(zk_connect)
    squatter = zookeeper_client(zk_connect, timeout=SESSION_TIMEOUT_MS / 1000)
    try:
        assert wait_for(lambda: controller_id(observer) == 1, 30)
        registration, _ = observer.get(path)
        broker.signal(signal.SIGSTOP)
        try:
            # The frozen broker's session expires: its ephemeral nodes go.
            assert wait_for(lambda: observer.exists(path) is None, 30)
            squatter.create(path, registration, ephemeral=True)
        finally:
            broker.signal(signal.SIGCONT)
        squatter_session = squatter.client_id[0]

        # The broker's first tries fail (the node is someone else's). It must not act as
        # controller meanwhile: its registration is missing.
        deadline = time.monotonic() + 3 * SESSION_TIMEOUT_MS / 1000 + 2
        while time.monotonic() < deadline:
            assert controller_id(observer) != 1, "controller while its registration is missing"
            time.sleep(0.1)
        assert observer.exists(path).ephemeralOwner == squatter_session

        squatter.stop()  # the other session goes: the broker's next try must succeed
        squatter.close()

        def registered_by_the_broker() -> bool:
            stat = observer.exists(path)
            return stat is not None and stat.ephemeralOwner != squatter_session

        assert wait_for(registered_by_the_broker, 30), "the broker never registered again"
        assert wait_for(lambda: controller_id(observer) == 1, 30)
        assert broker.is_running()
    finally:
        squatter.stop()
        squatter.close()
        observer.stop()
        observer.close()
