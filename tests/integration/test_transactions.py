"""Transactions against real brokers with confluent-kafka's transactional producer: the
transaction coordinator (``__transaction_state``, InitProducerId with a transactional id,
AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn, markers) and the log side
(control batches, read_committed) together.

- commit and abort interleaved across the partitions of two topics, on 1 broker and on 3
  brokers with replication factor 3: read_committed sees exactly the committed records in
  order, read_uncommitted sees every record;
- zombie fencing: a second producer with the same transactional id fences the first,
  whose later writes never become visible;
- send_offsets_to_transaction: the group's offsets become visible on commit only;
- a hanging transaction (producer SIGKILLed mid-transaction) is aborted after its timeout;
- the coordinator SIGKILLed while transactions commit: every transaction ends committed
  or aborted on every partition.
"""

from __future__ import annotations

import time

import confluent_kafka
import pytest

from .broker_helpers import create_topic
from .group_helpers import wait_until
from .txn_client_helpers import (
    SINGLE_BROKER_PROPERTIES,
    TXN_BROKER_PROPERTIES,
    CommitLoop,
    check_all_or_nothing,
    coordinator_address,
    describe_transaction,
    hanging_transaction,
    read_all,
    transactional_producer,
    wait_for_state,
)

PARTITIONS = 3


def _interleaved_commits_and_aborts(bootstrap: str, topics: list[str], transactional_id: str):
    """Six transactions, commit and abort alternating, each writing to every partition
    of ``topics``; returns (committed values per (topic, partition), all values)."""
    producer = transactional_producer(bootstrap, transactional_id)
    producer.init_transactions(60)
    committed: dict[tuple[str, int], list[bytes]] = {}
    written: dict[tuple[str, int], list[bytes]] = {}
    for number in range(6):
        commit = number % 2 == 0
        producer.begin_transaction()
        for topic in topics:
            for partition in range(PARTITIONS):
                for i in range(5):
                    value = f"{transactional_id}-{number}-{topic}-{partition}-{i}".encode()
                    producer.produce(topic, value, partition=partition)
                    written.setdefault((topic, partition), []).append(value)
                    if commit:
                        committed.setdefault((topic, partition), []).append(value)
        if commit:
            producer.commit_transaction(60)
        else:
            # Aborting purges what is not sent yet: flush so that the aborted records
            # are in the log (read_uncommitted must see them, read_committed not).
            assert producer.flush(60) == 0
            producer.abort_transaction(60)
    return committed, written


def _check_visibility(bootstrap: str, topics: list[str], committed, written) -> None:
    for topic in topics:
        seen = read_all(bootstrap, topic, PARTITIONS)
        for partition in range(PARTITIONS):
            assert seen[partition] == committed[(topic, partition)], (topic, partition)
        everything = read_all(bootstrap, topic, PARTITIONS, isolation="read_uncommitted")
        for partition in range(PARTITIONS):
            assert everything[partition] == written[(topic, partition)], (topic, partition)


def test_commit_and_abort_on_one_broker(broker_factory):
    broker = broker_factory(timeout=90, **SINGLE_BROKER_PROPERTIES)
    topics = ["txn-a", "txn-b"]
    for topic in topics:
        create_topic(broker.bootstrap, topic, partitions=PARTITIONS)
    committed, written = _interleaved_commits_and_aborts(broker.bootstrap, topics, "one-broker")
    _check_visibility(broker.bootstrap, topics, committed, written)
    state = wait_for_state(broker.bootstrap, "one-broker", {"CompleteAbort"})
    assert state.producer_epoch == 0
    assert state.topic_partitions == []


def test_commit_and_abort_on_three_brokers_rf3(cluster_factory):
    cluster = cluster_factory(timeout=180, **TXN_BROKER_PROPERTIES)
    bootstrap = cluster.bootstrap_servers
    topics = ["txn3-a", "txn3-b"]
    for topic in topics:
        create_topic(bootstrap, topic, partitions=PARTITIONS, replication_factor=3)
    committed, written = _interleaved_commits_and_aborts(bootstrap, topics, "three-brokers")
    _check_visibility(bootstrap, topics, committed, written)
    wait_for_state(bootstrap, "three-brokers", {"CompleteAbort"})


def test_zombie_producer_is_fenced(broker_factory):
    broker = broker_factory(timeout=90, **SINGLE_BROKER_PROPERTIES)
    bootstrap = broker.bootstrap
    create_topic(bootstrap, "zombie", partitions=PARTITIONS)
    old = transactional_producer(bootstrap, "shared-id")
    old.init_transactions(60)
    old.begin_transaction()
    old.produce("zombie", b"old-before", partition=0)
    old.flush(30)

    new = transactional_producer(bootstrap, "shared-id")
    new.init_transactions(60)  # fences `old` and aborts its open transaction
    new.begin_transaction()
    new.produce("zombie", b"new", partition=1)
    new.commit_transaction(60)

    old.produce("zombie", b"old-after", partition=2)
    with pytest.raises(confluent_kafka.KafkaException) as raised:
        old.commit_transaction(30)
    error = raised.value.args[0]
    assert error.fatal() or error.code() in (
        confluent_kafka.KafkaError._FENCED,
        confluent_kafka.KafkaError.PRODUCER_FENCED,
        confluent_kafka.KafkaError.INVALID_PRODUCER_EPOCH,
    ), error
    seen = read_all(bootstrap, "zombie", PARTITIONS)
    assert seen == {0: [], 1: [b"new"], 2: []}
    state = describe_transaction(bootstrap, "shared-id")
    assert state.transaction_state == "CompleteCommit"
    # old: epoch 0; the fence bumped it to 1, the new producer's init to 2.
    assert state.producer_epoch == 2


def test_offsets_sent_to_a_transaction_are_visible_on_commit_only(broker_factory):
    broker = broker_factory(timeout=90, **SINGLE_BROKER_PROPERTIES)
    bootstrap = broker.bootstrap
    create_topic(bootstrap, "source", partitions=1)
    create_topic(bootstrap, "sink", partitions=1)
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "eos-group", "enable.auto.commit": False}
    )
    producer = transactional_producer(bootstrap, "eos")
    producer.init_transactions(60)

    def committed() -> int:
        [found] = consumer.committed([confluent_kafka.TopicPartition("source", 0)], 30)
        return found.offset

    for offset, commit in ((5, False), (7, True), (9, False)):
        producer.begin_transaction()
        producer.produce("sink", f"out-{offset}".encode(), partition=0)
        producer.send_offsets_to_transaction(
            [confluent_kafka.TopicPartition("source", 0, offset)],
            consumer.consumer_group_metadata(),
            60,
        )
        if commit:
            producer.commit_transaction(60)
            wait_until(lambda offset=offset: committed() == offset, 30, f"offset {offset}")
        else:
            producer.abort_transaction(60)
            # An aborted transaction's offsets never show, however long we look.
            time.sleep(1.0)
            assert committed() == (7 if offset > 7 else confluent_kafka.OFFSET_INVALID)
    consumer.close()
    assert read_all(bootstrap, "sink", 1) == {0: [b"out-7"]}


def test_hanging_transaction_is_aborted_after_its_timeout(broker_factory):
    broker = broker_factory(timeout=90, **SINGLE_BROKER_PROPERTIES)
    bootstrap = broker.bootstrap
    create_topic(bootstrap, "hang", partitions=1)
    with hanging_transaction(bootstrap, "hanging", "hang", timeout_ms=3000):
        state = describe_transaction(bootstrap, "hanging")
        assert state.transaction_state == "Ongoing"
        assert state.topic_partitions == ["hang-0"]
    # A record after the open transaction: read_committed sees it only once the
    # coordinator aborted the hanging one (the last stable offset moves on).
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    producer.produce("hang", b"after", partition=0)
    producer.flush(30)
    state = wait_for_state(bootstrap, "hanging", {"CompleteAbort"}, timeout=60)
    assert state.producer_epoch == 1  # fenced: the abort bumped the epoch
    assert read_all(bootstrap, "hang", 1) == {0: [b"after"]}


def test_coordinator_killed_while_committing(cluster_factory):
    """A producer commits transactions over 6 partitions in a loop while the
    transaction coordinator is SIGKILLed: every transaction ends committed or aborted
    on every partition (all of its records visible to read_committed, or none), and
    every commit the producer saw succeed is visible."""
    cluster = cluster_factory(timeout=180, **TXN_BROKER_PROPERTIES)
    bootstrap = cluster.bootstrap_servers
    create_topic(bootstrap, "kill-a", partitions=PARTITIONS, replication_factor=3)
    create_topic(bootstrap, "kill-b", partitions=PARTITIONS, replication_factor=3)
    producer = transactional_producer(bootstrap, "killed-coordinator")
    producer.init_transactions(60)
    loop = CommitLoop(producer, ["kill-a", "kill-b"], PARTITIONS)
    loop.start()
    wait_until(lambda: len(loop.committed) >= 10 or bool(loop.failures), 60, "10 commits")
    node, _host, _port = coordinator_address(bootstrap, "killed-coordinator")
    cluster.broker(node).kill()
    loop.stop()
    final = wait_for_state(
        bootstrap, "killed-coordinator", {"CompleteCommit", "CompleteAbort"}, timeout=90
    )
    assert final is not None
    check_all_or_nothing(bootstrap, loop)


def test_idle_transactional_ids_expire(broker_factory):
    broker = broker_factory(
        timeout=90,
        **{
            **SINGLE_BROKER_PROPERTIES,
            "transactional.id.expiration.ms": "2000",
            "transaction.remove.expired.transaction.cleanup.interval.ms": "500",
        },
    )
    bootstrap = broker.bootstrap
    create_topic(bootstrap, "expiring", partitions=1)
    producer = transactional_producer(bootstrap, "short-lived")
    producer.init_transactions(60)
    producer.begin_transaction()
    producer.produce("expiring", b"x", partition=0)
    producer.commit_transaction(60)
    first = wait_for_state(bootstrap, "short-lived", {"CompleteCommit"})

    def gone() -> bool:
        try:
            describe_transaction(bootstrap, "short-lived", timeout=1)
        except AssertionError as error:
            return "TRANSACTIONAL_ID_NOT_FOUND" in str(error).upper()
        return False

    wait_until(gone, 60, "the idle transactional id to expire")
    # A producer with the id afterwards starts over: a new producer id at epoch 0.
    again = transactional_producer(bootstrap, "short-lived")
    again.init_transactions(60)
    state = wait_for_state(bootstrap, "short-lived", {"Empty"})
    assert state.producer_epoch == 0
    assert state.producer_id != first.producer_id


def test_a_producer_past_its_timeout_is_fenced_and_its_data_never_shows(broker_factory):
    """The coordinator aborts a transaction past its timeout, bumping the epoch: the
    producer's later writes fail (librdkafka treats the older epoch as fenced, as against
    Kafka; a KIP-360 client may instead abort and bump its epoch), nothing of that
    transaction becomes visible, and the transactional id carries on."""
    broker = broker_factory(timeout=90, **SINGLE_BROKER_PROPERTIES)
    bootstrap = broker.bootstrap
    create_topic(bootstrap, "slow", partitions=1)
    producer = transactional_producer(
        bootstrap, "slow-producer", **{"transaction.timeout.ms": 2000}
    )
    producer.init_transactions(60)
    producer.begin_transaction()
    producer.produce("slow", b"too-late", partition=0)
    assert producer.flush(30) == 0
    aborted = wait_for_state(bootstrap, "slow-producer", {"CompleteAbort"}, timeout=60)
    assert aborted.producer_epoch == 1
    with pytest.raises(confluent_kafka.KafkaException) as raised:
        producer.produce("slow", b"after-abort", partition=0)
        producer.commit_transaction(30)
    error = raised.value.args[0]
    if error.txn_requires_abort():
        producer.abort_transaction(30)
    else:
        assert error.fatal(), error
        producer = transactional_producer(bootstrap, "slow-producer")
        producer.init_transactions(60)
    producer.begin_transaction()
    producer.produce("slow", b"next", partition=0)
    producer.commit_transaction(60)
    assert read_all(bootstrap, "slow", 1) == {0: [b"next"]}
