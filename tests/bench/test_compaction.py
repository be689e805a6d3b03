"""The compaction benchmark, scaled down (the full rows: ``python -m bench.compaction``)."""

from __future__ import annotations

from pathlib import Path

from bench import compaction


def test_the_compaction_bench_measures_the_cleaner_and_produce_with_and_without(
    tmp_path: Path,
) -> None:
    result = compaction.run(tmp_path, log_mib=8, produce_mib=4, keys=100, segment_mib=2, reps=1)
    assert result["cleaner_mb_s"]["median"] > 0
    assert result["sequential_write_mb_s"]["median"] > 0
    # 8 MiB of 1 KiB updates over 100 keys: about 100 records stay.
    assert result["size_after_cleaning"]["median"] < 0.05, result
    assert result["produce_with_cleaner_mb_s"]["median"] > 0
    assert result["produce_without_cleaner_mb_s"]["median"] > 0
