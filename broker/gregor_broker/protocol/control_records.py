"""Transaction markers: the control records a partition leader appends when a
transaction ends (Kafka's ``EndTransactionMarker`` and ``ControlRecordType``).

A marker is a batch of its own with the control and transactional attribute bits set,
the transaction's producer id and epoch, no base sequence, and one record:

- key: ``version`` int16 (0) and ``type`` int16: 0 ABORT, 1 COMMIT (Kafka's
  ``ControlRecordType``; 2-5 are KRaft's and unknown types are skipped by readers);
- value: ``version`` int16 (0) and ``coordinator_epoch`` int32, the epoch of the
  transaction coordinator that wrote it (a marker from an older coordinator is fenced).

Consumers never see control records: clients drop them, and read_committed consumers use
them (with the aborted-transactions list of the fetch response) to skip aborted data.
No I/O here.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

from .record_batch import CONTROL_FLAG, TRANSACTIONAL_FLAG, BatchHeader, rewrite_header
from .records import Record, iter_batch_records, make_batch

CONTROL_KEY_VERSION = 0
MARKER_VALUE_VERSION = 0
_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")


class ControlRecordType(IntEnum):
    ABORT = 0
    COMMIT = 1


@dataclass(frozen=True, slots=True)
class EndTransactionMarker:
    type: ControlRecordType
    coordinator_epoch: int


class InvalidControlRecord(ValueError):
    """A control record that does not parse as a transaction marker."""


def encode_marker(marker: EndTransactionMarker) -> tuple[bytes, bytes]:
    """(key, value) of a marker record."""
    return (
        _KEY.pack(CONTROL_KEY_VERSION, marker.type),
        _VALUE.pack(MARKER_VALUE_VERSION, marker.coordinator_epoch),
    )


def control_record_type(key: bytes | None) -> int:
    """The type in a control record key (any version; Kafka reads the type the same way)."""
    if key is None or len(key) < _KEY.size:
        raise InvalidControlRecord("control record key shorter than 4 bytes")
    return _KEY.unpack_from(key)[1]


def decode_marker(key: bytes | None, value: bytes | None) -> EndTransactionMarker:
    kind = control_record_type(key)
    if kind not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        raise InvalidControlRecord(f"control record type {kind} is not a transaction marker")
    if value is None or len(value) < _VALUE.size:
        raise InvalidControlRecord("transaction marker value shorter than 6 bytes")
    version, coordinator_epoch = _VALUE.unpack_from(value)
    if version < 0:
        raise InvalidControlRecord(f"transaction marker value version {version}")
    return EndTransactionMarker(ControlRecordType(kind), coordinator_epoch)


def build_marker_batch(
    marker: EndTransactionMarker,
    *,
    producer_id: int,
    producer_epoch: int,
    timestamp: int,
    base_offset: int = 0,
) -> bytes:
    """The whole control batch a leader appends for ``marker`` (offsets assigned at
    append, like any batch)."""
    key, value = encode_marker(marker)
    batch = make_batch(
        [Record(0, 0, key, value)],
        base_offset=base_offset,
        base_timestamp=timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=-1,
    )
    return rewrite_header(batch, attributes=CONTROL_FLAG | TRANSACTIONAL_FLAG)


def marker_of(batch: bytes | memoryview, header: BatchHeader) -> EndTransactionMarker | None:
    """The transaction marker a control batch carries; None for other control records."""
    for record in iter_batch_records(batch, header):
        try:
            return decode_marker(record.key, record.value)
        except InvalidControlRecord:
            return None
    return None
