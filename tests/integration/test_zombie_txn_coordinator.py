"""A transaction coordinator that wakes after losing its ZooKeeper session never
describes its stale transactions.

The group coordinator's leadership lease (``test_zombie_coordinator.py``) did not cover
the transaction coordinator: SIGSTOPped past its session timeout, it woke still
believing it led its ``__transaction_state`` partition and answered the
DescribeTransactions / ListTransactions waiting in its socket from its cache (the old
producer epoch, a transaction the new coordinator had aborted meanwhile). It now answers
for a transactional id only while a recent ZooKeeper read confirmed its leadership; a
woken zombie answers NOT_COORDINATOR (and lists nothing of that partition) and the
client finds the real coordinator.
"""

from __future__ import annotations

import json
import signal
import struct

from gregor_broker.cli.transactions import parse_describe_transactions
from gregor_broker.devtools.local_cluster import zookeeper_client
from gregor_broker.protocol import entities
from gregor_broker.protocol.wire import skip_tagged_fields

from .broker_helpers import create_topic, read_response, wait_for
from .raw_requests import RawClient, request
from .txn_client_helpers import describe_transaction, transactional_producer

TOPIC, TXN_ID = "ledger", "settler"
DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 65, 66


def _describe(client: RawClient, correlation_id: int) -> dict:
    frame = read_response(client.sock)
    assert struct.unpack_from(">i", frame)[0] == correlation_id
    [found] = parse_describe_transactions(memoryview(frame), skip_tagged_fields(frame, 4))
    return found


def _send_describe(client: RawClient) -> int:
    body = entities.encode(request(DESCRIBE_TRANSACTIONS, 0, transactional_ids=[TXN_ID]))
    return client.send(DESCRIBE_TRANSACTIONS, 0, body)


def _send_list(client: RawClient) -> int:
    body = entities.encode(request(LIST_TRANSACTIONS, 0, state_filters=[], producer_id_filters=[]))
    return client.send(LIST_TRANSACTIONS, 0, body)


def _init(bootstrap: str) -> bool:
    producer = transactional_producer(bootstrap, TXN_ID)
    try:
        producer.init_transactions(20)
        return True
    except Exception as error:  # the coordinator moves: try again
        print(f"init_transactions: {error}")
        return False


def test_a_woken_zombie_transaction_coordinator_does_not_describe_stale_state(
    cluster_factory,
) -> None:
    cluster = cluster_factory(
        **{
            "min.insync.replicas": "2",
            "transaction.state.log.replication.factor": "3",
            "transaction.state.log.min.isr": "2",
            "transaction.state.log.num.partitions": "1",
            "zookeeper.session.timeout.ms": "3000",
            "replica.lag.time.max.ms": "3000",
        }
    )
    bootstrap = cluster.bootstrap_servers
    create_topic(bootstrap, TOPIC, partitions=1, replication_factor=3)
    producer = transactional_producer(bootstrap, TXN_ID)
    producer.init_transactions(60)
    producer.begin_transaction()
    producer.produce(TOPIC, b"open")
    producer.flush(30)
    first = describe_transaction(bootstrap, TXN_ID)
    assert first.transaction_state == "Ongoing", first

    zk = zookeeper_client(cluster.zookeeper_connect)
    try:

        def coordinator_now() -> int:
            data, _ = zk.get("/brokers/topics/__transaction_state/partitions/0/state")
            return json.loads(data)["leader"]

        old_id = coordinator_now()
        zombie = cluster.broker(old_id)
        others = ",".join(b.bootstrap for b in cluster.brokers if b is not zombie)
        with RawClient(zombie.bootstrap) as stale_reader:
            seen = _describe(stale_reader, _send_describe(stale_reader))
            assert (seen["error_code"], seen["producer_epoch"]) == (0, first.producer_epoch)
            zombie.signal(signal.SIGSTOP)
            try:
                assert wait_for(lambda: coordinator_now() not in (old_id, -1), 30)
                # A new producer with the id: the new coordinator aborts the open
                # transaction and bumps the epoch.
                assert wait_for(lambda: _init(others), 90)
                # Queued in the frozen broker's socket: the first it reads on waking.
                describe_id = _send_describe(stale_reader)
                list_id = _send_list(stale_reader)
            finally:
                zombie.signal(signal.SIGCONT)
            answer = _describe(stale_reader, describe_id)
            listed = stale_reader.receive(LIST_TRANSACTIONS, 0, list_id)
    finally:
        zk.stop()
        zk.close()

    fresh = describe_transaction(others, TXN_ID)
    print(f"woken coordinator: {answer}; listed {listed.transaction_states}; fresh {fresh}")
    assert fresh.producer_epoch > first.producer_epoch, fresh
    assert answer["error_code"] == 16 or (  # NOT_COORDINATOR
        answer["error_code"] == 0 and answer["producer_epoch"] == fresh.producer_epoch
    ), f"the woken coordinator described its stale state: {answer}"
    stale = [
        t
        for t in listed.transaction_states
        if t.transactional_id == TXN_ID and t.transaction_state == "Ongoing"
    ]
    assert not stale, f"the woken coordinator listed its stale state: {stale}"
