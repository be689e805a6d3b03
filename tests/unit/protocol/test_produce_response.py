"""The hand-written Produce response encoder writes exactly what kio would."""

from __future__ import annotations

import pytest

from gregor_broker.protocol.entities import encode_response
from gregor_broker.protocol.produce_response import PartitionProduceResult, ProduceResponse
from gregor_broker.protocol.wire import frame, response_header


@pytest.mark.parametrize("version", range(3, 12))
def test_encoder_matches_kafka_schema_byte_for_byte(version: int) -> None:
    response = ProduceResponse(
        [
            (
                "orders",
                [
                    PartitionProduceResult(0, 0, 42, -1, 0),
                    PartitionProduceResult(1, 6, error_message="NOT_LEADER_OR_FOLLOWER"),
                ],
            ),
            ("payments", [PartitionProduceResult(3, 0, 7, 1_700_000_000_000, 5)]),
        ],
        throttle_time=12,
    )
    data = {
        "throttle_time": 12,
        "responses": [
            {
                "name": "orders",
                "partition_responses": [
                    {
                        "index": 0,
                        "error_code": 0,
                        "base_offset": 42,
                        "log_append_time": -1,
                        "log_start_offset": 0,
                    },
                    {
                        "index": 1,
                        "error_code": 6,
                        "base_offset": -1,
                        "log_append_time": -1,
                        "log_start_offset": -1,
                        "error_message": "NOT_LEADER_OR_FOLLOWER",
                    },
                ],
            },
            {
                "name": "payments",
                "partition_responses": [
                    {
                        "index": 3,
                        "error_code": 0,
                        "base_offset": 7,
                        "log_append_time": 1_700_000_000_000,
                        "log_start_offset": 5,
                    },
                ],
            },
        ],
    }
    expected = frame(response_header(99, version >= 9), encode_response(0, version, data))
    assert response.encode_frame(version, 99) == expected


@pytest.mark.parametrize("version", range(3, 12))
def test_record_errors_are_encoded_as_kafka_schema_says(version: int) -> None:
    """KIP-467: INVALID_RECORD carries the failing records' batch indexes (v8+)."""
    failed = PartitionProduceResult(2, 87, error_message="One or more records ...")
    failed.record_errors = [(0, "no key"), (10, None)]
    response = ProduceResponse([("compacted", [failed])])
    data = {
        "throttle_time": 0,
        "responses": [
            {
                "name": "compacted",
                "partition_responses": [
                    {
                        "index": 2,
                        "error_code": 87,
                        "base_offset": -1,
                        "log_append_time": -1,
                        "log_start_offset": -1,
                        "record_errors": [
                            {"batch_index": 0, "batch_index_error_message": "no key"},
                            {"batch_index": 10, "batch_index_error_message": None},
                        ],
                        "error_message": "One or more records ...",
                    },
                ],
            },
        ],
    }
    expected = frame(response_header(5, version >= 9), encode_response(0, version, data))
    assert response.encode_frame(version, 5) == expected
