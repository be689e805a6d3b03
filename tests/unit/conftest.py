"""Fixtures shared by unit tests of different layers."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from gregor_broker.log import log_manager


@pytest.fixture
def slow_file_system(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """The log manager's threads wait for the gate before making a partition's files (a
    busy disk), which they then make for real."""
    gate = threading.Event()
    real = log_manager.prepare_first_segment

    def held(directory: Path) -> int | None:
        assert gate.wait(30)
        return real(directory)

    monkeypatch.setattr(log_manager, "prepare_first_segment", held)
    yield gate
    gate.set()
