"""The sendfile fetch encoder writes exactly what kio (Kafka's schemas) would."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import pytest

from gregor_broker.protocol.entities import encode_response
from gregor_broker.protocol.fetch_response import (
    PartitionResult,
    TopicResult,
    encode_fetch_response,
)
from gregor_broker.protocol.wire import frame, response_header


@dataclass
class Region:
    size: int


@pytest.mark.parametrize("version", range(4, 17))
def test_encoder_matches_kafka_schema_byte_for_byte(version: int) -> None:
    topic_id = uuid.uuid4()
    parts, size = encode_fetch_response(
        version,
        7,
        throttle_time_ms=3,
        topics=[
            TopicResult(
                "orders",
                topic_id,
                [
                    PartitionResult(0, 0, 10, 10, 2, b"abc"),
                    PartitionResult(
                        1, 6, -1, -1, -1, None, current_leader=(1, 5) if version >= 12 else None
                    ),
                ],
            )
        ],
    )
    ours = b"".join(parts)
    assert size == len(ours)
    partitions = [
        {
            "partition_index": 0,
            "error_code": 0,
            "high_watermark": 10,
            "last_stable_offset": 10,
            "log_start_offset": 2,
            "aborted_transactions": None,
            "records": b"abc",
        },
        {
            "partition_index": 1,
            "error_code": 6,
            "high_watermark": -1,
            "last_stable_offset": -1,
            "log_start_offset": -1,
            "aborted_transactions": None,
            "records": None,
            **({"current_leader": {"leader_id": 1, "leader_epoch": 5}} if version >= 12 else {}),
        },
    ]
    body = encode_response(
        1,
        version,
        {
            "throttle_time": 3,
            "error_code": 0,
            "session_id": 0,
            "responses": [{"topic": "orders", "topic_id": topic_id, "partitions": partitions}],
        },
    )
    assert ours == frame(response_header(7, version >= 12), body)


def test_file_regions_are_left_out_of_the_bytes_and_counted_in_the_size() -> None:
    region = Region(size=1_000_000)
    parts, size = encode_fetch_response(
        11, 1, topics=[TopicResult("t", None, [PartitionResult(0, 0, 5, 5, 0, region)])]
    )
    assert region in parts
    assert sum(len(p) for p in parts if isinstance(p, bytes)) + region.size == size
    # The size prefix counts everything after itself.
    assert int.from_bytes(parts[0][:4], "big") == size - 4
