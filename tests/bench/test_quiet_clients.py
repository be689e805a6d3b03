"""The bench's librdkafka clients keep their log lines off the terminal (issue 18: `make
bench` printed thousands of PARTCNT lines). A real librdkafka client pointed at a closed
port logs connection failures; with the bench's settings none of them reach stderr."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CLIENT = """
import sys
from confluent_kafka import Producer
from bench.clients import producer_config
producer = Producer(producer_config({{"bootstrap": "127.0.0.1:{port}"}}))
producer.produce("t", b"x")
producer.flush(3)
print("done")
"""


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # closed again when the block ends


def test_bench_producer_logs_nothing_to_the_terminal() -> None:
    completed = subprocess.run(
        [sys.executable, "-c", CLIENT.format(port=_closed_port())],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert completed.stdout.strip() == "done"
    assert completed.stderr == "", completed.stderr
