"""The log side of transactions with real brokers and real consumers: transactional
batches and WriteTxnMarkers sent as raw requests (a transaction coordinator's part played
by the test), read back by confluent-kafka and kafka-python consumers.

- read_committed consumers skip aborted data and stop at the last stable offset while a
  transaction is open; read_uncommitted ones see everything;
- ListOffsets latest and the Fetch response's last_stable_offset / aborted_transactions;
- WriteTxnMarkers' per-partition errors;
- SIGKILL with an open transaction, the .txnindex lost too: the restarted broker rebuilds
  the open transaction and the aborted-transaction index from the log;
- a follower's copy has the leader's .txnindex, byte for byte.
"""

from __future__ import annotations

import uuid

from kio.schema.errors import ErrorCode

from gregor_broker.log.transaction_index import TransactionIndex

from .broker_helpers import create_topic, every_broker_knows_the_others, produce_values, wait_for
from .txn_helpers import (
    TxnProducer,
    confluent_values,
    describe_producers,
    kafka_python_values,
    latest_offset,
    raw_fetch,
    write_markers,
)

NONE = ErrorCode.none


def _topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _interleaved(bootstrap: str, topic: str) -> tuple[TxnProducer, TxnProducer, TxnProducer]:
    """a0 a1 | b0 b1 | a2 | b2 | ABORT(b) | COMMIT(a) | p0 | c0 (open) | p1.

    Offsets: a 0-1, b 2-3, a 4, b 5, markers 6 and 7, p0 8, c0 9, p1 10."""
    a = TxnProducer(bootstrap, "txn-a")
    b = TxnProducer(bootstrap, "txn-b")
    c = TxnProducer(bootstrap, "txn-c")
    assert a.send(topic, [b"a0", b"a1"]) == (NONE, 0)
    assert b.send(topic, [b"b0", b"b1"]) == (NONE, 2)
    assert a.send(topic, [b"a2"]) == (NONE, 4)
    assert b.send(topic, [b"b2"]) == (NONE, 5)
    assert b.end(False, {topic: [0]}) == {(topic, 0): NONE}
    assert a.end(True, {topic: [0]}) == {(topic, 0): NONE}
    assert produce_values(bootstrap, topic, [b"p0"]) == [8]
    assert c.send(topic, [b"c0"]) == (NONE, 9)
    assert produce_values(bootstrap, topic, [b"p1"]) == [10]
    return a, b, c


COMMITTED = [b"a0", b"a1", b"a2", b"p0"]
EVERYTHING = [b"a0", b"a1", b"b0", b"b1", b"a2", b"b2", b"p0", b"c0", b"p1"]


def test_read_committed_skips_aborted_data_and_stops_at_the_lso(broker) -> None:
    bootstrap = broker.bootstrap
    topic = _topic("txn")
    create_topic(bootstrap, topic)
    a, b, c = _interleaved(bootstrap, topic)
    described = describe_producers(bootstrap, topic)
    assert described.error_code == NONE
    assert sorted(
        (p.producer_id, p.producer_epoch, p.last_sequence, p.current_txn_start_offset)
        for p in described.active_producers
    ) == sorted([(a.producer_id, 0, 2, -1), (b.producer_id, 0, 2, -1), (c.producer_id, 0, 0, 9)])

    assert latest_offset(bootstrap, topic, read_committed=True) == 9  # c0 is open
    assert latest_offset(bootstrap, topic, read_committed=False) == 11
    committed = raw_fetch(bootstrap, topic, read_committed=True)
    assert committed.error_code == NONE
    assert committed.high_watermark == 11 and committed.last_stable_offset == 9
    assert [(t.producer_id, t.first_offset) for t in committed.aborted_transactions] == [
        (b.producer_id, 2)
    ]
    uncommitted = raw_fetch(bootstrap, topic, read_committed=False)
    assert uncommitted.last_stable_offset == 9
    assert uncommitted.aborted_transactions is None

    # The consumers stop at the LSO: p1 (offset 10, not transactional) is not read yet.
    assert confluent_values(bootstrap, topic, read_committed=True, expect=4) == COMMITTED
    assert kafka_python_values(bootstrap, topic, read_committed=True, expect=4) == COMMITTED
    assert confluent_values(bootstrap, topic, read_committed=False, expect=9) == EVERYTHING
    assert kafka_python_values(bootstrap, topic, read_committed=False, expect=9) == EVERYTHING

    assert c.end(True, {topic: [0]}) == {(topic, 0): NONE}  # marker at 11
    assert latest_offset(bootstrap, topic, read_committed=True) == 12
    expected = [*COMMITTED, b"c0", b"p1"]
    assert confluent_values(bootstrap, topic, read_committed=True, expect=6) == expected
    assert kafka_python_values(bootstrap, topic, read_committed=True, expect=6) == expected


def test_write_txn_markers_answers_kafkas_errors(broker) -> None:
    bootstrap = broker.bootstrap
    topic = _topic("markers")
    create_topic(bootstrap, topic, partitions=2)
    producer = TxnProducer(bootstrap, "txn-d", epoch=3)
    assert producer.send(topic, [b"d0"])[0] == NONE
    # Unknown topic and partition; a fenced (older) producer epoch.
    assert write_markers(
        bootstrap, producer.producer_id, 3, True, {"no-such-topic": [0], topic: [7]}
    ) == {
        ("no-such-topic", 0): ErrorCode.unknown_topic_or_partition,
        (topic, 7): (ErrorCode.unknown_topic_or_partition),
    }
    assert producer.end(True, {topic: [0]}, epoch=2) == {
        (topic, 0): ErrorCode.invalid_producer_epoch
    }
    # Committed by coordinator epoch 5: a marker of coordinator epoch 4 is a zombie's.
    assert producer.end(True, {topic: [0, 1]}, coordinator_epoch=5) == {
        (topic, 0): NONE,
        (topic, 1): NONE,  # a partition the producer never wrote to: a marker all the same
    }
    assert producer.send(topic, [b"d1"])[0] == NONE
    assert producer.end(False, {topic: [0]}, coordinator_epoch=4) == {
        (topic, 0): ErrorCode.transaction_coordinator_fenced
    }
    assert latest_offset(bootstrap, topic, read_committed=True) == 2  # d1 still open
    assert producer.end(False, {topic: [0]}, coordinator_epoch=5) == {(topic, 0): NONE}
    assert latest_offset(bootstrap, topic, read_committed=True) == 4
    assert confluent_values(bootstrap, topic, read_committed=True, expect=1) == [b"d0"]


def test_an_open_transaction_and_the_aborted_index_survive_sigkill(broker) -> None:
    bootstrap = broker.bootstrap
    topic = _topic("crash")
    create_topic(bootstrap, topic)
    _interleaved(bootstrap, topic)
    index_path = broker.log_dir / f"{topic}-0" / f"{0:020d}.txnindex"
    assert wait_for(lambda: index_path.exists(), 10)
    written = TransactionIndex.load(index_path).entries
    assert [(e.first_offset, e.last_offset) for e in written] == [(2, 6)]

    broker.kill()
    index_path.unlink()  # as if the index write had not reached the disk
    broker.start()
    broker.wait_registered(60)

    assert wait_for(lambda: latest_offset(bootstrap, topic, read_committed=False) == 11, 60)
    assert latest_offset(bootstrap, topic, read_committed=True) == 9  # c0 still open
    assert confluent_values(bootstrap, topic, read_committed=True, expect=4) == COMMITTED
    assert kafka_python_values(bootstrap, topic, read_committed=True, expect=4) == COMMITTED
    assert TransactionIndex.load(index_path).entries == written


def test_a_follower_copies_markers_and_the_txn_index(broker_factory) -> None:
    first = broker_factory()
    second = broker_factory()
    assert every_broker_knows_the_others([first, second])  # two replicas
    topic = _topic("replicated")
    create_topic(first.bootstrap, topic, replication_factor=2)
    leader = None

    def find_leader() -> bool:
        nonlocal leader
        for candidate in (first, second):
            try:
                latest_offset(candidate.bootstrap, topic, read_committed=False)
            except AssertionError:
                continue
            leader = candidate
            return True
        return False

    assert wait_for(find_leader, 90)
    assert leader is not None
    follower = second if leader is first else first
    _interleaved(leader.bootstrap, topic)
    producer = TxnProducer(leader.bootstrap, "txn-e")
    assert producer.send(topic, [b"e0"]) == (NONE, 11)
    # Only the leader takes markers.
    assert producer.end(False, {topic: [0]}, bootstrap=follower.bootstrap) == {
        (topic, 0): ErrorCode.not_leader_or_follower
    }
    assert producer.end(False, {topic: [0]}) == {(topic, 0): NONE}
    assert describe_producers(follower.bootstrap, topic).error_code == (
        ErrorCode.not_leader_or_follower
    )

    name = f"{topic}-0/{0:020d}.txnindex"
    leader_index = (leader.log_dir / name).read_bytes()
    assert len(TransactionIndex.load(leader.log_dir / name).entries) == 2
    assert wait_for(
        lambda: (
            (follower.log_dir / name).exists()
            and (follower.log_dir / name).read_bytes() == leader_index
        ),
        90,
    )
    # The follower's producer state has c's transaction open too: once it leads, the
    # LSO it answers is the same.
    leader.kill()
    assert wait_for(lambda: latest_offset(follower.bootstrap, topic, read_committed=True) == 9, 180)
    assert confluent_values(follower.bootstrap, topic, read_committed=True, expect=4) == COMMITTED


def test_producer_ids_expire_after_producer_id_expiration_ms(broker_factory) -> None:
    import time

    from gregor_broker.protocol.records import Record, make_batch

    from .produce_crafting import produce

    broker = broker_factory(
        **{
            "producer.id.expiration.ms": "2000",
            "producer.id.expiration.check.interval.ms": "500",
        }
    )
    topic = _topic("expiry")
    create_topic(broker.bootstrap, topic)
    producer = TxnProducer(broker.bootstrap, "unused")

    def idempotent(sequence: int) -> bytes:
        return make_batch(
            [Record(0, 0, None, b"v")],
            producer_id=producer.producer_id,
            producer_epoch=0,
            base_sequence=sequence,
            base_timestamp=int(time.time() * 1000),
        )

    assert produce(broker.bootstrap, topic, idempotent(0)).error_code == NONE
    # Known: a gap in its sequences is refused.
    assert (
        produce(broker.bootstrap, topic, idempotent(40)).error_code
        == ErrorCode.out_of_order_sequence_number
    )
    # Expired: unknown again, so it may start anywhere.
    assert wait_for(lambda: produce(broker.bootstrap, topic, idempotent(40)).error_code == NONE, 60)
