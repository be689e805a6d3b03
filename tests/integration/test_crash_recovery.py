"""A broker killed with SIGKILL comes back with every acknowledged message.

acks=1 acknowledges once the leader has written the batch to its log (the page
cache); SIGKILL ends the process but not the kernel, so every acknowledged message
must be served again after restart, at the offset the producer was told. A torn
last batch (a write cut short by a crash of the machine) is truncated on recovery.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import confluent_kafka
import confluent_kafka.admin

from gregor_broker.devtools.zookeeper_server import free_port

TOPIC = "crashy"


def _consume_from(bootstrap: str, topic: str, until_offset: int) -> dict[int, bytes]:
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "fetch.queue.backoff.ms": 1,
        }
    )
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
    seen: dict[int, bytes] = {}
    deadline = time.monotonic() + 60
    try:
        while (not seen or max(seen) < until_offset - 1) and time.monotonic() < deadline:
            for message in consumer.consume(10_000, 1.0):
                assert message.error() is None, message.error()
                seen[message.offset()] = message.value()
    finally:
        consumer.close()
    return seen


def test_every_acknowledged_message_survives_sigkill_mid_produce(broker_factory) -> None:
    port = free_port()
    broker = broker_factory(port=port)
    bootstrap = broker.bootstrap
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([confluent_kafka.admin.NewTopic(TOPIC, 1, 1)]).values():
        future.result(30)

    acknowledged: dict[bytes, int] = {}
    failed = 0
    lock = threading.Lock()

    def on_delivery(error, message) -> None:
        nonlocal failed
        with lock:
            if error is None:
                acknowledged[message.value()] = message.offset()
            else:
                failed += 1

    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": 1,
            "linger.ms": 2,
            "message.timeout.ms": 3000,
            "retries": 0,
        }
    )
    stop = threading.Event()

    def produce_forever() -> None:
        number = 0
        while not stop.is_set():
            try:
                producer.produce(
                    TOPIC, f"message-{number:08d}".encode() + b"x" * 200, on_delivery=on_delivery
                )
                number += 1
            except BufferError:
                producer.poll(0.01)
            producer.poll(0)

    writer = threading.Thread(target=produce_forever)
    writer.start()
    try:
        deadline = time.monotonic() + 30
        while len(acknowledged) < 20_000 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(acknowledged) >= 20_000, "the producer made too little progress"
        broker.kill()  # SIGKILL while the producer is still sending
    finally:
        stop.set()
        writer.join()
        producer.flush(10)

    broker.start()
    broker.wait_registered(30)

    expected_end = max(acknowledged.values()) + 1
    served = _consume_from(bootstrap, TOPIC, expected_end)
    lost = [v for v, offset in acknowledged.items() if served.get(offset) != v]
    print(f"sent acked={len(acknowledged)} failed={failed} served={len(served)} lost={len(lost)}")
    assert lost == []
    # Offsets stay dense: nothing before the last acknowledged offset is missing.
    assert sorted(served)[:expected_end] == list(range(expected_end))


def _segment_files(log_dir: Path, topic: str) -> list[Path]:
    return sorted((log_dir / f"{topic}-0").glob("*.log"))


def test_a_torn_last_batch_is_truncated_and_the_broker_serves_on(broker_factory) -> None:
    broker = broker_factory()
    bootstrap = broker.bootstrap
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": 1})
    for number in range(100):
        producer.produce("torn", f"value-{number}".encode())
        producer.flush(10)  # one batch per message
    broker.stop()

    [segment] = _segment_files(broker.log_dir, "torn")
    good_size = segment.stat().st_size
    # A crash of the machine mid-write: a batch header promising more than was written.
    with segment.open("ab") as file:
        file.write(bytes.fromhex("0000000000000064") + (500).to_bytes(4, "big") + b"\x00" * 40)
    (broker.log_dir / ".kafka_cleanshutdown").unlink(missing_ok=True)

    broker.start()
    broker.wait_registered(30)
    assert segment.stat().st_size == good_size
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": 1})
    delivered = []
    producer.produce(
        "torn", b"after-restart", on_delivery=lambda e, m: delivered.append(m.offset())
    )
    producer.flush(10)
    assert delivered == [100]
    served = _consume_from(bootstrap, "torn", 101)
    assert [served[i] for i in range(101)] == [f"value-{n}".encode() for n in range(100)] + [
        b"after-restart"
    ]
