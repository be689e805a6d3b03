"""Builders and readers shared by the log storage tests."""

from __future__ import annotations

import os

from gregor_broker.log.partition_log import AppendResult, FileSlice, PartitionLog
from gregor_broker.protocol.record_batch import BatchHeader, read_header, scan_batches
from gregor_broker.protocol.records import Compression, Record, iter_batch_records, make_batch


class FakeClock:
    """A controllable ``now_ms``."""

    def __init__(self, now: int = 1_700_000_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms


def batch(
    count: int = 1,
    *,
    timestamp: int = 1_000,
    timestamp_deltas: list[int] | None = None,
    value_size: int = 10,
    compression: Compression = Compression.NONE,
) -> bytes:
    deltas = timestamp_deltas if timestamp_deltas is not None else [0] * count
    records = [
        Record(i, deltas[i], f"k{i}".encode(), bytes([65 + i % 26]) * value_size)
        for i in range(count)
    ]
    return make_batch(records, base_timestamp=timestamp, compression=compression)


def produce(log: PartitionLog, *batches: bytes, leader_epoch: int | None = None) -> AppendResult:
    buffer = bytearray(b"".join(batches))
    return log.append(buffer, scan_batches(buffer), leader_epoch=leader_epoch)


def slice_bytes(file_slice: FileSlice) -> bytes:
    return os.pread(file_slice.fd, file_slice.size, file_slice.position)


def slice_headers(file_slice: FileSlice) -> list[BatchHeader]:
    """The batches of a slice; it must hold whole, valid batches."""
    return scan_batches(slice_bytes(file_slice))


def consume_offsets(log: PartitionLog, start: int = 0, max_bytes: int = 1 << 20) -> list[int]:
    """Every record offset from ``start`` to the log end, reading like a consumer."""
    offsets: list[int] = []
    position = start
    while position < log.log_end_offset:
        file_slice = log.read(position, max_bytes)
        assert file_slice is not None
        for header in slice_headers(file_slice):
            for offset in range(header.base_offset, header.next_offset):
                if offset >= position:
                    offsets.append(offset)
            position = max(position, header.next_offset)
    return offsets


def record_values(data: bytes) -> list[tuple[int, bytes | None]]:
    """(offset, value) of every record in ``data`` (whole batches)."""
    out = []
    for header in scan_batches(data):
        for record in iter_batch_records(data, header):
            out.append((header.base_offset + record.offset_delta, record.value))
    return out


def header_at(path, position: int) -> BatchHeader:
    with open(path, "rb") as file:
        file.seek(position)
        return read_header(file.read(61))
