"""The poll(2)-based select behind the broker's kazoo handler keeps select's contract."""

from __future__ import annotations

import socket
import time

import pytest

from gregor_broker.cluster.zk_handler import poll_select


def test_poll_select_reports_readable_writable_and_closed_peers() -> None:
    a, b = socket.socketpair()
    try:
        assert poll_select([a], [], [], 0) == ([], [], [])
        assert poll_select([a], [a], [], 0) == ([], [a], [])
        b.send(b"x")
        assert poll_select([a], [], [], 5) == ([a], [], [])
        assert poll_select([a.fileno()], [], [], 5) == ([a.fileno()], [], [])
        b.close()
        a.recv(1)
        # A closed peer is readable (the next read returns b"" and kazoo reconnects).
        assert poll_select([a], [], [], 5)[0] == [a]
    finally:
        a.close()
        b.close()


def test_poll_select_waits_for_its_timeout() -> None:
    a, b = socket.socketpair()
    try:
        started = time.monotonic()
        assert poll_select([a], [], [], 0.2) == ([], [], [])
        assert time.monotonic() - started >= 0.19
        with pytest.raises(ValueError):
            poll_select([a], [], [], -1)
    finally:
        a.close()
        b.close()
