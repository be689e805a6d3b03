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


@pytest.mark.parametrize("version", range(7, 17))
def test_session_responses_match_kafka_schema_byte_for_byte(version: int) -> None:
    # An incremental response: a session id, and one topic in two entries (its
    # partitions are not consecutive in the session).
    orders, payments = uuid.uuid4(), uuid.uuid4()
    parts, size = encode_fetch_response(
        version,
        9,
        session_id=2_000_000_001,
        topics=[
            TopicResult("orders", orders, [PartitionResult(1, 0, 4, 4, 0, b"xy")]),
            TopicResult("payments", payments, [PartitionResult(0, 0, 8, 8, 0, b"")]),
            TopicResult("orders", orders, [PartitionResult(0, 0, 7, 7, 0, None)]),
        ],
    )
    ours = b"".join(parts)
    assert size == len(ours)

    def topic(name: str, topic_id: uuid.UUID, index: int, hw: int, records: bytes | None) -> dict:
        partition = {
            "partition_index": index,
            "error_code": 0,
            "high_watermark": hw,
            "last_stable_offset": hw,
            "log_start_offset": 0,
            "aborted_transactions": None,
            "records": records,
        }
        return {"topic": name, "topic_id": topic_id, "partitions": [partition]}

    body = encode_response(
        1,
        version,
        {
            "throttle_time": 0,
            "error_code": 0,
            "session_id": 2_000_000_001,
            "responses": [
                topic("orders", orders, 1, 4, b"xy"),
                topic("payments", payments, 0, 8, b""),
                topic("orders", orders, 0, 7, None),
            ],
        },
    )
    assert ours == frame(response_header(9, version >= 12), body)


@pytest.mark.parametrize("version", range(7, 17))
def test_a_session_error_is_an_error_code_session_zero_and_no_topics(version: int) -> None:
    parts, _size = encode_fetch_response(version, 3, error_code=71)
    body = encode_response(
        1, version, {"throttle_time": 0, "error_code": 71, "session_id": 0, "responses": []}
    )
    assert b"".join(parts) == frame(response_header(3, version >= 12), body)


@pytest.mark.parametrize("version", [4, 11, 12, 16])
def test_a_partition_error_carries_empty_records_not_null(version: int) -> None:
    """Kafka sends MemoryRecords.EMPTY with every partition error; librdkafka fails to
    parse the whole response (and so never sees NOT_LEADER_OR_FOLLOWER) on null records."""
    parts, _ = encode_fetch_response(
        version, 1, topics=[TopicResult("t", uuid.UUID(int=1), [PartitionResult(0, 6)])]
    )
    expected = encode_response(
        1,
        version,
        {
            "throttle_time": 0,
            "error_code": 0,
            "session_id": 0,
            "responses": [
                {
                    "topic": "t",
                    "topic_id": uuid.UUID(int=1),
                    "partitions": [
                        {
                            "partition_index": 0,
                            "error_code": 6,
                            "high_watermark": -1,
                            "last_stable_offset": -1,
                            "log_start_offset": -1,
                            "aborted_transactions": None,
                            "records": b"",
                        }
                    ],
                }
            ],
        },
    )
    assert b"".join(parts) == frame(response_header(1, version >= 12), expected)
