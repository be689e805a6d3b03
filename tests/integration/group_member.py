"""A consumer-group member process for the group integration tests.

    python group_member.py CLIENT BOOTSTRAP GROUP TOPIC OUT_FILE [JSON_CONFIG]

CLIENT is ``confluent`` or ``kafka-python``. The member subscribes to TOPIC, processes
every message (appends ``MSG <partition> <offset> <value>`` to OUT_FILE), commits
synchronously after each poll, and logs rebalance callbacks as ``ASSIGN``/``REVOKE``
lines with the wall-clock time and the partitions, then ``OWNED`` with its whole
assignment. SIGTERM closes the consumer cleanly (leaving the group); SIGKILL is what
the tests use to simulate a crash.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import time

stopping = False


def _stop(*_: object) -> None:
    global stopping
    stopping = True


def main() -> None:
    client, bootstrap, group, topic, out_path = sys.argv[1:6]
    extra = json.loads(sys.argv[6]) if len(sys.argv) > 6 else {}
    signal.signal(signal.SIGTERM, _stop)
    out = open(out_path, "a", buffering=1)  # noqa: SIM115 - line-buffered for the test to read

    def event(kind: str, partitions: list[int]) -> None:
        out.write(f"{kind} {time.time():.3f} {','.join(map(str, sorted(partitions)))}\n")

    # The clients' own account of the rebalances (stderr), for a failing test to show.
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(asctime)s %(message)s")
    logging.getLogger("kafka.coordinator").setLevel(logging.INFO)
    if os.environ.get("GREGOR_TEST_MEMBER_DEBUG"):  # every request and response, to stderr
        logging.getLogger("kafka").setLevel(logging.DEBUG)
    delay = float(extra.pop("process.delay.s", 0.002))
    if client == "confluent":
        run_confluent(bootstrap, group, topic, extra, out, event, delay)
    else:
        run_kafka_python(bootstrap, group, topic, extra, out, event, delay)
    out.write("CLOSED\n")
    out.close()


def run_confluent(bootstrap, group, topic, extra, out, event, delay) -> None:
    import confluent_kafka

    config = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 1000,
        "topic.metadata.refresh.interval.ms": 2000,
        **extra,
    }
    consumer = confluent_kafka.Consumer(config)

    def on_assign(c, partitions) -> None:
        event("ASSIGN", [p.partition for p in partitions])
        if config.get("partition.assignment.strategy") == "cooperative-sticky":
            c.incremental_assign(partitions)
        else:
            c.assign(partitions)
        event("OWNED", [p.partition for p in c.assignment()])

    def on_revoke(c, partitions) -> None:
        event("REVOKE", [p.partition for p in partitions])
        if config.get("partition.assignment.strategy") == "cooperative-sticky":
            c.incremental_unassign(partitions)
        else:
            c.unassign()
        event("OWNED", [p.partition for p in c.assignment()])

    consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
    while not stopping:
        messages = consumer.consume(100, 0.2)
        processed = False
        for message in messages:
            if message.error() is not None:
                continue
            time.sleep(delay)
            out.write(f"MSG {message.partition()} {message.offset()} {message.value().decode()}\n")
            processed = True
        if processed:
            try:
                consumer.commit(asynchronous=False)
            except confluent_kafka.KafkaException as error:
                out.write(f"COMMIT_FAILED {error}\n")
    consumer.close()


def run_kafka_python(bootstrap, group, topic, extra, out, event, delay) -> None:
    from kafka import ConsumerRebalanceListener, KafkaConsumer
    from kafka.errors import CommitFailedError, KafkaError

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=6000,
        heartbeat_interval_ms=1000,
        metadata_max_age_ms=2000,
        **extra,
    )

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked) -> None:
            event("REVOKE", [p.partition for p in revoked])

        def on_partitions_assigned(self, assigned) -> None:
            event("ASSIGN", [p.partition for p in assigned])
            event("OWNED", [p.partition for p in assigned])

    consumer.subscribe([topic], listener=Listener())
    while not stopping:
        # Not shorter: kafka-python 3.0.12 can lose a completed SyncGroup when poll's
        # timeout expires in the same instant ("timeout during coordinator.poll(); returning
        # early" with the response just logged); the member then never heartbeats or
        # rejoins. 1 in 10 runs at 200 ms, with the broker's answer in 4 ms (debug logs:
        # GREGOR_TEST_MEMBER_DEBUG=1).
        batches = consumer.poll(timeout_ms=1000, max_records=100)
        processed = False
        for partition, messages in batches.items():
            for message in messages:
                time.sleep(delay)
                out.write(f"MSG {partition.partition} {message.offset} {message.value.decode()}\n")
                processed = True
        if processed:
            try:
                consumer.commit()
            except (CommitFailedError, KafkaError) as error:
                out.write(f"COMMIT_FAILED {error}\n")
    consumer.close()


if __name__ == "__main__":
    main()
