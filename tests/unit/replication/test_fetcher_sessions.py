"""The follower's side of its fetch session (KIP-227, Kafka's ``FetchSessionHandler``):
what each request carries, and what makes the next one a full fetch again."""

from __future__ import annotations

from pathlib import Path

from kio.schema.errors import ErrorCode

from gregor_broker.log.log_config import LogConfig
from gregor_broker.log.partition_log import PartitionLog
from gregor_broker.protocol import replica_fetch
from gregor_broker.protocol.fetch_metadata import FINAL_EPOCH, INITIAL_EPOCH
from gregor_broker.protocol.fetch_metadata import INVALID_SESSION_ID as NO_SESSION
from gregor_broker.protocol.fetch_response import (
    PartitionResult,
    TopicResult,
    encode_fetch_response,
)
from gregor_broker.protocol.record_batch import BatchHeader
from gregor_broker.protocol.records import Record, make_batch
from gregor_broker.protocol.replica_fetch import FetchPosition
from gregor_broker.replication.fetcher import FetchSessionState, FollowedPartition, ReplicaFetcher
from gregor_broker.replication.partition import Partition
from gregor_broker.replication.replication_config import ReplicationConfig

A0 = ("a", 0)
A1 = ("a", 1)
B0 = ("b", 0)


def positions(**offsets: int) -> dict[tuple[str, int], FetchPosition]:
    """``a0=5, b0=7`` -> the fetch positions of those partitions at those offsets."""
    return {
        (name[0], int(name[1:])): FetchPosition(int(name[1:]), 3, offset, 0, 1 << 20)
        for name, offset in offsets.items()
    }


def test_a_session_starts_with_a_full_fetch_then_sends_only_what_moved() -> None:
    state = FetchSessionState()
    session_id, epoch, sending, forgotten = state.build(positions(a0=5, a1=0, b0=7))
    assert (session_id, epoch, set(sending), forgotten) == (
        NO_SESSION,
        INITIAL_EPOCH,
        {A0, A1, B0},
        [],
    )
    state.answered(epoch, 77)
    assert (state.session_id, state.epoch) == (77, 1)

    # Nothing moved: an empty incremental fetch (the leader reads its whole session).
    session_id, epoch, sending, forgotten = state.build(positions(a0=5, a1=0, b0=7))
    assert (session_id, epoch, sending, forgotten) == (77, 1, {}, [])
    state.answered(epoch, 77)

    # a0 appended what the last answer brought; b0 is no longer followed from here.
    session_id, epoch, sending, forgotten = state.build(positions(a0=9, a1=0))
    assert (session_id, epoch) == (77, 2)
    assert sending == positions(a0=9)
    assert forgotten == [B0]
    state.answered(epoch, 77)
    assert state.sent == positions(a0=9, a1=0)

    # A new leader epoch is a change too; a partition followed again is added back.
    moved = positions(a0=9, a1=0, b0=7)
    moved[A1] = moved[A1]._replace(current_leader_epoch=4)
    _session, epoch, sending, forgotten = state.build(moved)
    assert (epoch, set(sending), forgotten) == (3, {A1, B0}, [])


def test_anything_unsure_makes_the_next_fetch_a_full_one() -> None:
    state = FetchSessionState()
    state.answered(state.build(positions(a0=1))[1], 12)
    state.reset()  # an error answer, a lost connection
    # A full fetch that closes the session it replaces and asks for a new one.
    assert state.build(positions(a0=1))[:2] == (12, INITIAL_EPOCH)

    # The leader's cache had no room: full fetches asking for a session, until one comes.
    state.answered(INITIAL_EPOCH, NO_SESSION)
    assert state.build(positions(a0=1))[:3] == (NO_SESSION, INITIAL_EPOCH, positions(a0=1))

    # An incremental fetch answered without the session: the leader closed it.
    state.answered(INITIAL_EPOCH, 12)
    _session, epoch, _sending, _forgotten = state.build(positions(a0=1))
    state.answered(epoch, NO_SESSION)
    assert (state.session_id, state.epoch, state.sent) == (NO_SESSION, INITIAL_EPOCH, {})


def test_the_epoch_wraps_to_one() -> None:
    state = FetchSessionState()
    state.answered(state.build(positions(a0=1))[1], 5)
    state.epoch = 2**31 - 1
    state.answered(state.epoch, 5)
    assert state.epoch == 1


class Logs:
    """The replica manager's follower side, as far as these fetch requests go."""

    broker_id = 2
    replication_config = ReplicationConfig()

    def append_as_follower(
        self, partition: Partition, buffer: bytearray, headers: list[BatchHeader]
    ) -> None:
        partition.log.append_as_follower(buffer, headers)

    def follower_high_watermark_moved(self, partition: Partition) -> None:
        pass


class Client:
    client_id = b"gregor-replica-2"
    aborted = False

    def next_correlation_id(self) -> int:
        return 41

    def abort(self) -> None:
        self.aborted = True


def _fetcher(tmp_path: Path) -> ReplicaFetcher:
    fetcher = ReplicaFetcher(Logs(), 1, lambda leader: None)  # type: ignore[arg-type]
    for index in (0, 1):
        log = PartitionLog.open(tmp_path / f"a-{index}", LogConfig(), now_ms=lambda: 0)
        partition = Partition("a", index, None, log, replicas=(1, 2, 3), leader=1, leader_epoch=3)
        fetcher.add(FollowedPartition(partition, 3, needs_truncation=False))
    return fetcher


def _sent(frame: bytes) -> replica_fetch.ReplicaFetchRequest:
    request = replica_fetch.decode_request(frame[4:], 2 + 2 + 4 + 2 + len(Client.client_id))
    assert request is not None
    return request


def _answer(
    error_code: int = 0, session_id: int = 0, topics: list[TopicResult] | None = None
) -> memoryview:
    parts, _size = encode_fetch_response(
        11, 41, error_code=error_code, session_id=session_id, topics=topics or []
    )
    return memoryview(b"".join(parts))[4:]


def test_the_fetcher_asks_for_a_session_and_drops_it_on_a_session_error(tmp_path: Path) -> None:
    fetcher = _fetcher(tmp_path)
    client = Client()
    request = fetcher._fetch_request(client, set(), set(), None)  # type: ignore[arg-type]
    assert request is not None
    sent = _sent(request[0])
    assert (sent.session_id, sent.session_epoch) == (NO_SESSION, INITIAL_EPOCH)
    assert [len(t.partitions) for t in sent.topics] == [2]
    assert not fetcher._apply_response(client, _answer(session_id=9), 41, set(), None)  # type: ignore[arg-type]

    request = fetcher._fetch_request(client, set(), set(), None)  # type: ignore[arg-type]
    assert request is not None
    sent = _sent(request[0])
    assert (sent.session_id, sent.session_epoch, sent.topics) == (9, 1, [])

    # The leader lost the session (restarted, evicted it): a full fetch at once.
    answer = _answer(ErrorCode.fetch_session_id_not_found)
    assert not fetcher._apply_response(client, answer, 41, set(), None)  # type: ignore[arg-type]
    request = fetcher._fetch_request(client, set(), set(), None)  # type: ignore[arg-type]
    assert request is not None
    sent = _sent(request[0])
    assert (sent.session_id, sent.session_epoch) == (9, INITIAL_EPOCH)  # closes 9 if there
    assert [len(t.partitions) for t in sent.topics] == [2]
    fetcher._apply_response(client, _answer(session_id=10), 41, set(), None)  # type: ignore[arg-type]
    fetcher.session.reset(other_leader=True)  # the leader moved: nothing to close there
    request = fetcher._fetch_request(client, set(), set(), None)  # type: ignore[arg-type]
    assert request is not None
    assert (_sent(request[0]).session_id, _sent(request[0]).session_epoch) == (
        NO_SESSION,
        INITIAL_EPOCH,
    )


def test_a_throttled_fetcher_closes_its_session_and_fetches_without_one(tmp_path: Path) -> None:
    fetcher = _fetcher(tmp_path)
    client = Client()
    request = fetcher._fetch_request(client, set(), set(), None)  # type: ignore[arg-type]
    assert request is not None
    fetcher._apply_response(client, _answer(session_id=9), 41, set(), None)  # type: ignore[arg-type]
    request = fetcher._fetch_request(client, set(), {A0}, 1000.0)  # type: ignore[arg-type]
    assert request is not None
    sent = _sent(request[0])
    assert (sent.session_id, sent.session_epoch) == (9, FINAL_EPOCH)
    assert fetcher.session.session_id == NO_SESSION


def test_a_partition_followed_afresh_is_sent_even_at_the_position_the_session_holds(
    tmp_path: Path,
) -> None:
    """An answer is applied only to the fetch offset its item was sent with: a partition
    followed again (a new item) at the very position the leader's session holds must be
    sent, or its answers would be dropped for ever."""
    fetcher = _fetcher(tmp_path)
    client = Client()
    assert fetcher._fetch_request(client, set(), set(), None) is not None  # type: ignore[arg-type]
    fetcher._apply_response(client, _answer(session_id=9), 41, set(), None)  # type: ignore[arg-type]
    old = fetcher.partitions[A0]
    fetcher.add(FollowedPartition(old.partition, 3, needs_truncation=False))
    request = fetcher._fetch_request(client, set(), set(), None)  # type: ignore[arg-type]
    assert request is not None
    sent = _sent(request[0])
    assert (sent.session_id, sent.session_epoch) == (9, 1)
    assert [(t.topic, [p.partition for p in t.partitions]) for t in sent.topics] == [("a", [0])]
    assert fetcher.partitions[A0].fetch_offset == 0


def _records_for(index: int, base_offset: int) -> memoryview:
    """An answer in session 9 carrying one record for partition ``a-<index>``."""
    records = make_batch([Record(0, 0, b"k", b"v")], base_offset=base_offset)
    result = PartitionResult(index, high_watermark=0, records=records)
    return _answer(session_id=9, topics=[TopicResult("a", None, [result])])


def _error_for(index: int, error_code: int) -> memoryview:
    """An answer in session 9 with ``error_code`` for partition ``a-<index>``."""
    result = PartitionResult(index, error_code=error_code)
    return _answer(session_id=9, topics=[TopicResult("a", None, [result])])


def _request(fetcher: ReplicaFetcher) -> replica_fetch.ReplicaFetchRequest:
    request = fetcher._fetch_request(Client(), set(), set(), None)  # type: ignore[arg-type]
    assert request is not None
    return _sent(request[0])


def _named(sent: replica_fetch.ReplicaFetchRequest) -> list[tuple[str, int, int]]:
    return [(t.topic, p.partition, p.fetch_offset) for t in sent.topics for p in t.partitions]


def test_a_fetch_recomputes_only_what_changed_and_everything_at_the_full_pass(
    tmp_path: Path,
) -> None:
    """Each request costs the partitions something happened to (answered with records,
    followed or left, out of range, truncated), not all it follows; a change no event
    covers (a log start moved by retention) is sent by the next full pass."""
    fetcher = _fetcher(tmp_path)
    client = Client()
    assert _named(_request(fetcher)) == [("a", 0, 0), ("a", 1, 0)]  # full: a session
    fetcher._apply_response(client, _answer(session_id=9), 41, set(), None)  # type: ignore[arg-type]
    fetcher._full_pass_at = float("inf")  # no full pass until the end of this test

    # An answer with records for a-0 moves a-0 only.
    assert _named(_request(fetcher)) == []  # nothing moved yet: an empty incremental fetch
    assert not fetcher._apply_response(client, _records_for(0, 0), 41, set(), None)  # type: ignore[arg-type]
    assert fetcher._stale == {A0}
    sent = _request(fetcher)
    assert (sent.session_epoch, _named(sent), sent.forgotten_topics_data) == (2, [("a", 0, 1)], [])
    assert fetcher._stale == set()

    # Nothing happened: an empty incremental fetch, nothing recomputed.
    assert _named(_request(fetcher)) == []

    # Out of range: a-0 waits for its truncation point and leaves the session meanwhile;
    # back at its log end once truncated.
    fetcher._apply_response(client, _error_for(0, ErrorCode.offset_out_of_range), 41, set(), None)  # type: ignore[arg-type]
    sent = _request(fetcher)
    assert (_named(sent), [(t.topic, t.partitions) for t in sent.forgotten_topics_data]) == (
        [],
        [("a", [0])],
    )
    assert fetcher._due_for_truncation(0.0) == [fetcher.partitions[A0]]
    fetcher._apply_epoch_end(fetcher.partitions[A0], 3, 1)
    assert fetcher._due_for_truncation(0.0) == []
    assert _named(_request(fetcher)) == [("a", 0, 1)]

    # Left: forgotten at once.
    fetcher.remove(A1)
    sent = _request(fetcher)
    assert (_named(sent), [(t.topic, t.partitions) for t in sent.forgotten_topics_data]) == (
        [],
        [("a", [1])],
    )

    # Retention moved a-0's log start: no event says so; the full pass sends it.
    fetcher.partitions[A0].partition.log.delete_records_before(1)
    assert _named(_request(fetcher)) == []
    fetcher._full_pass_at = 0.0
    sent = _request(fetcher)
    assert [(p.partition, p.log_start_offset) for t in sent.topics for p in t.partitions] == [
        (0, 1)
    ]
