"""ZooKeeper sessions of the operator: one ``ZkAdmin`` per connect string, reused.

Every read and write goes through ``gregor_broker.cluster.admin.ZkAdmin``; this module only
opens, caches and drops sessions, and turns "ZooKeeper is not there" into one exception
(``ZooKeeperUnavailable``) handlers can retry on. Calls are blocking: kopf runs the sync
handlers that use them in its thread pool.
"""

from __future__ import annotations

import threading

from kazoo.client import KazooState
from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError

from gregor_broker.cluster.admin import ZkAdmin
from gregor_broker.devtools.local_cluster import zookeeper_client


class ZooKeeperUnavailable(Exception):
    """The cluster's ZooKeeper cannot be reached (now); the step is retried."""


# Exceptions that mean "the session or the server is gone", not "the request was wrong".
CONNECTION_ERRORS = (KazooException, KazooTimeoutError, TimeoutError, OSError)


class Sessions:
    def __init__(self, timeout: float = 5.0) -> None:
        self.timeout = timeout
        self._lock = threading.Lock()
        self._admins: dict[str, ZkAdmin] = {}

    def admin(self, connect: str) -> ZkAdmin:
        """A connected ``ZkAdmin`` for ``connect``; raises ZooKeeperUnavailable."""
        with self._lock:
            admin = self._admins.get(connect)
            if admin is not None and admin.client.state == KazooState.CONNECTED:
                return admin
            if admin is not None:
                self._close(admin)
                del self._admins[connect]
            try:
                client = zookeeper_client(connect, timeout=self.timeout)
            except CONNECTION_ERRORS as error:
                raise ZooKeeperUnavailable(
                    f"ZooKeeper {connect} is unreachable ({type(error).__name__}: {error})"
                ) from error
            admin = ZkAdmin(client)
            self._admins[connect] = admin
            return admin

    def drop(self, connect: str) -> None:
        with self._lock:
            admin = self._admins.pop(connect, None)
        if admin is not None:
            self._close(admin)

    def close(self) -> None:
        with self._lock:
            admins, self._admins = list(self._admins.values()), {}
        for admin in admins:
            self._close(admin)

    @staticmethod
    def _close(admin: ZkAdmin) -> None:
        try:
            admin.client.stop()
            admin.client.close()
        except Exception:  # a dead session cannot be closed cleanly; it is gone anyway
            pass
