"""Shared fixtures: a real ZooKeeper (Debian's package) for the whole test session.

Each test that needs isolation gets its own chroot under it (``zk_connect``), the
same way Kafka clusters share an ensemble with ``zookeeper.connect=host:port/chroot``.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from gregor_broker.devtools.zookeeper_server import ZooKeeperServer


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked ``long`` (acceptance runs of minutes) run only with
    ``GREGOR_LONG_TESTS=1`` (``make test-long``); ``make test`` runs a short variant of
    each."""
    if os.environ.get("GREGOR_LONG_TESTS"):
        return
    skip = pytest.mark.skip(reason="long run: GREGOR_LONG_TESTS=1 (make test-long)")
    for item in items:
        if item.get_closest_marker("long") is not None:
            item.add_marker(skip)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    """A failed test's report carries the tail of each broker's log it started."""
    report = yield
    if report.failed and call.when in ("setup", "call"):
        section = broker_logs_section(item)
        if section is not None:
            report.sections.append(("broker logs", section))
    return report


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def zk_connect(zookeeper: ZooKeeperServer) -> str:
    """A ``zookeeper.connect`` string with a fresh chroot, unique to the test."""
    return f"{zookeeper.connect_string}/gregor-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path


from .cluster_fixtures import *  # noqa: E402, F403
from .cluster_fixtures import broker_logs_section  # noqa: E402
from .kube.fixtures import *  # noqa: E402, F403
