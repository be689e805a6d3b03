"""A broker's stop completes whatever its peers do (Kafka: shutdown finishes even when
the other brokers are gone or hung).

Found with two brokers in one process (``test_layered_paths``): stopping the leader
first made the other broker leader, then the stopping one followed it, and its replica
fetcher, reconnecting, lost the cancellation ``Broker.stop`` sent it (Python 3.11's
``asyncio.wait_for`` in ``BrokerClient.connect``): that stop never returned.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path

from gregor_broker.cluster.admin import ZkAdmin
from gregor_broker.cluster.models import PartitionState
from gregor_broker.devtools.local_cluster import zookeeper_client
from gregor_broker.server.broker import Broker

from .broker_helpers import produce_values, wait_for
from .in_process_brokers import start_broker

# A stop takes well under a second here; the bound only turns a hang into a failure.
STOP_BOUND_S = 30.0
# Below the 30 s a controlled shutdown waits at most for leadership to move.
DELETED_TOPIC_STOP_BOUND_S = 15.0


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


class _HeldStateReads:
    """Holds the watched reads of ``topic``'s partition states on one broker's ZooKeeper
    client (its metadata cache's watches) until released: a cache that has not loaded a
    freshly written state yet. Other reads of that client pass. Injected at kazoo, the
    ZooKeeper client, as ``test_controller_reassignment_connection_loss`` does."""

    def __init__(self, client, topic: str) -> None:
        self._client = client
        self._prefix = f"/brokers/topics/{topic}/partitions/"
        self._real = client.get_async
        self._released = threading.Event()
        self.held: list[str] = []
        client.get_async = self._get_async

    def _get_async(self, path, *args, **kwargs):
        if not (path.startswith(self._prefix) and kwargs.get("watch") is not None):
            return self._real(path, *args, **kwargs)
        self.held.append(path)
        held = self._client.handler.async_result()

        def read_once_released() -> None:
            self._released.wait()
            try:
                held.set(self._real(path, *args, **kwargs).get())
            except Exception as error:
                held.set_exception(error)

        threading.Thread(target=read_once_released, daemon=True).start()
        return held

    def release(self) -> None:
        self._client.get_async = self._real
        self._released.set()


def _messages(caplog, text: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if text in r.getMessage()]


async def _controller_and_stopped(
    zk_connect: str, directory: Path, brokers: list[Broker]
) -> tuple[Broker, ZkAdmin]:
    """Start broker 2, the controller, then broker 1, the one the test stops (both
    appended to ``brokers`` as they start, for ``_release_and_stop``); broker 1 and an
    admin on the controller's session."""
    for broker_id in (2, 1):  # broker 2 first: the controller, not the one stopped
        broker, _ = await start_broker(broker_id, zk_connect, directory)
        brokers.append(broker)
    controller, stopped = brokers
    admin = ZkAdmin(controller.zk)
    assert admin.get_controller().broker_id == 2
    return stopped, admin


async def _release_and_stop(hold: _HeldStateReads | None, brokers: list[Broker]) -> None:
    if hold is not None:
        hold.release()
    for broker in brokers:
        if not broker.stopping:
            await broker.stop()


async def _stop_waiting_for_the_cache(
    stopped: Broker, admin: ZkAdmin, topic: str, hold: _HeldStateReads, caplog
) -> None:
    """Stop broker 1 while its cache cannot see ``<topic>-0`` (its reads are held): the
    controller hands the partition to broker 2 in ZooKeeper, and broker 1 must keep
    waiting (not decide from its cache that it had nothing to hand over) until its cache
    sees the handover, once the reads are released."""
    stopping = asyncio.create_task(stopped.stop())
    deadline = time.monotonic() + 120
    while _state(admin, topic) != (2, (2,)):
        assert time.monotonic() < deadline, f"the controller never moved {topic}-0 to broker 2"
        assert not stopping.done(), f"broker 1 stopped before {topic}-0 was handed over"
        await asyncio.sleep(0.2)
    await asyncio.sleep(2)
    assert not _messages(caplog, "nothing left to hand over"), (
        f"broker 1 stopped waiting before its cache saw {topic}-0 handed over"
    )
    hold.release()
    async with asyncio.timeout(STOP_BOUND_S):
        await stopping
    assert _messages(caplog, "nothing left to hand over")
    assert not _messages(caplog, "exiting anyway")


@contextlib.asynccontextmanager
async def _broker_1_leading_unseen(
    zk_connect: str, directory: Path, topic: str
) -> AsyncIterator[tuple[Broker, ZkAdmin, _HeldStateReads]]:
    """Broker 2 the controller, broker 1 (the one to stop) leading ``topic``-0 (replicas
    [1, 2]) in ZooKeeper while its cache's reads of that state are held; both brokers
    stopped at the end, the reads released first."""
    brokers: list[Broker] = []
    hold = None
    try:
        stopped, admin = await _controller_and_stopped(zk_connect, directory, brokers)
        hold = _HeldStateReads(stopped.zk, topic)
        admin.create_topic(topic, {0: [1, 2]}, {})
        deadline = time.monotonic() + 120
        while _state(admin, topic) != (1, (1, 2)) or not hold.held:
            assert time.monotonic() < deadline, f"{topic}-0 never led by broker 1"
            await asyncio.sleep(0.2)
        yield stopped, admin, hold
    finally:
        await _release_and_stop(hold, brokers)


async def _stop_right_after_a_topic_was_created(zk_connect: str, directory: Path, caplog) -> None:
    async with _broker_1_leading_unseen(zk_connect, directory, "fresh") as (stopped, admin, hold):
        # ZooKeeper says broker 1 leads fresh-0; its cache has not seen that yet.
        cached = stopped.metadata.topics.get("fresh")
        assert (
            cached is None or cached.partitions.get(0) is None or cached.partitions[0].leader == -1
        )
        await _stop_waiting_for_the_cache(stopped, admin, "fresh", hold, caplog)


def test_a_sigterm_right_after_a_topic_was_created_hands_its_leadership_over(
    zk_connect: str, tmp_path: Path, caplog
) -> None:
    """The stopping broker leads a partition in ZooKeeper that its metadata cache has not
    loaded yet: its controlled shutdown waits until the cache shows it handed over."""
    caplog.set_level(logging.INFO, logger="gregor_broker.server.broker")
    asyncio.run(_stop_right_after_a_topic_was_created(zk_connect, tmp_path, caplog))


async def _stop_while_a_led_topic_is_deleted(zk_connect: str, directory: Path, caplog) -> None:
    async with _broker_1_leading_unseen(zk_connect, directory, "gone") as (stopped, admin, _):
        # ZooKeeper says broker 1 leads gone-0; its cache will not see a state of it.
        started = time.monotonic()
        deadline = started + 120
        stopping = asyncio.create_task(stopped.stop())
        while not _messages(caplog, "waiting for leadership to move away"):
            assert time.monotonic() < deadline, "broker 1 never deregistered"
            assert not stopping.done()
            await asyncio.sleep(0.1)
        assert admin.request_topic_deletions(["gone"]) == {"gone": None}
        # Its state never arrives now: the topic's deletion must end the wait for it, not
        # the 30 s bound of a controlled shutdown.
        async with asyncio.timeout(STOP_BOUND_S):
            await stopping
        took = time.monotonic() - started
        assert _messages(caplog, "nothing left to hand over")
        assert not _messages(caplog, "exiting anyway")
        assert took < DELETED_TOPIC_STOP_BOUND_S, f"the stop took {took:.1f} s"


def test_a_topic_deleted_during_a_controlled_shutdown_does_not_hold_it(
    zk_connect: str, tmp_path: Path, caplog
) -> None:
    """The stopping broker leads a partition its cache never saw a state of, and the topic
    is deleted while it waits: there is nothing left to hand over, and it exits without
    waiting out its controlled-shutdown bound."""
    caplog.set_level(logging.INFO, logger="gregor_broker.server.broker")
    asyncio.run(_stop_while_a_led_topic_is_deleted(zk_connect, tmp_path, caplog))


async def _stop_with_a_stale_cached_state(zk_connect: str, directory: Path, caplog) -> None:
    brokers: list[Broker] = []
    hold = None
    try:
        stopped, admin = await _controller_and_stopped(zk_connect, directory, brokers)
        admin.create_topic("stale", {0: [2, 1]}, {})

        def cached() -> tuple[int, int] | None:
            topic = stopped.metadata.topics.get("stale")
            partition = topic.partitions.get(0) if topic is not None else None
            if partition is None or partition.state is None:
                return None
            return partition.leader, partition.state_version

        deadline = time.monotonic() + 120
        while _state(admin, "stale") != (2, (1, 2)) or cached() != (2, 0):
            assert time.monotonic() < deadline, "stale-0 never led by broker 2 in broker 1's cache"
            await asyncio.sleep(0.2)
        # From now on broker 1's cache does not see stale-0 change: it keeps version 0,
        # broker 2 leading. ZooKeeper moves on to version 1, broker 1 leading.
        hold = _HeldStateReads(stopped.zk, "stale")
        state, _ = admin.get_partition_state("stale", 0)
        admin.set_partition_state(
            "stale", 0, PartitionState(state.controller_epoch, 1, state.leader_epoch + 1, (1, 2)), 0
        )
        while not hold.held:
            assert time.monotonic() < deadline, "broker 1 never re-read stale-0"
            await asyncio.sleep(0.1)
        assert cached() == (2, 0)
        # The cache's version 0 does not pass the check made with the deregistration: the
        # states are read instead, and broker 1 waits until its cache has seen that it
        # led stale-0 (version 1), then that it no longer does.
        await _stop_waiting_for_the_cache(stopped, admin, "stale", hold, caplog)
        assert _messages(caplog, "read just before it deregistered")
        assert not _messages(caplog, "checked as it deregistered")
    finally:
        await _release_and_stop(hold, brokers)


def test_a_cached_state_zookeeper_has_moved_past_is_read_before_deregistering(
    zk_connect: str, tmp_path: Path, caplog
) -> None:
    """The stopping broker's cache knows every state assigned to it, but one is stale
    (ZooKeeper has since named this broker its leader): the deregistration checked against
    the cache is refused, the states are read, and the broker waits for its cache to
    catch up as it does for a state it never loaded."""
    caplog.set_level(logging.INFO, logger="gregor_broker.server.broker")
    asyncio.run(_stop_with_a_stale_cached_state(zk_connect, tmp_path, caplog))
