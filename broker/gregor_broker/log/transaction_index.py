"""Transactions on the log side: which transactions are open (the last stable offset)
and the aborted-transaction index, in Kafka's ``.txnindex`` format.

Open transactions (Kafka's ``ProducerStateManager.ongoingTxns``): a transactional batch of
a producer with no open transaction opens one at the batch's base offset; a commit or
abort marker of that producer closes it. The **last stable offset** (LSO) is the first
offset of the oldest open transaction, else the high watermark: read_committed consumers
read up to it and no further.

An aborted transaction becomes an ``AbortedTxn`` entry in the ``<base>.txnindex`` file of
the segment holding its marker: 34 bytes, ``version`` int16 (0), ``producer_id`` int64,
``first_offset`` int64, ``last_offset`` int64 (the marker's offset) and
``last_stable_offset`` int64 (the LSO once it was aborted), big-endian. A read_committed
fetch answers, with its records, the aborted transactions that overlap them, so the
client can drop their data.

No sockets; the index file is plain appends and reads, like the offset indexes.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

ABORTED_TXN_VERSION = 0
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34


class CorruptTransactionIndex(ValueError):
    """A ``.txnindex`` that is not whole entries of a known version."""


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        return _ENTRY.pack(
            ABORTED_TXN_VERSION,
            self.producer_id,
            self.first_offset,
            self.last_offset,
            self.last_stable_offset,
        )


class TransactionIndex:
    """One segment's aborted transactions, in marker order, and their file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: list[AbortedTxn] = []

    @classmethod
    def load(cls, path: Path) -> TransactionIndex:
        index = cls(path)
        if not path.exists():
            return index
        data = path.read_bytes()
        if len(data) % ENTRY_SIZE:
            # A crash tore the last append (entries are written after their marker, so
            # the marker is in the log and the next scan of the log writes it again).
            data = data[: len(data) - len(data) % ENTRY_SIZE]
            os.truncate(path, len(data))
        for position in range(0, len(data), ENTRY_SIZE):
            version, *fields = _ENTRY.unpack_from(data, position)
            if version != ABORTED_TXN_VERSION:
                raise CorruptTransactionIndex(f"{path}: entry version {version}")
            index.entries.append(AbortedTxn(*fields))
        return index

    def append(self, entry: AbortedTxn) -> None:
        if self.entries and entry.last_offset <= self.entries[-1].last_offset:
            raise ValueError(
                f"aborted transaction ending at {entry.last_offset} is not after the last "
                f"one ({self.entries[-1].last_offset})"
            )
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
        try:
            os.write(fd, entry.encode())
        finally:
            os.close(fd)
        self.entries.append(entry)

    def collect(self, fetch_offset: int, upper_bound: int) -> tuple[list[AbortedTxn], bool]:
        """Aborted transactions overlapping [fetch_offset, upper_bound), and whether the
        search is complete (an entry's LSO reached the bound: later segments cannot hold
        more that matter; Kafka's ``TxnIndexSearchResult``)."""
        found = []
        for entry in self.entries:
            if entry.last_offset >= fetch_offset and entry.first_offset < upper_bound:
                found.append(entry)
            if entry.last_stable_offset >= upper_bound:
                return found, True
        return found, False

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose marker is at or after ``offset`` (log truncation)."""
        kept = [entry for entry in self.entries if entry.last_offset < offset]
        if len(kept) == len(self.entries):
            return
        self.entries = kept
        with open(self.path, "wb") as file:
            file.write(b"".join(entry.encode() for entry in kept))


class OpenTransactions:
    """Open transactions of one partition: producer id -> first offset (Kafka's
    ``ongoingTxns``), fed batch headers in offset order, and the transactions that ended
    but whose marker the high watermark has not passed yet (Kafka's ``unreplicatedTxns``):
    until it has, a new leader may not have the marker, so they still hold the LSO back."""

    def __init__(self) -> None:
        self.first_offsets: dict[int, int] = {}
        self.unreplicated: list[tuple[int, int]] = []  # (first offset, marker offset)

    def on_transactional_batch(self, producer_id: int, base_offset: int) -> None:
        self.first_offsets.setdefault(producer_id, base_offset)

    def on_marker(
        self, producer_id: int, marker_offset: int, *, aborted: bool
    ) -> AbortedTxn | None:
        """Close the producer's transaction; the index entry when it was aborted."""
        first = self.first_offsets.pop(producer_id, None)
        if first is None:
            return None
        self.unreplicated.append((first, marker_offset))
        if not aborted:
            return None
        return AbortedTxn(
            producer_id, first, marker_offset, self.next_unstable_offset(marker_offset + 1)
        )

    def next_unstable_offset(self, default: int) -> int:
        """First offset of the oldest open transaction, else ``default`` (the LSO an
        aborted transaction records: Kafka's ``lastStableOffset(completedTxn)``)."""
        return min(self.first_offsets.values(), default=default)

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        """First offset of the oldest transaction still open or whose marker is at or
        past ``high_watermark``; None when there is none."""
        if self.unreplicated:
            self.unreplicated = [t for t in self.unreplicated if t[1] >= high_watermark]
        first = min(self.first_offsets.values(), default=None)
        for txn_first, _ in self.unreplicated:
            if first is None or txn_first < first:
                first = txn_first
        return first

    def last_stable_offset(self, high_watermark: int) -> int:
        """The first unstable offset, capped by the high watermark (Kafka's LSO)."""
        first = self.first_unstable_offset(high_watermark)
        return high_watermark if first is None else min(first, high_watermark)

    def truncate_to(self, offset: int) -> None:
        """Forget transactions opened at or after ``offset`` (the rest stay open; a
        marker truncated away reopens nothing here: state is rebuilt from the log)."""
        self.first_offsets = {
            producer: first for producer, first in self.first_offsets.items() if first < offset
        }
        self.unreplicated = [t for t in self.unreplicated if t[1] < offset]
