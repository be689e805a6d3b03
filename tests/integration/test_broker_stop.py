"""A broker's stop completes whatever its peers do (Kafka: shutdown finishes even when
the other brokers are gone or hung).

Found with two brokers in one process (``test_layered_paths``): stopping the leader
first made the other broker leader, then the stopping one followed it, and its replica
fetcher, reconnecting, lost the cancellation ``Broker.stop`` sent it (Python 3.11's
``asyncio.wait_for`` in ``BrokerClient.connect``): that stop never returned.
"""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

from gregor_broker.cluster.admin import ZkAdmin
from gregor_broker.devtools.local_cluster import zookeeper_client
from gregor_broker.server.broker import Broker

from .broker_helpers import produce_values, wait_for
from .in_process_brokers import start_broker

# A stop takes well under a second here; the bound only turns a hang into a failure.
STOP_BOUND_S = 30.0


async def _two_brokers_stopped_leader_first(zk_connect: str, directory: Path) -> list[float]:
    brokers: list[Broker] = []
    ports: list[int] = []
    try:
        for broker_id in (1, 2):
            broker, port = await start_broker(
                broker_id, zk_connect, directory, **{"min.insync.replicas": "2"}
            )
            brokers.append(broker)
            ports.append(port)
        ZkAdmin(brokers[0].zk).create_topic("t", {0: [1, 2]}, {})
        deadline = time.monotonic() + 120
        while len(getattr(brokers[0].replica_manager.partitions.get(("t", 0)), "isr", ())) != 2:
            assert time.monotonic() < deadline, "broker 1 never led t-0 with both in sync"
            await asyncio.sleep(0.2)
        bootstrap = ",".join(f"127.0.0.1:{port}" for port in ports)
        values = [b"v%d" % i for i in range(200)]
        assert len(await asyncio.to_thread(produce_values, bootstrap, "t", values)) == 200
        durations = []
        for broker in brokers:  # the leader (broker 1) first
            started = time.monotonic()
            async with asyncio.timeout(STOP_BOUND_S):
                await broker.stop()
            durations.append(time.monotonic() - started)
        return durations
    finally:
        for broker in brokers:
            if not broker.stopping:
                await broker.stop()


def test_stopping_the_leader_first_then_its_follower_completes(
    zk_connect: str, tmp_path: Path
) -> None:
    durations = asyncio.run(_two_brokers_stopped_leader_first(zk_connect, tmp_path))
    print(f"stop durations: {[f'{d:.2f}' for d in durations]} s")
    assert all(d < STOP_BOUND_S for d in durations)


def _state(admin: ZkAdmin, topic: str) -> tuple[int, tuple[int, ...]] | None:
    found = admin.get_partition_state(topic, 0)
    return None if found is None else (found[0].leader, tuple(sorted(found[0].isr)))


def test_a_broker_whose_leader_is_paused_still_exits_on_sigterm(
    broker_factory, zk_connect: str
) -> None:
    """Real processes: the leader hangs (SIGSTOP: its sockets stay open and silent), its
    follower gets SIGTERM mid-fetch and must exit by itself, cleanly, well within the
    fixture's SIGKILL deadline."""
    leader = broker_factory(1)
    follower = broker_factory(2)
    client = zookeeper_client(zk_connect)
    try:
        admin = ZkAdmin(client)
        admin.create_topic("paused", {0: [1, 2]}, {})
        assert wait_for(lambda: _state(admin, "paused") == (1, (1, 2)), 120)
        values = [b"p%d" % i for i in range(500)]
        assert len(produce_values(leader.bootstrap, "paused", values)) == 500
        leader.pause()
        started = time.monotonic()
        follower.signal(signal.SIGTERM)
        assert follower.process is not None
        status = follower.process.wait(STOP_BOUND_S)  # TimeoutExpired: the stop hung
        elapsed = time.monotonic() - started
        print(f"follower exited {elapsed:.2f} s after SIGTERM (status {status})")
        assert status == 0
        assert "broker 2 stopped in" in follower.log_path.read_text()
    finally:
        leader.resume()
        client.stop()
        client.close()
