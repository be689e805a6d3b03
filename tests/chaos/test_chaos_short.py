"""The short chaos campaign that runs in ``make test``: about 40 s of faults.

The same harness as ``make chaos`` (``tests/chaos``), on a 3-broker cluster with its own
ZooKeeper, under two idempotent acks=all producers and a committing consumer group. The
fault kinds are the ones that lose data when a broker gets its bookkeeping wrong: killed
and zombie leaders, ZooKeeper loss, a torn segment tail (of a replica out of the ISR, and
of a leader restarted at once), a network partition (skipped,
with its reason in the output, without network namespaces) and a reassignment. Two
nemesis workers, so faults overlap as in ``make chaos`` (which runs twelve).
``GREGOR_CHAOS_SEED`` picks another seed; the failure message says how to replay it.
"""

from __future__ import annotations

import os
from pathlib import Path

from .campaign import Settings, run_campaign, summary

SEED = int(os.environ.get("GREGOR_CHAOS_SEED", "20261123"))
CONCURRENCY = 2
# make test runs this beside the rest of the suite (pytest -n 4 on 2 cores): the 4 s
# session of the campaign's earlier runs, not make chaos's 2.5 s, so a broker starved of
# CPU for a moment is not a session expiry on top of the faults drawn.
SESSION_TIMEOUT_MS = 4000
KINDS = [
    "kill_leader",
    "zombie_leader",
    "zookeeper_kill",
    "torn_tail",
    "torn_leader",
    "network_partition",
    "reassign",
]


def test_nothing_acknowledged_is_lost_under_a_short_fault_campaign(tmp_path: Path) -> None:
    result = run_campaign(
        Settings(
            seed=SEED,
            duration=40,
            partitions=3,
            producers=2,
            rate=100,
            kinds=KINDS,
            concurrency=CONCURRENCY,
            pause_s=(0.1, 0.5),
            directory=tmp_path / "cluster",
            session_timeout_ms=SESSION_TIMEOUT_MS,
        )
    )
    table = summary(result)
    print(table)
    assert result["faults_total"] >= 4, table
    assert result["counts"]["acknowledged"] > 1000, table
    assert result["violations"] == 0, (
        f"{table}\nreplay: make chaos SEED={SEED} DURATION=40 "
        f"CHAOS_ARGS='--kinds {','.join(KINDS)} --partitions 3 --producers 2 --rate 100 "
        f"--concurrency {CONCURRENCY} --pause 0.1-0.5'"
    )
