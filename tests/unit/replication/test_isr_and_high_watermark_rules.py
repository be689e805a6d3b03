"""The leader's ISR and high-watermark rules (``replication/partition.py``), and the log as
the high watermark's only writer (``PartitionLog.update_high_watermark`` /
``maybe_increment_high_watermark``), on a real log in a temporary directory, with the
clock passed in. No replica manager, ZooKeeper or socket.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gregor_broker.log.log_config import LogConfig
from gregor_broker.log.partition_log import PartitionLog
from gregor_broker.protocol.record_batch import scan_batches
from gregor_broker.protocol.records import Record, make_batch
from gregor_broker.replication.partition import Partition

LEADER, FOLLOWER_A, FOLLOWER_B = 1, 2, 3
LAG_MS = 30_000


def append(log: PartitionLog, count: int, leader_epoch: int = 0) -> None:
    buffer = bytearray(make_batch([Record(i, 0, None, b"v") for i in range(count)]))
    log.append(buffer, scan_batches(buffer), leader_epoch=leader_epoch)


@pytest.fixture
def partition(tmp_path: Path) -> Partition:
    log = PartitionLog.open(tmp_path / "orders-0", LogConfig(), now_ms=lambda: 0)
    partition = Partition(
        "orders",
        0,
        None,
        log,
        replicas=(LEADER, FOLLOWER_A, FOLLOWER_B),
        leader=LEADER,
        leader_epoch=0,
        isr=(LEADER, FOLLOWER_A, FOLLOWER_B),
    )
    partition.become_leader(LEADER, now_ms=0)
    return partition


def test_a_new_leader_stops_the_high_watermark_following_its_log_end(partition: Partition):
    append(partition.log, 5)
    assert partition.log.log_end_offset == 5
    assert partition.log.high_watermark == 0


def test_high_watermark_is_the_smallest_log_end_offset_in_the_isr(partition: Partition):
    append(partition.log, 10)
    partition.record_follower_fetch(FOLLOWER_A, 7, now_ms=1)
    partition.record_follower_fetch(FOLLOWER_B, 4, now_ms=1)
    assert partition.maybe_advance_high_watermark(LEADER)
    assert partition.log.high_watermark == 4
    partition.record_follower_fetch(FOLLOWER_B, 10, now_ms=2)
    assert partition.maybe_advance_high_watermark(LEADER)
    assert partition.log.high_watermark == 7


def test_a_follower_of_unknown_offset_holds_the_high_watermark_back(partition: Partition):
    append(partition.log, 3)
    partition.record_follower_fetch(FOLLOWER_A, 3, now_ms=1)
    assert not partition.maybe_advance_high_watermark(LEADER)  # FOLLOWER_B never fetched
    assert partition.log.high_watermark == 0


def test_the_high_watermark_never_moves_back(partition: Partition):
    append(partition.log, 6)
    partition.record_follower_fetch(FOLLOWER_A, 6, now_ms=1)
    partition.record_follower_fetch(FOLLOWER_B, 6, now_ms=1)
    partition.maybe_advance_high_watermark(LEADER)
    assert partition.log.high_watermark == 6
    # A follower fetching from further back (after its own truncation) lowers the
    # candidate, but what was committed stays committed.
    partition.record_follower_fetch(FOLLOWER_B, 2, now_ms=2)
    assert not partition.maybe_advance_high_watermark(LEADER)
    assert partition.log.high_watermark == 6


def test_only_in_sync_replicas_count_for_the_high_watermark(partition: Partition):
    append(partition.log, 8)
    partition.isr = (LEADER, FOLLOWER_A)
    partition.record_follower_fetch(FOLLOWER_A, 8, now_ms=1)
    partition.record_follower_fetch(FOLLOWER_B, 1, now_ms=1)
    assert partition.maybe_advance_high_watermark(LEADER)
    assert partition.log.high_watermark == 8


def test_a_follower_that_has_not_caught_up_for_the_lag_time_is_out_of_sync(
    partition: Partition,
):
    append(partition.log, 4)
    partition.record_follower_fetch(FOLLOWER_A, 4, now_ms=1_000)  # caught up
    partition.record_follower_fetch(FOLLOWER_B, 1, now_ms=1_000)  # behind
    assert partition.out_of_sync_replicas(LEADER, now_ms=LAG_MS, lag_ms=LAG_MS) == set()
    # FOLLOWER_B last caught up at become_leader (time 0); FOLLOWER_A at 1,000.
    assert partition.out_of_sync_replicas(LEADER, now_ms=LAG_MS + 1, lag_ms=LAG_MS) == {FOLLOWER_B}
    assert partition.out_of_sync_replicas(LEADER, now_ms=1_001 + LAG_MS, lag_ms=LAG_MS) == {
        FOLLOWER_A,
        FOLLOWER_B,
    }


def test_catching_up_with_where_the_leader_was_at_the_previous_fetch_counts(
    partition: Partition,
):
    """Kafka's rule: under steady produce a follower never equals the leader's log end
    at the moment it fetches, but reaching the previous fetch's log end keeps it in sync."""
    append(partition.log, 4)
    partition.record_follower_fetch(FOLLOWER_A, 2, now_ms=1_000)  # leader was at 4
    append(partition.log, 4)
    partition.record_follower_fetch(FOLLOWER_A, 4, now_ms=2_000)  # reached 4, leader at 8
    assert partition.followers[FOLLOWER_A].last_caught_up_ms == 1_000


def test_an_out_of_sync_follower_rejoins_at_the_high_watermark_of_the_current_epoch(
    partition: Partition,
):
    append(partition.log, 5)
    partition.isr = (LEADER, FOLLOWER_A)
    partition.record_follower_fetch(FOLLOWER_A, 5, now_ms=1)
    partition.maybe_advance_high_watermark(LEADER)
    partition.record_follower_fetch(FOLLOWER_B, 4, now_ms=1)
    assert not partition.may_rejoin_isr(FOLLOWER_B)
    partition.record_follower_fetch(FOLLOWER_B, 5, now_ms=2)
    assert partition.may_rejoin_isr(FOLLOWER_B)
    assert not partition.may_rejoin_isr(FOLLOWER_A)  # already in the ISR


def test_the_log_holds_an_updated_high_watermark_within_its_offsets(tmp_path: Path):
    log = PartitionLog.open(tmp_path / "orders-0", LogConfig(), now_ms=lambda: 0)
    log.stop_following_log_end()
    append(log, 5)
    assert log.update_high_watermark(9) == 5  # never beyond the log end
    log.delete_records_before(3)
    assert log.update_high_watermark(1) == 3  # never below the log start
    assert not log.maybe_increment_high_watermark(2)
    assert log.maybe_increment_high_watermark(99)
    assert log.high_watermark == 5


def test_truncation_takes_the_high_watermark_down_with_the_log_end(tmp_path: Path):
    log = PartitionLog.open(tmp_path / "orders-0", LogConfig(), now_ms=lambda: 0)
    append(log, 3)
    append(log, 3)
    assert log.high_watermark == 6  # alone, it follows the log end
    log.truncate_to(3)
    assert (log.log_end_offset, log.high_watermark) == (3, 3)


def test_replicas_an_isr_expansion_in_flight_adds_hold_the_high_watermark(partition: Partition):
    """Kafka's maximal ISR (KIP-497): once the expansion's write reaches ZooKeeper the
    joining replica can be elected, before the leader hears the answer (or when the answer
    is lost), so the high watermark must not pass what it holds meanwhile."""
    partition.isr = (LEADER, FOLLOWER_A)
    append(partition.log, 10)
    partition.record_follower_fetch(FOLLOWER_A, 10, now_ms=1)
    partition.record_follower_fetch(FOLLOWER_B, 4, now_ms=1)  # caught up to the old HW
    partition.pending_isr_additions = (FOLLOWER_B,)
    assert partition.maybe_advance_high_watermark(LEADER)
    assert partition.log.high_watermark == 4
    partition.pending_isr_additions = ()  # refused: only the ISR counts again
    assert partition.maybe_advance_high_watermark(LEADER)
    assert partition.log.high_watermark == 10


def test_a_replica_assigned_away_and_back_rejoins_only_from_what_it_fetches(
    partition: Partition,
):
    """Found by the short chaos campaign: broker 3 left a partition's assignment (its log
    deleted) and was assigned again at once; the leader still held its old progress and
    took it back into the ISR before it had copied anything."""
    append(partition.log, 10)
    partition.record_follower_fetch(FOLLOWER_A, 10, now_ms=1)
    partition.record_follower_fetch(FOLLOWER_B, 10, now_ms=1)
    assert partition.maybe_advance_high_watermark(LEADER)
    partition.isr = (LEADER, FOLLOWER_A)
    partition.update_assignment((LEADER, FOLLOWER_A))
    partition.update_assignment((LEADER, FOLLOWER_A, FOLLOWER_B))
    assert not partition.may_rejoin_isr(FOLLOWER_B)
    partition.record_follower_fetch(FOLLOWER_B, 0, now_ms=2)  # its new, empty log
    assert not partition.may_rejoin_isr(FOLLOWER_B)
    partition.record_follower_fetch(FOLLOWER_B, 10, now_ms=3)
    assert partition.may_rejoin_isr(FOLLOWER_B)
