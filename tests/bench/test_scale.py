"""Scale on one broker, scaled down (the full row is ``python -m bench --only scale``).

Issue 9: 20,000 partitions would pass the broker's file-descriptor limit (one open file
per segment), deleted partitions kept their files open, and a topic created during a
mass deletion had no leader for minutes. Here: 600 partitions with
``log.max.open.files=32``, then 120 topics deleted while a new topic is created.
"""

from __future__ import annotations

from pathlib import Path

from bench import scale


def test_fds_stay_bounded_and_a_new_topic_is_led_during_a_mass_deletion(tmp_path: Path) -> None:
    result = scale.run_once(
        600, 120, tmp_path, max_open_files=32, metadata_requests=20, timeout=120
    )
    # Every partition holds a record, so every segment was opened; at most 32 stay open.
    assert result["fds_log_files"] <= 32, result
    assert result["fds_log_files_after_delete"] <= 32, result
    # The deleted partitions' files are closed at once, not file.delete.delay.ms later.
    assert result["fds_of_deleted_files"] == 0, result
    # Generous bounds (a loaded 2-core machine); before the fixes a new topic waited
    # behind the whole deletion, which grew quadratically with the topics deleted.
    assert result["newcomer_leader_s"] < 20, result
    assert result["delete_s"] < 45, result
    assert result["metadata_one_p50_ms"] < 50, result
