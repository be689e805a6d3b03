"""Per-request cost of the broker's request decoding, in microseconds, in one process.

Not a broker benchmark: a focused timing of the pure steps every produce and fetch
request pays before its handler runs (``RequestRouter.decode``: header, the frame
guard's length checks, kio's native decode). Used to measure hot-spot fixes before and
after; ``python -m bench.decode_cost`` prints a small table.
"""

from __future__ import annotations

import datetime
import io
import sys
import time
import timeit
import uuid
from collections.abc import Callable
from typing import Any

from kio.serial import entity_writer

from gregor_broker.protocol import entities
from gregor_broker.protocol.frame_guard import check_request, check_request_generic
from gregor_broker.protocol.wire import parse_request_header
from gregor_broker.server.handlers import API_TABLE
from gregor_broker.server.request_router import RequestRouter


def _frame(api_key: int, version: int, body: Any) -> bytes:
    flexible = entities.is_flexible(api_key, version)
    client = b"rdkafka"
    header = (
        api_key.to_bytes(2, "big")
        + version.to_bytes(2, "big")
        + (7).to_bytes(4, "big")
        + len(client).to_bytes(2, "big")
        + client
        + (b"\x00" if flexible else b"")
    )
    buffer = io.BytesIO()
    entity_writer(type(body))(buffer, body)
    return header + buffer.getvalue()


def produce_frame(
    version: int = 9, partitions: int = 1, batch_bytes: int = 1100, records: bytes | None = None
) -> bytes:
    """A Produce request frame; ``records`` (a real batch) or ``batch_bytes`` of zeros."""
    cls = entities.payload_class(0, version, "request")
    if records is None:
        records = b"\x00" * batch_bytes
    data = {
        "transactional_id": None,
        "acks": 1,
        "timeout": 30000,
        "topic_data": [
            {
                "name": "bench",
                "partition_data": [
                    {"index": index, "records": records} for index in range(partitions)
                ],
            }
        ],
    }
    return _frame(0, version, entities.build(cls, data))


def fetch_frame(version: int = 11, partitions: int = 1) -> bytes:
    cls = entities.payload_class(1, version, "request")
    data = {
        "replica_id": -1,
        "max_wait": datetime.timedelta(milliseconds=500),
        "min_bytes": 1,
        "max_bytes": 52428800,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": "bench",
                "topic_id": uuid.UUID(int=0),
                "partitions": [
                    {
                        "partition": index,
                        "current_leader_epoch": 0,
                        "fetch_offset": 1000,
                        "last_fetched_epoch": -1,
                        "log_start_offset": -1,
                        "partition_max_bytes": 1048576,
                    }
                    for index in range(partitions)
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }
    return _frame(1, version, entities.build(cls, data))


def per_call_us(function: Callable[[], Any], repeat: int = 5) -> float:
    """Best of ``repeat`` timings, in microseconds per call."""
    timer = timeit.Timer(function)
    number, _ = timer.autorange()
    return min(timer.repeat(repeat, number)) / number * 1e6


def time_case(router: RequestRouter, key: int, version: int, frame: bytes) -> dict[str, float]:
    """µs per request: the generic and generated guards, kio's decode, the whole decode."""
    view = memoryview(frame)
    header = parse_request_header(view, entities.is_flexible(key, version))
    cls = entities.payload_class(key, version, "request")
    reader = entities.request_reader(key, version)
    offset = header.body_offset
    return {
        "generic guard": per_call_us(lambda: check_request_generic(cls, view, offset)),
        "guard": per_call_us(lambda: check_request(cls, view, offset)),
        "kio": per_call_us(lambda: reader(view, offset)),
        "decode": per_call_us(lambda: router.decode(view)),
    }


def main() -> int:
    router = RequestRouter(broker=None, apis=API_TABLE)  # type: ignore[arg-type]
    cases = {
        "produce v9, 1 partition": (0, 9, produce_frame(9, 1)),
        "produce v9, 8 partitions": (0, 9, produce_frame(9, 8)),
        "produce v7, 1 partition": (0, 7, produce_frame(7, 1)),
        "fetch v11, 1 partition": (1, 11, fetch_frame(11, 1)),
    }
    print(
        f"{'request':28} {'generic guard':>14} {'guard':>8} {'kio':>8} {'decode':>8}"
        "  (µs per request)"
    )
    started = time.perf_counter()
    for name, (key, version, frame) in cases.items():
        timings = time_case(router, key, version, frame)
        print(
            f"{name:28} "
            + " ".join(
                f"{timings[column]:{width}.2f}"
                for column, width in (
                    ("generic guard", 14),
                    ("guard", 8),
                    ("kio", 8),
                    ("decode", 8),
                )
            )
        )
    print(f"({time.perf_counter() - started:.1f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
