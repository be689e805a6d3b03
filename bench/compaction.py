"""Log compaction rows (issue 14): the cleaner's throughput against the machine's
sequential-write limit, and produce throughput to a compacted topic with the cleaner
running against without it, measured in the same run.

- ``cleaner``: one unthrottled pass of ``log/cleaner.py`` over a log of ``log_mib`` MiB of
  updates to ``keys`` keys (1 KiB values, 64 KiB batches of one producer, segments of
  ``segment_mib`` MiB), driven in this process as the broker's worker drives it. Reported
  as MB/s of log read, next to ``bench.limits.disk_write`` on the same directory (what
  writing the same bytes sequentially costs): the cleaner reads, hashes, copies and
  rewrites every byte, so the sequential write rate bounds it.
- ``produce``: one broker; confluent-kafka produces ``produce_mib`` MiB of 1 KiB updates
  over ``keys`` keys to a compacted topic with 1 MiB segments, once with
  ``log.cleaner.enable=true`` (``min.cleanable.dirty.ratio=0.01``, so it cleans while the
  producer writes) and once with ``false``; ``reps`` alternating repetitions.

Run: ``.venv/bin/python -m bench.compaction [--log-mib 256] [--produce-mib 256] [--reps 3]``;
prints JSON with medians and ranges. ``tests/bench/test_compaction.py`` runs it small.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.alternating import alternate, ratio_spread, run_main, spread
from bench.clients import produce_when_room
from bench.limits import disk_write
from gregor_broker.devtools.local_cluster import LocalCluster
from gregor_broker.log.cleaner import OffsetMap, clean
from gregor_broker.log.log_config import LogConfig
from gregor_broker.log.partition_log import PartitionLog
from gregor_broker.protocol.record_batch import scan_batches
from gregor_broker.protocol.records import Record, make_batch

VALUE = 1024
BATCH_RECORDS = 64


def _fill(log: PartitionLog, total_bytes: int, keys: int) -> int:
    """Append updates until the log holds ``total_bytes``; return the records written."""
    value = os.urandom(VALUE)
    written = 0
    sequence = 0
    while log.size_bytes < total_bytes:
        records = [
            Record(i, 0, b"key-%d" % ((written + i) % keys), value) for i in range(BATCH_RECORDS)
        ]
        buffer = bytearray(
            make_batch(records, producer_id=1, producer_epoch=0, base_sequence=sequence)
        )
        log.append(buffer, scan_batches(buffer))
        written += BATCH_RECORDS
        sequence += BATCH_RECORDS
    log._roll(log.log_end_offset)
    return written


def cleaner_pass(work_dir: Path, log_mib: int, keys: int, segment_mib: int) -> dict[str, float]:
    """One pass over a fresh log; bytes read and written, seconds."""
    directory = work_dir / "cleaner-0"
    config = LogConfig(cleanup_policy="compact", segment_bytes=segment_mib * 1024 * 1024)
    log = PartitionLog.open(directory, config)
    try:
        records = _fill(log, log_mib * 1024 * 1024, keys)
        log.flush()
        size_before = log.size_bytes
        started = time.perf_counter()
        gen = clean(log, None, offset_map=OffsetMap(128 * 1024 * 1024), now_ms=0)
        try:
            while True:
                next(gen)
        except StopIteration as stop:
            result = stop.value
        seconds = time.perf_counter() - started
        return {
            "records": records,
            "bytes_read": result.stats.bytes_read + result.stats.map_bytes_read,
            "log_bytes": size_before,
            "bytes_after": log.size_bytes,
            "seconds": seconds,
        }
    finally:
        log.close()
        for path in directory.iterdir():
            path.unlink()
        directory.rmdir()


def produce_run(work_dir: Path, produce_mib: int, keys: int, cleaner: bool) -> dict[str, float]:
    """MB/s of a confluent-kafka producer to a compacted topic on one broker."""
    import confluent_kafka
    import confluent_kafka.admin

    cluster = LocalCluster(
        work_dir,
        1,
        properties={
            "log.cleaner.enable": "true" if cleaner else "false",
            "log.cleaner.backoff.ms": "100",
        },
    )
    cluster.start(120)
    try:
        bootstrap = cluster.bootstrap_servers
        admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
        topic = confluent_kafka.admin.NewTopic(
            "compacted",
            1,
            1,
            config={
                "cleanup.policy": "compact",
                "segment.bytes": str(1024 * 1024),
                "min.cleanable.dirty.ratio": "0.01",
            },
        )
        for future in admin.create_topics([topic]).values():
            future.result(60)
        producer = confluent_kafka.Producer(
            {"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "1"}
        )
        value = os.urandom(VALUE)
        count = produce_mib * 1024
        started = time.perf_counter()
        for i in range(count):
            produce_when_room(producer, "compacted", value, b"key-%d" % (i % keys))
        if producer.flush(300) != 0:
            raise RuntimeError("produce did not finish")
        seconds = time.perf_counter() - started
        return {"bytes": count * VALUE, "seconds": seconds}
    finally:
        cluster.stop()


def run(
    work_dir: Path,
    *,
    log_mib: int = 256,
    produce_mib: int = 256,
    keys: int = 1000,
    segment_mib: int = 64,
    reps: int = 3,
) -> dict[str, Any]:
    cleaner_mbps: list[float] = []
    write_mbps: list[float] = []
    shrink: list[float] = []

    def clean_and_write(_rep: int) -> None:
        passed = cleaner_pass(work_dir, log_mib, keys, segment_mib)
        cleaner_mbps.append(passed["bytes_read"] / passed["seconds"] / 1e6)
        shrink.append(passed["bytes_after"] / passed["log_bytes"])
        wrote = disk_write(work_dir, log_mib, fsync=False)
        write_mbps.append(wrote["bytes"] / wrote["seconds"] / 1e6)

    def produce(cleaner: bool, _rep: int) -> float:
        result = produce_run(Path(tempfile.mkdtemp(dir=work_dir)), produce_mib, keys, cleaner)
        return result["bytes"] / result["seconds"] / 1e6

    with_mbps, without_mbps = alternate(reps, produce, before_each=clean_and_write)
    return {
        "options": {
            "log_mib": log_mib,
            "produce_mib": produce_mib,
            "keys": keys,
            "segment_mib": segment_mib,
            "reps": reps,
        },
        "load_average": os.getloadavg(),
        "cleaner_mb_s": spread(cleaner_mbps),
        "sequential_write_mb_s": spread(write_mbps),
        "cleaner_vs_write": ratio_spread(cleaner_mbps, write_mbps),
        "size_after_cleaning": spread(shrink),
        "produce_with_cleaner_mb_s": spread(with_mbps),
        "produce_without_cleaner_mb_s": spread(without_mbps),
        "produce_with_vs_without": ratio_spread(with_mbps, without_mbps),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Benchmark the log cleaner; prints JSON.",
        epilog="example: python -m bench.compaction --log-mib 256 --produce-mib 256 --reps 3",
    )
    parser.add_argument("--log-mib", type=int, default=256)
    parser.add_argument("--produce-mib", type=int, default=256)
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--segment-mib", type=int, default=64)
    return run_main(parser, argv, run)


if __name__ == "__main__":
    raise SystemExit(main())
