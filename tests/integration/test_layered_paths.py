"""The produce path (acks=all, the follower's fetch that completes it) and the consumer's
fetch path call across the broker's layers downward only (issue 10's acceptance;
docs/design/architecture.md, "The produce path" and "The fetch path").

``.importlinter`` checks the imports; this checks the calls. Two real brokers run in this
process (a real ZooKeeper, a topic with replicas on both, min.insync.replicas=2), a real
confluent-kafka producer (acks=all) and consumer talk to them over sockets, and
``sys.setprofile`` records every call between two ``gregor_broker`` functions on the event
loop's thread. A call from a lower layer into a higher one fails the test unless it goes
through something the higher layer handed down (``HANDED_DOWN``): the API table's handlers
and the responses they return (the router calls them; the composition root built the
table), the coordinator's ``InternalTopicCreator`` (``TopicAdmin``), and the listener lists
and waiter predicates a lower layer calls and an upper one fills (the fetch sessions that
listen to ``Waiters`` and the fetches parked there among them), and the callbacks chained
on a ``Deferred`` answer.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

import confluent_kafka

from gregor_broker.cluster.admin import ZkAdmin
from gregor_broker.server.broker import Broker

from .in_process_brokers import start_broker

# .importlinter's layers, lowest first; inside server/ its own contract's order. tasks,
# stats and deferred are independent of each other (``stats | tasks | deferred``): none
# calls another.
LAYERS = (
    "tasks",
    "stats",
    "deferred",
    "protocol",
    "log",
    "config",
    "security",
    "cluster",
    "replication",
    "coordinator",
    "server",
    "devtools",
    "cli",
)
SERVER_LAYERS = ("services", "request_router", "handlers", "broker")
# Calls up through what the upper layer handed down: (caller module, caller function or
# None for any, callee module prefix). docs/design/architecture.md lists them.
HANDED_DOWN = (
    # ApiSpec.handler from the API table; Response.encode_frame of what a handler returned.
    ("gregor_broker.server.request_router", None, "gregor_broker.server.handlers."),
    # InternalTopicCreator (TopicAdmin), given to the coordinator by the composition root.
    ("gregor_broker.coordinator.internal_topic", None, "gregor_broker.server.topic_admin"),
    ("gregor_broker.coordinator.partition_writer", None, "gregor_broker.server.topic_admin"),
    # MetadataCache.listeners and the predicates of MetadataCache.wait_for.
    ("gregor_broker.cluster.metadata_cache", "MetadataCache.notify", "gregor_broker."),
    ("gregor_broker.cluster.metadata_cache", "MetadataCache.wait_for", "gregor_broker."),
    ("gregor_broker.cluster.metadata_cache", "MetadataCache._check_waiters", "gregor_broker."),
    # ReplicaManager.leadership_listeners: the coordinators load and unload partitions.
    (
        "gregor_broker.replication.replica_manager",
        "ReplicaManager._notify_leadership",
        "gregor_broker.coordinator.",
    ),
    # LogManager.dir_failure_listeners: a failed log dir taken offline above the log.
    ("gregor_broker.log.log_manager", "LogManager.log_dir_failed", "gregor_broker."),
    # LogManager.ready_listeners: the replica manager creates a partition whose files
    # the log manager's threads made (or whose deleted directory they renamed away).
    (
        "gregor_broker.log.log_manager",
        "LogManager._tell_ready",
        "gregor_broker.replication.replica_manager",
    ),
    # Waiters.listen: a follower's fetch session hears its partitions' notifications
    # (FetchSessionCache.watch_partitions, given append_waiters by the composition root).
    (
        "gregor_broker.replication.purgatory",
        "Waiters._tell_listeners",
        "gregor_broker.server.fetch_sessions",
    ),
    # Waiters.watch_with: a parked fetch (DelayedFetch, a Wakeable) is woken by the
    # notification that makes it answerable, and answers in that call.
    ("gregor_broker.replication.purgatory", "_wake", "gregor_broker.server.handlers.fetch"),
    # Deferred.then: what waits for an answer (the produce handler on its DelayedProduce,
    # the router encoding a handler's answer, the connection writing it) is called by
    # whoever resolves it, in that call.
    ("gregor_broker.deferred", "Deferred._deliver", "gregor_broker."),
)
RECORDS = 50


def rank(module: str) -> tuple[int, int | None] | None:
    """(package layer, layer inside server/ or None) of a gregor_broker module."""
    parts = module.split(".")
    if parts[0] != "gregor_broker" or len(parts) < 2 or parts[1] not in LAYERS:
        return None
    inner = None
    if parts[1] == "server" and len(parts) > 2 and parts[2] in SERVER_LAYERS:
        inner = SERVER_LAYERS.index(parts[2])
    return LAYERS.index(parts[1]), inner


def upward(caller: str, callee: str) -> bool:
    a, b = rank(caller), rank(callee)
    if a is None or b is None:
        return False
    if a[0] != b[0]:
        return b[0] > a[0]
    # Within one package only server/'s contract orders modules.
    return a[1] is not None and b[1] is not None and b[1] > a[1]


def handed_down(caller: str, function: str, callee: str) -> bool:
    return any(
        caller == module and name in (None, function) and callee.startswith(high)
        for module, name, high in HANDED_DOWN
    )


class CallRecorder:
    def __init__(self) -> None:
        self.upward: Counter[tuple[str, str, str, str]] = Counter()
        self.modules: set[str] = set()

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        callee = frame.f_globals.get("__name__", "")
        if not callee.startswith("gregor_broker."):
            return
        self.modules.add(callee)
        back = frame.f_back
        if back is None:
            return
        caller = back.f_globals.get("__name__", "")
        function = back.f_code.co_qualname
        if upward(caller, callee) and not handed_down(caller, function, callee):
            key = (caller, function, callee, frame.f_code.co_qualname)
            self.upward[key] += 1


def produce(bootstrap: str) -> None:
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0}
    )
    for i in range(RECORDS):
        producer.produce("t", b"value-%d" % i, partition=0)
        producer.poll(0)
    assert producer.flush(120) == 0


def consume(bootstrap: str) -> int:
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "layers", "enable.auto.commit": False}
    )
    consumer.assign([confluent_kafka.TopicPartition("t", 0, 0)])
    got = 0
    deadline = time.monotonic() + 120
    try:
        while got < RECORDS and time.monotonic() < deadline:
            message = consumer.poll(1)
            if message is not None and message.error() is None:
                got += 1
    finally:
        consumer.close()
    return got


async def traced_paths(zk_connect: str, directory: Path, recorder: CallRecorder) -> int:
    brokers: list[tuple[Broker, int]] = []
    try:
        for broker_id in (1, 2):
            started = await start_broker(
                broker_id,
                zk_connect,
                directory,
                **{
                    "min.insync.replicas": "2",
                    # Stopping: nothing to hand over, no wait for a controller to move leaders.
                    "controlled.shutdown.enable": "false",
                },
            )
            brokers.append(started)
        ZkAdmin(brokers[0][0].zk).create_topic("t", {0: [1, 2]}, {})
        deadline = time.monotonic() + 120
        while not any(
            len(getattr(broker.replica_manager.partitions.get(("t", 0)), "isr", ())) == 2
            for broker, _ in brokers
        ):
            assert time.monotonic() < deadline, "the topic never had both replicas in sync"
            await asyncio.sleep(0.2)
        bootstrap = ",".join(f"127.0.0.1:{port}" for _, port in brokers)
        sys.setprofile(recorder)
        try:
            await asyncio.to_thread(produce, bootstrap)
            return await asyncio.to_thread(consume, bootstrap)
        finally:
            sys.setprofile(None)
    finally:
        # The follower first, so that nothing fails over while they stop (either order
        # completes: tests/integration/test_broker_stop.py).
        for broker, _ in reversed(brokers):
            await broker.stop()


def test_produce_and_fetch_paths_call_downward_only(zk_connect: str, tmp_path: Path) -> None:
    recorder = CallRecorder()
    consumed = asyncio.run(traced_paths(zk_connect, tmp_path, recorder))
    assert consumed == RECORDS
    # The paths were traced: the modules architecture.md names for them ran.
    for module in (
        "gregor_broker.server.connection",
        "gregor_broker.server.request_router",
        "gregor_broker.server.handlers.produce",
        "gregor_broker.server.handlers.fetch",
        "gregor_broker.replication.replica_manager",
        "gregor_broker.replication.partition",
        "gregor_broker.replication.fetch_reader",
        "gregor_broker.replication.purgatory",
        "gregor_broker.log.partition_log",
        "gregor_broker.log.segment",
        "gregor_broker.protocol.fetch_response",
    ):
        assert module in recorder.modules, module
    assert not recorder.upward, "\n".join(
        f"{count} x {caller}.{function} -> {callee}.{target}"
        for (caller, function, callee, target), count in recorder.upward.items()
    )
