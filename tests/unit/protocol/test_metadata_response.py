"""The hand-written Metadata response encoder writes exactly what kio would."""

from __future__ import annotations

import uuid

import pytest

from gregor_broker.protocol.entities import encode_response
from gregor_broker.protocol.metadata_response import (
    NO_AUTHORIZED_OPERATIONS,
    MetadataBroker,
    MetadataResponse,
    MetadataTopic,
    encode_topic,
)
from gregor_broker.protocol.wire import frame, response_header

TOPIC_ID = uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")

RESPONSE = MetadataResponse(
    brokers=[MetadataBroker(1, "127.0.0.1", 9092, "a"), MetadataBroker(2, "host-2", 9093, None)],
    cluster_id="cluster-x",
    controller_id=2,
    topics=[
        MetadataTopic(
            0,
            "orders",
            TOPIC_ID,
            False,
            [
                (0, 0, 1, 4, (1, 2), (1, 2), ()),
                (5, 1, -1, 3, (2, 3), (2,), (3,)),
            ],
        ),
        MetadataTopic(0, "__consumer_offsets", TOPIC_ID, True, [(0, 0, 2, 0, (2,), (2,), ())]),
        MetadataTopic(3, "missing", uuid.UUID(int=0), False, []),
    ],
    throttle_time=7,
)


def _as_dict(response: MetadataResponse) -> dict:
    return {
        "throttle_time": response.throttle_time,
        "brokers": [
            {"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack}
            for b in response.brokers
        ],
        "cluster_id": response.cluster_id,
        "controller_id": response.controller_id,
        "topics": [
            {
                "error_code": t.error_code,
                "name": t.name,
                "topic_id": t.topic_id,
                "is_internal": t.is_internal,
                "partitions": [
                    {
                        "error_code": p[0],
                        "partition_index": p[1],
                        "leader_id": p[2],
                        "leader_epoch": p[3],
                        "replica_nodes": list(p[4]),
                        "isr_nodes": list(p[5]),
                        "offline_replicas": list(p[6]),
                    }
                    for p in t.partitions
                ],
                "topic_authorized_operations": t.topic_authorized_operations,
            }
            for t in response.topics
        ],
        "cluster_authorized_operations": NO_AUTHORIZED_OPERATIONS,
        "error_code": 0,
    }


@pytest.mark.parametrize("version", range(14))
def test_encoder_matches_kafka_schema_byte_for_byte(version: int) -> None:
    expected = frame(
        response_header(77, version >= 9), encode_response(3, version, _as_dict(RESPONSE))
    )
    assert RESPONSE.encode_frame(version, 77) == expected


def test_a_null_topic_name_encodes_from_v12() -> None:
    response = MetadataResponse([], None, -1, [MetadataTopic(100, None, TOPIC_ID, False, [])])
    expected = frame(response_header(1, True), encode_response(3, 12, _as_dict(response)))
    assert response.encode_frame(12, 1) == expected


@pytest.mark.parametrize("version", [0, 5, 9, 12, 13])
def test_pre_encoded_topics_give_the_same_frame(version: int) -> None:
    cached = MetadataResponse(
        RESPONSE.brokers,
        RESPONSE.cluster_id,
        RESPONSE.controller_id,
        [encode_topic(version, topic) for topic in RESPONSE.topics],
        throttle_time=RESPONSE.throttle_time,
    )
    assert cached.encode_frame(version, 5) == RESPONSE.encode_frame(version, 5)
