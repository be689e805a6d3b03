"""Setting many ZooKeeper data watches at once.

kazoo's ``DataWatch`` reads its node synchronously when it is created, so creating one
per partition in a loop costs one ZooKeeper round trip per partition, one after the
other: with 10,000 partitions, more than a minute before a broker (or the controller)
knew them all. ``start_data_watches`` creates them from a small pool of threads, so
their first reads are in flight together. The watches themselves are kazoo's, with
its reconnection and session handling.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kazoo.client import KazooClient
from kazoo.recipe.watchers import DataWatch

# Reads in flight together; ZooKeeper answers a session's requests in order anyway.
_PARALLEL = 16
# Two pools: a topic watch's callback starts its partitions' watches and waits for them,
# which must not wait on the pool it runs in.
_outer_pool = ThreadPoolExecutor(_PARALLEL, thread_name_prefix="zk-watch")
_inner_pool = ThreadPoolExecutor(_PARALLEL, thread_name_prefix="zk-watch-inner")

DataCallback = Callable[[bytes | None, Any], bool | None]


def start_data_watches(
    client: KazooClient, watches: Sequence[tuple[str, DataCallback]], *, inner: bool = False
) -> None:
    """``DataWatch(client, path, callback)`` for every (path, callback); returns once each
    has made its first call. Callbacks run on several threads (as kazoo's own do on its
    callback thread), so they must be thread-safe. ``inner``: for watches whose
    callbacks never start watches themselves (partition states)."""
    if len(watches) <= 1:
        for path, callback in watches:
            DataWatch(client, path, callback)
        return
    pool = _inner_pool if inner else _outer_pool
    futures = [pool.submit(DataWatch, client, path, callback) for path, callback in watches]
    for future in futures:
        future.result()
