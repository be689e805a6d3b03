"""``gregor groups`` shows what the clients see, and manages groups like
kafka-consumer-groups.sh: describe (members, assignments, committed offsets, lag),
list, reset-offsets (dry run by default) and delete."""

from __future__ import annotations

import json
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


def _starts_at(bootstrap: str, partition: int) -> int:
    """The offset of the first message a fresh member of GROUP reads from ``partition``:
    where the group's committed offset (or auto.offset.reset) puts it, as a client sees it."""
    consumer = _consumer(bootstrap)
    try:
        consumer.assign([confluent_kafka.TopicPartition(TOPIC, partition)])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                return message.offset()
        raise AssertionError(f"no message from {TOPIC}-{partition} within 20 s")
    finally:
        consumer.close()


def test_reset_modes_shift_duration_current_file_and_delete_offsets(
    broker_factory, capsys, tmp_path
) -> None:
    """Each of Kafka's reset modes, seen by a consumer that then starts at the new offset;
    --dry-run and --output json change nothing; delete-offsets leaves the partition to
    auto.offset.reset."""
    broker = broker_factory(**GROUP_BROKER_PROPERTIES)
    bootstrap = broker.bootstrap
    create_topic(bootstrap, TOPIC, PARTITIONS)
    produce(bootstrap, TOPIC, [f"i{n}" for n in range(30)], PARTITIONS)  # 10 per partition
    consumer = _consumer(bootstrap)
    consumer.commit(
        offsets=[confluent_kafka.TopicPartition(TOPIC, p, 6) for p in range(PARTITIONS)],
        asynchronous=False,
    )
    consumer.close()
    args = ["groups", "reset-offsets", GROUP, "-b", bootstrap]

    assert main([*args, "--all-topics", "--shift-by", "-4", "--dry-run", "-o", "json"]) == 0
    planned = json.loads(capsys.readouterr().out)
    assert [(r["partition"], r["current_offset"], r["new_offset"]) for r in planned] == [
        (0, 6, 2),
        (1, 6, 2),
        (2, 6, 2),
    ]
    assert committed_offsets(bootstrap, GROUP, TOPIC, PARTITIONS) == {0: 6, 1: 6, 2: 6}

    assert main([*args, "--topic", f"{TOPIC}:0", "--shift-by", "-4", "--execute"]) == 0
    assert main([*args, "--topic", f"{TOPIC}:1", "--shift-by", "100", "--execute"]) == 0
    assert committed_offsets(bootstrap, GROUP, TOPIC, PARTITIONS) == {0: 2, 1: 10, 2: 6}
    assert _starts_at(bootstrap, 0) == 2

    # Every message is younger than an hour: by-duration PT1H goes to the first one.
    assert main([*args, "--topic", f"{TOPIC}:2", "--by-duration", "PT1H", "--execute"]) == 0
    assert committed_offsets(bootstrap, GROUP, TOPIC, PARTITIONS)[2] == 0
    # ... and a zero duration finds no message at or after now: the end of the log.
    assert main([*args, "--topic", f"{TOPIC}:2", "--by-duration", "PT0S", "--execute"]) == 0
    assert committed_offsets(bootstrap, GROUP, TOPIC, PARTITIONS)[2] == 10

    assert main([*args, "--all-topics", "--to-current", "--execute"]) == 0
    assert committed_offsets(bootstrap, GROUP, TOPIC, PARTITIONS) == {0: 2, 1: 10, 2: 10}

    plan = tmp_path / "plan.csv"
    plan.write_text(f"{TOPIC},0,7\n{TOPIC},2,3\n")
    assert main([*args, "--from-file", str(plan), "--execute"]) == 0
    assert committed_offsets(bootstrap, GROUP, TOPIC, PARTITIONS) == {0: 7, 1: 10, 2: 3}
    assert _starts_at(bootstrap, 2) == 3
    capsys.readouterr()

    assert main([*args, "--all-topics", "--by-duration", "soon"]) == 2
    assert "--by-duration" in capsys.readouterr().err

    assert main(["groups", "delete-offsets", GROUP, "--topic", f"{TOPIC}:0", "-b", bootstrap]) == 0
    assert "Successful" in capsys.readouterr().out
    assert committed_offsets(bootstrap, GROUP, TOPIC, PARTITIONS) == {0: -1001, 1: 10, 2: 3}
    assert _starts_at(bootstrap, 0) == 0  # auto.offset.reset=earliest
    assert (
        main(["groups", "delete-offsets", GROUP, "--topic", "no-such-topic", "-b", bootstrap]) == 1
    )
    assert "no-such-topic does not exist" in capsys.readouterr().err


def test_describe_members_verbose_and_state(broker_factory, capsys) -> None:
    broker = broker_factory(**GROUP_BROKER_PROPERTIES)
    bootstrap = broker.bootstrap
    create_topic(bootstrap, TOPIC, PARTITIONS)
    produce(bootstrap, TOPIC, [f"i{n}" for n in range(6)], PARTITIONS)
    consumer = _consumer(bootstrap)
    consumer.subscribe([TOPIC])
    try:
        wait_until(
            lambda: consumer.poll(0.2) is not None and len(consumer.assignment()) == PARTITIONS,
            30,
            "the consumer to be assigned every partition",
        )
        describe = ["groups", "describe", GROUP, "-b", bootstrap]
        assert main([*describe, "--state", "-o", "json"]) == 0
        (state,) = json.loads(capsys.readouterr().out)
        assert state["state"] == "Stable" and state["#members"] == 1
        assert state["assignment_strategy"] == "range"

        assert main([*describe, "--members", "--verbose", "-o", "json"]) == 0
        (member,) = json.loads(capsys.readouterr().out)
        assert member["consumer_id"] == consumer.memberid()
        assert member["client_id"] == "billing-worker"
        assert member["#partitions"] == PARTITIONS
        assert sorted(member["assignment"]) == [f"{TOPIC}-{p}" for p in range(PARTITIONS)]

        assert main([*describe, "--members"]) == 0
        out = capsys.readouterr().out
        assert "#PARTITIONS" in out and "ASSIGNMENT" not in out and consumer.memberid() in out

        # Subscribed topics keep their offsets while the group is active, as in Kafka.
        consumer.commit(asynchronous=False)
        assert main(["groups", "delete-offsets", GROUP, "--topic", TOPIC, "-b", bootstrap]) == 1
        captured = capsys.readouterr()
        assert "GROUP_SUBSCRIBED_TO_TOPIC" in captured.out, captured
        assert "stop its consumers first" in captured.err
    finally:
        consumer.close()
    assert main(["groups", "describe", "nobody", "-b", bootstrap]) == 1
    assert "group nobody does not exist" in capsys.readouterr().err
