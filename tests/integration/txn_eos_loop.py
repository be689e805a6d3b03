"""A consume-transform-produce loop, run as its own process by the exactly-once tests
(``python txn_eos_loop.py BOOTSTRAP INPUT OUTPUT PARTITIONS``): it reads the input topic
with ``isolation.level=read_committed`` from the group's committed offsets, writes each
record transformed (``out:`` + value) to the same partition of the output topic and
commits the consumed offsets with ``send_offsets_to_transaction`` in the same
transaction. It runs until killed, printing ``committed N`` after each commit, so the
test can SIGKILL it at any moment and start it again: every restart fences the previous
incarnation (same ``transactional.id``) and resumes from the committed offsets."""

from __future__ import annotations

import sys

import confluent_kafka

TRANSACTIONAL_ID = "eos-loop"
GROUP = "eos-loop-group"
MAX_RECORDS_PER_TRANSACTION = 200


def main(bootstrap: str, source: str, sink: str, partitions: int) -> None:
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": GROUP,
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "fetch.queue.backoff.ms": 1,
        }
    )
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": TRANSACTIONAL_ID, "linger.ms": 5}
    )
    # Fences the previous incarnation and waits until its open transaction is aborted,
    # so the committed offsets read next are stable.
    producer.init_transactions(120)
    wanted = [confluent_kafka.TopicPartition(source, p) for p in range(partitions)]
    start = consumer.committed(wanted, 60)
    consumer.assign(
        [
            confluent_kafka.TopicPartition(
                source,
                tp.partition,
                tp.offset if tp.offset >= 0 else confluent_kafka.OFFSET_BEGINNING,
            )
            for tp in start
        ]
    )
    print("started " + " ".join(str(tp.offset) for tp in start), flush=True)
    committed = 0
    while True:
        messages = [
            m for m in consumer.consume(MAX_RECORDS_PER_TRANSACTION, 1.0) if m.error() is None
        ]
        if not messages:
            continue
        positions: dict[int, int] = {}
        producer.begin_transaction()
        for message in messages:
            producer.produce(sink, b"out:" + message.value(), partition=message.partition())
            positions[message.partition()] = message.offset() + 1
        producer.send_offsets_to_transaction(
            [confluent_kafka.TopicPartition(source, p, o) for p, o in positions.items()],
            consumer.consumer_group_metadata(),
            60,
        )
        producer.commit_transaction(120)
        committed += len(messages)
        print(f"committed {committed}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]))
