"""The fuzzer's inputs: input ``i`` of seed ``s`` is a pure function of ``(s, i)``.

Kinds (``KINDS``, with their share of a run):
- ``structured``: a request of an advertised API and version, built from kio's schema
  with extreme values (``requests.RequestBuilder``); (api, version) pairs are visited
  round-robin so every advertised pair is sent;
- ``unknown_tag``: a plausible flexible request with a tagged field no schema has, in
  the body or in the request header (KIP-482: skip it);
- ``mutated``: a valid frame with bytes flipped, inserted, deleted, truncated, or an int
  overwritten with an extreme, the size prefix kept right (or, sometimes, lying);
- ``batch_lie``: a Produce of a lying record batch (``batches``) to a delete-policy or
  a compacted topic;
- ``connection_abuse``: half frames, clients that never read, many connections, huge or
  negative size prefixes; run on their own connections.

An ``Input`` carries the bytes to send and whether an answer is due.
"""

from __future__ import annotations

import random
import struct
from dataclasses import dataclass
from typing import Any

from gregor_broker.protocol.entities import build, encode, is_flexible, payload_class

from . import batches
from .requests import RequestBuilder, add_unknown_tag, frame, header

KINDS = {
    "structured": 0.38,
    "unknown_tag": 0.14,
    "mutated": 0.28,
    "batch_lie": 0.18,
    "connection_abuse": 0.02,
}
ABUSES = [
    "half_frame",
    "never_read",
    "many_connections",
    "huge_size",
    "negative_size",
    "pipelined_flood",
]
DELETE_TOPIC = "fuzz-target"
COMPACT_TOPIC = "fuzz-compact"
# The strings requests prefer; never the control or health topics.
NAMES = [
    DELETE_TOPIC,
    COMPACT_TOPIC,
    "fuzz-other",
    "fuzz-group",
    "__consumer_offsets",
    "fuzz-txn",
    "1",
    "0",
]
PRODUCE = 0
API_VERSIONS = 18


@dataclass
class Input:
    index: int
    kind: str
    detail: str  # e.g. "Metadata v12", "bomb", "never_read"
    api_key: int = -1
    version: int = -1
    data: bytes = b""
    expect_response: bool = True
    abuse: str | None = None
    params: dict[str, Any] | None = None
    # A structured request with a null where its schema allows none: Kafka refuses it
    # (the connection closes), so a closed connection is the right answer.
    null_where_not_allowed: bool = False


def rng_for(seed: int, index: int) -> random.Random:
    return random.Random(f"{seed}:{index}")


def make_input(seed: int, index: int, pairs: list[tuple[int, int]]) -> Input:
    """Input ``index`` of ``seed``; ``pairs`` are the advertised (api key, version)s."""
    rng = rng_for(seed, index)
    kind = rng.choices(list(KINDS), weights=list(KINDS.values()))[0]
    correlation_id = index & 0x7FFFFFFF
    if kind == "structured":
        api_key, version = pairs[index % len(pairs)]
        return _structured(rng, index, api_key, version, correlation_id)
    if kind == "unknown_tag":
        flexible = [(k, v) for k, v in pairs if is_flexible(k, v)]
        api_key, version = rng.choice(flexible)
        return _unknown_tag(rng, index, api_key, version, correlation_id)
    if kind == "mutated":
        api_key, version = rng.choice(pairs)
        return _mutated(rng, index, api_key, version, correlation_id)
    if kind == "batch_lie":
        versions = [v for k, v in pairs if k == PRODUCE and v >= 3]
        return _batch_lie(rng, index, rng.choice(versions), correlation_id)
    abuse = rng.choice(ABUSES)
    return Input(index, kind, abuse, abuse=abuse, params={"seed": rng.getrandbits(32)})


def _request_frame(
    api_key: int, version: int, correlation_id: int, body: bytes, rng: random.Random
) -> bytes:
    flexible = is_flexible(api_key, version)
    client_id = rng.choice(["fuzz", "", "x" * 300])
    return frame(header(api_key, version, correlation_id, flexible, client_id), body)


def _expects_response(entity: Any, api_key: int) -> bool:
    return not (api_key == PRODUCE and getattr(entity, "acks", 1) == 0)


def _structured(
    rng: random.Random, index: int, api_key: int, version: int, correlation_id: int
) -> Input:
    builder = RequestBuilder(rng, NAMES, plausible=rng.random() < 0.4)
    entity = builder.request(api_key, version)
    body = builder.encode(entity)
    return Input(
        index,
        "structured",
        f"{type(entity).__name__} v{version}",
        api_key,
        version,
        _request_frame(api_key, version, correlation_id, body, rng),
        _expects_response(entity, api_key) and not builder.forced_nulls,
        null_where_not_allowed=builder.forced_nulls > 0,
    )


def _unknown_tag(
    rng: random.Random, index: int, api_key: int, version: int, correlation_id: int
) -> Input:
    builder = RequestBuilder(rng, NAMES, plausible=True)
    entity = builder.request(api_key, version, default_tags=True)
    body = builder.encode(entity)
    head = header(api_key, version, correlation_id, True, "fuzz")
    where = rng.choice(["body", "header", "both"])
    if where in ("body", "both"):
        body = add_unknown_tag(body, rng)
    if where in ("header", "both"):
        head = add_unknown_tag(head, rng)
    return Input(
        index,
        "unknown_tag",
        f"{type(entity).__name__} v{version} ({where})",
        api_key,
        version,
        frame(head, body),
        _expects_response(entity, api_key) and not builder.forced_nulls,
        null_where_not_allowed=builder.forced_nulls > 0,
    )


def _mutated(
    rng: random.Random, index: int, api_key: int, version: int, correlation_id: int
) -> Input:
    builder = RequestBuilder(rng, NAMES, plausible=True)
    entity = builder.request(api_key, version)
    valid = _request_frame(api_key, version, correlation_id, builder.encode(entity), rng)
    data = bytearray(valid[4:])
    operations = []
    for _ in range(rng.randint(1, 4)):
        operation = rng.choice(["flip", "insert", "delete", "extreme", "truncate", "extend"])
        operations.append(operation)
        position = rng.randrange(len(data)) if data else 0
        if operation == "flip" and data:
            data[position] ^= 1 << rng.randrange(8)
        elif operation == "insert":
            data[position:position] = rng.randbytes(rng.randint(1, 8))
        elif operation == "delete" and data:
            del data[position : position + rng.randint(1, 8)]
        elif operation == "extreme" and len(data) >= 4:
            position = rng.randrange(len(data) - 3)
            data[position : position + 4] = rng.choice(
                [b"\x7f\xff\xff\xff", b"\x80\x00\x00\x00", b"\xff\xff\xff\xff", b"\x00" * 4]
            )
        elif operation == "truncate":
            del data[position:]
        elif operation == "extend":
            data += rng.randbytes(rng.randint(1, 64))
    size = len(data)
    if rng.random() < 0.05:
        size += rng.choice([-1, 1, 100])  # the size prefix lies too
        operations.append("size-lie")
    return Input(
        index,
        "mutated",
        f"api {api_key} v{version} {'+'.join(operations)}",
        api_key,
        version,
        struct.pack(">i", max(size, 0)) + bytes(data),
        expect_response=False,  # anything may come back, or nothing
    )


def _batch_lie(rng: random.Random, index: int, version: int, correlation_id: int) -> Input:
    lie, records = batches.lying_batch(rng)
    topic = rng.choice([DELETE_TOPIC, COMPACT_TOPIC])
    entity = build(
        payload_class(PRODUCE, version, "request"),
        {
            "transactional_id": None,
            "acks": rng.choice([-1, 1]),
            "timeout": 5000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}],
        },
    )
    return Input(
        index,
        "batch_lie",
        f"{lie} -> {topic}",
        PRODUCE,
        version,
        _request_frame(PRODUCE, version, correlation_id, encode(entity), rng),
    )


def api_versions_frame(correlation_id: int = 1) -> bytes:
    """ApiVersions v0: what the prober and connection abuses send."""
    return frame(header(API_VERSIONS, 0, correlation_id, False, "fuzz"), b"")
