"""A follower applies a fetch answer only to the state it asked for (Kafka's fetcher
checks the request's fetch offset against the current fetch state).

Found by the short chaos campaign: a partition reassigned away from a broker and straight
back had its log deleted and made again while a fetch for the old log (at offset 816)
was in flight; the answer was appended to the new, empty log, which then began at 816,
and that replica was later elected with offsets 0-815 missing.
"""

from __future__ import annotations

from pathlib import Path

from gregor_broker.log.log_config import LogConfig
from gregor_broker.log.partition_log import PartitionLog
from gregor_broker.protocol.record_batch import BatchHeader
from gregor_broker.protocol.records import Record, make_batch
from gregor_broker.protocol.replica_fetch import FetchedPartition
from gregor_broker.replication.fetcher import FollowedPartition, ReplicaFetcher
from gregor_broker.replication.partition import Partition


class Logs:
    """The replica manager's follower side, reduced to the append the fetcher calls."""

    def append_as_follower(
        self, partition: Partition, buffer: bytearray, headers: list[BatchHeader]
    ) -> None:
        partition.log.append_as_follower(buffer, headers)

    def follower_high_watermark_moved(self, partition: Partition) -> None:
        pass


def _followed(tmp_path: Path) -> FollowedPartition:
    log = PartitionLog.open(tmp_path / "chaos-0", LogConfig(), now_ms=lambda: 0)
    partition = Partition("chaos", 0, None, log, replicas=(1, 2, 3), leader=2, leader_epoch=4)
    return FollowedPartition(partition, 4, needs_truncation=False)


def _answer(base_offset: int) -> FetchedPartition:
    records = make_batch([Record(0, 0, b"k", b"v")], base_offset=base_offset)
    return FetchedPartition("chaos", 0, 0, base_offset + 1, 0, memoryview(records))


def test_an_answer_to_a_request_for_an_earlier_state_is_not_appended(tmp_path: Path) -> None:
    fetcher = ReplicaFetcher(Logs(), 2, lambda leader: None)  # type: ignore[arg-type]
    item = _followed(tmp_path)  # the new, empty log; its own request not sent yet
    assert fetcher._apply_fetched(item, _answer(816))
    assert item.partition.log.log_end_offset == 0
    assert item.partition.log.high_watermark == 0


def test_the_answer_to_the_current_request_is_appended(tmp_path: Path) -> None:
    fetcher = ReplicaFetcher(Logs(), 2, lambda leader: None)  # type: ignore[arg-type]
    item = _followed(tmp_path)
    item.fetch_offset = 0  # the request in flight asked from the log end
    assert fetcher._apply_fetched(item, _answer(0))
    assert item.partition.log.log_end_offset == 1
