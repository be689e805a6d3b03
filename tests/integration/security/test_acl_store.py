"""cluster/acls.py against a real ZooKeeper: Kafka's znodes, conditional updates, change
notifications seen by a listener on another client."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from kazoo.client import KazooClient

from gregor_broker.cluster import acls as store
from gregor_broker.config import load_broker_config
from gregor_broker.security.acl import (
    AclBinding,
    AclBindingFilter,
    AclEntry,
    AclEntryFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from gregor_broker.server.authorizer import AclAuthorizer, build_authorizer

ALICE_READ = AclEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW)
BOB_WRITE = AclEntry("User:bob", "10.0.0.1", AclOperation.WRITE, AclPermissionType.DENY)
BOB_READ_DENIED = AclEntry("User:bob", "10.0.0.1", AclOperation.READ, AclPermissionType.DENY)
ORDERS = ResourcePattern(ResourceType.TOPIC, "orders", PatternType.LITERAL)
PREFIXED = ResourcePattern(ResourceType.GROUP, "app-", PatternType.PREFIXED)


@pytest.fixture
def clients(zk_connect: str) -> Iterator[list[KazooClient]]:
    started = []
    for _ in range(2):
        client = KazooClient(hosts=zk_connect, timeout=6.0)
        client.start(timeout=15)
        client.ensure_path("/")
        started.append(client)
    yield started
    for client in started:
        client.stop()
        client.close()


def test_znodes_are_kafkas(clients: list[KazooClient]) -> None:
    client = clients[0]
    store.ensure_acl_paths(client)
    assert "Topic" in client.get_children("/kafka-acl")
    assert "TransactionalId" in client.get_children("/kafka-acl-extended/prefixed")
    results = store.add_acls(
        client, [AclBinding(ORDERS, ALICE_READ), AclBinding(PREFIXED, BOB_READ_DENIED)]
    )
    assert results == [None, None]
    data, _ = client.get("/kafka-acl/Topic/orders")
    assert json.loads(data) == {
        "version": 1,
        "acls": [
            {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"}
        ],
    }
    data, _ = client.get("/kafka-acl-extended/prefixed/Group/app-")
    assert json.loads(data)["acls"][0]["permissionType"] == "Deny"
    literal = client.get_children("/kafka-acl-changes")
    extended = client.get_children("/kafka-acl-extended-changes")
    assert len(literal) == 1 and literal[0].startswith("acl_changes_")
    assert client.get(f"/kafka-acl-changes/{literal[0]}")[0] == b"TOPIC:orders"
    assert json.loads(client.get(f"/kafka-acl-extended-changes/{extended[0]}")[0]) == {
        "version": 1,
        "resourceType": "GROUP",
        "name": "app-",
        "patternType": "PREFIXED",
    }
    # Adding what is there changes nothing and announces nothing.
    assert store.add_acls(client, [AclBinding(ORDERS, ALICE_READ)]) == [None]
    assert len(client.get_children("/kafka-acl-changes")) == 1
    loaded = store.load_all_acls(client)
    assert loaded[ORDERS].acls == {ALICE_READ}
    assert set(loaded) == {ORDERS, PREFIXED}


def test_invalid_bindings_are_refused(clients: list[KazooClient]) -> None:
    client = clients[0]
    bad = [
        AclBinding(ResourcePattern(ResourceType.TOPIC, "a/b"), ALICE_READ),
        AclBinding(ResourcePattern(ResourceType.CLUSTER, "other"), ALICE_READ),
        AclBinding(
            ResourcePattern(ResourceType.GROUP, "g"),
            AclEntry("User:x", "*", AclOperation.WRITE, AclPermissionType.ALLOW),
        ),
        AclBinding(ORDERS, AclEntry("alice", "*", AclOperation.READ, AclPermissionType.ALLOW)),
    ]
    results = store.add_acls(client, bad)
    assert all(isinstance(result, ValueError) for result in results)
    assert store.load_all_acls(client) == {}


def test_conditional_updates_lose_nothing_between_writers(clients: list[KazooClient]) -> None:
    """Two writers adding different entries to one pattern at once: both survive."""
    entries = [
        AclEntry(f"User:u{i}", "*", AclOperation.READ, AclPermissionType.ALLOW) for i in range(20)
    ]
    errors: list[BaseException] = []

    def write(client: KazooClient, part: list[AclEntry]) -> None:
        try:
            for entry in part:
                assert store.add_acls(client, [AclBinding(ORDERS, entry)]) == [None]
        except BaseException as error:  # reported below
            errors.append(error)

    threads = [threading.Thread(target=write, args=(clients[i], entries[i::2])) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors
    assert store.read_acls(clients[0], ORDERS).acls == set(entries)


def test_remove_with_filters_and_the_empty_pattern_goes(clients: list[KazooClient]) -> None:
    client = clients[0]
    other = ResourcePattern(ResourceType.TOPIC, "payments")
    store.add_acls(
        client,
        [
            AclBinding(ORDERS, ALICE_READ),
            AclBinding(ORDERS, BOB_WRITE),
            AclBinding(other, ALICE_READ),
        ],
    )
    alice_anywhere = AclBindingFilter(
        ResourcePatternFilter(ResourceType.TOPIC, None, PatternType.ANY),
        AclEntryFilter("User:alice", None, AclOperation.ANY, AclPermissionType.ANY),
    )
    results = store.remove_acls(client, [alice_anywhere], store.load_all_acls(client))
    assert sorted(b.pattern.name for b, error in results[0] if error is None) == [
        "orders",
        "payments",
    ]
    assert store.read_acls(client, ORDERS).acls == {BOB_WRITE}
    assert not client.exists("/kafka-acl/Topic/payments")
    # A definite filter finds a pattern the caller did not know of.
    exact = AclBindingFilter(
        ResourcePatternFilter(ResourceType.TOPIC, "orders", PatternType.LITERAL),
        AclEntryFilter(None, None, AclOperation.ANY, AclPermissionType.ANY),
    )
    results = store.remove_acls(client, [exact], [])
    assert [b.entry for b, _ in results[0]] == [BOB_WRITE]
    assert not client.exists("/kafka-acl/Topic/orders")


def test_listener_sees_changes_from_another_client(clients: list[KazooClient]) -> None:
    writer, watcher = clients
    store.ensure_acl_paths(writer)
    store.add_acls(writer, [AclBinding(ORDERS, ALICE_READ)])  # before: not reported
    seen: list[ResourcePattern] = []
    listener = store.AclChangeListener(watcher, seen.append)
    listener.start()
    store.add_acls(writer, [AclBinding(PREFIXED, ALICE_READ)])
    store.remove_acls(
        writer,
        [
            AclBindingFilter(
                ResourcePatternFilter(ResourceType.TOPIC, "orders", PatternType.LITERAL),
                AclEntryFilter(None, None, AclOperation.ANY, AclPermissionType.ANY),
            )
        ],
        [],
    )
    deadline = time.monotonic() + 60
    while len(seen) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    listener.stop()
    assert set(seen) == {PREFIXED, ORDERS}


@dataclass
class Session:
    """What a decision needs of a request (a RequestContext has these)."""

    principal: str
    host: str = "10.0.0.7"
    api_key: int = 1
    api_name: str = "Fetch"


def _authorizer(zk_connect: str, client: KazooClient, **keys: str) -> AclAuthorizer:
    config = load_broker_config(
        None,
        {
            "broker.id": "1",
            "log.dirs": "/nonexistent",
            "zookeeper.connect": zk_connect,
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            **keys,
        },
        env={},
    )
    authorizer = build_authorizer(config, client)
    assert isinstance(authorizer, AclAuthorizer)
    return authorizer


def test_authorizer_loads_follows_counts_and_audits(
    clients: list[KazooClient], zk_connect: str, caplog: pytest.LogCaptureFixture
) -> None:
    writer, broker_client = clients
    store.add_acls(writer, [AclBinding(ORDERS, ALICE_READ)])  # before start: loaded
    authorizer = _authorizer(
        zk_connect,
        broker_client,
        **{"super.users": "User:admin", "authorizer.audit.log.enable": "true"},
    )
    authorizer.start()
    try:
        alice, bob = Session("User:alice"), Session("User:bob")
        with caplog.at_level(logging.DEBUG, logger="kafka.authorizer.logger"):
            assert authorizer.authorize(alice, AclOperation.READ, ResourceType.TOPIC, "orders")
            assert not authorizer.authorize(bob, AclOperation.READ, ResourceType.TOPIC, "orders")
            assert not authorizer.authorize(
                bob, AclOperation.DESCRIBE, ResourceType.GROUP, "g", log_if_denied=False
            )
        messages = [r.getMessage() for r in caplog.records if r.name == "kafka.authorizer.logger"]
        assert (
            "Principal = User:bob is Denied Operation = Read from host = 10.0.0.7 on resource "
            "= Topic:LITERAL:orders for request = Fetch with resourceRefCount = 1"
        ) in messages
        assert any("User:alice is Allowed Operation = Read" in m for m in messages)
        # A decision made only to filter is logged below DEBUG (Kafka: TRACE).
        assert not [r for r in caplog.records if "Operation = Describe" in r.getMessage()]
        # Only explicit refusals count.
        assert authorizer.denials == {"Topic": 1}
        assert authorizer.authorize(
            Session("User:admin"), AclOperation.ALTER, ResourceType.CLUSTER, "kafka-cluster"
        )
        # A change by another writer reaches the cache through the notification.
        store.add_acls(
            writer,
            [
                AclBinding(
                    ORDERS, AclEntry("User:bob", "*", AclOperation.READ, AclPermissionType.ALLOW)
                )
            ],
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not authorizer.authorize(
            bob, AclOperation.READ, ResourceType.TOPIC, "orders"
        ):
            time.sleep(0.1)
        assert authorizer.authorize(bob, AclOperation.READ, ResourceType.TOPIC, "orders")
        # The broker's own writes update its cache at once.
        removed = authorizer.delete_acls(
            [
                AclBindingFilter(
                    ResourcePatternFilter(ResourceType.TOPIC, "orders", PatternType.LITERAL),
                    AclEntryFilter("User:bob", None, AclOperation.ANY, AclPermissionType.ANY),
                )
            ]
        )
        assert len(removed[0]) == 1
        assert not authorizer.authorize(bob, AclOperation.READ, ResourceType.TOPIC, "orders")
    finally:
        authorizer.stop()


def test_no_authorizer_allows_everything(zk_connect: str) -> None:
    config = load_broker_config(
        None,
        {"broker.id": "1", "log.dirs": "/nonexistent", "zookeeper.connect": zk_connect},
        env={},
    )
    authorizer = build_authorizer(config, None)
    assert not authorizer.enabled
    assert authorizer.authorize(
        Session("User:x"), AclOperation.ALTER, ResourceType.CLUSTER, "kafka-cluster"
    )


def test_set_principal_acls_makes_them_exactly_the_desired_ones(clients: list[KazooClient]) -> None:
    client = clients[0]
    bob_read = AclBinding(
        ORDERS, AclEntry("User:bob", "*", AclOperation.READ, AclPermissionType.ALLOW)
    )
    store.add_acls(client, [AclBinding(ORDERS, ALICE_READ), bob_read])
    group = AclBinding(
        PREFIXED, AclEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW)
    )
    write = AclBinding(
        ORDERS, AclEntry("User:alice", "*", AclOperation.WRITE, AclPermissionType.ALLOW)
    )
    added, removed = store.set_principal_acls(client, "User:alice", [group, write])
    assert set(added) == {group, write} and removed == [AclBinding(ORDERS, ALICE_READ)]
    stored = set(store.list_acls(client))
    assert stored == {bob_read, group, write}  # bob's untouched
    assert store.set_principal_acls(client, "User:alice", [group, write]) == ([], [])
    assert store.set_principal_acls(client, "User:alice", []) == (
        [],
        sorted([group, write], key=str),
    )
    assert set(store.list_acls(client)) == {bob_read}
    with pytest.raises(ValueError):
        store.set_principal_acls(client, "User:alice", [bob_read])
