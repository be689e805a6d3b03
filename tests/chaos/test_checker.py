"""The chaos checker counts what it claims to (pure functions, no cluster)."""

from __future__ import annotations

from .checker import (
    Verdict,
    check_acknowledgements,
    divergence,
    longest_gaps,
    split_resends,
)
from .load import Ack, Commit, regressed_from


def test_each_kind_of_violation_is_counted() -> None:
    acks = [
        Ack(b"kept", 0, 0, 1.0),
        Ack(b"lost", 0, 1, 1.1),
        Ack(b"moved", 0, 2, 1.2),
        Ack(b"twice-a", 1, 0, 1.3),
        Ack(b"twice-b", 1, 0, 1.4),
    ]
    served = {
        (0, 0): b"kept",
        (0, 1): b"other",
        (0, 3): b"moved",
        (1, 0): b"twice-a",
        (1, 1): b"dup",
        (1, 2): b"dup",
    }
    verdict = Verdict()
    check_acknowledgements(verdict, acks, served)
    assert verdict.acknowledged == 5
    assert [v.split(" ")[0] for v in verdict.lost] == ["lost", "twice-b"]
    assert [v.split(" ")[0] for v in verdict.wrong_offset] == ["moved"]
    assert len(verdict.acked_twice) == 1 and "(1, 0)" in verdict.acked_twice[0]
    assert len(verdict.duplicates) == 1 and verdict.duplicates[0].startswith("dup")
    assert verdict.violations() == 5


def test_an_ack_without_offset_is_checked_for_presence_only() -> None:
    acks = [Ack(b"kept", 0, None, 1.0), Ack(b"gone", 0, -1, 1.1)]
    verdict = Verdict()
    check_acknowledgements(verdict, acks, {(0, 7): b"kept"})
    assert verdict.acked_without_offset == 2
    assert [v.split(" ")[0] for v in verdict.lost] == ["gone"]
    assert verdict.violations() == 1


def test_acks_of_a_partition_that_could_not_be_read_are_unverified_not_lost() -> None:
    acks = [Ack(b"read", 0, 0, 1.0), Ack(b"gone", 0, 1, 1.1), Ack(b"offline", 1, 0, 1.2)]
    verdict = Verdict()
    check_acknowledgements(verdict, acks, {(0, 0): b"read"}, unreadable=[1])
    assert verdict.acknowledged == 3 and verdict.unverified == 1
    assert [v.split(" ")[0] for v in verdict.lost] == ["gone"]


def test_replicas_that_differ_below_the_high_watermark_diverge() -> None:
    same = [(0, 4, 111), (5, 9, 222)]
    assert divergence({1: same, 2: list(same), 3: [*same, (10, 12, 333)]}, 10) == []
    other_crc = divergence({1: same, 2: [(0, 4, 111), (5, 9, 999)]}, 10)
    assert len(other_crc) == 1 and "broker 2 differs" in other_crc[0]
    missing = divergence({1: same, 2: [(0, 4, 111)]}, 10)
    assert len(missing) == 1
    # Above the high watermark replicas may differ (uncommitted tails).
    assert divergence({1: same, 2: [(0, 4, 111), (5, 7, 555)]}, 5) == []


def test_the_longest_gap_counts_from_the_load_start_to_its_end() -> None:
    acks = [Ack(b"a", 0, 0, 12.0), Ack(b"b", 0, 1, 13.0), Ack(b"c", 1, 0, 10.5)]
    gaps = longest_gaps(acks, 2, start=10.0, end=20.0)
    assert gaps == {0: 7.0, 1: 9.5}


def test_only_true_commit_regressions_are_counted() -> None:
    """A read that misses the latest acknowledged commit counts; a client that commits
    backwards (Kafka allows it: after a rebalance or an offset reset) does not."""
    commits = [
        Commit(1.0, {0: 100}, 1.1, {0: 100}),
        Commit(2.0, {0: 200}, 2.1, {0: 200}),
        Commit(3.0, {0: 150}, 3.1, {0: 150}),  # the client went back, acknowledged
        Commit(4.0, {0: 120}),  # failed, but may be stored
    ]
    assert regressed_from(0, 100, 2.5, commits) == 200  # a stale answer
    assert regressed_from(0, -1, 2.5, commits) == 200  # a commit that vanished
    assert regressed_from(0, 200, 2.5, commits) is None
    assert regressed_from(0, 150, 2.5, commits) is None  # sent after 200, then acknowledged
    assert regressed_from(0, 150, 3.5, commits) is None
    assert regressed_from(0, 120, 3.5, commits) is None  # the failed commit was stored
    assert regressed_from(0, 100, 3.5, commits) == 150
    assert regressed_from(0, 250, 2.5, commits) is None  # ahead: a commit in flight
    assert regressed_from(1, 0, 5.0, commits) is None  # never committed


def test_new_epoch_resends_are_told_apart_from_failed_deduplication() -> None:
    """A value one producer id stored under two epochs is a client re-send (librdkafka's
    own epoch bump); two copies under one epoch, or by two producer ids, are not."""
    served = {
        (0, 0): b"resent",
        (0, 1): b"retried",
        (0, 2): b"other",
        (0, 3): b"resent",
        (0, 4): b"retried",
        (0, 5): b"other",
    }
    batches = {
        0: [
            (0, 1, 7, 0, 10),  # producer 7 epoch 0, sequences 10-11
            (2, 2, 8, 0, 0),
            (3, 3, 7, 1, 0),  # producer 7 epoch 1 from 0: the bump's re-send
            (4, 4, 7, 0, 11),  # epoch 0 sequence 11 again: deduplication failed
            (5, 5, 9, 0, 0),  # another producer id
        ]
    }
    verdict = Verdict()
    check_acknowledgements(verdict, [], served)
    assert len(verdict.duplicates) == 3
    split_resends(verdict, batches)
    assert [line.split(" ")[0] for line in verdict.resent_new_epoch] == ["resent"]
    assert [line.split(" ")[0] for line in verdict.duplicates] == ["other", "retried"]
    assert verdict.counts()["resent_new_epoch"] == 1 and verdict.violations() == 2
