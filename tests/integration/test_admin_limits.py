"""Expensive admin requests are bounded: a request for millions of partitions is refused
at once with Kafka's POLICY_VIOLATION instead of freezing the broker (issue 9, F1).

Raw protocol requests, because clients refuse such counts before sending them.
"""

from __future__ import annotations

import socket
import struct
import time

from kio.schema.errors import ErrorCode

from .broker_helpers import api_versions_request, host_port, read_response
from .quota_helpers import kafka_request

CREATE_TOPICS = 19
CREATE_PARTITIONS = 37


def _create_topics(bootstrap: str, *topics: tuple[str, int]) -> list[tuple[str, ErrorCode]]:
    response = kafka_request(
        bootstrap,
        CREATE_TOPICS,
        5,
        {
            "topics": [
                {
                    "name": name,
                    "num_partitions": partitions,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [],
                }
                for name, partitions in topics
            ],
            "timeout": 10_000,
            "validate_only": False,
        },
    )
    return [(topic.name, topic.error_code) for topic in response.topics]


def _create_partitions(bootstrap: str, topic: str, count: int) -> ErrorCode:
    response = kafka_request(
        bootstrap,
        CREATE_PARTITIONS,
        1,
        {
            "topics": [{"name": topic, "count": count, "assignments": None}],
            "timeout": 10_000,
            "validate_only": False,
        },
    )
    return response.results[0].error_code


def _api_versions_round_trip_s(bootstrap: str) -> float:
    with socket.create_connection(host_port(bootstrap), timeout=30) as sock:
        started = time.monotonic()
        sock.sendall(api_versions_request(correlation_id=9))
        response = read_response(sock)
        assert struct.unpack(">ih", response[:6]) == (9, 0)
        return time.monotonic() - started


def _partition_count(bootstrap: str, topic: str) -> int:
    response = kafka_request(
        bootstrap, 3, 9, {"topics": [{"name": topic}], "allow_auto_topic_creation": False,
                          "include_cluster_authorized_operations": False,
                          "include_topic_authorized_operations": False},
    )  # fmt: skip
    (found,) = response.topics
    assert found.error_code == ErrorCode.none
    return len(found.partitions)


def test_create_partitions_near_two_to_the_31_is_refused_at_once(broker) -> None:
    bootstrap = broker.bootstrap
    assert _create_topics(bootstrap, ("grow", 1)) == [("grow", ErrorCode.none)]
    for count in (2**31 - 1, 1_000_000, 10_002):
        started = time.monotonic()
        assert _create_partitions(bootstrap, "grow", count) == ErrorCode.policy_violation
        assert time.monotonic() - started < 5, f"count {count} took the broker too long"
    # The broker is responsive and the topic untouched.
    assert _api_versions_round_trip_s(bootstrap) < 1
    assert _partition_count(bootstrap, "grow") == 1
    # Within the limit, partitions are added as before.
    assert _create_partitions(bootstrap, "grow", 3) == ErrorCode.none
    assert _partition_count(bootstrap, "grow") == 3


def test_create_topics_with_a_million_partitions_is_a_policy_violation(broker) -> None:
    bootstrap = broker.bootstrap
    started = time.monotonic()
    assert _create_topics(bootstrap, ("huge", 1_000_000)) == [("huge", ErrorCode.policy_violation)]
    assert time.monotonic() - started < 5
    assert _api_versions_round_trip_s(bootstrap) < 1


def test_the_limit_counts_every_topic_of_one_request(broker_factory) -> None:
    broker = broker_factory(**{"max.partitions.per.request": "10"})
    bootstrap = broker.bootstrap
    assert _create_topics(bootstrap, ("first", 6), ("second", 6), ("third", 4)) == [
        ("first", ErrorCode.none),
        ("second", ErrorCode.policy_violation),
        ("third", ErrorCode.none),
    ]
    assert _create_topics(bootstrap, ("alone", 11)) == [("alone", ErrorCode.policy_violation)]
    assert _create_partitions(bootstrap, "first", 6 + 11) == ErrorCode.policy_violation
    assert _create_partitions(bootstrap, "first", 6 + 10) == ErrorCode.none
