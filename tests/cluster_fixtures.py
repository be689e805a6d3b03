"""Fixtures that run real Gregor broker processes (imported by ``tests/conftest.py``).

- ``broker_factory``: start brokers on demand, each a ``BrokerProcess`` with its own free
  port and log dir, all in the test's ZooKeeper chroot (``zk_connect``), so brokers started
  by one factory form one cluster. Stopped (SIGTERM, then SIGKILL) after the test.
- ``broker``: one broker with default settings.
- ``cluster_factory`` / ``cluster``: a ``LocalCluster`` of N brokers (3, racks a, b, c for
  ``cluster``) on the test's chroot.

Brokers are forked from one pre-imported zygote per pytest worker (``broker_launcher``,
``gregor_broker.devtools.launcher``): a broker start costs a fork, not the 1-2 s of CPU of
the broker's imports (10-20 s of wall time with 4 workers on 2 cores), and each broker is
still its own process (own pid and session; kill -9 is a real crash). Brokers with a
``command_prefix`` (network namespaces, small disks) are spawned as before, and
``GREGOR_TEST_SPAWN_BROKERS=1`` spawns every broker (to compare, or to rule the zygote
out).

Safe under pytest-xdist: ports come from the kernel, directories from ``tmp_path_factory``
(per worker), chroots from ``zk_connect`` (per test). A broker that does not start fails
the test with the tail of its log; a test that fails shows the tail of the log of every
broker these fixtures started for it (``pytest_runtest_makereport`` in ``conftest.py``):
a failure in CI, where the files are gone, can then be read.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator

import pytest

from gregor_broker.devtools.launcher import BrokerLauncher
from gregor_broker.devtools.local_cluster import BrokerProcess, LocalCluster, log_tail

from .integration.broker_helpers import every_broker_knows_the_others

REGISTRATION_TIMEOUT = 90.0  # a broker starts in seconds; CI runs 4 workers on 2 cores

__all__ = [
    "broker",
    "broker_factory",
    "broker_launcher",
    "cluster",
    "cluster_factory",
]

# The brokers a test started through these fixtures, for its failure report.
STARTED_BROKERS = pytest.StashKey[list[BrokerProcess]]()
FAILURE_LOG_LINES = 80


def _remember(request: pytest.FixtureRequest, *brokers: BrokerProcess) -> None:
    request.node.stash.setdefault(STARTED_BROKERS, []).extend(brokers)


def broker_logs_section(item: pytest.Item) -> str | None:
    """The last lines of each broker's log the test started, or None if it started none."""
    brokers = item.stash.get(STARTED_BROKERS, [])
    if not brokers:
        return None
    return "\n".join(
        f"--- broker {b.broker_id}: {b.log_path} (last {FAILURE_LOG_LINES} lines)\n"
        + log_tail(b.log_path, FAILURE_LOG_LINES)
        for b in brokers
    )


@pytest.fixture(scope="session")
def broker_launcher() -> Iterator[BrokerLauncher | None]:
    """The worker's broker zygote (None with ``GREGOR_TEST_SPAWN_BROKERS=1``): pass it as
    ``BrokerProcess(launcher=...)`` or ``LocalCluster(launcher=...)``."""
    if os.environ.get("GREGOR_TEST_SPAWN_BROKERS") == "1":
        yield None
        return
    launcher = BrokerLauncher()
    try:
        yield launcher
    finally:
        launcher.close()


@pytest.fixture
def broker_factory(
    request: pytest.FixtureRequest,
    zk_connect: str,
    tmp_path_factory: pytest.TempPathFactory,
    broker_launcher: BrokerLauncher | None,
) -> Iterator[Callable[..., BrokerProcess]]:
    """``broker_factory(broker_id=None, *, rack=None, port=0, wait=True, command_prefix=(),
    **properties)``.

    Starts a broker and, with ``wait``, returns once it is registered in ZooKeeper. Broker
    ids count up from 1 when not given. Properties use Kafka's names, so pass them as
    ``broker_factory(**{"auto.create.topics.enable": "false"})``.
    """
    started: list[BrokerProcess] = []
    next_id = 1

    def start(
        broker_id: int | None = None,
        *,
        rack: str | None = None,
        port: int = 0,
        wait: bool = True,
        timeout: float = REGISTRATION_TIMEOUT,
        command_prefix: tuple[str, ...] = (),
        **properties: str,
    ) -> BrokerProcess:
        nonlocal next_id
        if broker_id is None:
            broker_id = next_id
        next_id = max(next_id, broker_id + 1)
        broker = BrokerProcess(
            broker_id=broker_id,
            directory=tmp_path_factory.mktemp(f"broker-{broker_id}-"),
            zookeeper_connect=zk_connect,
            port=port,
            rack=rack,
            properties={key: str(value) for key, value in properties.items()},
            command_prefix=command_prefix,
            # The zygote runs outside any command prefix (namespace, prlimit): spawn those.
            launcher=None if command_prefix else broker_launcher,
        )
        started.append(broker)
        _remember(request, broker)
        broker.start()
        if wait:
            broker.wait_registered(timeout)
        return broker

    yield start
    for broker in started:
        # SIGTERM all first, so that brokers shut down in parallel (SIGCONT: paused ones).
        broker.signal(signal.SIGCONT)
        broker.signal(signal.SIGTERM)
    for broker in started:
        broker.stop()


@pytest.fixture
def broker(broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    """One real broker (id 1) on a free port, registered in the test's chroot."""
    return broker_factory()


@pytest.fixture
def cluster_factory(
    request: pytest.FixtureRequest,
    zk_connect: str,
    tmp_path_factory: pytest.TempPathFactory,
    broker_launcher: BrokerLauncher | None,
) -> Iterator[Callable[..., LocalCluster]]:
    """``cluster_factory(brokers=3, racks="a,b,c", **properties)``: a started LocalCluster
    (ids 1..N, free ports) on the test's chroot; stopped after the test."""
    clusters: list[LocalCluster] = []

    def start(
        brokers: int = 3,
        racks: str | None = "a,b,c",
        timeout: float = 120.0,
        **properties: str,
    ) -> LocalCluster:
        local_cluster = LocalCluster(
            tmp_path_factory.mktemp("cluster-"),
            brokers,
            racks=racks,
            zookeeper_connect=zk_connect,
            properties={key: str(value) for key, value in properties.items()},
            launcher=broker_launcher,
        )
        clusters.append(local_cluster)
        _remember(request, *local_cluster.brokers)
        local_cluster.start(timeout)
        if not any(key.startswith("listener") for key in properties):
            # Registered in ZooKeeper is not yet known to each other: a broker learns of
            # the others through its watch a moment later, and a test naming them in an
            # assignment before that was refused (CI simulations, under load).
            assert every_broker_knows_the_others(local_cluster.brokers), "brokers unknown"
        return local_cluster

    yield start
    for local_cluster in clusters:
        local_cluster.stop()


@pytest.fixture
def cluster(cluster_factory: Callable[..., LocalCluster]) -> LocalCluster:
    """Three brokers (ids 1, 2, 3 on racks a, b, c) sharing the test's chroot."""
    return cluster_factory()
