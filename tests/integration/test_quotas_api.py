"""Managing quotas: AlterClientQuotas/DescribeClientQuotas, ``gregor quotas``, and the
request_percentage quota on a live broker."""

from __future__ import annotations

import time

import confluent_kafka
from kio.schema.errors import ErrorCode

from gregor_broker.cli.main import main as gregor
from gregor_broker.cluster.models import ConfigChangeNotification

from .broker_helpers import create_topic
from .quota_helpers import kafka_request, set_quota, zk_admin

DESCRIBE, ALTER = 48, 49


def alter(bootstrap: str, entity: dict, ops: list[dict], validate_only: bool = False):
    entries = [
        {
            "entity": [{"entity_type": k, "entity_name": v} for k, v in entity.items()],
            "ops": [{"value": 0.0, "remove": False} | op for op in ops],
        }
    ]
    return kafka_request(
        bootstrap, ALTER, 1, {"entries": entries, "validate_only": validate_only}
    ).entries[0]


def describe(bootstrap: str, components: list[dict], strict: bool = False):
    return kafka_request(bootstrap, DESCRIBE, 1, {"components": components, "strict": strict})


def test_alter_and_describe_client_quotas_write_kafkas_zookeeper_layout(broker, zk_connect) -> None:
    bootstrap = broker.bootstrap
    result = alter(
        bootstrap,
        {"user": "alice", "client-id": None},
        [
            {"key": "producer_byte_rate", "value": 1048576.0, "remove": False},
            {"key": "request_percentage", "value": 25.5, "remove": False},
        ],
    )
    assert result.error_code == ErrorCode.none
    alter(bootstrap, {"client-id": "my app"}, [{"key": "consumer_byte_rate", "value": 2048.0}])
    with zk_admin(zk_connect) as admin:
        assert admin.get_entity_config("users/alice/clients/<default>") == {
            "producer_byte_rate": "1048576",
            "request_percentage": "25.5",
        }
        assert admin.get_entity_config("clients/my%20app") == {"consumer_byte_rate": "2048"}
        changes = admin.client.get_children("/config/changes")
        paths = {
            ConfigChangeNotification.from_json(
                admin.client.get(f"/config/changes/{child}")[0]
            ).entity_path
            for child in changes
        }
        assert {"users/alice/clients/<default>", "clients/my%20app"} <= paths

    everything = describe(bootstrap, [])
    assert everything.error_code == ErrorCode.none
    described = {
        tuple((e.entity_type, e.entity_name) for e in entry.entity): {
            v.key: v.value for v in entry.values
        }
        for entry in everything.entries
    }
    assert described == {
        (("user", "alice"), ("client-id", None)): {
            "producer_byte_rate": 1048576.0,
            "request_percentage": 25.5,
        },
        (("client-id", "my app"),): {"consumer_byte_rate": 2048.0},
    }
    # user=alice exactly, client-id the default; strict excludes client-only entities.
    only_alice = describe(
        bootstrap,
        [
            {"entity_type": "user", "match_type": 0, "match": "alice"},
            {"entity_type": "client-id", "match_type": 1, "match": None},
        ],
    )
    assert len(only_alice.entries) == 1
    strict_clients = describe(
        bootstrap, [{"entity_type": "client-id", "match_type": 2, "match": None}], strict=True
    )
    assert [[e.entity_name for e in entry.entity] for entry in strict_clients.entries] == [
        ["my app"]
    ]

    # Removing the last key deletes the node (Kafka deletes empty quota configs).
    alter(bootstrap, {"client-id": "my app"}, [{"key": "consumer_byte_rate", "remove": True}])
    with zk_admin(zk_connect) as admin:
        assert admin.client.exists("/config/clients/my%20app") is None


def test_bad_quota_alterations_are_refused_and_validate_only_writes_nothing(
    broker, zk_connect
) -> None:
    bootstrap = broker.bootstrap
    unknown = alter(bootstrap, {"client-id": "x"}, [{"key": "bogus_rate", "value": 1.0}])
    assert unknown.error_code == ErrorCode.invalid_request
    fractional = alter(bootstrap, {"client-id": "x"}, [{"key": "producer_byte_rate", "value": 1.5}])
    assert fractional.error_code == ErrorCode.invalid_request
    ip = alter(bootstrap, {"ip": "1.2.3.4"}, [{"key": "producer_byte_rate", "value": 10.0}])
    assert ip.error_code == ErrorCode.invalid_request
    checked = alter(
        bootstrap,
        {"client-id": "x"},
        [{"key": "producer_byte_rate", "value": 10.0}],
        validate_only=True,
    )
    assert checked.error_code == ErrorCode.none
    with zk_admin(zk_connect) as admin:
        assert admin.client.exists("/config/clients/x") is None
    bad_filter = describe(bootstrap, [{"entity_type": "ip", "match_type": 2, "match": None}])
    assert bad_filter.error_code == ErrorCode.invalid_request


def test_gregor_quotas_cli_sets_lists_and_deletes(broker, zk_connect, capsys) -> None:
    zk = ["--zookeeper", zk_connect]
    assert (
        gregor(["quotas", "set", *zk, "--client-id", "bulk", "--producer-byte-rate", "1048576"])
        == 0
    )
    default_default = ["--default-user", "--default-client-id", "--request-percentage", "50"]
    assert gregor(["quotas", "set", *zk, *default_default]) == 0
    capsys.readouterr()
    assert gregor(["quotas", "list", *zk]) == 0
    listing = capsys.readouterr().out
    assert "client-id=bulk" in listing and "1048576" in listing
    assert "user=<default>, client-id=<default>" in listing and "50" in listing
    # The broker sees CLI-written quotas like any other (DescribeClientQuotas reads the same).
    entries = describe(broker.bootstrap, []).entries
    assert len(entries) == 2
    assert gregor(["quotas", "delete", *zk, "--client-id", "bulk"]) == 0
    assert gregor(["quotas", "set", *zk, "--client-id", "bulk"]) == 1  # nothing to set
    assert gregor(["quotas", "set", *zk, "--producer-byte-rate", "5"]) == 1  # no entity
    capsys.readouterr()
    assert gregor(["quotas", "list", *zk, "--client-id", "bulk"]) == 0
    assert capsys.readouterr().out.strip() == "no quotas configured"


def test_request_percentage_throttles_a_client_that_keeps_the_broker_busy(
    broker_factory, zk_connect
) -> None:
    broker = broker_factory()
    create_topic(broker.bootstrap, "busy")
    with zk_admin(zk_connect) as admin:
        set_quota(admin, None, "busy", request_percentage=0.01)
        time.sleep(1)
    throttles: list[int] = []
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "client.id": "busy",
            "linger.ms": 0,
            "throttle_cb": lambda event: throttles.append(round(event.throttle_time * 1000)),
        }
    )
    for i in range(20):
        producer.produce("busy", b"%d" % i)
        producer.poll(0.05)
    assert producer.flush(60) == 0
    producer.poll(0.2)
    assert throttles and max(throttles) > 0
    # Matches Kafka: a request-quota throttle lasts at most one quota window (1 s).
    assert max(throttles) <= 1000


def test_describe_v0_refusing_a_huge_entity_type_answers_invalid_request(broker) -> None:
    """The refusal quotes the entity type: 32,767 bytes of it (the most a v0 string
    holds) made an error message too long for v0's int16-length string, the response
    failed to encode and the client got UNKNOWN_SERVER_ERROR. The message is shortened
    to fit; the error code is the one the request deserves."""
    huge = "b" * 32767
    for version in (0, 1):
        answer = kafka_request(
            broker.bootstrap,
            DESCRIBE,
            version,
            {"components": [{"entity_type": huge, "match_type": 0, "match": "x"}], "strict": False},
        )
        assert answer.error_code is ErrorCode.invalid_request, (version, answer.error_code)
        assert answer.error_message.startswith("entity type 'bbb")
        if version == 0:
            assert len(answer.error_message.encode()) <= 32767
