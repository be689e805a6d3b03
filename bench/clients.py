"""confluent-kafka workloads, each run as a process of its own and printing one JSON line.

The harness never runs a client inside its own process, let alone the broker's: each
measurement is ``python -m bench.clients KIND --spec '{json}'``. librdkafka is the
fastest client Python can reach; both brokers get exactly the same client settings.

- ``produce``: produce fixed-size messages round-robin over the partitions for a while,
  then flush; the rate counts only delivered messages.
- ``fill``: produce a given number of 1 KiB messages as fast as possible (to build the
  large topic the consume workloads read).
- ``consume``: read one partition from the beginning up to a given offset.
- ``latency-consumer`` / ``latency-producer``: the producer sends messages stamped with
  ``time.monotonic_ns()`` (one clock for every process on this machine) at a fixed rate;
  the consumer records how long each took to arrive. One warm-up message goes first and
  is waited for; the consumer skips it.
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import sys
import time
from typing import Any

from gregor_broker.cli.kafka_api import client_config

_STAMP = struct.Struct(">q")
# The stamp of the latency producer's warm-up message (no clock reads below zero).
WARM_UP_STAMP = -1


def produce_when_room(
    producer: Any, topic: str, value: bytes, key: bytes | None = None, partition: int = -1
) -> None:
    """One record, serving delivery reports (``poll``) while librdkafka's queue is full
    (``BufferError``) instead of dropping it; partition -1 lets the partitioner choose."""
    while True:
        try:
            producer.produce(topic, value, key, partition=partition)
            return
        except BufferError:
            producer.poll(0.01)


def wait_for_leaders(client: Any, topic: str, partitions: int, timeout: float = 60.0) -> None:
    """Until ``client``'s metadata (a confluent-kafka producer or admin client) names a
    leader for every partition of the new ``topic``, so that a timed part does not include
    the client's first metadata retries."""
    deadline = time.monotonic() + timeout
    while True:
        found = client.list_topics(topic, timeout=10).topics.get(topic)
        if (
            found is not None
            and found.error is None
            and len(found.partitions) == partitions
            and all(p.leader >= 0 for p in found.partitions.values())
        ):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"topic {topic} has no leaders after {timeout} s")
        time.sleep(0.05)


# How long the produce loop waits for delivery reports when librdkafka's queue is full
# (the spec's ``queue_full_wait_s``). confluent-kafka hands librdkafka whole
# milliseconds, rounded down, so anything under 1 ms is ``poll(0)``: the loop spins, a
# core of its own, and refills the queue the moment a report arrives. That is the
# default, and the kindest to the peer: tansu answers one request at a time, and with a
# waiting loop its unbatched rate fell from 23,600 to 9,700 msg/s (Gregor's: 38,900 and
# 40,600; docs/performance.md, round fifteen). librdkafka's own rdkafka_performance
# waits 10 ms instead (``QUEUE_FULL_WAIT_S``), which the replicated rows use: three
# brokers share this machine's two cores there, and a spinning client took a third of
# a core from them (round fourteen).
SPIN = 0.0
QUEUE_FULL_WAIT_S = 0.010


def producer_config(spec: dict[str, Any]) -> dict[str, Any]:
    config: dict[str, Any] = {
        # client_config: librdkafka's log lines go to a silent logger, not the terminal.
        **client_config(spec["bootstrap"]),
        "acks": str(spec.get("acks", 1)),
        "queue.buffering.max.messages": 100000,
        "queue.buffering.max.kbytes": 512 * 1024,
    }
    if spec.get("batched", True):
        config["linger.ms"] = 5
        config["batch.size"] = 64 * 1024
    else:
        # One message per batch and, with one partition, per Produce request: the Kafka
        # paper's "batch size 1" case. Requests are still pipelined on the connection.
        config["linger.ms"] = 0
        config["batch.num.messages"] = 1
    return config


def consumer_config(bootstrap: str) -> dict[str, Any]:
    return {
        **client_config(bootstrap),
        # Required by librdkafka, unused: assign() without commits needs no coordinator.
        "group.id": "gregor-bench",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": False,
        # librdkafka's default (1000 ms) stalls the consumer for a second at a time.
        "fetch.queue.backoff.ms": 1,
    }


def broker_pids(spec: dict[str, Any]) -> list[int]:
    """The broker processes whose CPU a workload reports: ``broker_pids`` (every broker of a
    cluster) or ``broker_pid`` (one broker)."""
    if spec.get("broker_pids"):
        return list(spec["broker_pids"])
    return [spec["broker_pid"]] if spec.get("broker_pid") else []


def broker_cpu_seconds(pids: list[int]) -> float | None:
    """User + system CPU seconds of the broker processes, summed (the harness passes their
    pids); None if there are none or one cannot be read."""
    if not pids:
        return None
    total = 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            return None
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def _own_cpu_seconds() -> float:
    times = os.times()  # the whole process: librdkafka's threads too
    return times.user + times.system


class Window:
    """The measured interval: wall time, and the brokers' and this client's CPU time
    over it (on two cores the client competes with the brokers it measures)."""

    def __init__(self, pids: list[int]) -> None:
        self.broker_pids = pids
        self.started = time.perf_counter()
        self.cpu_started = broker_cpu_seconds(self.broker_pids)
        self.own_cpu_started = _own_cpu_seconds()

    def close(self) -> dict[str, Any]:
        seconds = time.perf_counter() - self.started
        cpu = broker_cpu_seconds(self.broker_pids)
        own_cpu = _own_cpu_seconds() - self.own_cpu_started
        cores = None
        if cpu is not None and self.cpu_started is not None and seconds > 0:
            cores = (cpu - self.cpu_started) / seconds
        client_cores = own_cpu / seconds if seconds > 0 else None
        return {"seconds": seconds, "broker_cores": cores, "client_cores": client_cores}


def produce(spec: dict[str, Any]) -> dict[str, Any]:
    """Delivered messages per second over a fixed window, in steady state.

    Only deliveries reported inside the window count; at its end whatever is still
    queued is purged rather than flushed, so every run lasts the same time whatever the
    broker's speed (a flush of a deep unbatched queue could take many seconds).
    """
    from confluent_kafka import Producer

    counting = [False]
    delivered = [0, 0]  # ok, failed

    def on_delivery(error, _message) -> None:
        if counting[0]:
            delivered[1 if error else 0] += 1

    config = producer_config(spec)
    config["on_delivery"] = on_delivery
    producer = Producer(config)
    topic = spec["topic"]
    payload = b"x" * spec["size"]
    partitions = spec["partitions"]
    # Warm up: metadata, connections and the first batch on every partition.
    for partition in range(partitions):
        producer.produce(topic, payload, partition=partition)
    if producer.flush(30):
        raise RuntimeError(f"warm-up messages to {topic} were not delivered")
    produce_one = producer.produce
    poll = producer.poll
    queue_full_wait = spec.get("queue_full_wait_s", SPIN)
    counting[0] = True
    window = Window(broker_pids(spec))
    deadline = window.started + spec["seconds"]
    sent = 0
    partition = 0
    while time.perf_counter() < deadline:
        for _ in range(200):
            try:
                produce_one(topic, payload, partition=partition)
            except BufferError:
                poll(queue_full_wait)  # the queue is full
                break
            sent += 1
            partition += 1
            if partition == partitions:
                partition = 0
        poll(0)
    poll(0)
    measured = window.close()
    counting[0] = False
    ok, failed = delivered
    producer.purge()
    producer.flush(30)
    return {
        "messages": ok,
        "failed": failed,
        "sent": sent,
        "bytes": ok * spec["size"],
        **measured,
    }


def fill(spec: dict[str, Any]) -> dict[str, Any]:
    from confluent_kafka import Producer

    producer = Producer(producer_config({**spec, "batched": True, "acks": 1}))
    topic = spec["topic"]
    payload = b"f" * spec["size"]
    started = time.perf_counter()
    for _ in range(spec["messages"]):
        produce_when_room(producer, topic, payload, partition=0)
    remaining = producer.flush(300)
    if remaining:
        raise RuntimeError(f"{remaining} messages not delivered while filling {topic}")
    return {"messages": spec["messages"], "seconds": time.perf_counter() - started}


def consume(spec: dict[str, Any]) -> dict[str, Any]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(consumer_config(spec["bootstrap"]))
    target = spec["messages"]
    received = 0
    payload_bytes = 0
    consumer.assign([TopicPartition(spec["topic"], 0, 0)])
    deadline = time.perf_counter() + spec.get("timeout", 300)
    # The clock starts at the first message: connecting and the first metadata round trips
    # are the same fixed cost for every broker and would swamp a small topic.
    window = None
    first_bytes = 0
    while received < target and time.perf_counter() < deadline:
        # consume() waits for the whole count (or the timeout): never ask for more than
        # is left, or the last call idles for its full timeout.
        messages = consumer.consume(min(10000, target - received), 1.0)
        if window is None and messages:
            window = Window(broker_pids(spec))
        for message in messages:
            if message.error() is None:
                received += 1
                payload_bytes += len(message)
        if not first_bytes:
            first_bytes = payload_bytes
    measured = window.close() if window is not None else {"seconds": float("nan")}
    consumer.close()
    return {
        "messages": received,
        # What arrived after the clock started (the first call's messages came before).
        "bytes": payload_bytes - first_bytes,
        "total_bytes": payload_bytes,
        **measured,
    }


def latency_consumer(spec: dict[str, Any]) -> dict[str, Any]:
    from confluent_kafka import Consumer, TopicPartition

    config = consumer_config(spec["bootstrap"])
    consumer = Consumer(config)
    consumer.assign([TopicPartition(spec["topic"], 0, 0)])
    consumer.consume(1, 0.2)  # connections and the first fetch
    print("ready", flush=True)
    target = spec["messages"]
    latencies: list[int] = []
    deadline = time.perf_counter() + spec["seconds"] + 30
    window = Window(broker_pids(spec))
    poll = consumer.poll
    while len(latencies) < target and time.perf_counter() < deadline:
        # poll(), not consume(n): consume waits until n messages are there (or its
        # timeout), which would add its wait to every message's latency.
        message = poll(0.1)
        if message is not None and message.error() is None:
            now = time.monotonic_ns()
            stamp = _STAMP.unpack_from(message.value())[0]
            if stamp != WARM_UP_STAMP:
                latencies.append(now - stamp)
    cpu = window.close()
    consumer.close()
    # The first tenth is the warm-up (connections, first batches); leave it out.
    measured = sorted(latencies[len(latencies) // 10 :])

    def percentile(fraction: float) -> float:
        if not measured:
            return float("nan")
        return measured[min(len(measured) - 1, int(fraction * len(measured)))] / 1e6

    return {
        "messages": len(latencies),
        "measured": len(measured),
        "p50_ms": percentile(0.50),
        "p99_ms": percentile(0.99),
        "p999_ms": percentile(0.999),
        "broker_cores": cpu["broker_cores"],
    }


def latency_producer(spec: dict[str, Any]) -> dict[str, Any]:
    from confluent_kafka import Producer

    config = producer_config({**spec, "batched": False})
    # librdkafka still batches what queues up between sends; no linger keeps it prompt.
    config.pop("batch.num.messages")
    producer = Producer(config)
    topic = spec["topic"]
    padding = b"l" * (spec["size"] - _STAMP.size)
    rate = spec["rate"]
    total = spec["messages"]
    # Wait for one message's acknowledgement before the clock starts: connections and
    # metadata are up, and with acks=all on a new replicated topic the followers are
    # fetching it (a follower only picks up a new partition when its fetch to that leader
    # comes back, up to replica.fetch.wait.max.ms later).
    producer.produce(topic, _STAMP.pack(WARM_UP_STAMP) + padding, partition=0)
    if producer.flush(60):
        raise RuntimeError(f"the warm-up message to {topic} was not delivered")
    started = time.monotonic_ns()
    interval = 1e9 / rate
    sent = 0
    while sent < total:
        wait = started + sent * interval - time.monotonic_ns()
        if wait > 0:
            # Sleep rather than spin: a spinning client would take the core the brokers
            # need on a 2-core machine. Messages that fell behind go out at once.
            producer.poll(0)
            time.sleep(min(wait / 1e9, 0.001))
            continue
        producer.produce(topic, _STAMP.pack(time.monotonic_ns()) + padding, partition=0)
        producer.poll(0)
        sent += 1
    remaining = producer.flush(60)
    seconds = (time.monotonic_ns() - started) / 1e9
    return {"messages": total - remaining, "seconds": seconds, "rate": total / seconds}


KINDS = {
    "produce": produce,
    "fill": fill,
    "consume": consume,
    "latency-consumer": latency_consumer,
    "latency-producer": latency_producer,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run one client workload; prints JSON.")
    parser.add_argument("kind", choices=sorted(KINDS))
    parser.add_argument("--spec", required=True, help="the workload's parameters, as JSON")
    args = parser.parse_args(argv)
    result = KINDS[args.kind](json.loads(args.spec))
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
