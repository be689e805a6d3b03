"""Summaries, ratios and the markdown table. Pure: results in, text out.

Every ratio compares figures measured in the same run: Gregor/peer (same workload,
same client, alternating runs) and Gregor/limit (this machine's physical limit for the
bytes that workload moves). The 3-broker rows have no peer (tansu cannot replicate): their
ratio is RF=3 / RF=1, Gregor's 3-broker cluster against Gregor's single broker. The Kafka
paper's 2011 figures are printed as a labelled reference and never enter a ratio.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

# Kreps, Narkhede, Rao: "Kafka: a Distributed Messaging System for Log Processing"
# (NetDB 2011), section 5. Two 2011 Linux boxes (8 cores 2 GHz, 16 GB, 6 disks RAID 10,
# 1 Gb/s network), 200-byte messages. A reference point, not a measurement of ours.
PAPER_REFERENCE = [
    {"figure": "produce, batch size 1 (200 B)", "value": 50_000, "unit": "msg/s"},
    {"figure": "produce, batches of 50 (200 B)", "value": 400_000, "unit": "msg/s (about)"},
    {"figure": "consume (200 B)", "value": 22_000, "unit": "msg/s"},
]

LIMIT_NAMES = {
    "tcp_copy": "loopback TCP copy",
    "sendfile": "sendfile from page cache",
    "disk_write": "sequential write (page cache)",
    "disk_write_fsync": "sequential write + fsync",
}


def summarise(values: list[float]) -> dict[str, Any]:
    values = [v for v in values if v is not None and not math.isnan(v)]
    if not values:
        return {"median": None, "min": None, "max": None, "n": 0, "samples": []}
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "n": len(values),
        "samples": values,
    }


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or denominator in (None, 0):
        return None
    return numerator / denominator


def number(value: float | None) -> str:
    """Three significant figures, thousands grouped; '-' for nothing."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    magnitude = abs(value)
    if magnitude >= 1000:
        return f"{value:,.0f}"
    if magnitude >= 100:
        return f"{value:.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    if magnitude >= 1:
        return f"{value:.2f}"
    return f"{value:.3f}"


def spread(summary: dict[str, Any]) -> str:
    if summary.get("median") is None:
        return "-"
    if summary["n"] == 1:
        return number(summary["median"])
    return f"{number(summary['median'])} [{number(summary['min'])}-{number(summary['max'])}]"


def limits_table(limits: dict[str, dict[str, Any]]) -> list[str]:
    lines = [
        "| physical limit | MB/s median [min-max] |",
        "| --- | --- |",
    ]
    for key, summary in limits.items():
        lines.append(f"| {LIMIT_NAMES.get(key, key)} | {spread(summary)} |")
    return lines


def rows_table(rows: list[dict[str, Any]], peer_label: str) -> list[str]:
    lines = [
        f"| workload | unit | Gregor median [min-max] | {peer_label} median [min-max] "
        "| Gregor/peer | Gregor/limit | broker cores G / P |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        lines.append(_row_line(row, "gregor", "peer"))
    return lines


def _row_line(row: dict[str, Any], measured: str, baseline: str) -> str:
    unit = row["unit"] + ("" if row["higher_is_better"] else ", lower is better")
    limit = "-"
    if row.get("ratio_limit") is not None:
        limit = f"{number(row['ratio_limit'])} of {LIMIT_NAMES.get(row['limit'], row['limit'])}"
    cores = (
        f"{number(row[measured].get('broker_cores'))} / {number(row[baseline].get('broker_cores'))}"
    )
    ratio_value = row.get("ratio_baseline", row.get("ratio_peer"))
    return (
        f"| {row['title']} | {unit} | {spread(row[measured])} | {spread(row[baseline])} "
        f"| {number(ratio_value)} | {limit} | {cores} |"
    )


def replicated_table(rows: list[dict[str, Any]], cluster_label: str) -> list[str]:
    """The 3-broker rows: the cluster (RF=3) against the single broker (RF=1)."""
    lines = [
        f"| workload | unit | {cluster_label} median [min-max] "
        "| Gregor (1 broker, RF=1) median [min-max] | RF=3 / RF=1 | RF=3 / limit "
        "| broker cores RF=3 (3 brokers) / RF=1 |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        lines.append(_row_line(row, row["measured"], row["baseline"]))
    return lines


FAILOVER_LABELS = {
    "detection_s": "detection: the killed broker's ZooKeeper session expires",
    "election_s": "election: every partition led by a live broker again, after the expiry "
    "(as a client reading ZooKeeper sees it)",
    "election_written_s": "... the last new leader written in ZooKeeper, after the expiry "
    "(the state znodes' modification time)",
    "last_sweep_s": "... the client's last sweep, reading every partition's state (how late "
    "it can see the end)",
    "total_s": "kill to every partition led",
}


def failover_table(failover: dict[str, Any]) -> list[str]:
    timeout = failover["session_timeout_ms"] / 1000
    lines = [
        f"| failover: {failover['partitions']:,} partitions, {failover['brokers']} brokers, "
        f"RF={failover['replication_factor']}, SIGKILL of the broker leading the most "
        "| seconds median [min-max] |",
        "| --- | --- |",
    ]
    for phase, label in FAILOVER_LABELS.items():
        if phase == "detection_s":
            label += f" (its limit: zookeeper.session.timeout.ms, {number(timeout)} s)"
        if phase in failover:  # results of older runs lack the newer phases
            lines.append(f"| {label} | {spread(failover[phase])} |")
    lines.append(
        f"| partitions the killed broker led (re-elected) | {spread(failover['led_by_victim'])} |"
    )
    return lines


def scale_table(scale: dict[str, Any]) -> list[str]:
    from bench.scale import FIGURES, PARTITIONS_PER_TOPIC

    lines = [
        f"| scale: {scale['partitions']:,} partitions ({PARTITIONS_PER_TOPIC} per topic) on "
        f"1 broker, {scale['deleted_topics']:,} topics deleted | median [min-max] |",
        "| --- | --- |",
    ]
    for key, label in FIGURES.items():
        if key in scale:
            lines.append(f"| {label} | {spread(scale[key])} |")
    return lines


def goals_table(goals: list[dict[str, Any]]) -> list[str]:
    lines = ["| goal (issue 6) | measured | met |", "| --- | --- | --- |"]
    for goal in goals:
        measured = number(goal["measured"]) if goal["measured"] is not None else "-"
        met = "-" if goal["met"] is None else ("yes" if goal["met"] else "no")
        lines.append(f"| {goal['goal']} | {measured} | {met} |")
    return lines


def _paired_rows(lines: list[str], rows: list[dict[str, Any]]) -> list[str]:
    """``lines`` (a table's heading) followed by one line per alternating pair row:
    measured, baseline and their ratio (the Spark, transactions and security groups)."""
    for row in rows:
        measured, baseline = row[row["measured"]], row[row["baseline"]]
        lines.append(
            f"| {row['title']} | {row['unit']} | {spread(measured)} | {spread(baseline)} | "
            f"{number(row['ratio_baseline'])} |"
        )
    return lines


def spark_table(rows: list[dict[str, Any]]) -> list[str]:
    """The opt-in spark group: Spark through format("gregor") against a plain
    confluent-kafka consumer reading the same topic from the same broker."""
    lines = [
        '## Spark: format("gregor") against a confluent-kafka consumer (one Gregor broker)',
        "",
        "Spark local[2] reads the topic through the pure-Python data source (timed around "
        "the job, not the session start); the consumer reads the same topic, alternating "
        "(A B A B). Spark / consumer is the share of the plain client's rate (goal: 0.5).",
        "",
        "| workload | unit | Spark median [min-max] | consumer median [min-max] | "
        "Spark / consumer |",
        "| --- | --- | --- | --- | --- |",
    ]
    return _paired_rows(lines, rows)


def transactions_table(rows: list[dict[str, Any]]) -> list[str]:
    """The transactions group: a transactional producer against an idempotent one on the
    same broker, alternating."""
    lines = [
        "## Transactions: transactional against idempotent produce (one Gregor broker)",
        "",
        "Both producers use confluent-kafka with idempotence and acks=all, alternating "
        "(A B A B); the transactional one commits every 1,000 records (AddPartitionsToTxn, "
        "EndTxn, the coordinator's writes and a marker per transaction).",
        "",
        "| workload | unit | transactional median [min-max] | idempotent median [min-max] | "
        "transactional / idempotent |",
        "| --- | --- | --- | --- | --- |",
    ]
    return _paired_rows(lines, rows)


def security_table(rows: list[dict[str, Any]]) -> list[str]:
    """The security group: SASL_SSL against PLAINTEXT on one broker, alternating."""
    lines = [
        "## Security: SASL_SSL against PLAINTEXT (one Gregor broker, both listeners)",
        "",
        "The same confluent-kafka producer and consumer on each listener, alternating "
        "(A B A B); SASL_SSL logs in with SCRAM-SHA-512 before the clock starts. A PLAINTEXT "
        "consumer is served with sendfile(2), a TLS one from segment slices the broker reads "
        "and encrypts (docs/security.md).",
        "",
        "| workload | unit | SASL_SSL median [min-max] | PLAINTEXT median [min-max] | "
        "SASL_SSL / PLAINTEXT |",
        "| --- | --- | --- | --- | --- |",
    ]
    return _paired_rows(lines, rows)


def markdown(result: dict[str, Any]) -> str:
    machine = result["machine"]
    peer_label = result["targets"].get("peer", {}).get("label", "peer")
    peer_rows = [row for row in result["rows"] if row.get("baseline", "peer") == "peer"]
    spark_rows = [row for row in result["rows"] if row.get("baseline") == "confluent-kafka"]
    txn_rows = [row for row in result["rows"] if row.get("baseline") == "idempotent"]
    security_rows = [row for row in result["rows"] if row.get("baseline") == "PLAINTEXT"]
    replicated_rows = [
        row
        for row in result["rows"]
        if row.get("baseline", "peer") != "peer"
        and row not in spark_rows + txn_rows + security_rows
    ]
    lines = [
        f"# Gregor benchmark, {result['started']}",
        "",
        f"Machine: {machine['cpu_model']}, {machine['cpus']} cores, "
        f"{machine['memory_gib']} GiB, {machine['kernel']}, Python {machine['python']}. "
        f"Commit {result['commit']}. Mode: {result['options']['mode']}, "
        f"{result['options']['reps']} repetitions per figure (A B A B), "
        f"{result['seconds']:.0f} s in all.",
        "",
        *limits_table(result["limits"]),
        "",
    ]
    if peer_rows:
        lines += [
            *rows_table(peer_rows, peer_label),
            "",
            "Gregor/peer above 1 means Gregor is faster, except where lower is better "
            "(latency). Gregor/limit is the share of this machine's physical limit for the "
            "bytes the workload moves. Broker cores: CPU time the broker process used "
            "divided by wall time, medians.",
            "",
        ]
    lines += [
        *goals_table(result["goals"]),
        "",
        "Reference, not measured here: the Kafka paper (2011 hardware, 200-byte messages):",
        "",
        *[f"- {item['figure']}: {item['value']:,} {item['unit']}" for item in PAPER_REFERENCE],
    ]
    if result.get("notes"):
        lines += ["", "Notes:", "", *[f"- {note}" for note in result["notes"]]]
    if replicated_rows or result.get("failover"):
        lines += ["", "## 3 brokers: replication factor 3 (no peer: tansu cannot replicate)", ""]
    if replicated_rows:
        cluster_label = result["targets"].get("gregor-cluster", {}).get("label", "RF=3")
        lines += [
            "tansu runs as one node with in-memory storage and cannot replicate, so these "
            "rows have no peer. They compare Gregor on 3 brokers (every topic with "
            "replication factor 3 and min.insync.replicas=2) with Gregor on 1 broker "
            "(replication factor 1), both at acks=all, alternating in the same run "
            "(A B A B). RF=3 / RF=1 is what replication costs: 0.5 on a throughput row "
            "means the cluster carried half as much, 2 on a latency row that messages took "
            "twice as long.",
            "",
            *replicated_table(replicated_rows, cluster_label),
            "",
            "RF=3 / limit is the share of the loopback TCP copy limit for the bytes the "
            "cluster moves: every payload byte crosses loopback three times (producer to "
            "leader, leader to each of the two followers). Broker cores: the three "
            "brokers' CPU time summed, against the single broker's.",
            "",
        ]
    if result.get("failover"):
        lines += [
            *failover_table(result["failover"]),
            "",
            "No peer and no ratio: a failover's floor is the session timeout (detection), "
            "the rest is Gregor's controller electing new leaders (bench/failover.py).",
            "",
        ]
    if result.get("scale"):
        lines += [
            "## Scale: topics and partitions on one broker",
            "",
            *scale_table(result["scale"]),
            "",
            "No peer: bench/scale.py drives one Gregor broker through Kafka's protocol "
            "(log.max.open.files=1000).",
            "",
        ]
    if spark_rows:
        lines += ["", *spark_table(spark_rows), ""]
    if txn_rows:
        lines += ["", *transactions_table(txn_rows), ""]
    if security_rows:
        lines += ["", *security_table(security_rows), ""]
    profile = result.get("profile")
    if profile:
        lines += [
            "",
            "## Profile of the Gregor broker (py-spy, share of samples holding the GIL)",
            "",
        ]
        for phase in profile:
            lines += [
                f"### {phase['phase']}: {phase['workload']}",
                "",
                f"Flame graph: `{phase['svg']}` ({phase['hot_spots']['samples']} samples)",
                "",
                "| self time | share | inclusive | share |",
                "| --- | --- | --- | --- |",
            ]
            own = phase["hot_spots"]["self"][:10]
            inclusive = [
                item
                for item in phase["hot_spots"]["inclusive"]
                if item["function"].startswith("gregor_broker/")
                and not item["function"].startswith("gregor_broker/cli/")
            ][:10]
            for index in range(max(len(own), len(inclusive))):
                left = own[index] if index < len(own) else None
                right = inclusive[index] if index < len(inclusive) else None
                lines.append(
                    "| "
                    + (f"`{left['function']}` | {left['share']:.1%}" if left else " | ")
                    + " | "
                    + (f"`{right['function']}` | {right['share']:.1%}" if right else " | ")
                    + " |"
                )
            lines.append("")
    return "\n".join(lines) + "\n"
