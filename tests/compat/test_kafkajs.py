"""kafkajs 2.2.4 (Node.js) against Gregor.

The client runs as ``node tests/compat/kafkajs/client.mjs <scenario>``, one scenario a
process, and prints its results as one JSON line; ``make test`` installs it with npm when
Node.js is present (``scripts/install-kafkajs``). Covers admin topic creation, an
idempotent acks=all producer with headers under no compression and gzip (the codecs
kafkajs has without plugins), a consumer group reading everything from the beginning and
committing, and the committed offsets and watermarks kafkajs' admin reads back.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest

from .expectations import unique_topic

CLIENT_DIR = Path(__file__).resolve().parent / "kafkajs"
NODE = shutil.which("node")

pytestmark = [
    pytest.mark.skipif(NODE is None, reason="Node.js is not installed: kafkajs cannot run"),
    pytest.mark.skipif(
        not (CLIENT_DIR / "node_modules" / "kafkajs").is_dir(),
        reason="kafkajs is not installed: run scripts/install-kafkajs (make test does)",
    ),
]


def run_client(scenario: str, bootstrap: str, topic: str) -> dict:
    completed = subprocess.run(
        [NODE, str(CLIENT_DIR / "client.mjs"), scenario, bootstrap, topic],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    lines = completed.stdout.strip().splitlines()
    assert lines, f"kafkajs printed nothing; stderr:\n{completed.stderr}"
    result = json.loads(lines[-1])
    assert completed.returncode == 0 and "error" not in result, (result, completed.stderr)
    return result


def test_kafkajs_produces_and_consumes_in_a_group_and_commits(broker):
    topic = unique_topic("kjs")
    result = run_client("roundtrip", broker.bootstrap, topic)

    assert all(reply["errorCode"] == 0 for reply in result["sent"])
    by_partition: dict[int, list[dict]] = defaultdict(list)
    for record in result["received"]:
        by_partition[record["partition"]].append(record)
    assert sorted(by_partition) == [0, 1, 2]
    for partition, records in by_partition.items():
        # Dense offsets from 0, in produce order: the uncompressed batch, then the gzip one.
        assert [r["offset"] for r in records] == list(range(20)), partition
        expected = [
            (f"{codec}-key-{i}", f"{codec}-value-{i}", {"codec": codec, "index": str(i)})
            for codec in ("none", "gzip")
            for i in range(30)
            if i % 3 == partition
        ]
        assert [(r["key"], r["value"], r["headers"]) for r in records] == expected
    (committed,) = result["committed"]
    assert sorted((int(p["partition"]), int(p["offset"])) for p in committed["partitions"]) == [
        (0, 20),
        (1, 20),
        (2, 20),
    ]
    assert sorted((p["partition"], int(p["high"]), int(p["low"])) for p in result["offsets"]) == [
        (0, 20, 0),
        (1, 20, 0),
        (2, 20, 0),
    ]


def test_kafkajs_describes_the_cluster_and_a_missing_topic(broker):
    topic = unique_topic("kjs-missing")
    completed = subprocess.run(
        [NODE, str(CLIENT_DIR / "client.mjs"), "metadata", broker.bootstrap, topic],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    result = json.loads(completed.stdout.strip().splitlines()[-1])

    host, port = broker.bootstrap.rsplit(":", 1)
    assert [(b["nodeId"], b["host"], b["port"]) for b in result["cluster"]["brokers"]] == [
        (broker.broker_id, host, int(port))
    ]
    assert result["cluster"]["controller"] == broker.broker_id
    # kafkajs' admin asks without auto-creation: Kafka answers UNKNOWN_TOPIC_OR_PARTITION.
    assert result["topics"] == {"error": "UNKNOWN_TOPIC_OR_PARTITION"}
