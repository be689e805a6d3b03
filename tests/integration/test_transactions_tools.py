"""Transactions with kafka-python's and aiokafka's transactional producers, and the
``gregor transactions list|describe|abort`` command against a hanging transaction."""

from __future__ import annotations

import asyncio
import json

import aiokafka
import kafka

from .broker_helpers import create_topic
from .test_cli_tools import gregor
from .txn_client_helpers import (
    SINGLE_BROKER_PROPERTIES,
    hanging_transaction,
    read_all,
    wait_for_state,
)


def test_kafka_python_and_aiokafka_commit_and_abort(broker_factory):
    broker = broker_factory(timeout=90, **SINGLE_BROKER_PROPERTIES)
    bootstrap = broker.bootstrap
    create_topic(bootstrap, "clients", partitions=2)

    producer = kafka.KafkaProducer(bootstrap_servers=bootstrap, transactional_id="kafka-python")
    producer.init_transactions()
    for number, commit in ((0, True), (1, False), (2, True)):
        producer.begin_transaction()
        for partition in (0, 1):
            producer.send("clients", f"kp-{number}".encode(), partition=partition)
        producer.flush()
        if commit:
            producer.commit_transaction()
        else:
            producer.abort_transaction()
    producer.close()

    async def with_aiokafka() -> None:
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id="aio")
        await producer.start()
        try:
            async with producer.transaction():
                for partition in (0, 1):
                    await producer.send_and_wait("clients", b"aio-0", partition=partition)
            await producer.begin_transaction()
            for partition in (0, 1):
                await producer.send_and_wait("clients", b"aio-1", partition=partition)
            await producer.abort_transaction()
        finally:
            await producer.stop()

    asyncio.run(with_aiokafka())
    expected = [b"kp-0", b"kp-2", b"aio-0"]
    assert read_all(bootstrap, "clients", 2) == {0: expected, 1: expected}
    everything = read_all(bootstrap, "clients", 2, isolation="read_uncommitted")
    assert everything[0] == [b"kp-0", b"kp-1", b"kp-2", b"aio-0", b"aio-1"]
    wait_for_state(bootstrap, "kafka-python", {"CompleteCommit"})
    wait_for_state(bootstrap, "aio", {"CompleteAbort"})


def test_gregor_transactions_list_describe_and_abort(broker_factory):
    broker = broker_factory(timeout=90, **SINGLE_BROKER_PROPERTIES)
    bootstrap = broker.bootstrap
    create_topic(bootstrap, "stuck-topic", partitions=1)
    with hanging_transaction(bootstrap, "stuck", "stuck-topic", timeout_ms=600000):
        listed = json.loads(gregor("transactions", "list", "-b", bootstrap, "-o", "json").stdout)
        assert [(r["transactional_id"], r["transaction_state"]) for r in listed] == [
            ("stuck", "Ongoing")
        ]
        ongoing = gregor("transactions", "list", "-b", bootstrap, "--state", "Ongoing")
        assert "stuck" in ongoing.stdout
        empty = gregor("transactions", "list", "-b", bootstrap, "--state", "CompleteCommit")
        assert "stuck" not in empty.stdout
        [described] = json.loads(
            gregor(
                "transactions", "describe", "-b", bootstrap, "--transactional-id", "stuck",
                "-o", "json",
            ).stdout
        )  # fmt: skip
        assert described["transaction_state"] == "Ongoing"
        assert described["topic_partitions"] == ["stuck-topic-0"]
        assert described["producer_epoch"] == 0
        assert described["transaction_duration_ms"] >= 0
        unknown = gregor(
            "transactions", "describe", "-b", bootstrap, "--transactional-id", "nobody",
            check=False,
        )  # fmt: skip
        assert unknown.returncode == 1
        assert "TRANSACTIONAL_ID_NOT_FOUND" in unknown.stderr
    producer = kafka.KafkaProducer(bootstrap_servers=bootstrap)
    producer.send("stuck-topic", b"after", partition=0).get(30)
    producer.close()
    # The hanging transaction holds read_committed back (last stable offset)...
    assert read_all(bootstrap, "stuck-topic", 1, settle_s=2.0) == {0: []}
    nothing = gregor(
        "transactions", "abort", "-b", bootstrap, "--topic", "stuck-topic", "--partition", "0",
        "--start-offset", "1", check=False,
    )  # fmt: skip
    assert nothing.returncode == 1
    assert "no open transaction starts at offset 1" in nothing.stderr
    # The hanging transaction starts at offset 0: DescribeProducers names its producer.
    aborted = gregor(
        "transactions", "abort", "-b", bootstrap, "--topic", "stuck-topic", "--partition", "0",
        "--start-offset", "0",
    )  # fmt: skip
    assert f"producer {described['producer_id']} (epoch 0)" in aborted.stdout
    assert "aborted" in aborted.stdout
    # ... until the ABORT marker: the later record shows, the aborted one never.
    assert read_all(bootstrap, "stuck-topic", 1) == {0: [b"after"]}
