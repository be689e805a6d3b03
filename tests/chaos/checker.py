"""What the cluster holds after a campaign, against what it acknowledged.

Two reads: every partition through a consumer (up to its high watermark), and every
replica's segment files on disk (the batches' base offsets, last offsets and CRCs). The
counts (the names the summary and the JSON use):

- ``lost``: an acknowledged value that is nowhere in its partition;
- ``wrong_offset``: an acknowledged value that is in its partition, but not at the offset
  it was acknowledged with;
- ``acked_twice``: an offset acknowledged to two different values;
- ``duplicates``: a value stored at more than one offset that idempotence should have
  kept out: the copies were written by different producer ids, or by one producer id
  under one epoch (a retry the broker failed to recognise);
- ``resent_new_epoch`` (not a violation): a value stored more than once by one producer
  id, each copy under another epoch. librdkafka bumps an idempotent producer's epoch
  itself after a message timed out or its sequences went out of sync, and sends again,
  from sequence 0, whatever was not acknowledged; Kafka stores those too;
- ``divergent``: a partition whose replicas' batches below the high watermark differ
  (another base offset, last offset or CRC; a replica missing a batch counts too);
- ``regressions``: a committed offset of the group read back lower than one whose commit
  was acknowledged before the read began (``load.CommitSampler``);
- ``unread``: a partition the consumer could not read up to its high watermark (its
  acknowledgements, when it gave no high watermark at all, are ``unverified``, not lost);
- ``protocol_errors``: librdkafka log lines saying it could not parse a response;
- ``longest_unavailable_s``: the longest time a partition went without an acknowledgement
  while the load ran.
"""

from __future__ import annotations

import bisect
import itertools
import os
import time
from collections import defaultdict
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path

import confluent_kafka

from gregor_broker.log.segment import iter_headers

from ..integration.durability import read_topic
from .load import Ack, Position

BatchKey = tuple[int, int, int]  # (base offset, last offset, crc)
# (base offset, last offset, producer id, producer epoch, base sequence)
ProducerBatch = tuple[int, int, int, int, int]

# Answers that only mean "not now" while leaders move (librdkafka does not flag all of
# them retriable on a watermark query).
RETRIABLE_CODES = {
    confluent_kafka.KafkaError.NOT_LEADER_FOR_PARTITION,  # NOT_LEADER_OR_FOLLOWER
    confluent_kafka.KafkaError.LEADER_NOT_AVAILABLE,
    confluent_kafka.KafkaError.FENCED_LEADER_EPOCH,
    confluent_kafka.KafkaError.UNKNOWN_LEADER_EPOCH,
    confluent_kafka.KafkaError.UNKNOWN_TOPIC_OR_PART,
    confluent_kafka.KafkaError.NOT_ENOUGH_REPLICAS,
    confluent_kafka.KafkaError.REQUEST_TIMED_OUT,
    confluent_kafka.KafkaError._TIMED_OUT,
    confluent_kafka.KafkaError._TRANSPORT,
    confluent_kafka.KafkaError._ALL_BROKERS_DOWN,
    confluent_kafka.KafkaError.KAFKA_STORAGE_ERROR,
}


def _headers(partition_dir: Path):
    for segment in sorted(partition_dir.glob("*.log")):
        fd = os.open(segment, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            for _, header in iter_headers(fd, 0, size):
                yield header
        finally:
            os.close(fd)


def replica_batches(partition_dir: Path) -> list[BatchKey]:
    """Every batch in a replica's segments, in offset order, as (base, last, crc)."""
    return [(h.base_offset, h.last_offset, h.crc) for h in _headers(partition_dir)]


def producer_batches(partition_dir: Path) -> list[ProducerBatch]:
    """Every batch in a replica's segments with the producer that wrote it."""
    return [
        (h.base_offset, h.last_offset, h.producer_id, h.producer_epoch, h.base_sequence)
        for h in _headers(partition_dir)
    ]


def writer_at(batches: list[ProducerBatch], offset: int) -> tuple[int, int, int] | None:
    """(producer id, epoch, sequence) of the record at ``offset``; None if not found."""
    index = bisect.bisect_right(batches, offset, key=lambda batch: batch[0]) - 1
    if index < 0 or batches[index][1] < offset:
        return None
    base, _last, producer_id, epoch, sequence = batches[index]
    return producer_id, epoch, sequence + offset - base


def split_resends(verdict: Verdict, batches: dict[int, list[ProducerBatch]]) -> None:
    """Move the duplicates that are one producer id re-sending under newer epochs from
    ``duplicates`` to ``resent_new_epoch`` (``batches``: a replica's, per partition)."""
    true_duplicates, resent = [], []
    for value, positions in sorted(verdict.duplicate_positions.items()):
        writers = [writer_at(batches.get(p, []), offset) for p, offset in positions]
        line = f"{value.decode(errors='replace')} at {positions} by {writers}"
        known = [w for w in writers if w is not None]
        if (
            len(known) == len(writers)
            and len({w[0] for w in known}) == 1
            and len({w[1] for w in known}) == len(known)
        ):
            resent.append(line)
        else:
            true_duplicates.append(line)
    verdict.duplicates = true_duplicates
    verdict.resent_new_epoch = resent


def divergence(replicas: dict[int, list[BatchKey]], high_watermark: int) -> list[str]:
    """How replicas differ below ``high_watermark`` (empty when they agree)."""
    below = {
        broker_id: [batch for batch in batches if batch[1] < high_watermark]
        for broker_id, batches in replicas.items()
    }
    problems = []
    reference_id = max(below, key=lambda broker_id: len(below[broker_id]))
    reference = below[reference_id]
    covered = reference[-1][1] + 1 if reference else 0
    for broker_id, batches in sorted(below.items()):
        if broker_id == reference_id:
            continue
        if batches != reference:
            first = next(
                (i for i, (a, b) in enumerate(zip(batches, reference, strict=False)) if a != b),
                min(len(batches), len(reference)),
            )
            mine = batches[first] if first < len(batches) else None
            theirs = reference[first] if first < len(reference) else None
            problems.append(
                f"broker {broker_id} differs from broker {reference_id} at batch {first}: "
                f"{mine} vs {theirs} ({len(batches)} vs {len(reference)} batches below "
                f"HW {high_watermark})"
            )
    if covered < high_watermark and reference:
        problems.append(f"no replica holds offsets {covered}..{high_watermark - 1}")
    return problems


@dataclass
class Verdict:
    acknowledged: int = 0
    acked_without_offset: int = 0
    unverified: int = 0  # acknowledged in a partition the checker could not read
    lost: list[str] = field(default_factory=list)
    wrong_offset: list[str] = field(default_factory=list)
    acked_twice: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    resent_new_epoch: list[str] = field(default_factory=list)
    duplicate_positions: dict[bytes, list[Position]] = field(default_factory=dict, repr=False)
    divergent: list[str] = field(default_factory=list)
    regressions: list[str] = field(default_factory=list)
    unread: list[str] = field(default_factory=list)
    protocol_errors: list[str] = field(default_factory=list)
    longest_unavailable_s: dict[int, float] = field(default_factory=dict)
    high_watermarks: dict[int, int] = field(default_factory=dict)

    VIOLATIONS = (
        "lost",
        "wrong_offset",
        "acked_twice",
        "duplicates",
        "divergent",
        "regressions",
        "unread",
        "protocol_errors",
    )

    def violations(self) -> int:
        return sum(len(getattr(self, name)) for name in self.VIOLATIONS)

    def counts(self) -> dict[str, int | float]:
        counts: dict[str, int | float] = {
            "acknowledged": self.acknowledged,
            "acked_without_offset": self.acked_without_offset,
            "unverified": self.unverified,
        }
        counts.update({name: len(getattr(self, name)) for name in self.VIOLATIONS})
        counts["resent_new_epoch"] = len(self.resent_new_epoch)
        counts["longest_unavailable_s"] = round(
            max(self.longest_unavailable_s.values(), default=0), 2
        )
        return counts


def check_acknowledgements(
    verdict: Verdict,
    acks: list[Ack],
    served: dict[Position, bytes],
    unreadable: Collection[int] = (),
) -> None:
    """Lost, wrong-offset, acked-twice and duplicate counts from the consumer's read.

    Acknowledgements in an ``unreadable`` partition (no high watermark: it had no leader
    when the checker asked) are counted as ``unverified``, not lost: nothing read says
    where they are, and the partition is already a violation in ``unread``."""
    verdict.acknowledged = len(acks)
    skipped = set(unreadable)
    verdict.unverified = sum(1 for ack in acks if ack.partition in skipped)
    acks = [ack for ack in acks if ack.partition not in skipped]
    where: dict[bytes, list[Position]] = defaultdict(list)
    for position, value in served.items():
        where[value].append(position)
    for value, positions in where.items():
        if len(positions) > 1:
            verdict.duplicates.append(f"{value.decode(errors='replace')} at {sorted(positions)}")
            verdict.duplicate_positions[value] = sorted(positions)
    by_position: dict[Position, set[bytes]] = defaultdict(set)
    for ack in acks:
        name = ack.value.decode(errors="replace")
        if ack.offset is None or ack.offset < 0:
            # librdkafka reports some idempotent retries as persisted with no offset
            # (e.g. after DUPLICATE_SEQUENCE_NUMBER): only presence can be checked.
            verdict.acked_without_offset += 1
            if not any(p == ack.partition for p, _ in where.get(ack.value, ())):
                verdict.lost.append(f"{name} acknowledged in partition {ack.partition}, not stored")
            continue
        position = (ack.partition, ack.offset)
        by_position[position].add(ack.value)
        if served.get(position) == ack.value:
            continue
        if ack.value in where:
            verdict.wrong_offset.append(
                f"{name} acknowledged at {position}, stored at {sorted(where[ack.value])}"
            )
        else:
            verdict.lost.append(
                f"{name} acknowledged at {position}, not stored "
                f"(that offset holds {served.get(position)!r})"
            )
    for position, values in by_position.items():
        if len(values) > 1:
            verdict.acked_twice.append(
                f"{position} acknowledged to {sorted(v.decode(errors='replace') for v in values)}"
            )


def longest_gaps(acks: list[Ack], partitions: int, start: float, end: float) -> dict[int, float]:
    """Per partition, the longest time without an acknowledgement within [start, end]."""
    times: dict[int, list[float]] = {p: [start] for p in range(partitions)}
    for ack in acks:
        times[ack.partition].append(ack.at)
    gaps = {}
    for partition, moments in times.items():
        moments.sort()
        moments.append(max(end, moments[-1]))
        gaps[partition] = max(b - a for a, b in itertools.pairwise(moments))
    return gaps


HIGH_WATERMARK_WAIT_S = 60.0


def read_high_watermarks(
    query: Callable[[int], int],
    partitions: int,
    verdict: Verdict,
    *,
    wait_s: float = HIGH_WATERMARK_WAIT_S,
    backoff_s: float = 0.5,
) -> None:
    """Each partition's high watermark into ``verdict.high_watermarks``, asking
    ``query(partition)`` again after retriable errors (a leader just moved:
    NOT_LEADER_OR_FOLLOWER, a timeout) for up to ``wait_s`` in all. A partition that
    never answers is reported in ``verdict.unread`` as unavailable (the campaign's
    result, not a crash of the checker) and left out of the reads."""
    deadline = time.monotonic() + wait_s
    for partition in range(partitions):
        while True:
            try:
                verdict.high_watermarks[partition] = query(partition)
                break
            except confluent_kafka.KafkaException as error:
                kafka_error = error.args[0] if error.args else None
                retriable = not isinstance(kafka_error, confluent_kafka.KafkaError) or (
                    kafka_error.retriable() or kafka_error.code() in RETRIABLE_CODES
                )
                if not retriable or time.monotonic() + backoff_s > deadline:
                    verdict.unread.append(
                        f"partition {partition}: unavailable, no high watermark "
                        f"within {wait_s:.0f} s ({kafka_error})"
                    )
                    break
                time.sleep(backoff_s)


def read_partitions(bootstrap: str, topic: str, high_watermarks: dict[int, int]):
    """Everything below each partition's high watermark, through a consumer."""
    wanted = {p: hw for p, hw in high_watermarks.items() if hw > 0}
    return read_topic(bootstrap, topic, wanted, timeout=120) if wanted else {}


def check_unread(
    verdict: Verdict, served: dict[Position, bytes], high_watermarks: dict[int, int]
) -> None:
    reached: dict[int, int] = defaultdict(lambda: -1)
    for partition, offset in served:
        reached[partition] = max(reached[partition], offset)
    for partition, hw in high_watermarks.items():
        if hw > 0 and reached[partition] < hw - 1:
            verdict.unread.append(
                f"partition {partition}: the consumer reached offset {reached[partition]}, "
                f"high watermark {hw}"
            )
