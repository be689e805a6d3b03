"""A handler that fails unexpectedly answers with the API's error response (F7).

Kafka's ``KafkaApis.handleError`` answers ``request.getErrorResponse(error)``: the
response to the request with the error on everything it named. Gregor derives that
response from the schemas (``protocol.error_response``); it must be encodable for every
API and version it advertises, and the router must send it (one log line, not a
traceback per bad request) instead of closing the connection.
"""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest
from kio.schema.errors import ErrorCode
from tests.request_samples import request_frame, sample_request

from gregor_broker.protocol import entities
from gregor_broker.protocol.error_response import error_response
from gregor_broker.protocol.wire import skip_tagged_fields
from gregor_broker.server.handlers import API_TABLE
from gregor_broker.server.request_router import ApiSpec, RequestRouter
from gregor_broker.stats import RateLimitedLog

VERSIONS = [
    (spec.key, version)
    for spec in API_TABLE.values()
    for version in range(spec.min_version, spec.max_version + 1)
]


@pytest.mark.parametrize(("key", "version"), VERSIONS)
def test_every_api_has_an_error_response_naming_what_the_request_named(key, version) -> None:
    for elements in (0, 2):
        request = sample_request(key, version, elements)
        response = error_response(key, version, request, ErrorCode.unknown_server_error)
        body = entities.encode_response(key, version, response.body)
        _response, size = entities.response_reader(key, version)(body, 0)
        assert size == len(body)


def test_produce_error_response_answers_every_partition() -> None:
    request = sample_request(0, 9, elements=2)
    response = error_response(0, 9, request, ErrorCode.unknown_server_error)
    body = entities.encode_response(0, 9, response.body)
    response, _size = entities.response_reader(0, 9)(body, 0)
    partitions = [p for topic in response.responses for p in topic.partition_responses]
    assert len(partitions) == 4
    assert {p.error_code for p in partitions} == {ErrorCode.unknown_server_error}
    assert {p.base_offset for p in partitions} == {-1}


def _failing(broker, context, request):
    raise RuntimeError("a bug nobody foresaw")


def test_the_router_answers_a_failing_handler_and_logs_one_line_per_request(
    caplog, monkeypatch
) -> None:
    from gregor_broker.server import request_router

    # A fresh limiter: other tests in this process may have used the shared one.
    monkeypatch.setattr(request_router, "handler_errors", RateLimitedLog(request_router.log))
    router = RequestRouter(
        broker=SimpleNamespace(quotas=SimpleNamespace(active=False)),  # type: ignore[arg-type]
        apis={20: ApiSpec(20, "DeleteTopics", 1, 6, _failing)},
    )
    router.preparer.prepare_now(20, 4)  # answers now, not after preparing off the loop
    connection = SimpleNamespace(peer="client:1")
    request = entities.encode(
        entities.build(
            entities.payload_class(20, 4, "request"),
            {"topic_names": ["a", "b"], "timeout": 1000},
        )
    )
    frame = memoryview(request_frame(20, 4, request, correlation_id=99))[4:]
    with caplog.at_level(logging.WARNING, logger="gregor_broker.server.request_router"):
        answers = [router(connection, frame) for _ in range(50)]  # type: ignore[arg-type]
    answer = answers[0]
    assert int.from_bytes(answer[4:8], "big") == 99
    position = skip_tagged_fields(answer, 8)
    response, _size = entities.response_reader(20, 4)(answer, position)
    assert [(r.name, r.error_code) for r in response.responses] == [
        ("a", ErrorCode.unknown_server_error),
        ("b", ErrorCode.unknown_server_error),
    ]
    assert len(caplog.records) == 50
    assert sum(record.exc_info is not None for record in caplog.records) <= 1
    assert "DeleteTopics v4" in caplog.records[0].getMessage()
