"""Requests a handler cannot serve are answered with Kafka's error, not a closed connection.

Raw protocol against a real broker. Each case was found closing the connection (an
exception in a handler or in kio's decoder) where Kafka answers: unknown tagged fields
(KIP-482), a topic named twice in DeleteTopics, two deletions of one topic at once,
Metadata v10/v11 with a null topic name, Fetch v15 with a zero topic id in a new
session, Fetch v12 with a null cluster id tag, ListPartitionReassignments for names no
topic can have, OffsetCommit v2-v4 with a retention time no timedelta holds. After each,
the same connection still answers ApiVersions.
"""

from __future__ import annotations

import datetime
import time
import uuid

import pytest
from kio.schema.errors import ErrorCode

from gregor_broker.protocol import entities
from gregor_broker.protocol.wire import encode_unsigned_varint
from gregor_broker.server.handlers import API_TABLE

from ..request_samples import sample_request, with_unknown_tag
from .broker_helpers import create_topic
from .raw_requests import RawClient, request

FLEXIBLE = [
    (spec.key, spec.name, version)
    for spec in API_TABLE.values()
    for version in range(spec.min_version, spec.max_version + 1)
    if entities.is_flexible(spec.key, version)
]


def _still_answers(client: RawClient) -> None:
    response = client.call(
        18, 3, request(18, 3, client_software_name="t", client_software_version="1")
    )
    assert response.error_code == ErrorCode.none


def _safe_sample(key: int, version: int):
    """A request that changes nothing on the broker: every array empty."""
    return sample_request(key, version, elements=0)


def test_an_unknown_tagged_field_in_any_flexible_request_is_skipped(broker) -> None:
    """F6: every advertised flexible API and version, with an unknown tag added to the
    body and one to the header, gets an answer on the same connection."""
    answered = []
    with RawClient(broker.bootstrap) as client:
        for key, name, version in FLEXIBLE:
            if key == 0:
                continue  # an empty acks=1 produce is answered; acks=0 (the sample) is not
            body = with_unknown_tag(entities.encode(_safe_sample(key, version)))
            header_tags = encode_unsigned_varint(1) + encode_unsigned_varint(3) + b"\x01x"
            client.call(key, version, body, header_tags=header_tags)
            answered.append(f"{name} v{version}")
        produce = request(0, 9, acks=1, timeout=1000, topic_data=[])
        client.call(0, 9, with_unknown_tag(entities.encode(produce)))
        _still_answers(client)
    assert len(answered) == len([api for api in FLEXIBLE if api[0] != 0])


def _delete_topics_v6(*names: str):
    return request(
        20,
        6,
        topics=[{"name": name, "topic_id": uuid.UUID(int=0)} for name in names],
        timeout=30000,
    )


def test_delete_topics_naming_a_topic_twice_answers_invalid_request_for_the_repeat(
    broker,
) -> None:
    create_topic(broker.bootstrap, "twice")
    with RawClient(broker.bootstrap) as client:
        response = client.call(20, 6, _delete_topics_v6("twice", "twice"))
        codes = [(result.name, result.error_code) for result in response.responses]
        assert codes == [("twice", ErrorCode.none), ("twice", ErrorCode.invalid_request)]
        response = client.call(20, 4, request(20, 4, topic_names=["gone", "gone"], timeout=0))
        assert [r.error_code for r in response.responses] == [
            ErrorCode.unknown_topic_or_partition,
            ErrorCode.invalid_request,
        ]
        _still_answers(client)


def test_two_deletions_of_one_topic_at_once_are_both_answered(broker) -> None:
    create_topic(broker.bootstrap, "contested")
    with RawClient(broker.bootstrap) as first, RawClient(broker.bootstrap) as second:
        body = entities.encode(_delete_topics_v6("contested"))
        sent = [first.send(20, 6, body), second.send(20, 6, body)]
        answers = [
            client.receive(20, 6, correlation_id)
            for client, correlation_id in zip((first, second), sent, strict=True)
        ]
        codes = {answer.responses[0].error_code for answer in answers}
        # Kafka: deleting a topic already marked for deletion succeeds; one deleted
        # meanwhile is UNKNOWN_TOPIC_OR_PARTITION.
        assert codes <= {ErrorCode.none, ErrorCode.unknown_topic_or_partition}, codes
        _still_answers(first)
        _still_answers(second)


def test_metadata_v10_v11_with_a_null_topic_name_is_an_invalid_request(broker) -> None:
    with RawClient(broker.bootstrap) as client:
        for version in (10, 11):
            fields = {
                "topics": [{"name": None, "topic_id": uuid.UUID(int=0)}],
                "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False,
            }
            if version == 10:
                fields["include_cluster_authorized_operations"] = False
            response = client.call(3, version, request(3, version, **fields))
            # Kafka's MetadataRequest.getErrorResponse: the null name becomes "".
            assert [(t.name, t.error_code) for t in response.topics] == [
                ("", ErrorCode.invalid_request)
            ]
        _still_answers(client)


def _fetch_partition(version: int) -> dict:
    return {
        "partition": 0,
        "current_leader_epoch": -1,
        "fetch_offset": 0,
        "last_fetched_epoch": -1,
        "log_start_offset": -1,
        "partition_max_bytes": 1 << 20,
    }


def test_fetch_v15_with_a_zero_topic_id_in_a_new_session_is_unknown_topic_id(broker) -> None:
    fetch = request(
        1,
        15,
        max_wait=0,
        min_bytes=0,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=0,  # a full fetch that asks for a new session
        topics=[{"topic_id": uuid.UUID(int=0), "partitions": [_fetch_partition(15)]}],
        forgotten_topics_data=[],
        rack_id="",
    )
    with RawClient(broker.bootstrap) as client:
        response = client.call(1, 15, fetch)
        assert response.error_code == ErrorCode.none
        (topic,) = response.responses
        assert [p.error_code for p in topic.partitions] == [ErrorCode.unknown_topic_id]
        _still_answers(client)


def test_fetch_v12_with_a_null_cluster_id_tag_is_answered(broker) -> None:
    create_topic(broker.bootstrap, "clustered")
    fetch = request(
        1,
        12,
        replica_id=-1,
        max_wait=0,
        min_bytes=0,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[{"topic": "clustered", "partitions": [_fetch_partition(12)]}],
        forgotten_topics_data=[],
        rack_id="",
    )
    body = entities.encode(fetch)
    assert body.endswith(b"\x00")
    # Tag 0 (cluster_id) present, holding a null compact string.
    body = body[:-1] + b"\x01" + b"\x00" + b"\x01" + b"\x00"
    with RawClient(broker.bootstrap) as client:
        response = client.call(1, 12, body)
        assert response.error_code == ErrorCode.none
        (topic,) = response.responses
        assert [p.error_code for p in topic.partitions] == [ErrorCode.none]
        _still_answers(client)


@pytest.mark.parametrize("name", [".", "", ".."])
def test_list_partition_reassignments_for_an_impossible_topic_name_is_answered(
    broker, name: str
) -> None:
    with RawClient(broker.bootstrap) as client:
        response = client.call(
            46,
            0,
            request(46, 0, timeout=30000, topics=[{"name": name, "partition_indexes": [0]}]),
        )
        # Matches Kafka (ZooKeeper mode): a partition that is not being reassigned,
        # existing or not, is left out of the answer.
        assert response.error_code == ErrorCode.none
        assert response.topics == ()
        _still_answers(client)


def _coordinator_ready(client: RawClient, group: str) -> None:
    deadline = time.monotonic() + 30
    while True:
        found = client.call(10, 0, request(10, 0, key=group))
        if found.error_code == ErrorCode.none:
            return
        assert time.monotonic() < deadline, found
        time.sleep(0.2)


def test_offset_commit_with_a_retention_time_beyond_any_timedelta_is_answered(broker) -> None:
    create_topic(broker.bootstrap, "retained")
    marker = (1234567).to_bytes(8, "big", signed=True)
    with RawClient(broker.bootstrap) as client:
        _coordinator_ready(client, "retaining")
        for version in (2, 3, 4):
            for retention_ms in (2**63 - 1, 2**62, -(2**63)):
                commit = request(
                    8,
                    version,
                    group_id="retaining",
                    generation_id_or_member_epoch=-1,
                    member_id="",
                    retention_time=datetime.timedelta(milliseconds=1234567),
                    topics=[
                        {
                            "name": "retained",
                            "partitions": [
                                {
                                    "partition_index": 0,
                                    "committed_offset": 5,
                                    "committed_metadata": "",
                                }
                            ],
                        }
                    ],
                )
                body = entities.encode(commit)
                assert body.count(marker) == 1
                body = body.replace(marker, retention_ms.to_bytes(8, "big", signed=True))
                response = client.call(8, version, body)
                codes = [p.error_code for t in response.topics for p in t.partitions]
                assert codes == [ErrorCode.none], (version, retention_ms, codes)
        fetched = client.call(
            9,
            1,
            request(
                9, 1, group_id="retaining", topics=[{"name": "retained", "partition_indexes": [0]}]
            ),
        )
        assert [p.committed_offset for t in fetched.topics for p in t.partitions] == [5]
        _still_answers(client)


def test_scram_credentials_of_a_user_no_znode_can_name_are_answered(broker) -> None:
    """The fuzzer's DescribeUserScramCredentials for a user "." was answered
    UNKNOWN_SERVER_ERROR: "/config/users/." is no ZooKeeper path (nor are "" and "..").
    No credentials can exist there: RESOURCE_NOT_FOUND, as Kafka answers for the empty
    name; altering them is UNACCEPTABLE_CREDENTIAL."""
    names = ["", ".", ".."]
    with RawClient(broker.bootstrap) as client:
        described = client.call(50, 0, request(50, 0, users=[{"name": n} for n in names]))
        assert described.error_code == ErrorCode.none
        assert {r.user: r.error_code for r in described.results} == {
            name: ErrorCode.resource_not_found for name in names
        }
        upsert = {"mechanism": 1, "iterations": 8192, "salt": b"s", "salted_password": b"p"}
        altered = client.call(
            51,
            0,
            request(
                51,
                0,
                deletions=[{"name": "..", "mechanism": 1}],
                upsertions=[{"name": ".", **upsert}],
            ),
        )
        assert {r.user: r.error_code for r in altered.results} == {
            ".": ErrorCode.unacceptable_credential,
            "..": ErrorCode.unacceptable_credential,
        }
        _still_answers(client)


def test_describe_configs_quoting_a_huge_name_in_a_non_flexible_version_is_answered(
    broker,
) -> None:
    """Found by the fuzzer (seed 20261128): DescribeConfigs v1 and v3 answered
    UNKNOWN_SERVER_ERROR for a resource name of 32,767 bytes, the most a v0-v3 string
    holds: the error message quoting it did not fit the response's int16-length string.
    A topic name that long is illegal, as Kafka's Topic.validate says first; a broker
    resource naming another broker quotes the name, shortened to fit."""
    huge = "t" * 32767
    with RawClient(broker.bootstrap) as client:
        for version in (1, 2, 3):  # the non-flexible versions served (v0 is gone in Kafka 4)
            for resource_type, expected in ((2, ErrorCode.invalid_topic_exception),
                                            (4, ErrorCode.invalid_request)):  # fmt: skip
                body = request(
                    32,
                    version,
                    resources=[
                        {
                            "resource_type": resource_type,
                            "resource_name": huge,
                            "configuration_keys": None,
                        }
                    ],
                    include_synonyms=False,
                    include_documentation=False,
                )
                answer = client.call(32, version, body)
                [result] = answer.results
                assert result.error_code is expected, (version, resource_type, result)
                assert result.resource_name == huge
                assert len(result.error_message.encode()) <= 32767
        _still_answers(client)
