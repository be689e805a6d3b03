"""CPU cost of one Produce request inside a real broker, in microseconds, in one process.

Not a throughput benchmark: a real broker (with its own ZooKeeper) runs in this process
and its request path (``RequestRouter``: decode, quotas, the produce handler, the log
append, the response encoding) is called directly with the same one-record Produce
frame over and over, as a connection would call it for each pipelined frame. No socket,
no client: the figure is the broker's own Python work per unbatched produce request,
which is what the unbatched rows of ``make bench`` are bound by, measured without a
client sharing the two cores. The figure is the event loop thread's CPU time
(``time.thread_time``), not wall time: on a machine shared with other work, wall time
per request mostly measures how long the process waited for a core.

    python -m bench.request_cost [--size 100] [--records 1] [--requests 20000] [--rounds 7]
    python -m bench.request_cost --replica-fetch   # a follower's Fetch v11 instead

``--records`` puts that many records in the request's one batch (the broker walks every
record of a batch it validates, so this shows the per-record cost). ``--replica-fetch``
times the leader's side of a replication round trip instead: a Fetch v11 from follower
2 (the topic's replicas are 1 and 2, broker 2 does not run) at the leader's log end,
answered at once (max wait 0) with no records; the follower's fetch offset, the high
watermark and ISR bookkeeping, and the response encoding are all on that path.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from gregor_broker.cluster.admin import ZkAdmin
from gregor_broker.cluster.models import BrokerRegistration
from gregor_broker.config import load_broker_config
from gregor_broker.devtools.zookeeper_server import ZooKeeperServer, free_port
from gregor_broker.protocol import replica_fetch
from gregor_broker.protocol.record_batch import build_batch
from gregor_broker.protocol.records import Record, encode_record
from gregor_broker.server.broker import Broker

from .decode_cost import produce_frame

TOPIC = "bench"


class _Transport:
    """Swallows responses: the cost of sending them is the kernel's, not measured here."""

    def write(self, data: bytes) -> None:
        pass

    def is_reading(self) -> bool:
        return True


class _Connection:
    peer = "bench"
    transport = _Transport()

    def close_for(self, reason: str) -> None:
        raise RuntimeError(f"the broker closed the bench connection: {reason}")


async def _measure(
    directory: Path,
    size: int,
    requests: int,
    rounds: int,
    records: int = 1,
    replica_fetch_frame: bool = False,
) -> list[float]:
    zookeeper = ZooKeeperServer(directory / "zookeeper")
    zookeeper.start()
    broker = Broker(
        load_broker_config(
            None,
            {
                "broker.id": "1",
                "zookeeper.connect": f"{zookeeper.connect_string}/request-cost",
                "listeners": f"PLAINTEXT://127.0.0.1:{free_port()}",
                "log.dirs": str(directory / "logs"),
                "num.partitions": "1",
            },
            env={},
        )
    )
    try:
        await broker.start()
        encoded = [encode_record(Record(i, 0, None, b"x" * size, [])) for i in range(records)]
        batch = build_batch(encoded, base_timestamp=int(time.time() * 1000))
        frame = memoryview(produce_frame(9, records=batch))
        connection = _Connection()
        router = broker.router
        router.preparer.prepare_now(0, 9)  # answers now, not after preparing off the loop
        if replica_fetch_frame:
            # Broker 2 does not run, but only a registered broker joins an ISR (as in
            # Kafka): its registration, on this process's session.
            ZkAdmin(broker.zk).register_broker(
                BrokerRegistration("127.0.0.1", 1, ("PLAINTEXT://127.0.0.1:1",)), 2
            )
        ZkAdmin(broker.zk).create_topic(TOPIC, {0: [1, 2] if replica_fetch_frame else [1]}, {})
        deadline = time.monotonic() + 30
        while broker.replica_manager.partitions.get((TOPIC, 0)) is None or not _accepted(
            router(connection, frame)
        ):
            if time.monotonic() > deadline:
                raise RuntimeError(f"topic {TOPIC} never got a leader")
            await asyncio.sleep(0.1)
        appended = broker.replica_manager.partitions[(TOPIC, 0)].log.log_end_offset
        if replica_fetch_frame:
            return await _measure_replica_fetch(broker, connection, appended, requests, rounds)
        results = await _timed_rounds(broker, connection, frame, requests, rounds)
        written = broker.replica_manager.partitions[(TOPIC, 0)].log.log_end_offset - appended
        if written != requests * rounds * records:  # every measured request appended
            raise RuntimeError(f"{written} of {requests * rounds * records} records were appended")
        return results
    finally:
        await broker.stop()
        zookeeper.stop()


async def _timed_rounds(
    broker: Broker, connection: _Connection, frame: memoryview, requests: int, rounds: int
) -> list[float]:
    """Thread CPU microseconds per request, one figure per round of ``requests``; the
    broker's own tasks run between rounds."""
    router = broker.router
    results = []
    for _ in range(rounds):
        started = time.thread_time()
        for _ in range(requests):
            router(connection, frame)
        results.append((time.thread_time() - started) / requests * 1e6)
        await asyncio.sleep(0)
    return results


async def _measure_replica_fetch(
    broker: Broker, connection: _Connection, log_end: int, requests: int, rounds: int
) -> list[float]:
    """Microseconds per follower Fetch answered at the log end (see the module's help)."""
    router = broker.router
    frame = memoryview(
        replica_fetch.encode_request(
            1,
            b"gregor-replica-2",
            replica_id=2,
            max_wait_ms=0,
            min_bytes=1,
            max_bytes=10485760,
            topics=[(TOPIC, [replica_fetch.FetchPosition(0, -1, log_end, 0, 1048576)])],
        )[4:]
    )
    router.preparer.prepare_now(1, replica_fetch.VERSION)
    partition = broker.replica_manager.partitions[(TOPIC, 0)]
    deadline = time.monotonic() + 30
    while 2 not in partition.isr:  # the first fetches add follower 2 to the ISR
        router(connection, frame)
        if time.monotonic() > deadline:
            raise RuntimeError("follower 2 never joined the ISR")
        await asyncio.sleep(0.1)
    results = await _timed_rounds(broker, connection, frame, requests, rounds)
    if partition.log.high_watermark != log_end or 2 not in partition.isr:
        raise RuntimeError("the follower's fetches did not keep it in sync")
    return results


def _accepted(response: object) -> bool:
    """Whether a Produce v9 response frame for one partition carries error code 0."""
    if not isinstance(response, bytes):
        return False
    # size, correlation id, header tags, topic array, name, partition array, index, error
    name_end = 4 + 4 + 1 + 1 + 1 + len(TOPIC)
    error_at = name_end + 1 + 4
    return response[error_at : error_at + 2] == b"\x00\x00"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.request_cost",
        description="Microseconds of broker CPU per one-record Produce request (acks=1), "
        "measured inside a real broker without a socket or a client.",
    )
    parser.add_argument("--size", type=int, default=100, help="record value bytes (100)")
    parser.add_argument("--records", type=int, default=1, help="records per batch (1)")
    parser.add_argument("--requests", type=int, default=20000, help="requests per round")
    parser.add_argument("--rounds", type=int, default=7, help="rounds; the median is reported")
    parser.add_argument(
        "--replica-fetch",
        action="store_true",
        help="time a follower's Fetch v11 at the leader's log end instead of a Produce",
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="gregor-request-cost-") as directory:
        results = asyncio.run(
            _measure(
                Path(directory),
                args.size,
                args.requests,
                args.rounds,
                args.records,
                replica_fetch_frame=args.replica_fetch,
            )
        )
    rounds = ", ".join(f"{r:.1f}" for r in results)
    if args.replica_fetch:
        print(
            f"follower Fetch v{replica_fetch.VERSION} at the log end, 1 partition: "
            f"median {statistics.median(results):.1f} us per request (rounds: {rounds})"
        )
        return 0
    print(
        f"Produce v9, {args.records} x {args.size}-byte record(s) in one batch, acks=1: "
        f"median {statistics.median(results):.1f} us per request (rounds: {rounds})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
