"""ZooKeeper paths and JSON models read what Kafka wrote and write what Kafka reads."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gregor_broker.cluster import zk_paths
from gregor_broker.cluster.models import (
    BrokerRegistration,
    ClusterId,
    ConfigChangeNotification,
    ControllerRegistration,
    EntityConfig,
    IsrChangeNotification,
    PartitionReassignment,
    PartitionState,
    PreferredReplicaElection,
    ProducerIdBlock,
    TopicAssignment,
    ZkDataError,
    decode_controller_epoch,
    encode_controller_epoch,
    new_uuid,
    uuid_from_str,
    uuid_to_str,
)


def test_paths_follow_kafkas_layout():
    assert zk_paths.CLUSTER_ID == "/cluster/id"
    assert zk_paths.broker_path(3) == "/brokers/ids/3"
    assert zk_paths.topic_path("orders") == "/brokers/topics/orders"
    assert zk_paths.partition_state_path("orders", 7) == "/brokers/topics/orders/partitions/7/state"
    assert zk_paths.CONTROLLER == "/controller"
    assert zk_paths.CONTROLLER_EPOCH == "/controller_epoch"
    assert zk_paths.topic_config_path("orders") == "/config/topics/orders"
    assert zk_paths.broker_config_path(2) == "/config/brokers/2"
    assert zk_paths.CONFIG_CHANGE_PREFIX == "/config/changes/config_change_"
    assert zk_paths.ADMIN_REASSIGN_PARTITIONS == "/admin/reassign_partitions"
    assert zk_paths.ADMIN_PREFERRED_REPLICA_ELECTION == "/admin/preferred_replica_election"
    assert zk_paths.delete_topic_path("orders") == "/admin/delete_topics/orders"
    assert zk_paths.ISR_CHANGE_PREFIX == "/isr_change_notification/isr_change_"
    assert zk_paths.LATEST_PRODUCER_ID_BLOCK == "/latest_producer_id_block"


def test_quota_entity_paths_are_sanitized_and_allow_default():
    assert zk_paths.user_config_path("CN=alice, O=acme") == "/config/users/CN%3Dalice%2C%20O%3Dacme"
    assert zk_paths.client_config_path("<default>") == "/config/clients/<default>"
    assert (
        zk_paths.user_client_config_path("<default>", "app*1")
        == "/config/users/<default>/clients/app%2A1"
    )


@pytest.mark.parametrize(
    ("name", "sanitized"),
    [
        ("alice", "alice"),
        ("user with space", "user%20with%20space"),
        ("a*b", "a%2Ab"),
        ("a+b", "a%2Bb"),
        ("User:CN=x", "User%3ACN%3Dx"),
        ("dots.dashes-under_scores", "dots.dashes-under_scores"),
        ("tilde~", "tilde%7E"),  # java.net.URLEncoder encodes '~' (Python's quote does not)
        ("é", "%C3%A9"),
    ],
)
def test_sanitize_matches_kafkas_sanitizer(name, sanitized):
    assert zk_paths.sanitize(name) == sanitized
    assert zk_paths.desanitize(sanitized) == name


@given(st.text())
def test_desanitize_inverts_sanitize(name):
    assert zk_paths.desanitize(zk_paths.sanitize(name)) == name


def test_cluster_id_version_is_a_string_like_kafka():
    data = ClusterId("vM4x7q2nTVa9yfSYP8Z7Dw").to_json()
    assert json.loads(data) == {"version": "1", "id": "vM4x7q2nTVa9yfSYP8Z7Dw"}
    assert ClusterId.from_json(data).id == "vM4x7q2nTVa9yfSYP8Z7Dw"


def test_uuid_format_matches_kafkas_uuid_to_string():
    raw = bytes(range(16))
    text = uuid_to_str(raw)
    assert text == "AAECAwQFBgcICQoLDA0ODw"
    assert len(text) == 22 and "=" not in text
    assert uuid_from_str(text) == raw
    assert uuid_to_str(b"\xff" * 16) == "_____________________w"
    with pytest.raises(ValueError):
        uuid_from_str("AAAA")


def test_new_uuid_never_starts_with_dash_and_round_trips():
    for _ in range(500):
        text = new_uuid()
        assert not text.startswith("-")
        assert uuid_to_str(uuid_from_str(text)) == text


KAFKA_BROKER_V5 = (
    b'{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT",'
    b'"SSL":"SSL"},"endpoints":["PLAINTEXT://kafka-0.kafka:9092","SSL://kafka-0.kafka:9093"],'
    b'"jmx_port":-1,"port":9092,"host":"kafka-0.kafka","version":5,'
    b'"timestamp":"1700000000000","rack":"eu-1a"}'
)


def test_broker_registration_reads_kafka_v5():
    registration = BrokerRegistration.from_json(KAFKA_BROKER_V5)
    assert registration.host == "kafka-0.kafka"
    assert registration.port == 9092
    assert registration.rack == "eu-1a"
    assert registration.endpoint_tuples() == [
        ("PLAINTEXT", "kafka-0.kafka", 9092),
        ("SSL", "kafka-0.kafka", 9093),
    ]
    assert registration.security_protocol("SSL") == "SSL"
    assert registration.timestamp == "1700000000000"


def test_broker_registration_reads_old_versions():
    v1 = BrokerRegistration.from_json(
        b'{"jmx_port":-1,"timestamp":"1","host":"h","version":1,"port":9}'
    )
    assert v1.endpoints == ("PLAINTEXT://h:9",)
    assert v1.rack is None
    v2 = BrokerRegistration.from_json(
        b'{"version":2,"host":"h","port":9,"endpoints":["PLAINTEXT://h:9"],"jmx_port":-1,'
        b'"timestamp":"1"}'
    )
    assert v2.listener_security_protocol_map == {}


def test_broker_registration_writes_kafkas_fields():
    registration = BrokerRegistration(
        host="h",
        port=9092,
        endpoints=("PLAINTEXT://h:9092",),
        listener_security_protocol_map={"PLAINTEXT": "PLAINTEXT"},
        rack="r1",
        timestamp="42",
    )
    assert json.loads(registration.to_json()) == {
        "version": 5,
        "host": "h",
        "port": 9092,
        "endpoints": ["PLAINTEXT://h:9092"],
        "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"},
        "rack": "r1",
        "jmx_port": -1,
        "timestamp": "42",
        "features": {},
    }
    assert BrokerRegistration.from_json(registration.to_json()) == registration.__class__(
        **{**_fields(registration), "features": {}}
    )
    no_rack = BrokerRegistration(host="h", port=1, endpoints=("PLAINTEXT://h:1",))
    assert "rack" not in json.loads(no_rack.to_json())


def _fields(obj):
    return {name: getattr(obj, name) for name in obj.__dataclass_fields__}


def test_topic_assignment_round_trip_and_kafka_field_names():
    topic = TopicAssignment.of({1: [2, 3], 0: [1, 2]}, "AAECAwQFBgcICQoLDA0ODw")
    assert json.loads(topic.to_json()) == {
        "version": 3,
        "topic_id": "AAECAwQFBgcICQoLDA0ODw",
        "partitions": {"0": [1, 2], "1": [2, 3]},
        "adding_replicas": {},
        "removing_replicas": {},
    }
    assert TopicAssignment.from_json(topic.to_json()) == topic


@pytest.mark.parametrize(
    "data",
    [
        b'{"version":1,"partitions":{"0":[1,2],"1":[2,3]}}',
        b'{"version":2,"partitions":{"0":[1,2],"1":[2,3]},"adding_replicas":{},'
        b'"removing_replicas":{}}',
    ],
)
def test_topic_assignment_reads_versions_without_topic_id(data):
    topic = TopicAssignment.from_json(data)
    assert topic.topic_id is None
    assert topic.partitions == {0: (1, 2), 1: (2, 3)}


def test_topic_assignment_keeps_reassignment_in_flight():
    data = (
        b'{"version":3,"topic_id":"x","partitions":{"0":[1,2,3,4]},'
        b'"adding_replicas":{"0":[4]},"removing_replicas":{"0":[1]}}'
    )
    topic = TopicAssignment.from_json(data)
    assert topic.adding_replicas == {0: (4,)}
    assert topic.removing_replicas == {0: (1,)}
    assert TopicAssignment.from_json(topic.to_json()) == topic


def test_partition_state_matches_kafka():
    kafka = b'{"controller_epoch":7,"leader":1,"version":1,"leader_epoch":3,"isr":[1,2,3]}'
    state = PartitionState.from_json(kafka)
    assert state == PartitionState(controller_epoch=7, leader=1, leader_epoch=3, isr=(1, 2, 3))
    assert json.loads(state.to_json()) == json.loads(kafka)
    recovering = PartitionState.from_json(
        b'{"controller_epoch":7,"leader":1,"version":1,"leader_epoch":3,"isr":[1],'
        b'"leader_recovery_state":1}'
    )
    assert json.loads(recovering.to_json())["leader_recovery_state"] == 1


def test_controller_and_epoch():
    controller = ControllerRegistration.from_json(b'{"version":1,"brokerid":2,"timestamp":"9"}')
    assert controller.broker_id == 2
    assert json.loads(ControllerRegistration(2, "9").to_json()) == {
        "version": 1,
        "brokerid": 2,
        "timestamp": "9",
    }
    # Kafka 3.4+ migration mode adds a field; it must still parse.
    migrating = b'{"version":2,"brokerid":3000,"timestamp":"1","kraftControllerEpoch":5}'
    assert ControllerRegistration.from_json(migrating).kraft_controller_epoch == 5
    assert encode_controller_epoch(7) == b"7"
    assert decode_controller_epoch(b"7") == 7
    with pytest.raises(ZkDataError):
        decode_controller_epoch(b"seven")


def test_entity_config_values_are_strings():
    config = EntityConfig({"retention.ms": "86400000"})
    assert json.loads(config.to_json()) == {"version": 1, "config": {"retention.ms": "86400000"}}
    assert EntityConfig.from_json(config.to_json()) == config
    assert EntityConfig.from_json(b'{"version":1,"config":{}}').config == {}


def test_config_change_notification_v2_and_v1():
    note = ConfigChangeNotification("topics/orders")
    assert json.loads(note.to_json()) == {"version": 2, "entity_path": "topics/orders"}
    assert note.entity_type == "topics"
    old = ConfigChangeNotification.from_json(
        b'{"version":1,"entity_type":"topics","entity_name":"orders"}'
    )
    assert old.entity_path == "topics/orders"


def test_reassignment_json_as_kafka_reassign_partitions_writes_it():
    data = (
        b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2,3],'
        b'"log_dirs":["any","any","any"]}]}'
    )
    reassignment = PartitionReassignment.from_json(data)
    assert reassignment.partitions == {("t", 0): (1, 2, 3)}
    assert json.loads(reassignment.to_json()) == {
        "version": 1,
        "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2, 3]}],
    }


def test_preferred_election_and_isr_change_share_kafkas_shape():
    data = b'{"version":1,"partitions":[{"topic":"t","partition":0},{"topic":"u","partition":2}]}'
    election = PreferredReplicaElection.from_json(data)
    assert isinstance(election, PreferredReplicaElection)
    assert election.partitions == (("t", 0), ("u", 2))
    assert json.loads(election.to_json()) == json.loads(data)
    isr = IsrChangeNotification.from_json(data)
    assert json.loads(isr.to_json()) == json.loads(data)


def test_producer_id_block_writes_longs_as_strings():
    block = ProducerIdBlock(broker=1, block_start=1000, block_end=1999)
    assert json.loads(block.to_json()) == {
        "version": 1,
        "broker": 1,
        "block_start": "1000",
        "block_end": "1999",
    }
    assert ProducerIdBlock.from_json(block.to_json()) == block


@pytest.mark.parametrize("data", [b"", b"not json", b"[1,2]", b'{"version":1}'])
def test_malformed_znodes_raise_zk_data_error(data):
    with pytest.raises(ZkDataError):
        TopicAssignment.from_json(data)
