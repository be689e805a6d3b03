"""``gregor transactions list|describe|abort``: the transactions the coordinators hold,
one transactional id in detail, and aborting a hanging transaction on a partition, like
Kafka's kafka-transactions.sh.

- ``list`` sends ListTransactions to every broker (each answers for the
  ``__transaction_state`` partitions it leads);
- ``describe`` finds the id's coordinator (FindCoordinator, key type TRANSACTION) and
  sends it DescribeTransactions;
- ``abort`` writes an ABORT marker for a producer to one partition: WriteTxnMarkers to
  the partition's leader, as kafka-transactions.sh abort does; the producer is the one
  whose open transaction starts at ``--start-offset`` (DescribeProducers on the leader),
  or is given by its producer id, epoch and coordinator epoch.

Requests go through ``wire_client`` since confluent-kafka's AdminClient has no calls for
them.
"""

from __future__ import annotations

import argparse
import struct
import time
from typing import Any

from kio.schema.errors import ErrorCode

from ..protocol.wire import read_unsigned_varint, skip_tagged_fields
from .kafka_api import (
    ToolError,
    add_bootstrap_argument,
    add_output_argument,
    admin,
    brokers,
    command_group,
    print_rows,
    run,
)
from .wire_client import request, request_raw

PROG = "gregor transactions"
FIND_COORDINATOR, FIND_COORDINATOR_VERSION = 10, 3
WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_VERSION = 27, 1
DESCRIBE_PRODUCERS = 61
DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 65, 66
TRANSACTION_KEY_TYPE = 1
STATES = (
    "Empty",
    "Ongoing",
    "PrepareCommit",
    "PrepareAbort",
    "CompleteCommit",
    "CompleteAbort",
    "Dead",
    "PrepareEpochFence",
)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    commands = command_group(
        subparsers,
        "transactions",
        help="list, describe and abort transactions (kafka-transactions)",
        description="Inspect transactions and abort hanging ones, like kafka-transactions.sh.",
    )

    listing = commands.add_parser(
        "list",
        help="every transactional id the coordinators hold, with its state",
        description=(
            "Ask every broker for the transactional ids whose __transaction_state partition "
            "it leads: the id, its coordinator, producer id and state."
        ),
        epilog=(
            "examples:\n"
            "  gregor transactions list -b 127.0.0.1:9092\n"
            "  gregor transactions list --state Ongoing --duration-filter 60000 -o json"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_bootstrap_argument(listing)
    add_output_argument(listing)
    listing.add_argument(
        "--state", action="append", choices=STATES, help="only this state (repeatable)"
    )
    listing.add_argument(
        "--producer-id", type=int, action="append", help="only this producer id (repeatable)"
    )
    listing.add_argument(
        "--duration-filter",
        type=int,
        default=-1,
        metavar="MS",
        help="only transactions running for longer than MS milliseconds",
    )
    listing.set_defaults(func=lambda args: run(_list, args, PROG))

    describe = commands.add_parser(
        "describe",
        help="one transactional id: producer, epoch, state, partitions",
        description=(
            "Ask the transactional id's coordinator for its producer id and epoch, state, "
            "timeout, the start of the current transaction and its partitions."
        ),
        epilog="example:\n  gregor transactions describe --transactional-id orders-tx-1",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_bootstrap_argument(describe)
    add_output_argument(describe)
    describe.add_argument("--transactional-id", required=True, metavar="ID")
    describe.set_defaults(func=lambda args: run(_describe, args, PROG))

    abort = commands.add_parser(
        "abort",
        help="abort a hanging transaction on one partition (an ABORT marker)",
        description=(
            "Write an ABORT marker for a producer to one partition, through its leader "
            "(WriteTxnMarkers), so that a transaction its coordinator no longer knows "
            "stops holding back the last stable offset. Name the hanging transaction by "
            "its first offset (--start-offset: the leader's DescribeProducers gives its "
            "producer id, epoch and coordinator epoch), or give those three; the "
            "coordinator epoch must be at least that of the producer's last marker in the "
            "partition (else TRANSACTION_COORDINATOR_FENCED)."
        ),
        epilog=(
            "examples:\n"
            "  gregor transactions abort --topic orders --partition 0 --start-offset 1200\n"
            "  gregor transactions abort --topic orders --partition 0 \\\n"
            "      --producer-id 1003 --producer-epoch 2 --coordinator-epoch 5"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_bootstrap_argument(abort)
    abort.add_argument("--topic", required=True)
    abort.add_argument("--partition", type=int, required=True)
    abort.add_argument("--start-offset", type=int, help="first offset of the hanging transaction")
    abort.add_argument("--producer-id", type=int)
    abort.add_argument("--producer-epoch", type=int)
    abort.add_argument("--coordinator-epoch", type=int)
    abort.set_defaults(func=lambda args: run(_abort, args, PROG))


def list_transactions(
    bootstrap: str, states: list[str], producer_ids: list[int], duration_ms: int
) -> list[dict[str, Any]]:
    rows = []
    for node in brokers(bootstrap):
        response = request(
            f"{node.host}:{node.port}",
            LIST_TRANSACTIONS,
            1,
            {
                "state_filters": states,
                "producer_id_filters": producer_ids,
                "duration_filter": duration_ms,
            },
        )
        if response.error_code.value != 0:
            raise ToolError(
                f"broker {node.id} cannot list its transactions: {response.error_code.name.upper()}"
            )
        for state in response.transaction_states:
            rows.append(
                {
                    "transactional_id": state.transactional_id,
                    "coordinator": node.id,
                    "producer_id": state.producer_id,
                    "transaction_state": state.transaction_state,
                }
            )
    return sorted(rows, key=lambda row: row["transactional_id"])


def _list(args: argparse.Namespace) -> int:
    rows = list_transactions(
        args.bootstrap_server, args.state or [], args.producer_id or [], args.duration_filter
    )
    print_rows(
        rows, ["transactional_id", "coordinator", "producer_id", "transaction_state"], args.output
    )
    return 0


def find_coordinator(bootstrap: str, transactional_id: str) -> tuple[int, str]:
    """(broker id, host:port) of the id's transaction coordinator."""
    response = request(
        bootstrap.split(",")[0],
        FIND_COORDINATOR,
        FIND_COORDINATOR_VERSION,
        {"key": transactional_id, "key_type": TRANSACTION_KEY_TYPE},
    )
    if response.error_code.value != 0:
        raise ToolError(
            f"no coordinator for {transactional_id!r}: {response.error_code.name.upper()}"
            + (f" ({response.error_message})" if response.error_message else "")
        )
    return response.node_id, f"{response.host}:{response.port}"


def parse_describe_transactions(frame: memoryview, position: int) -> list[dict[str, Any]]:
    """DescribeTransactions v0's response body. Read by hand: its start time is -1 when
    no transaction runs, which kio's reader refuses as a timestamp."""

    def unpack(fmt: str) -> int:
        nonlocal position
        (value,) = struct.unpack_from(fmt, frame, position)
        position += struct.calcsize(fmt)
        return value

    def varint() -> int:
        nonlocal position
        value, position = read_unsigned_varint(frame, position)
        return value

    def string() -> str:
        nonlocal position
        size = varint() - 1
        text = bytes(frame[position : position + size]).decode("utf-8")
        position += size
        return text

    unpack(">i")  # throttle time
    states = []
    for _ in range(varint() - 1):
        state: dict[str, Any] = {
            "error_code": unpack(">h"),
            "transactional_id": string(),
            "transaction_state": string(),
            "transaction_timeout_ms": unpack(">i"),
            "transaction_start_time_ms": unpack(">q"),
            "producer_id": unpack(">q"),
            "producer_epoch": unpack(">h"),
        }
        partitions = []
        for _ in range(varint() - 1):
            topic = string()
            partitions += [f"{topic}-{unpack('>i')}" for _ in range(varint() - 1)]
            position = skip_tagged_fields(frame, position)
        state["topic_partitions"] = partitions
        position = skip_tagged_fields(frame, position)
        states.append(state)
    return states


def describe_transaction(bootstrap: str, transactional_id: str) -> dict[str, Any]:
    node, address = find_coordinator(bootstrap, transactional_id)
    frame, position = request_raw(
        address, DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [transactional_id]}
    )
    [state] = parse_describe_transactions(frame, position)
    if state["error_code"] != 0:
        name = ErrorCode(state["error_code"]).name.upper()
        raise ToolError(f"cannot describe {transactional_id!r}: {name}")
    start_ms = state["transaction_start_time_ms"]
    return {
        "coordinator_id": node,
        "transactional_id": transactional_id,
        "producer_id": state["producer_id"],
        "producer_epoch": state["producer_epoch"],
        "transaction_state": state["transaction_state"],
        "transaction_timeout_ms": state["transaction_timeout_ms"],
        "current_transaction_start_time_ms": start_ms if start_ms >= 0 else None,
        "transaction_duration_ms": int(time.time() * 1000) - start_ms if start_ms >= 0 else None,
        "topic_partitions": state["topic_partitions"],
    }


def _describe(args: argparse.Namespace) -> int:
    row = describe_transaction(args.bootstrap_server, args.transactional_id)
    print_rows([row], list(row), args.output)
    return 0


def partition_leader(bootstrap: str, topic: str, partition: int) -> str:
    """host:port of the partition's leader."""
    metadata = admin(bootstrap).list_topics(topic, timeout=30)
    found = metadata.topics.get(topic)
    if found is None or found.error is not None or partition not in found.partitions:
        raise ToolError(f"{topic}-{partition} does not exist (see gregor topics describe)")
    broker = metadata.brokers.get(found.partitions[partition].leader)
    if broker is None:
        raise ToolError(f"{topic}-{partition} has no leader now; try again")
    return f"{broker.host}:{broker.port}"


def producer_at(leader: str, topic: str, partition: int, start_offset: int) -> tuple[int, int, int]:
    """(producer id, epoch, coordinator epoch) of the producer whose open transaction
    starts at ``start_offset`` (DescribeProducers, as kafka-transactions.sh abort)."""
    response = request(
        leader,
        DESCRIBE_PRODUCERS,
        0,
        {"topics": [{"name": topic, "partition_indexes": [partition]}]},
    )
    [found] = [p for t in response.topics for p in t.partitions]
    if found.error_code.value != 0:
        raise ToolError(
            f"cannot describe the producers of {topic}-{partition}: {found.error_code.name.upper()}"
        )
    for producer in found.active_producers:
        if producer.current_txn_start_offset == start_offset:
            return (
                producer.producer_id,
                producer.producer_epoch,
                max(producer.coordinator_epoch, 0),
            )
    raise ToolError(
        f"no open transaction starts at offset {start_offset} of {topic}-{partition} "
        "(see gregor transactions describe for the transactions a coordinator knows)"
    )


def abort_transaction(
    leader: str,
    topic: str,
    partition: int,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
) -> None:
    response = request(
        leader,
        WRITE_TXN_MARKERS,
        WRITE_TXN_MARKERS_VERSION,
        {
            "markers": [
                {
                    "producer_id": producer_id,
                    "producer_epoch": producer_epoch,
                    "transaction_result": False,
                    "topics": [{"name": topic, "partition_indexes": [partition]}],
                    "coordinator_epoch": coordinator_epoch,
                }
            ]
        },
    )
    for marker in response.markers:
        for result_topic in marker.topics:
            for part in result_topic.partitions:
                if part.error_code.value != 0:
                    raise ToolError(
                        f"abort on {topic}-{partition} refused: {part.error_code.name.upper()}"
                    )


def _abort(args: argparse.Namespace) -> int:
    given = (args.producer_id, args.producer_epoch, args.coordinator_epoch)
    explicit = [value is not None for value in given]
    if (args.start_offset is None) != all(explicit) or (
        args.start_offset is not None and any(explicit)
    ):
        raise ToolError(
            "give either --start-offset or all of --producer-id, --producer-epoch and "
            "--coordinator-epoch",
            exit_code=2,
        )
    leader = partition_leader(args.bootstrap_server, args.topic, args.partition)
    if args.start_offset is not None:
        given = producer_at(leader, args.topic, args.partition, args.start_offset)
    producer_id, producer_epoch, coordinator_epoch = given
    abort_transaction(
        leader, args.topic, args.partition, producer_id, producer_epoch, coordinator_epoch
    )
    print(
        f"aborted the transaction of producer {producer_id} (epoch {producer_epoch}) on "
        f"{args.topic}-{args.partition}"
    )
    return 0
