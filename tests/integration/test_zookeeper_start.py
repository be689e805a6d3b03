"""A broker's ZooKeeper client survives a connection lost right after connecting.

With a chroot in ``zookeeper.connect`` kazoo's ``start`` reads the chroot once connected;
a connection lost in that moment raised ConnectionLoss out of ``start`` and the broker
exited with status 1 (CI: a Spark test's broker, ZooKeeper on a machine at load 55),
although the client reconnects by itself and every later start-up step retries its
requests. The loss here is kazoo's own exception, raised once from that read; ZooKeeper
and the client are real.
"""

from __future__ import annotations

from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionLoss

from gregor_broker.server.broker import _start_zookeeper


class LosesTheFirstRead(KazooClient):
    """A kazoo client whose first ``exists`` meets a lost connection."""

    lost = False

    def exists(self, path: str, watch: Any = None) -> Any:
        if not self.lost:
            self.lost = True
            raise ConnectionLoss()
        return super().exists(path, watch)


def test_a_connection_lost_as_the_chroot_is_read_does_not_fail_the_start(zk_connect) -> None:
    root, _, chroot = zk_connect.partition("/")
    setup = KazooClient(hosts=root)
    setup.start(30)
    setup.ensure_path(f"/{chroot}")
    setup.stop()
    setup.close()

    client = LosesTheFirstRead(hosts=zk_connect)
    try:
        _start_zookeeper(client, 30)
        assert client.lost, "start read the chroot"
        assert client.connected
        client.retry(client.ensure_path, "/brokers")
        assert client.exists("/brokers") is not None
    finally:
        client.stop()
        client.close()
