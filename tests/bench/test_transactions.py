"""The transactions benchmark, scaled down (the full rows: ``python -m bench.transactions``)."""

from __future__ import annotations

from pathlib import Path

from bench import transactions


def test_the_transactions_bench_measures_transactional_against_idempotent(
    tmp_path: Path,
) -> None:
    result = transactions.run(tmp_path, mib=2, txn_records=500, reps=1)
    assert result["idempotent_mb_s"]["median"] > 0
    assert result["transactional_mb_s"]["median"] > 0
    assert result["transactional_vs_idempotent"]["median"] > 0
