"""Transactional produce rows (issue 15): the throughput of a transactional producer
against an idempotent one, measured in the same run on the same broker.

One broker (``__transaction_state`` with replication factor 1); confluent-kafka produces
``mib`` MiB of 1 KiB records (``linger.ms=5``, ``batch.size=64 KiB``, acks=all,
idempotence on) to a fresh topic of ``partitions`` partitions, once as an idempotent
producer and once as a transactional one committing every ``txn_records`` records
(begin, produce, commit_transaction, which waits for the markers). ``reps`` repetitions
alternate the order, so neither variant always runs on a warmer machine. The ratio
transactional / idempotent is the cost of transactions at that size: AddPartitionsToTxn,
EndTxn, the coordinator's two ``__transaction_state`` writes and a marker per partition,
per transaction.

Run: ``.venv/bin/python -m bench.transactions [--mib 64] [--txn-records 1000] [--reps 3]``;
prints JSON with medians and ranges and the load average. ``make bench`` has the same
comparison as its ``transactions`` group (``python -m bench.transactions measure`` per
measurement). ``tests/bench/test_transactions.py`` runs it small.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from bench.alternating import alternate, ratio_spread, run_main, spread
from bench.clients import produce_when_room, wait_for_leaders
from gregor_broker.devtools.local_cluster import LocalCluster

VALUE = 1024
ROWS = ("transactions/idempotent", "transactions/transactional")
BROKER_PROPERTIES = {
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "5",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "5",
}


def produce_run(
    bootstrap: str, topic: str, *, mib: int, partitions: int, txn_records: int | None
) -> dict[str, float]:
    """Produce ``mib`` MiB of 1 KiB records to a new topic; transactions of
    ``txn_records`` records when given, else idempotent. Bytes, records, seconds."""
    import confluent_kafka
    import confluent_kafka.admin

    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    new = confluent_kafka.admin.NewTopic(topic, partitions, 1)
    for future in admin.create_topics([new]).values():
        future.result(60)
    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "linger.ms": 5,
        "batch.size": 64 * 1024,  # as the harness's batched produce rows
        "acks": "all",
        "enable.idempotence": True,
    }
    if txn_records is not None:
        config["transactional.id"] = f"bench-{topic}"
    producer = confluent_kafka.Producer(config)
    wait_for_leaders(producer, topic, partitions)
    # One record before the clock starts: the producer id (InitProducerId, lazy for an
    # idempotent producer, init_transactions for the other) and the connection are set up.
    if txn_records is not None:
        producer.init_transactions(60)
        producer.begin_transaction()
    producer.produce(topic, b"warm-up", partition=0)
    if txn_records is not None:
        producer.commit_transaction(60)
    if producer.flush(60) != 0:
        raise RuntimeError("warm-up record not delivered")
    value = os.urandom(VALUE)
    count = mib * 1024
    started = time.perf_counter()
    for i in range(count):
        if txn_records is not None and i % txn_records == 0:
            if i:
                producer.commit_transaction(120)
            producer.begin_transaction()
        produce_when_room(producer, topic, value, partition=i % partitions)
    if txn_records is not None:
        producer.commit_transaction(120)
    if producer.flush(300) != 0:
        raise RuntimeError("produce did not finish")
    seconds = time.perf_counter() - started
    return {"bytes": count * VALUE, "records": count, "seconds": seconds}


def run(
    work_dir: Path, *, mib: int = 64, partitions: int = 1, txn_records: int = 1000, reps: int = 3
) -> dict[str, Any]:
    cluster = LocalCluster(work_dir, 1, properties=BROKER_PROPERTIES)
    cluster.start(120)
    try:
        bootstrap = cluster.bootstrap_servers

        def produce(idempotent: bool, rep: int) -> float:
            result = produce_run(
                bootstrap,
                f"{'idem' if idempotent else 'txn'}-{rep}",
                mib=mib,
                partitions=partitions,
                txn_records=None if idempotent else txn_records,
            )
            return result["bytes"] / result["seconds"] / 1e6

        idempotent, transactional = alternate(reps, produce)
    finally:
        cluster.stop()
    return {
        "options": {
            "mib": mib,
            "partitions": partitions,
            "txn_records": txn_records,
            "record_bytes": VALUE,
            "reps": reps,
        },
        "load_average": os.getloadavg(),
        "idempotent_mb_s": spread(idempotent),
        "transactional_mb_s": spread(transactional),
        "transactional_vs_idempotent": ratio_spread(transactional, idempotent),
    }


def measure_main(argv: list[str]) -> int:
    """``measure``: one measurement against a running broker (the harness's transactions
    group runs it in a process of its own); the last line printed is JSON."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.transactions measure",
        description="One produce measurement against a running broker; prints JSON.",
        epilog="example: python -m bench.transactions measure --bootstrap 127.0.0.1:9092 "
        "--topic t1 --mib 64 --txn-records 1000",
    )
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--mib", type=int, default=64)
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument(
        "--txn-records", type=int, default=1000, help="records per transaction; 0: idempotent"
    )
    args = parser.parse_args(argv)
    result = produce_run(
        args.bootstrap,
        args.topic,
        mib=args.mib,
        partitions=args.partitions,
        txn_records=args.txn_records or None,
    )
    print(json.dumps(result))
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["measure"]:
        return measure_main(argv[1:])
    parser = argparse.ArgumentParser(
        description="Benchmark transactional against idempotent produce; prints JSON.",
        epilog="example: python -m bench.transactions --mib 64 --txn-records 1000 --reps 3",
    )
    parser.add_argument("--mib", type=int, default=64, help="MiB produced per measurement")
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--txn-records", type=int, default=1000, help="records per transaction")
    return run_main(parser, argv, run)


if __name__ == "__main__":
    raise SystemExit(main())
