"""kazoo's threading handler with a cheaper ``select``.

kazoo's connection thread calls ``handler.select`` before every read and write of the
ZooKeeper socket, and its stock implementation builds a new epoll selector each time
(epoll_create, epoll_ctl per descriptor, epoll_wait, close). Creating 6,000 partitions
(every broker watches every partition's state znode: tens of thousands of ZooKeeper
requests) spent about 60 % of that thread's time there, a thread competing with the
event loop for the interpreter and two cores (profile of issue 9's scale bench). One
``poll(2)`` does the same work in one system call and, unlike ``select(2)``, takes
descriptors above 1023 (a broker holds thousands of files open).
"""

from __future__ import annotations

import math
import select
from typing import Any

from kazoo.handlers.threading import SequentialThreadingHandler

_READ = select.POLLIN | select.POLLPRI
_WRITE = select.POLLOUT
# As Python's PollSelector does, a hung-up or failed descriptor is ready for both: the
# following read or write raises, and kazoo handles that as a lost connection.
_FAILED = select.POLLERR | select.POLLHUP | select.POLLNVAL


def _fd(fileobj: Any) -> int:
    return fileobj if isinstance(fileobj, int) else fileobj.fileno()


def poll_select(
    rlist: list[Any], wlist: list[Any], xlist: list[Any], timeout: float | None = None
) -> tuple[list[Any], list[Any], list[Any]]:
    """``select.select``'s contract (the ready objects of ``rlist`` and ``wlist``;
    ``timeout`` in seconds, None to wait for good) with one ``poll(2)``."""
    if timeout is not None and timeout < 0:
        raise ValueError("timeout must be non-negative")
    masks: dict[int, int] = {}
    for fileobj in rlist:
        fd = _fd(fileobj)
        masks[fd] = masks.get(fd, 0) | _READ
    for fileobj in wlist:
        fd = _fd(fileobj)
        masks[fd] = masks.get(fd, 0) | _WRITE
    poller = select.poll()
    for fd, mask in masks.items():
        poller.register(fd, mask)
    ready = dict(poller.poll(None if timeout is None else math.ceil(timeout * 1000)))
    readable = [f for f in rlist if ready.get(_fd(f), 0) & (_READ | _FAILED)]
    writable = [f for f in wlist if ready.get(_fd(f), 0) & (_WRITE | _FAILED)]
    return readable, writable, []


class PollingHandler(SequentialThreadingHandler):
    """``SequentialThreadingHandler`` whose ``select`` is ``poll_select``."""

    def select(self, *args: Any, **kwargs: Any) -> Any:
        return poll_select(*args, **kwargs)
