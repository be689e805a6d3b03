"""Scale of topics and partitions on one broker (issue 9): create, hold, serve, delete.

Starts ZooKeeper and one Gregor broker, then measures, through Kafka's protocol:

- create: CreateTopics for ``partitions`` partitions (topics of ``PARTITIONS_PER_TOPIC``,
  ``TOPICS_PER_REQUEST`` topics per request, each request waiting for leaders), time
  until every partition has a leader;
- fds: the broker's open file descriptors (all, and segment ``.log`` files) once every
  partition holds a record, against ``log.max.open.files``;
- metadata: round trips of Metadata v9 for every topic, and for one topic, p50 and p99;
- delete: DeleteTopics for ``delete_topics`` topics, time until the broker's metadata no
  longer lists any of them and their directories are gone; meanwhile (right after the
  DeleteTopics request) a new topic is created, and its time to a leader is recorded.

Run: ``.venv/bin/python -m bench.scale [--partitions 10000] [--delete-topics 2000]``
(``--create-only``: the create phase alone, with the broker's CPU seconds over it). The
harness (``python -m bench --only scale``) calls ``run_once`` too; so does the short test
in ``tests/bench/test_scale.py`` with small numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import struct
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.clients import broker_cpu_seconds
from gregor_broker.devtools.local_cluster import LocalCluster
from gregor_broker.protocol import entities
from gregor_broker.protocol.wire import read_unsigned_varint

PARTITIONS_PER_TOPIC = 4
TOPICS_PER_REQUEST = 250
METADATA = 3
CREATE_TOPICS = 19
DELETE_TOPICS = 20
PRODUCE = 0


# The figures the harness summarises (median [min-max] over repetitions), with labels.
FIGURES = {
    "create_s": "create every partition (CreateTopics, 250 topics per request) until all led, s",
    "fds_log_files": "open segment (.log) descriptors, every partition holding a record",
    "fds_total": "open descriptors of the broker process in all",
    "metadata_all_p50_ms": "Metadata v9, every topic: p50, ms",
    "metadata_all_p99_ms": "Metadata v9, every topic: p99, ms",
    "metadata_one_p50_ms": "Metadata v9, one topic: p50, ms",
    "metadata_one_p99_ms": "Metadata v9, one topic: p99, ms",
    "delete_metadata_s": "delete topics (one DeleteTopics) until gone from the metadata, s",
    "delete_s": "... and until their directories are gone from disk, s",
    "newcomer_leader_s": "a topic created during that deletion: time to a leader, s",
    "fds_of_deleted_files": "descriptors still open on deleted segment files afterwards",
}


class ScaleTimedOut(RuntimeError):
    pass


class KafkaConnection:
    """One connection for raw requests (no client library sits in the measured path)."""

    def __init__(self, bootstrap: str, timeout: float = 300) -> None:
        host, _, port = bootstrap.rpartition(":")
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def _read_exactly(self, size: int) -> bytes:
        chunks = []
        while size:
            chunk = self.sock.recv(min(size, 1 << 20))
            if not chunk:
                raise ConnectionError("broker closed the connection")
            chunks.append(chunk)
            size -= len(chunk)
        return b"".join(chunks)

    def send(self, api_key: int, version: int, body: dict[str, Any]) -> None:
        request_class = entities.payload_class(api_key, version, "request")
        payload = entities.encode(entities.build(request_class, body))
        self.correlation_id += 1
        header = struct.pack(">hhih", api_key, version, self.correlation_id, 5) + b"scale"
        if entities.is_flexible(api_key, version):
            header += b"\x00"
        frame = header + payload
        self.sock.sendall(struct.pack(">i", len(frame)) + frame)

    def receive_raw(self) -> bytes:
        (size,) = struct.unpack(">i", self._read_exactly(4))
        return self._read_exactly(size)

    def request(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        self.send(api_key, version, body)
        response = self.receive_raw()
        position = 4
        if entities.is_flexible(api_key, version):
            _, position = read_unsigned_varint(response, position)
        decoded, _ = entities.response_reader(api_key, version)(response, position)
        return decoded


def metadata_body(topics: list[str] | None) -> dict[str, Any]:
    return {
        "topics": None if topics is None else [{"name": t} for t in topics],
        "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False,
    }


def create_topics(connection: KafkaConnection, names: list[str], timeout_ms: int) -> list[str]:
    """CreateTopics (waiting up to ``timeout_ms`` for leaders); the names that failed."""
    response = connection.request(
        CREATE_TOPICS,
        5,
        {
            "topics": [
                {
                    "name": name,
                    "num_partitions": PARTITIONS_PER_TOPIC,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [],
                }
                for name in names
            ],
            "timeout": timeout_ms,
            "validate_only": False,
        },
    )
    return [f"{t.name}: {t.error_code.name}" for t in response.topics if t.error_code != 0]


def leaderless(connection: KafkaConnection, topics: list[str] | None) -> tuple[int, set[str]]:
    """(partitions without a leader, topic names listed) from one Metadata request."""
    response = connection.request(METADATA, 9, metadata_body(topics))
    missing = 0
    names = set()
    for topic in response.topics:
        if topic.error_code != 0:
            missing += 1
            continue
        names.add(topic.name)
        missing += sum(1 for p in topic.partitions if p.leader_id < 0)
    return missing, names


def open_fds(pid: int) -> tuple[int, int, int]:
    """(all open descriptors, descriptors of segment .log files, of those the ones whose
    file was deleted) of process ``pid``."""
    total = logs = deleted = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        total += 1
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        name = os.path.basename(target.removesuffix(" (deleted)"))
        if name.endswith(".log") and name[:-4].isdigit():
            logs += 1
            deleted += target.endswith(" (deleted)") or "-delete/" in target
    return total, logs, deleted


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def metadata_latencies(bootstrap: str, topics: list[str] | None, count: int) -> list[float]:
    connection = KafkaConnection(bootstrap)
    try:
        body = metadata_body(topics)
        times = []
        for _ in range(count):
            started = time.perf_counter()
            connection.send(METADATA, 9, body)
            connection.receive_raw()
            times.append(time.perf_counter() - started)
        return times
    finally:
        connection.close()


def produce_one_record_each(bootstrap: str, topics: list[str]) -> None:
    """One record into every partition, so every partition has used its segment file."""
    import confluent_kafka

    from gregor_broker.cli.kafka_api import client_config

    producer = confluent_kafka.Producer(client_config(bootstrap, **{"linger.ms": 50, "acks": 1}))
    errors: list[str] = []
    for topic in topics:
        for partition in range(PARTITIONS_PER_TOPIC):
            producer.produce(
                topic,
                b"x" * 100,
                partition=partition,
                on_delivery=lambda e, m: errors.append(str(e)) if e else None,
            )
            producer.poll(0)
    if producer.flush(300) or errors:
        raise ScaleTimedOut(f"producing one record per partition failed: {errors[:3]}")


def run_once(
    partitions: int,
    delete_topics: int,
    work_dir: Path,
    *,
    max_open_files: int = 1000,
    metadata_requests: int = 200,
    timeout: float = 600,
    produce: bool = True,
    create_only: bool = False,
) -> dict[str, Any]:
    """One broker, one pass; the broker and ZooKeeper are stopped whatever happens."""
    topic_count = partitions // PARTITIONS_PER_TOPIC
    delete_topics = min(delete_topics, topic_count)
    topics = [f"scale-{i:05d}" for i in range(topic_count)]
    cluster = LocalCluster(
        work_dir,
        1,
        properties={"log.max.open.files": str(max_open_files), "num.partitions": "1"},
    )
    cluster.start(120)
    broker = cluster.broker(1)
    assert broker.pid is not None
    connection = KafkaConnection(broker.bootstrap, timeout)
    try:
        fds_at_start = open_fds(broker.pid)[0]
        cpu_at_start = broker_cpu_seconds([broker.pid])
        load_at_start = os.getloadavg()[0]
        started = time.monotonic()
        failed: list[str] = []
        for first in range(0, topic_count, TOPICS_PER_REQUEST):
            names = topics[first : first + TOPICS_PER_REQUEST]
            failed += create_topics(connection, names, int(timeout * 1000))
        if failed:
            raise ScaleTimedOut(f"CreateTopics failed: {failed[:3]}")
        while (missing := leaderless(connection, None)[0]) > 0:
            if time.monotonic() - started > timeout:
                raise ScaleTimedOut(f"{missing} partitions without a leader after {timeout} s")
            time.sleep(0.1)
        create_s = time.monotonic() - started
        if create_only:
            cpu = broker_cpu_seconds([broker.pid])
            return {
                "partitions": partitions,
                "create_s": create_s,
                "create_broker_cpu_s": None
                if cpu is None or cpu_at_start is None
                else cpu - cpu_at_start,
                "load_average": [load_at_start, os.getloadavg()[0]],
            }
        if produce:
            produce_one_record_each(broker.bootstrap, topics)
        fds_total, fds_logs, _ = open_fds(broker.pid)

        all_topics = metadata_latencies(broker.bootstrap, None, metadata_requests)
        one_topic = metadata_latencies(broker.bootstrap, topics[:1], metadata_requests * 5)

        doomed = topics[:delete_topics]
        newcomer = "scale-newcomer"
        created_at: list[float] = []

        def create_newcomer() -> None:
            other = KafkaConnection(broker.bootstrap, timeout)
            try:
                created_at.append(time.monotonic())
                create_topics(other, [newcomer], 0)  # no wait: measured below
                while leaderless(other, [newcomer])[0] > 0:
                    if time.monotonic() - created_at[0] > timeout:
                        return
                    time.sleep(0.01)
                created_at.append(time.monotonic())
            finally:
                other.close()

        log_dir = broker.log_dir
        started = time.monotonic()
        response = connection.request(
            DELETE_TOPICS,
            4,
            {"topic_names": doomed, "timeout": 0},  # no wait: measured below
        )
        errors = [r.name for r in response.responses if r.error_code != 0]
        if errors:
            raise ScaleTimedOut(f"DeleteTopics failed for {errors[:3]}")
        newcomer_thread = threading.Thread(target=create_newcomer)
        newcomer_thread.start()
        doomed_set = set(doomed)
        while True:
            _, listed = leaderless(connection, None)
            if not listed & doomed_set:
                break
            if time.monotonic() - started > timeout:
                raise ScaleTimedOut(f"{len(listed & doomed_set)} topics still listed")
            time.sleep(0.1)
        deleted_from_metadata_s = time.monotonic() - started
        while any(
            entry.name.endswith("-delete") or entry.name.rpartition("-")[0] in doomed_set
            for entry in os.scandir(log_dir)
        ):
            if time.monotonic() - started > timeout:
                raise ScaleTimedOut("partition directories of deleted topics remain")
            time.sleep(0.1)
        delete_s = time.monotonic() - started
        newcomer_thread.join(timeout)
        if len(created_at) < 2:
            raise ScaleTimedOut(f"{newcomer} had no leader within {timeout} s")
        fds_after_delete = open_fds(broker.pid)
        return {
            "partitions": partitions,
            "topics": topic_count,
            "partitions_per_topic": PARTITIONS_PER_TOPIC,
            "max_open_files": max_open_files,
            "create_s": create_s,
            "fds_at_start": fds_at_start,
            "fds_total": fds_total,
            "fds_log_files": fds_logs,
            "metadata_all_p50_ms": 1000 * statistics.median(all_topics),
            "metadata_all_p99_ms": 1000 * percentile(all_topics, 0.99),
            "metadata_one_p50_ms": 1000 * statistics.median(one_topic),
            "metadata_one_p99_ms": 1000 * percentile(one_topic, 0.99),
            "deleted_topics": len(doomed),
            "delete_metadata_s": deleted_from_metadata_s,
            "delete_s": delete_s,
            "newcomer_leader_s": created_at[1] - created_at[0],
            "fds_after_delete": fds_after_delete[0],
            "fds_log_files_after_delete": fds_after_delete[1],
            "fds_of_deleted_files": fds_after_delete[2],
        }
    finally:
        connection.close()
        cluster.stop()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="example: python -m bench.scale --partitions 10000 --create-only --repeat 3",
    )
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--delete-topics", type=int, default=2_000)
    parser.add_argument("--max-open-files", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument(
        "--create-only",
        action="store_true",
        help="only create the partitions: time until all are led, broker CPU",
    )
    args = parser.parse_args()
    runs = []
    for index in range(args.repeat):
        with tempfile.TemporaryDirectory(prefix="gregor-scale-") as work_dir:
            result = run_once(
                args.partitions,
                args.delete_topics,
                Path(work_dir),
                max_open_files=args.max_open_files,
                create_only=args.create_only,
            )
        runs.append(result)
        print(f"run {index + 1}: {json.dumps(result)}", flush=True)


if __name__ == "__main__":
    main()
