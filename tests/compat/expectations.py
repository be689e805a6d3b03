"""What every client in the compatibility suite must round-trip, and how to check it.

Owns the shared message set (keyed messages with headers and explicit timestamps, one
batch per compression codec and partition) and the assertions that compare what a client
consumed with it: exact key, value, headers and timestamp, order per partition, and dense
offsets. It does not talk to a broker or a client; each ``test_<client>.py`` turns its
client's records into ``Received`` and calls the helpers here.

The message set is text-only (UTF-8, no newline, no ``|``) so that kcat can produce it
line by line with ``-K '|'``, and its headers are the same for every message of one
(codec, partition) batch because kcat's ``-H`` applies to a whole run.
"""

from __future__ import annotations

import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
PARTITIONS = 3
MESSAGES_PER_BATCH = 2
# Messages of one partition: one batch per codec.
MESSAGES_PER_PARTITION = len(CODECS) * MESSAGES_PER_BATCH
# Timestamps are one second apart, so "first offset at or after" has exactly one answer.
TIMESTAMP_STEP_MS = 1000
KCAT_KEY_DELIMITER = "|"


@dataclass(frozen=True)
class Message:
    """One message as produced: to ``partition``, compressed with ``codec``."""

    partition: int
    codec: str
    key: bytes
    value: bytes
    headers: tuple[tuple[str, bytes], ...]
    timestamp: int


@dataclass(frozen=True)
class Received:
    """One record as a client handed it to the application."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    timestamp: int


def unique_topic(purpose: str) -> str:
    """A topic name no other test uses (tests share nothing but ZooKeeper)."""
    return f"compat-{purpose}-{uuid.uuid4().hex[:10]}"


def now_ms() -> int:
    return int(time.time() * 1000)


def batch_headers(codec: str, partition: int) -> tuple[tuple[str, bytes], ...]:
    return (
        ("codec", codec.encode()),
        ("partition", str(partition).encode()),
        ("trace", "héader-✓".encode()),
    )


def message_set(base_timestamp: int | None = None) -> list[Message]:
    """The messages in produce order: codec by codec, partition by partition.

    Timestamps start at ``base_timestamp`` (default: an hour ago, well inside the default
    retention, so time-based retention never deletes them) and grow by one second per
    message, so they increase along every partition.
    """
    if base_timestamp is None:
        base_timestamp = (now_ms() // 1000 - 3600) * 1000
    messages = []
    sequence = 0
    for codec in CODECS:
        for partition in range(PARTITIONS):
            for index in range(MESSAGES_PER_BATCH):
                # Repetitive text, so every codec really compresses the batch.
                value = f"{codec}/p{partition}/#{index} " + "Grüße aus Gregor; " * 20
                messages.append(
                    Message(
                        partition=partition,
                        codec=codec,
                        key=f"key-{codec}-p{partition}-{index}".encode(),
                        value=value.encode(),
                        headers=batch_headers(codec, partition),
                        timestamp=base_timestamp + sequence * TIMESTAMP_STEP_MS,
                    )
                )
                sequence += 1
    return messages


def batches(messages: Iterable[Message]) -> dict[tuple[str, int], list[Message]]:
    """Messages grouped by (codec, partition), in produce order."""
    grouped: dict[tuple[str, int], list[Message]] = defaultdict(list)
    for message in messages:
        grouped[(message.codec, message.partition)].append(message)
    return dict(grouped)


def by_partition(messages: Iterable[Message]) -> dict[int, list[Message]]:
    """Messages of each partition in produce order; list index == expected offset."""
    grouped: dict[int, list[Message]] = defaultdict(list)
    for message in messages:
        grouped[message.partition].append(message)
    return dict(grouped)


def kcat_input(messages: Iterable[Message]) -> str:
    """``key|value`` lines for ``kcat -P -K '|'``."""
    lines = []
    for message in messages:
        key, value = message.key.decode(), message.value.decode()
        assert KCAT_KEY_DELIMITER not in key + value and "\n" not in key + value
        lines.append(f"{key}{KCAT_KEY_DELIMITER}{value}\n")
    return "".join(lines)


def first_offset_at_or_after(partition_messages: Sequence[Message], timestamp: int) -> int | None:
    """ListOffsets by timestamp, as Kafka answers it: the first offset whose timestamp is
    at or after ``timestamp``, or None (offset -1 on the wire) if there is none."""
    for offset, message in enumerate(partition_messages):
        if message.timestamp >= timestamp:
            return offset
    return None


def _describe(record: Message | Received) -> str:
    headers = ", ".join(f"{name}={value!r}" for name, value in record.headers)
    value = repr(record.value)
    value = value if len(value) <= 60 else value[:57] + "..."
    return f"key={record.key!r} ts={record.timestamp} headers=[{headers}] value={value}"


def assert_partition_round_trip(
    expected: Mapping[int, Sequence[Message]],
    received: Sequence[Received],
    *,
    start_offsets: Mapping[int, int] | None = None,
    timestamps: Callable[[Message, Received], bool] | None = None,
) -> None:
    """Assert that ``received`` is exactly ``expected[p][start:]`` for every partition ``p``
    in ``expected``: same key, value, headers and timestamp, in offset order, with offsets
    ``start, start + 1, ...`` (dense; ``start`` defaults to 0).

    ``received`` may interleave partitions (clients fetch them in parallel) but must keep
    each partition's order. ``timestamps`` replaces the exact timestamp comparison for
    clients that cannot set one (kcat stamps CreateTime itself).
    """
    start_offsets = dict(start_offsets or {})
    got: dict[int, list[Received]] = defaultdict(list)
    for record in received:
        got[record.partition].append(record)
    unexpected = sorted(set(got) - set(expected))
    assert not unexpected, f"records from partitions nobody asked for: {unexpected}"
    problems = []
    for partition, messages in sorted(expected.items()):
        start = start_offsets.get(partition, 0)
        want = list(messages[start:])
        have = got.get(partition, [])
        offsets = [record.offset for record in have]
        if offsets != list(range(start, start + len(have))):
            problems.append(
                f"partition {partition}: offsets {offsets}, expected dense from {start}"
            )
        if len(have) != len(want):
            problems.append(f"partition {partition}: {len(have)} records, expected {len(want)}")
        at_offset = {record.offset: record for record in have}
        for offset, message in enumerate(want, start):
            record = at_offset.get(offset)
            if record is None:
                problems.append(f"partition {partition} offset {offset}: missing")
                continue
            same_timestamp = (
                timestamps(message, record)
                if timestamps is not None
                else record.timestamp == message.timestamp
            )
            if (
                record.key != message.key
                or record.value != message.value
                or tuple(record.headers) != message.headers
                or not same_timestamp
            ):
                problems.append(
                    f"partition {partition} offset {offset}:\n"
                    f"    got      {_describe(record)}\n"
                    f"    expected {_describe(message)}"
                )
    assert not problems, "round trip differs:\n" + "\n".join(problems)


@dataclass(frozen=True)
class OffsetLookups:
    """The timestamp lookups kafka-python and aiokafka both perform (their consumers
    share an API), and what the log must answer to them."""

    expected: dict[int, list[Message]]
    partitions: list  # the client's TopicPartition objects
    middle: int

    @property
    def between(self) -> dict:
        """Just before each partition's middle message: the answer is that message."""
        middle = self.middle
        return {tp: self.expected[tp.partition][middle].timestamp - 1 for tp in self.partitions}

    @property
    def exact(self) -> dict:
        """Exactly on message 3 of the first partition."""
        return {self.partitions[0]: self.expected[0][3].timestamp}

    @property
    def too_late(self) -> dict:
        """After the last message: no answer."""
        return {self.partitions[0]: self.expected[0][-1].timestamp + 1}

    def check(self, found, exact, too_late, beginning, end, records) -> None:
        assert {tp: (found[tp].offset, found[tp].timestamp) for tp in self.partitions} == {
            tp: (
                first_offset_at_or_after(self.expected[tp.partition], ts),
                self.expected[tp.partition][self.middle].timestamp,
            )
            for tp, ts in self.between.items()
        }
        assert exact[self.partitions[0]].offset == 3
        assert too_late == {self.partitions[0]: None}  # nothing at or after the timestamp
        assert beginning == dict.fromkeys(self.partitions, 0)
        assert end == dict.fromkeys(self.partitions, MESSAGES_PER_PARTITION)
        assert_partition_round_trip(
            self.expected, records, start_offsets=dict.fromkeys(range(PARTITIONS), self.middle)
        )


def wait_until(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.05)
