"""Crafted record batches and raw Produce requests for the produce-validation tests.

Real clients never send these batches, so the tests build them byte by byte: a header
field rewritten (CRC recomputed, so only the lie is wrong), payloads a codec cannot read,
and a zstd decompression bomb written directly as RLE blocks (RFC 8878), so building a
5 GB bomb costs the test nothing.
"""

from __future__ import annotations

import struct
from typing import Any

from gregor_broker.protocol.record_batch import build_batch
from gregor_broker.protocol.records import Record, encode_record, encode_varint

from .quota_helpers import kafka_request


def records(count: int, *, key: bytes | None = b"k", value: bytes = b"v") -> list[Record]:
    return [Record(i, 0, key, value + str(i).encode()) for i in range(count)]


def encoded(batch_records: list[Record]) -> bytes:
    return b"".join(encode_record(r) for r in batch_records)


def batch_around(payload: bytes, count: int, *, attributes: int = 0) -> bytes:
    """A batch whose header says ``count`` records around any ``payload``."""
    return build_batch([b""] * count, attributes=attributes, records_payload=payload)


def zstd_bomb(record_count: int, value_bytes: int, window_log: int = 17) -> bytes:
    """A zstd frame inflating to ``record_count`` keyed records of ``value_bytes`` zeros.

    Each 128 KiB of zeros is one 4-byte RLE block, so 80 records of 64 MiB are ~170 KB
    compressed and 5 GiB inflated. Record fields around the value are raw blocks. The
    frame declares a window of 2^``window_log`` bytes (a decoder fills its window).
    """
    block_max = 128 * 1024
    out = bytearray(struct.pack("<I", 0xFD2FB528))
    out += bytes([0x00, (window_log - 10) << 3])  # no content size, no checksum; window

    def raw(data: bytes, last: bool = False) -> None:
        out.extend(((len(data) << 3) | int(last)).to_bytes(3, "little"))
        out.extend(data)

    def rle(size: int) -> None:
        out.extend(((size << 3) | (1 << 1)).to_bytes(3, "little"))
        out.append(0)

    for index in range(record_count):
        body_head = b"\x00" + encode_varint(0) + encode_varint(index) + encode_varint(1) + b"k"
        body_head += encode_varint(value_bytes)
        length = len(body_head) + value_bytes + 1  # + the header count
        raw(encode_varint(length) + body_head)
        remaining = value_bytes
        while remaining:
            step = min(block_max, remaining)
            rle(step)
            remaining -= step
        raw(encode_varint(0), last=index == record_count - 1)
    return bytes(out)


def produce(
    bootstrap: str,
    topic: str,
    records_bytes: bytes | None,
    *,
    version: int = 9,
    acks: int = -1,
    transactional_id: str | None = None,
) -> Any:
    """One raw Produce to partition 0; returns that partition's response."""
    response = kafka_request(
        bootstrap,
        0,
        version,
        {
            "transactional_id": transactional_id,
            "acks": acks,
            "timeout": 30000,
            "topic_data": [
                {"name": topic, "partition_data": [{"index": 0, "records": records_bytes}]}
            ],
        },
    )
    return response.responses[0].partition_responses[0]


def log_end_offset(bootstrap: str, topic: str) -> int:
    """ListOffsets v1 for the latest offset of partition 0 (what a consumer would see)."""
    response = kafka_request(
        bootstrap,
        2,
        1,
        {
            "replica_id": -1,
            "topics": [{"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}],
        },
    )
    partition = response.topics[0].partitions[0]
    assert partition.error_code == 0, partition
    return partition.offset
