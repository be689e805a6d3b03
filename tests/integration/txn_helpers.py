"""Transactions driven by raw requests, for tests of the log side before (and beside) the
transaction coordinator: transactional Produce batches, WriteTxnMarkers as a coordinator
sends them, ListOffsets and Fetch with an isolation level, and consumers of real clients
in read_committed or read_uncommitted."""

from __future__ import annotations

import time
from typing import Any

from kio.schema.errors import ErrorCode

from gregor_broker.protocol.record_batch import TRANSACTIONAL_FLAG, rewrite_header
from gregor_broker.protocol.records import Record, make_batch

from .quota_helpers import kafka_request


class TxnProducer:
    """One producer id writing transactional batches to partitions with raw Produce
    requests (sequence numbers per partition, as a client keeps them)."""

    def __init__(self, bootstrap: str, transactional_id: str, epoch: int = 0) -> None:
        response = kafka_request(
            bootstrap, 22, 1, {"transactional_id": None, "transaction_timeout": 60000}
        )
        assert response.error_code == ErrorCode.none, response
        self.bootstrap = bootstrap
        self.transactional_id = transactional_id
        self.producer_id = response.producer_id
        self.epoch = epoch
        self.sequences: dict[tuple[str, int], int] = {}

    def send(self, topic: str, values: list[bytes], partition: int = 0) -> tuple[int, int]:
        """Produce ``values`` as one transactional batch (acks=all): (error, base offset)."""
        key = (topic, partition)
        sequence = self.sequences.get(key, 0)
        batch = make_batch(
            [Record(i, 0, None, value) for i, value in enumerate(values)],
            producer_id=self.producer_id,
            producer_epoch=self.epoch,
            base_sequence=sequence,
            base_timestamp=int(time.time() * 1000),
        )
        response = kafka_request(
            self.bootstrap,
            0,
            9,
            {
                "transactional_id": self.transactional_id,
                "acks": -1,
                "timeout": 30000,
                "topic_data": [
                    {
                        "name": topic,
                        "partition_data": [
                            {
                                "index": partition,
                                "records": rewrite_header(batch, attributes=TRANSACTIONAL_FLAG),
                            }
                        ],
                    }
                ],
            },
        )
        answer = response.responses[0].partition_responses[0]
        if answer.error_code == ErrorCode.none:
            self.sequences[key] = sequence + len(values)
        return answer.error_code, answer.base_offset

    def end(
        self,
        commit: bool,
        partitions: dict[str, list[int]],
        *,
        bootstrap: str | None = None,
        coordinator_epoch: int = 0,
        epoch: int | None = None,
    ) -> dict[tuple[str, int], ErrorCode]:
        """WriteTxnMarkers to the partitions' leader (``bootstrap``, default the one
        this producer writes to), as a transaction coordinator sends it."""
        return write_markers(
            bootstrap or self.bootstrap,
            self.producer_id,
            self.epoch if epoch is None else epoch,
            commit,
            partitions,
            coordinator_epoch=coordinator_epoch,
        )


def write_markers(
    bootstrap: str,
    producer_id: int,
    producer_epoch: int,
    commit: bool,
    partitions: dict[str, list[int]],
    *,
    coordinator_epoch: int = 0,
    version: int = 1,
) -> dict[tuple[str, int], ErrorCode]:
    response = kafka_request(
        bootstrap,
        27,
        version,
        {
            "markers": [
                {
                    "producer_id": producer_id,
                    "producer_epoch": producer_epoch,
                    "transaction_result": commit,
                    "topics": [
                        {"name": name, "partition_indexes": indexes}
                        for name, indexes in partitions.items()
                    ],
                    "coordinator_epoch": coordinator_epoch,
                }
            ]
        },
    )
    (result,) = response.markers
    assert result.producer_id == producer_id
    return {
        (topic.name, partition.partition_index): partition.error_code
        for topic in result.topics
        for partition in topic.partitions
    }


def latest_offset(bootstrap: str, topic: str, *, read_committed: bool, partition: int = 0) -> int:
    """ListOffsets v5 latest for one partition under an isolation level."""
    response = kafka_request(
        bootstrap,
        2,
        5,
        {
            "replica_id": -1,
            "isolation_level": 1 if read_committed else 0,
            "topics": [
                {
                    "name": topic,
                    "partitions": [
                        {"partition_index": partition, "current_leader_epoch": -1, "timestamp": -1}
                    ],
                }
            ],
        },
    )
    answer = response.topics[0].partitions[0]
    assert answer.error_code == ErrorCode.none, answer
    return answer.offset


def raw_fetch(
    bootstrap: str, topic: str, *, read_committed: bool, offset: int = 0, version: int = 11
) -> Any:
    """One Fetch of partition 0 from ``offset``: the partition's response."""
    response = kafka_request(
        bootstrap,
        1,
        version,
        {
            "replica_id": -1,
            "max_wait": 0,
            "min_bytes": 0,
            "max_bytes": 1 << 20,
            "isolation_level": 1 if read_committed else 0,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [
                {
                    "topic": topic,
                    "partitions": [
                        {
                            "partition": 0,
                            "current_leader_epoch": -1,
                            "fetch_offset": offset,
                            "log_start_offset": -1,
                            "partition_max_bytes": 1 << 20,
                        }
                    ],
                }
            ],
            "forgotten_topics_data": [],
            "rack_id": "",
        },
    )
    return response.responses[0].partitions[0]


def confluent_values(
    bootstrap: str,
    topic: str,
    *,
    read_committed: bool,
    expect: int,
    settle_s: float = 3.0,
    timeout: float = 60.0,
    partitions: int = 1,
) -> list[bytes]:
    """Everything a confluent-kafka consumer reads from offset 0: until ``expect``
    values came, then ``settle_s`` more (so a consumer that does not stop at the LSO
    would show the extra values)."""
    import confluent_kafka

    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "isolation.level": "read_committed" if read_committed else "read_uncommitted",
            "fetch.queue.backoff.ms": 1,
        }
    )
    consumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(partitions)])
    values: list[bytes] = []
    deadline = time.monotonic() + timeout
    settle_until = None
    try:
        while time.monotonic() < deadline:
            if len(values) >= expect and settle_until is None:
                settle_until = time.monotonic() + settle_s
            if settle_until is not None and time.monotonic() >= settle_until:
                break
            for message in consumer.consume(1000, 0.3):
                if message.error() is None:
                    values.append(message.value())
    finally:
        consumer.close()
    return values


def kafka_python_values(
    bootstrap: str,
    topic: str,
    *,
    read_committed: bool,
    expect: int,
    settle_s: float = 3.0,
    timeout: float = 60.0,
) -> list[bytes]:
    """As ``confluent_values``, with kafka-python's consumer."""
    import kafka

    consumer = kafka.KafkaConsumer(
        bootstrap_servers=bootstrap,
        isolation_level="read_committed" if read_committed else "read_uncommitted",
        enable_auto_commit=False,
        consumer_timeout_ms=1000,
    )
    partition = kafka.TopicPartition(topic, 0)
    consumer.assign([partition])
    consumer.seek(partition, 0)
    values: list[bytes] = []
    deadline = time.monotonic() + timeout
    settle_until = None
    try:
        while time.monotonic() < deadline:
            if len(values) >= expect and settle_until is None:
                settle_until = time.monotonic() + settle_s
            if settle_until is not None and time.monotonic() >= settle_until:
                break
            for records in consumer.poll(timeout_ms=300).values():
                values.extend(record.value for record in records)
    finally:
        consumer.close()
    return values


def describe_producers(bootstrap: str, topic: str, partition: int = 0) -> Any:
    """DescribeProducers v0 for one partition: its response."""
    response = kafka_request(
        bootstrap, 61, 0, {"topics": [{"name": topic, "partition_indexes": [partition]}]}
    )
    return response.topics[0].partitions[0]
