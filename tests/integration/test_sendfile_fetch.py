"""A consumer reading 1 GiB from one partition is served through sendfile(2).

The broker counts every byte it hands to ``os.sendfile`` and exports the count as
``gregor_sendfile_bytes_total``; the consumed record bytes must all have gone that way.
"""

from __future__ import annotations

import time

import confluent_kafka

from gregor_broker.devtools.zookeeper_server import free_port

from .broker_helpers import scrape

GIB = 1 << 30
VALUE = b"s" * (16 * 1024)


def test_a_one_gib_partition_is_consumed_through_sendfile(broker_factory) -> None:
    metrics_port = free_port()
    broker = broker_factory(**{"metrics.port": str(metrics_port)})
    bootstrap = broker.bootstrap
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": 1,
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "queue.buffering.max.kbytes": 262144,
        }
    )
    count = GIB // len(VALUE)
    for _ in range(count):
        while True:
            try:
                producer.produce("big", VALUE)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(120) == 0

    before = scrape(metrics_port)["gregor_sendfile_bytes_total"]
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "fetch.queue.backoff.ms": 1,
            "fetch.max.bytes": 52428800,
        }
    )
    consumer.assign([confluent_kafka.TopicPartition("big", 0, 0)])
    consumed_bytes = 0
    consumed = 0
    deadline = time.monotonic() + 180
    try:
        while consumed < count and time.monotonic() < deadline:
            for message in consumer.consume(10_000, 1.0):
                assert message.error() is None, message.error()
                consumed += 1
                consumed_bytes += len(message.value())
    finally:
        consumer.close()
    after = scrape(metrics_port)["gregor_sendfile_bytes_total"]

    assert consumed == count
    assert consumed_bytes >= GIB
    # Every record byte the consumer received went through sendfile (batch bytes are
    # the records plus their headers, so the counter is at least the payload).
    assert after - before >= consumed_bytes
    print(
        f"consumed {consumed_bytes / GIB:.2f} GiB; sendfile sent {(after - before) / GIB:.2f} GiB"
    )
