"""ZkAdmin against a real ZooKeeper: the znodes it writes are the ones Kafka's tools write."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from gregor_broker.cluster import zk_paths
from gregor_broker.cluster.admin import (
    BadVersion,
    BrokerIdInUse,
    InvalidPartitions,
    InvalidReplicaAssignment,
    InvalidTopic,
    TopicAlreadyMarkedForDeletion,
    TopicExists,
    UnknownTopic,
    ZkAdmin,
)
from gregor_broker.cluster.models import BrokerRegistration, PartitionState, uuid_from_str
from gregor_broker.config import InvalidConfig


def _client(zk_connect: str) -> KazooClient:
    client = KazooClient(hosts=zk_connect, timeout=6.0)
    client.start(timeout=15)
    client.ensure_path("/")
    return client


@pytest.fixture
def clients(zk_connect: str) -> Iterator[list[KazooClient]]:
    started: list[KazooClient] = []

    def make() -> KazooClient:
        client = _client(zk_connect)
        started.append(client)
        return client

    make()
    yield started
    for client in started:
        client.stop()
        client.close()


@pytest.fixture
def client(clients: list[KazooClient]) -> KazooClient:
    return clients[0]


@pytest.fixture
def admin(client: KazooClient) -> ZkAdmin:
    admin = ZkAdmin(client)
    admin.ensure_paths()
    return admin


def test_ensure_paths_creates_kafkas_persistent_parents(admin, client):
    for path in (
        "/brokers/ids",
        "/brokers/topics",
        "/config/topics",
        "/config/changes",
        "/config/users",
        "/config/clients",
        "/config/brokers",
        "/admin/delete_topics",
        "/isr_change_notification",
    ):
        assert client.exists(path) is not None, path
    admin.ensure_paths()  # idempotent


def test_cluster_id_is_created_once(admin, client, zk_connect):
    first = admin.get_or_create_cluster_id()
    assert len(uuid_from_str(first)) == 16
    other = ZkAdmin(_client(zk_connect))
    try:
        assert other.get_or_create_cluster_id() == first
    finally:
        other.client.stop()
        other.client.close()
    data, _ = client.get("/cluster/id")
    assert json.loads(data) == {"version": "1", "id": first}


def test_concurrent_cluster_id_creation_agrees(zk_connect):
    results: list[str] = []
    clients = [_client(zk_connect) for _ in range(4)]
    threads = [
        threading.Thread(target=lambda c=c: results.append(ZkAdmin(c).get_or_create_cluster_id()))
        for c in clients
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for c in clients:
        c.stop()
        c.close()
    assert len(results) == 4 and len(set(results)) == 1


def test_create_topic_writes_config_then_assignment(admin, client):
    topic = admin.create_topic("orders", {0: [1, 2], 1: [2, 3]}, {"retention.ms": "86400000"})
    config_stat = client.exists("/config/topics/orders")
    topic_stat = client.exists("/brokers/topics/orders")
    assert config_stat.czxid < topic_stat.czxid  # config node first, as AdminZkClient does
    data, _ = client.get("/brokers/topics/orders")
    assert json.loads(data) == {
        "version": 3,
        "topic_id": topic.topic_id,
        "partitions": {"0": [1, 2], "1": [2, 3]},
        "adding_replicas": {},
        "removing_replicas": {},
    }
    data, _ = client.get("/config/topics/orders")
    assert json.loads(data) == {"version": 1, "config": {"retention.ms": "86400000"}}
    assert admin.list_topics() == ["orders"]
    assert admin.get_topic("orders") == topic
    assert admin.get_topic("missing") is None
    # Partition state is the controller's job.
    assert client.exists("/brokers/topics/orders/partitions") is None


def test_create_topic_keeps_a_given_topic_id_and_writes_empty_config(admin, client):
    admin.create_topic("t", {0: [1]}, {}, topic_id="AAECAwQFBgcICQoLDA0ODw")
    assert admin.get_topic("t").topic_id == "AAECAwQFBgcICQoLDA0ODw"
    data, _ = client.get("/config/topics/t")
    assert json.loads(data) == {"version": 1, "config": {}}


def test_create_topic_rejects_existing_colliding_and_invalid(admin):
    admin.create_topic("a.b", {0: [1]}, {})
    with pytest.raises(TopicExists, match=r"'a\.b' already exists"):
        admin.create_topic("a.b", {0: [1]}, {})
    with pytest.raises(InvalidTopic, match="collides"):
        admin.create_topic("a_b", {0: [1]}, {})
    with pytest.raises(InvalidTopic):
        admin.create_topic("bad/name", {0: [1]}, {})
    with pytest.raises(InvalidConfig, match="Unknown topic config name"):
        admin.create_topic("c", {0: [1]}, {"retention.hours": "1"})
    with pytest.raises(InvalidReplicaAssignment, match="duplicate"):
        admin.create_topic("d", {0: [1, 1]}, {})
    with pytest.raises(InvalidReplicaAssignment, match="same replication factor"):
        admin.create_topic("e", {0: [1, 2], 1: [1]}, {})
    assert admin.list_topics() == ["a.b"]


def test_reads_a_topic_znode_written_by_old_kafka(admin, client):
    client.create("/brokers/topics/legacy", b'{"version":1,"partitions":{"0":[0,1]}}')
    topic = admin.get_topic("legacy")
    assert topic.topic_id is None
    assert topic.partitions == {0: (0, 1)}


def test_add_partitions_rewrites_with_versioned_set(admin, client):
    created = admin.create_topic("t", {0: [1, 2], 1: [2, 1]}, {})
    updated = admin.add_partitions("t", {2: [1, 2], 3: [2, 1]})
    assert updated.topic_id == created.topic_id
    assert admin.get_topic("t").partitions == {0: (1, 2), 1: (2, 1), 2: (1, 2), 3: (2, 1)}
    _, stat = client.get("/brokers/topics/t")
    assert stat.version == 1
    with pytest.raises(Exception, match="consecutive from 4"):
        admin.add_partitions("t", {5: [1, 2]})
    with pytest.raises(InvalidReplicaAssignment, match="replication factor 1"):
        admin.add_partitions("t", {4: [1]})
    with pytest.raises(UnknownTopic):
        admin.add_partitions("nope", {0: [1]})


def _written_meanwhile(admin, monkeypatch, write) -> None:
    """The next read of a topic by ``admin`` is followed at once by ``write`` (a real
    write to ZooKeeper), so that the rewrite based on that read loses."""
    read = admin.get_topic_with_version
    pending = [write]

    def read_then_write(name):
        found = read(name)
        if pending:
            pending.pop()()
        return found

    monkeypatch.setattr(admin, "get_topic_with_version", read_then_write)


def test_add_partitions_that_lose_a_rewrite_read_the_topic_again(admin, client, monkeypatch):
    """Another writer between the read and the versioned rewrite (a reassignment, another
    CreatePartitions): the partitions are added to what is there now, or refused when
    they no longer continue it; never the BadVersion of the lost rewrite."""
    admin.create_topic("t", {0: [1, 2]}, {})
    topic, version = admin.get_topic_with_version("t")
    _written_meanwhile(admin, monkeypatch, lambda: admin.set_topic_assignment("t", topic, version))
    admin.add_partitions("t", {1: [2, 1]})
    assert admin.get_topic("t").partitions == {0: (1, 2), 1: (2, 1)}
    _, stat = client.get("/brokers/topics/t")
    assert stat.version == 2  # the other writer's, then ours

    other = ZkAdmin(client)
    _written_meanwhile(admin, monkeypatch, lambda: other.add_partitions("t", {2: [1, 2]}))
    with pytest.raises(InvalidPartitions, match="consecutive from 3"):
        admin.add_partitions("t", {2: [2, 1]})
    assert admin.get_topic("t").partitions == {0: (1, 2), 1: (2, 1), 2: (1, 2)}


def test_set_topic_assignment_is_conditional(admin):
    admin.create_topic("t", {0: [1]}, {})
    topic, version = admin.get_topic_with_version("t")
    admin.set_topic_assignment("t", topic, version)
    with pytest.raises(BadVersion):
        admin.set_topic_assignment("t", topic, version)


def test_request_topic_deletion(admin, client):
    admin.create_topic("t", {0: [1]}, {})
    admin.request_topic_deletion("t")
    data, _ = client.get("/admin/delete_topics/t")
    assert data == b""
    assert admin.topics_marked_for_deletion() == ["t"]
    with pytest.raises(TopicAlreadyMarkedForDeletion):
        admin.request_topic_deletion("t")
    with pytest.raises(UnknownTopic):
        admin.request_topic_deletion("missing")


def test_request_topic_deletions_marks_many_topics_in_one_batch(admin, client):
    admin.create_topic("a", {0: [1]}, {})
    admin.create_topic("b", {0: [1]}, {})
    admin.request_topic_deletion("b")
    results = admin.request_topic_deletions(["a", "b", "missing"])
    assert results["a"] is None
    assert isinstance(results["b"], TopicAlreadyMarkedForDeletion)
    assert isinstance(results["missing"], UnknownTopic)
    assert admin.topics_marked_for_deletion() == ["a", "b"]


def test_delete_topics_znodes_removes_every_node_of_each_topic(admin, client):
    for name in ("a", "b"):
        admin.create_topic(name, {i: [1] for i in range(1500)}, {"retention.ms": "1"})
        state = PartitionState(1, 1, 0, (1,)).to_json()
        pending = [
            client.create_async(zk_paths.partition_state_path(name, index), state, makepath=True)
            for index in range(1500)
        ]
        for request in pending:
            request.get()
    admin.request_topic_deletions(["a", "b"])
    # "b" lost a partition state meanwhile: the batch falls back to node-by-node for it.
    client.delete("/brokers/topics/b/partitions/3/state")
    assert admin.delete_topics_znodes(["a", "b", "gone"]) == ["a", "b", "gone"]
    assert client.get_children("/brokers/topics") == []
    assert client.get_children("/config/topics") == []
    assert admin.topics_marked_for_deletion() == []


def test_set_topic_config_writes_node_then_notification(admin, client):
    admin.create_topic("t", {0: [1]}, {})
    admin.set_topic_config("t", {"cleanup.policy": "compact", "retention.ms": "1000"})
    assert admin.get_topic_config("t") == {"cleanup.policy": "compact", "retention.ms": "1000"}
    changes = sorted(client.get_children("/config/changes"))
    assert changes == ["config_change_0000000000"]
    data, stat = client.get("/config/changes/" + changes[0])
    assert json.loads(data) == {"version": 2, "entity_path": "topics/t"}
    assert stat.ephemeralOwner == 0  # persistent
    config_stat = client.exists("/config/topics/t")
    assert config_stat.mzxid < stat.czxid

    admin.set_topic_config("t", {})
    data, _ = client.get("/config/topics/t")
    assert json.loads(data) == {"version": 1, "config": {}}  # topics keep their node
    assert len(client.get_children("/config/changes")) == 2
    with pytest.raises(InvalidConfig):
        admin.set_topic_config("t", {"segment.bytes": "1"})
    with pytest.raises(UnknownTopic):
        admin.set_topic_config("missing", {})


def test_quota_config_node_is_deleted_when_empty(admin, client):
    user = zk_paths.sanitize("CN=alice")
    entity = f"users/{user}"
    admin.set_entity_config(entity, {"producer_byte_rate": "1048576"})
    data, _ = client.get(zk_paths.user_config_path("CN=alice"))
    assert json.loads(data) == {"version": 1, "config": {"producer_byte_rate": "1048576"}}
    admin.set_entity_config(entity, {})
    assert client.exists(zk_paths.user_config_path("CN=alice")) is None
    notes = [json.loads(client.get("/config/changes/" + c)[0]) for c in sorted(
        client.get_children("/config/changes"))]  # fmt: skip
    assert notes == [{"version": 2, "entity_path": entity}] * 2


def test_partition_state_conditional_updates(admin, client):
    admin.create_topic("t", {0: [1, 2]}, {})
    assert admin.get_partition_state("t", 0) is None
    state = PartitionState(controller_epoch=1, leader=1, leader_epoch=0, isr=(1, 2))
    assert admin.create_partition_state("t", 0, state) == 0
    with pytest.raises(NodeExistsError):
        admin.create_partition_state("t", 0, state)
    read, version = admin.get_partition_state("t", 0)
    assert read == state and version == 0
    data, _ = client.get("/brokers/topics/t/partitions/0/state")
    assert json.loads(data) == {
        "version": 1,
        "controller_epoch": 1,
        "leader": 1,
        "leader_epoch": 0,
        "isr": [1, 2],
    }
    moved = PartitionState(controller_epoch=1, leader=2, leader_epoch=1, isr=(2,))
    assert admin.set_partition_state("t", 0, moved, 0) == 1
    with pytest.raises(BadVersion):
        admin.set_partition_state("t", 0, state, 0)
    with pytest.raises(BadVersionError):  # callers may catch kazoo's error too
        admin.set_partition_state("t", 0, state, 0)
    assert admin.get_partition_state("t", 0) == (moved, 1)


def registration(host: str = "127.0.0.1", port: int = 9092, rack: str | None = None):
    return BrokerRegistration(
        host=host,
        port=port,
        endpoints=(f"PLAINTEXT://{host}:{port}",),
        listener_security_protocol_map={"PLAINTEXT": "PLAINTEXT"},
        rack=rack,
    )


def test_register_and_list_brokers(admin, client):
    admin.register_broker(registration(port=9092, rack="a"), 1)
    admin.register_broker(registration(port=9093, rack="b"), 2)
    brokers = admin.list_brokers()
    assert list(brokers) == [1, 2]
    assert brokers[2].port == 9093 and brokers[2].rack == "b"
    assert client.exists("/brokers/ids/1").ephemeralOwner == client.client_id[0]
    # Re-registering from the same session refreshes the data.
    admin.register_broker(registration(port=9099, rack="a"), 1)
    assert admin.get_broker(1).port == 9099


def test_register_broker_fails_clearly_while_another_session_holds_the_id(admin, clients):
    admin.register_broker(registration(), 1)
    other = ZkAdmin(_client_from(clients))
    with pytest.raises(BrokerIdInUse, match=r"Broker id 1 is registered by another"):
        other.register_broker(registration(port=9999), 1, timeout=0.5)


def test_register_broker_waits_for_the_old_session_to_vanish(admin, clients):
    admin.register_broker(registration(), 1)
    other = ZkAdmin(_client_from(clients))
    timer = threading.Timer(0.5, admin.client.stop)  # the old session ends meanwhile
    timer.start()
    other.register_broker(registration(port=9999), 1, timeout=10)
    timer.join()
    assert other.get_broker(1).port == 9999


def _client_from(clients: list[KazooClient]) -> KazooClient:
    hosts = clients[0].hosts
    chroot = clients[0].chroot
    client = KazooClient(hosts=",".join(f"{h}:{p}" for h, p in hosts) + chroot, timeout=6.0)
    client.start(timeout=15)
    clients.append(client)
    return client


def test_controller_election_increments_epoch(admin, client, clients):
    assert admin.get_controller() is None
    assert admin.get_controller_epoch() is None
    assert admin.try_become_controller(1) == 1
    assert admin.get_controller().broker_id == 1
    assert client.get("/controller_epoch")[0] == b"1"
    assert client.exists("/controller").ephemeralOwner == client.client_id[0]
    data = json.loads(client.get("/controller")[0])
    assert data["version"] == 1 and data["brokerid"] == 1 and isinstance(data["timestamp"], str)

    other = ZkAdmin(_client_from(clients))
    assert other.try_become_controller(2) is None
    assert admin.get_controller_epoch()[0] == 1

    assert admin.resign_controller(2) is False
    assert admin.resign_controller(1) is True
    assert other.try_become_controller(2) == 2
    assert client.get("/controller_epoch")[0] == b"2"


def test_a_candidate_whose_answer_was_lost_still_holds_its_win(admin, client, clients):
    """The controller retries its election after a ConnectionLoss; when the lost answer
    was a win, ``/controller`` is its own session's and the epoch is the one it wrote."""
    assert admin.try_become_controller(1) == 1
    assert admin.try_become_controller(1) == 1
    assert client.get("/controller_epoch")[0] == b"1"
    other = ZkAdmin(_client_from(clients))
    assert other.try_become_controller(1) is None  # same broker id, another session


def test_only_one_of_many_concurrent_candidates_wins(clients):
    candidates = [ZkAdmin(_client_from(clients)) for _ in range(5)]
    results: dict[int, int | None] = {}
    barrier = threading.Barrier(len(candidates))

    def run(broker_id: int, candidate: ZkAdmin) -> None:
        barrier.wait()
        results[broker_id] = candidate.try_become_controller(broker_id)

    threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate(candidates)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    winners = {b: e for b, e in results.items() if e is not None}
    assert list(winners.values()) == [1]
    assert candidates[0].get_controller().broker_id == next(iter(winners))


def test_admin_requests_and_isr_notifications(admin, client):
    from gregor_broker.cluster.models import PartitionReassignment

    admin.request_reassignment(PartitionReassignment({("t", 0): (1, 2, 3)}))
    assert admin.get_reassignment().partitions == {("t", 0): (1, 2, 3)}
    with pytest.raises(NodeExistsError):
        admin.request_reassignment(PartitionReassignment({("t", 1): (1,)}))
    admin.request_preferred_replica_election([("t", 0)])
    data, _ = client.get("/admin/preferred_replica_election")
    assert json.loads(data) == {"version": 1, "partitions": [{"topic": "t", "partition": 0}]}
    path = admin.notify_isr_change([("t", 0)])
    assert path.startswith("/isr_change_notification/isr_change_")


def test_partition_states_are_read_in_one_pipelined_call(admin, client):
    """The coordinator's lease renewal reads every __consumer_offsets partition it leads
    at once; a missing state znode reads as None."""
    admin.create_topic("t", {0: [1, 2], 1: [2, 1], 2: [1, 2]}, {})
    first = PartitionState(controller_epoch=1, leader=1, leader_epoch=3, isr=(1, 2))
    second = PartitionState(controller_epoch=1, leader=2, leader_epoch=0, isr=(2, 1))
    admin.create_partition_state("t", 0, first)
    admin.create_partition_state("t", 1, second)
    assert admin.get_partition_states("t", [0, 1, 2], 10.0) == {
        0: (first, 0),
        1: (second, 0),
        2: None,
    }


def test_partitions_led_by_reads_before_what_its_then_sends(admin, client):
    """A controlled shutdown deregisters from ``then``, right behind the state reads
    instead of after their answers: ZooKeeper executes one session's requests in the
    order sent, so the reads still see every state from before it. Here ``then`` moves
    every partition away at once, on the same session (what the controller does once the
    broker is gone); the answer must still list them all, at their old versions."""
    partitions = 150
    admin.create_topic("led", {p: [1, 2] for p in range(partitions)}, {})
    admin.create_topic("elsewhere", {0: [2, 3]}, {})
    topic_id = admin.get_topic("led").topic_id
    for index in range(partitions):
        admin.create_partition_state("led", index, PartitionState(1, 1, 0, (1, 2)))
    admin.create_partition_state("elsewhere", 0, PartitionState(1, 2, 0, (2, 3)))
    moved = PartitionState(1, 2, 1, (2,)).to_json()
    sent = []

    def move_away() -> None:
        sent.extend(
            client.set_async(zk_paths.partition_state_path("led", index), moved, version=0)
            for index in range(partitions)
        )

    led = admin.partitions_led_by(1, 30.0, then=move_away)
    assert len(sent) == partitions, "then is called once"
    assert led == {("led", index): (topic_id, 0) for index in range(partitions)}
    assert all(request.get().version == 1 for request in sent)
    assert admin.partitions_led_by(1, 30.0) == {}
    assert admin.partitions_led_by(2, 30.0) == {
        **{("led", index): (topic_id, 1) for index in range(partitions)},
        ("elsewhere", 0): (admin.get_topic("elsewhere").topic_id, 0),
    }


def test_deregistration_checked_against_known_states(admin, client):
    """One transaction: the registration goes only if every given state is still at its
    version; otherwise nothing changes and the caller reads the states instead."""
    admin.create_topic("checked", {p: [1, 2] for p in range(3)}, {})
    for index in range(3):
        admin.create_partition_state("checked", index, PartitionState(1, 1, 0, (1, 2)))
    admin.set_partition_state("checked", 2, PartitionState(1, 2, 1, (2,)), 0)
    admin.register_broker(registration(), 1)
    known = {("checked", 0): 0, ("checked", 1): 0, ("checked", 2): 0}  # 2 is at 1
    assert admin.deregister_broker_if_states_unchanged(1, known) is False
    assert admin.get_broker(1) is not None, "a refused check deletes nothing"
    known[("checked", 2)] = 1
    assert admin.deregister_broker_if_states_unchanged(1, {**known, ("gone", 0): 0}) is False
    assert admin.get_broker(1) is not None
    assert admin.deregister_broker_if_states_unchanged(1, known) is True
    assert admin.get_broker(1) is None
    with pytest.raises(NoNodeError):
        admin.deregister_broker_if_states_unchanged(1, known)
    # Too many states for one request: refused before anything is sent.
    admin.register_broker(registration(), 1)
    many = {("t" * 200, index): 0 for index in range(5000)}
    assert admin.deregister_broker_if_states_unchanged(1, many) is False
    assert admin.get_broker(1) is not None
