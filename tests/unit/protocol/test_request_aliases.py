"""The kio request aliases handlers are typed with cover exactly the versions served."""

from __future__ import annotations

import pytest

from gregor_broker.protocol import entities, requests
from gregor_broker.server.handlers import API_TABLE


@pytest.mark.parametrize(
    ("api_key", "versions"),
    [
        (0, requests.PRODUCE_REQUEST_VERSIONS),
        (1, requests.FETCH_REQUEST_VERSIONS),
        (3, requests.METADATA_REQUEST_VERSIONS),
    ],
)
def test_alias_versions_are_the_served_versions_and_the_decoded_classes(api_key, versions):
    spec = API_TABLE[api_key]
    assert sorted(versions) == list(range(spec.min_version, spec.max_version + 1))
    for version, cls in versions.items():
        # The class the router decodes a request of this version into.
        assert entities.payload_class(api_key, version, "request") is cls
