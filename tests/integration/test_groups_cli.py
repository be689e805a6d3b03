"""``gregor groups`` shows what the clients see, and manages groups like
kafka-consumer-groups.sh: describe (members, assignments, committed offsets, lag),
list, reset-offsets (dry run by default) and delete."""

from __future__ import annotations

import time

import confluent_kafka

from gregor_broker.cli.groups import describe_rows
from gregor_broker.cli.main import main

from .group_helpers import (
    GROUP_BROKER_PROPERTIES,
    committed_offsets,
    create_topic,
    produce,
    wait_until,
)

TOPIC, GROUP, PARTITIONS = "invoices", "billing", 3


def _consumer(bootstrap: str) -> confluent_kafka.Consumer:
    return confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": GROUP,
            "client.id": "billing-worker",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
        }
    )


def test_describe_matches_what_the_consumer_reports(broker_factory, capsys) -> None:
    broker = broker_factory(**GROUP_BROKER_PROPERTIES)
    bootstrap = broker.bootstrap
    create_topic(bootstrap, TOPIC, PARTITIONS)
    produce(bootstrap, TOPIC, [f"i{n}" for n in range(30)], PARTITIONS)
    consumer = _consumer(bootstrap)
    consumer.subscribe([TOPIC])
    try:
        seen = 0
        deadline = time.monotonic() + 30
        while seen < 30 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                seen += 1
        consumer.commit(
            offsets=[
                confluent_kafka.TopicPartition(TOPIC, 0, 10),
                confluent_kafka.TopicPartition(TOPIC, 1, 4),
                confluent_kafka.TopicPartition(TOPIC, 2, 7),
            ],
            asynchronous=False,
        )
        tps = [confluent_kafka.TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
        client_committed = {tp.partition: tp.offset for tp in consumer.committed(tps, 10)}
        client_ends = {
            p: consumer.get_watermark_offsets(confluent_kafka.TopicPartition(TOPIC, p), 10)[1]
            for p in range(PARTITIONS)
        }
        client_lag = {p: client_ends[p] - client_committed[p] for p in range(PARTITIONS)}
        assert client_lag == {0: 0, 1: 6, 2: 3}

        description, rows = describe_rows(bootstrap, GROUP)
        assert {r.partition: r.committed for r in rows} == client_committed
        assert {r.partition: r.end for r in rows} == client_ends
        assert {r.partition: r.lag for r in rows} == client_lag
        assert {r.member for r in rows} == {consumer.memberid()}
        assert [m.client_id for m in description.members] == ["billing-worker"]

        assert main(["groups", "describe", GROUP, "-b", bootstrap]) == 0
        out = capsys.readouterr().out
        print(out)
        assert f"Group {GROUP}: state Stable, 1 members" in out
        assert (
            f"{TOPIC}  1          4                 10          6    {consumer.memberid()}" in out
        )
        assert main(["groups", "list", "-b", bootstrap]) == 0
        assert f"{GROUP}  Stable" in capsys.readouterr().out
        # Active members: reset and delete are refused with a reason.
        assert (
            main(
                ["groups", "reset-offsets", GROUP, "--all-topics", "--to-earliest", "-b", bootstrap]
            )
            == 1
        )
        assert "stop its consumers first" in capsys.readouterr().err
    finally:
        consumer.close()


def test_reset_offsets_is_a_dry_run_until_execute_and_delete_removes_the_group(
    broker_factory, capsys
) -> None:
    broker = broker_factory(**GROUP_BROKER_PROPERTIES)
    bootstrap = broker.bootstrap
    create_topic(bootstrap, TOPIC, PARTITIONS)
    before = int(time.time() * 1000)
    produce(bootstrap, TOPIC, [f"i{n}" for n in range(30)], PARTITIONS)
    consumer = _consumer(bootstrap)
    consumer.commit(
        offsets=[confluent_kafka.TopicPartition(TOPIC, p, 8) for p in range(PARTITIONS)],
        asynchronous=False,
    )
    consumer.close()
    args = ["groups", "reset-offsets", GROUP, "-b", bootstrap]

    assert main([*args, "--all-topics", "--to-earliest"]) == 0
    assert "dry run" in capsys.readouterr().out
    assert committed_offsets(bootstrap, GROUP, TOPIC, PARTITIONS) == {0: 8, 1: 8, 2: 8}

    assert main([*args, "--all-topics", "--to-earliest", "--execute"]) == 0
    assert committed_offsets(bootstrap, GROUP, TOPIC, PARTITIONS) == {0: 0, 1: 0, 2: 0}

    assert main([*args, "--topic", f"{TOPIC}:1", "--to-offset", "5", "--execute"]) == 0
    assert main([*args, "--topic", f"{TOPIC}:2", "--to-latest", "--execute"]) == 0
    assert committed_offsets(bootstrap, GROUP, TOPIC, PARTITIONS) == {0: 0, 1: 5, 2: 10}

    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(before / 1000 - 60))
    assert main([*args, "--topic", TOPIC, "--to-datetime", stamp, "--execute"]) == 0
    assert committed_offsets(bootstrap, GROUP, TOPIC, PARTITIONS) == {0: 0, 1: 0, 2: 0}
    capsys.readouterr()

    assert main(["groups", "delete", GROUP, "-b", bootstrap]) == 0
    assert f"deleted group {GROUP}" in capsys.readouterr().out
    wait_until(
        lambda: (
            committed_offsets(bootstrap, GROUP, TOPIC, PARTITIONS) == {0: -1001, 1: -1001, 2: -1001}
        ),
        10,
        "the deleted group's offsets to be gone",
    )
    assert main(["groups", "delete", GROUP, "-b", bootstrap]) == 1
