"""A null in any string, bytes or array field of any request gets Kafka's answer.

Raw protocol against a real broker: for every API and version it advertises, every
string, bytes and array field (nested ones too) is sent as null, one at a time, in an
otherwise valid request. Where the schema allows a null (``nullableVersions``) the broker
answers, and nowhere with UNKNOWN_SERVER_ERROR (ElectLeaders' null ``topic_partitions``
means every partition). Where it does not, Kafka's generated reader refuses the request
("non-nullable field ... was serialized as null") and the connection closes: kio decoded
such a null as None and handlers failed on it (an ElectLeaders topic with null
``partitions`` was answered UNKNOWN_SERVER_ERROR). After every case a fresh connection
still answers ApiVersions.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from kio.schema.errors import ErrorCode

from gregor_broker.protocol import entities
from gregor_broker.server.handlers import API_TABLE

from ..request_samples import encode_with_nulls, field_type, nullable_fields, sample_request
from .raw_requests import RawClient, request, server_errors

CASES = [
    (spec.key, f"{spec.name} v{version}", version, path, nullable)
    for spec in API_TABLE.values()
    for version in range(spec.min_version, spec.max_version + 1)
    for path, nullable in nullable_fields(entities.payload_class(spec.key, version, "request"))
]


def _body(key: int, version: int, path: tuple[str, ...]) -> bytes:
    sample = sample_request(key, version)
    if key == 0:
        sample = dataclasses.replace(sample, acks=1)  # acks=0 is never answered
    cls = entities.payload_class(key, version, "request")
    return encode_with_nulls(sample, [(path, field_type(cls, path))])


def _answer(bootstrap: str, key: int, version: int, body: bytes) -> Any:
    """The decoded answer, or "closed" when the broker closed the connection."""
    with RawClient(bootstrap) as client:
        correlation_id = client.send(key, version, body)
        try:
            return client.receive(key, version, correlation_id)
        except (TimeoutError, ConnectionError):
            return "closed"


def test_a_null_in_any_request_field_is_answered_or_refused_as_kafka_does(broker) -> None:
    problems = []
    for key, name, version, path, nullable in CASES:
        where = f"{name} {'.'.join(path)} (nullable: {nullable})"
        answer = _answer(broker.bootstrap, key, version, _body(key, version, path))
        if answer != "closed" and server_errors(answer):
            problems.append(f"{where}: UNKNOWN_SERVER_ERROR at {server_errors(answer)}")
        elif nullable and answer == "closed":
            problems.append(f"{where}: connection closed")
        elif not nullable and answer != "closed":
            problems.append(f"{where}: answered, Kafka refuses the request")
        with RawClient(broker.bootstrap) as client:
            versions = client.call(
                18, 3, request(18, 3, client_software_name="t", client_software_version="1")
            )
            assert versions.error_code == ErrorCode.none, where
    assert len(CASES) > 600  # every advertised API and version had its fields nulled
    assert not problems, "\n".join(problems)
