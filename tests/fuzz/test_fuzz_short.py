"""The short fuzzing run that runs in ``make test``: a few thousand inputs of every kind.

The same harness as ``make fuzz`` (``tests/fuzz``): one real broker and ZooKeeper, inputs
from kio's schemas, byte mutations, lying record batches with compression bombs, and
connection abuse; after every 500 inputs the broker must be alive, a fresh client must
round-trip, the control topic must be unchanged, RSS must stay under 1 GiB, another
client's ApiVersions must stay under 1 s, and no stored batch may be one Kafka rejects.
``GREGOR_FUZZ_SEED`` picks another seed; the failure message says how to replay it.
"""

from __future__ import annotations

import os
from pathlib import Path

from .campaign import Settings, run_fuzz, summary
from .inputs import KINDS

SEED = int(os.environ.get("GREGOR_FUZZ_SEED", "20261123"))
INPUTS = 2000


def test_a_broker_survives_hostile_and_malformed_traffic(tmp_path: Path) -> None:
    result = run_fuzz(Settings(seed=SEED, inputs=INPUTS, directory=tmp_path / "broker"))
    table = summary(result)
    print(table)
    assert result["inputs"] == INPUTS, table
    assert set(result["kinds"]) == set(KINDS), table
    assert result["violations"] == 0, f"{table}\nreplay: make fuzz SEED={SEED} INPUTS={INPUTS}"
