"""The kio request aliases handlers are typed with cover exactly the versions served."""

from __future__ import annotations

import typing

import pytest

from gregor_broker.protocol import entities, requests
from gregor_broker.server.handlers import API_TABLE


@pytest.mark.parametrize("api_key", sorted(API_TABLE))
def test_each_served_api_has_its_versions_and_the_classes_the_router_decodes(api_key):
    spec = API_TABLE[api_key]
    versions = requests.REQUEST_VERSIONS[api_key]
    assert sorted(versions) == list(range(spec.min_version, spec.max_version + 1))
    for version, cls in versions.items():
        assert entities.payload_class(api_key, version, "request") is cls


@pytest.mark.parametrize("api_key", sorted(API_TABLE))
def test_each_handler_is_typed_with_its_apis_alias(api_key):
    spec = API_TABLE[api_key]
    hints = typing.get_type_hints(spec.handler)
    alias = hints["request"]
    members = set(typing.get_args(alias)) or {alias}
    assert members == set(requests.REQUEST_VERSIONS[api_key].values())
