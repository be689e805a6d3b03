"""Follower fetchers: copy leaders' logs to this broker with the Fetch API.

One fetcher task per leader broker, fetching all partitions this broker follows from
it, as Kafka's ReplicaFetcherThread does, in an incremental fetch session (KIP-227,
Kafka's ``FetchSessionHandler``): after the first, full, fetch a request names only the
partitions whose fetch position changed and the answer only those that changed, so
partitions with no traffic (``__consumer_offsets``'s fifty, say) cost a round trip
nothing on either side. Before fetching a partition after a leader
change, the follower asks the leader where its own latest leader epoch ends
(OffsetForLeaderEpoch) and truncates any divergent tail there (KIP-101). Truncating to
the high watermark instead loses acknowledged writes (seed 001); that legacy mode exists
only behind ``gregor.unsafe.truncate.to.high.watermark`` to demonstrate the difference.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol, TypeVar

from kio.schema.errors import ErrorCode

from ..cluster.metadata_cache import MetadataCache
from ..log.checkpoints import UNDEFINED_EPOCH
from ..log.partition_log import PartitionLog
from ..protocol import replica_fetch
from ..protocol.fetch_metadata import FINAL_EPOCH, INITIAL_EPOCH, INVALID_SESSION_ID, next_epoch
from ..protocol.record_batch import BatchHeader, InvalidBatch, peek_offset_and_length, scan_batches
from ..protocol.replica_fetch import FetchedPartition, FetchPosition
from ..tasks import cancel_and_wait
from .client import BrokerClient, BrokerConnectionError
from .partition import Partition
from .replication_config import ReplicationConfig
from .throttle import FOLLOWER_RATE, FOLLOWER_REPLICAS, ByteBudget, is_throttled, parse_rate


class FollowerLogs(Protocol):
    """What the fetchers need from the replica manager (which owns them): its broker id,
    settings and metadata, and the follower's side of the log (append, fail the dir)."""

    broker_id: int
    metadata: MetadataCache
    replication_config: ReplicationConfig
    truncate_to_high_watermark: bool

    def storage_failed(self, partition: Partition, error: OSError) -> Exception: ...

    def append_as_follower(
        self, partition: Partition, buffer: bytearray, headers: list[BatchHeader]
    ) -> None: ...

    def follower_high_watermark_moved(self, partition: Partition) -> None: ...


log = logging.getLogger(__name__)

FETCH_VERSION = replica_fetch.VERSION
# Answers after which the session is dropped and the next fetch is a full one.
SESSION_ERRORS = frozenset(
    {
        ErrorCode.fetch_session_id_not_found,
        ErrorCode.invalid_fetch_session_epoch,
        ErrorCode.fetch_session_topic_id_error,
    }
)
OFFSET_FOR_LEADER_EPOCH_VERSION = 3
RETRY_BACKOFF_S = 0.2
# How often a fetcher recomputes every partition's fetch position, not only those it knows
# changed (``ReplicaFetcher._session_positions``): a log start moved by retention under it.
FULL_PASS_S = 0.25

TopicPartition = tuple[str, int]
_T = TypeVar("_T")


@dataclass(slots=True)
class FollowedPartition:
    partition: Partition
    leader_epoch: int
    needs_truncation: bool = True
    # time.monotonic() before which its OffsetForLeaderEpoch is not asked again (after an
    # error): the other partitions of the leader are fetched meanwhile.
    truncation_retry_at: float = 0.0
    # The fetch offset of the request in flight for it (-1: none yet). Kafka's fetcher
    # applies a partition's data only if the request's fetch offset is still the current
    # one: an answer to a request made for an earlier state (a log deleted and made again
    # by a reassignment away and back, a truncation) would leave a gap below its records.
    fetch_offset: int = -1


def complete_batches(records: memoryview) -> memoryview:
    """The prefix of ``records`` made of whole batches (a response may end mid-batch)."""
    position = 0
    total = len(records)
    while total - position >= 12:
        _offset, length = peek_offset_and_length(records, position)
        end = position + 12 + length
        if length < 0 or end > total:
            break
        position = end
    return records[:position]


def _latest_epoch(item: FollowedPartition) -> int:
    return item.partition.log.leader_epoch_cache.latest_epoch()


class FetchSessionState:
    """The follower's side of its fetch session with one leader (Kafka's
    ``FetchSessionHandler``): the session's id, the epoch of the next request, and what
    the leader's session holds for each partition, as of the requests sent.

    ``build`` decides what a request carries: everything (a full fetch, which asks for a
    session at epoch 0) when there is no session, else only the partitions whose fetch
    position differs from what the session holds, and the partitions that left
    (forgotten). ``answered`` takes the response's session id or error; anything that
    leaves the two sides unsure of each other (an error, a lost connection) ``reset``s,
    and the next fetch is a full one, naming the session it replaces so that the leader
    closes it instead of keeping it until evicted (Kafka's ``nextCloseExisting``).
    """

    __slots__ = ("epoch", "replaces", "sent", "session_id")

    def __init__(self) -> None:
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        self.sent: dict[TopicPartition, FetchPosition] = {}
        self.replaces = INVALID_SESSION_ID  # the session the next full fetch closes

    def reset(self, *, other_leader: bool = False) -> None:
        """Start again with a full fetch. ``other_leader``: the fetcher now talks to
        another address, where this session id names nothing of ours."""
        if other_leader:
            self.replaces = INVALID_SESSION_ID
        elif self.session_id != INVALID_SESSION_ID:
            self.replaces = self.session_id
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        self.sent = {}

    def close(self) -> int:
        """Leave the session for fetches without one: the id such a fetch names (epoch
        -1) so that the leader closes it, or none."""
        self.reset()
        closing, self.replaces = self.replaces, INVALID_SESSION_ID
        return closing

    def resend(self, key: TopicPartition) -> None:
        """Send ``key``'s position in the next request whatever the session holds."""
        self.sent.pop(key, None)

    def build(
        self,
        wanted: dict[TopicPartition, FetchPosition],
        changed: Iterable[TopicPartition] | None = None,
    ) -> tuple[int, int, dict[TopicPartition, FetchPosition], list[TopicPartition]]:
        """``(session_id, epoch, partitions to send, partitions to forget)`` for a request
        fetching ``wanted``; what the leader's session will hold is remembered now.
        ``changed``: the only keys whose entry in ``wanted`` may differ from the one in
        the last request built (added, removed or moved); None compares them all."""
        if self.session_id == INVALID_SESSION_ID:
            self.sent = dict(wanted)
            return self.replaces, INITIAL_EPOCH, wanted, []
        sent = self.sent
        if changed is None:
            sending = {key: pos for key, pos in wanted.items() if sent.get(key) != pos}
            forgotten = [key for key in sent if key not in wanted]
        else:
            sending = {}
            forgotten = []
            for key in changed:
                position = wanted.get(key)
                if position is None:
                    if key in sent:
                        forgotten.append(key)
                elif sent.get(key) != position:
                    sending[key] = position
        for key in forgotten:
            del sent[key]
        sent.update(sending)
        return self.session_id, self.epoch, sending, forgotten

    def answered(self, epoch: int, session_id: int) -> None:
        """A response without error to the request sent at ``epoch``."""
        if epoch == INITIAL_EPOCH:
            # A new session, or none when the leader's cache had no room: the next
            # fetch is a full one again. Either way the one it replaced is closed.
            self.replaces = INVALID_SESSION_ID
            self.session_id = session_id
            self.epoch = next_epoch(INITIAL_EPOCH) if session_id else INITIAL_EPOCH
            if session_id == INVALID_SESSION_ID:
                self.sent = {}
        elif session_id != self.session_id:
            self.reset()  # closed by the leader (every partition forgotten)
        else:
            self.epoch = next_epoch(self.epoch)


class ReplicaFetcher:
    """Fetches every partition this broker follows from one leader.

    A fetch costs what changed, not what is followed: the fetch positions of the
    partitions it may fetch are kept between requests (``_positions``) and recomputed for
    the partitions something happened to (``_stale``: followed or left, answered,
    truncated), with a full pass every ``FULL_PASS_S`` for what changes underneath (a log
    start moved by retention). Only ``add`` and ``remove`` change ``partitions``.
    """

    def __init__(
        self,
        manager: FollowerLogs,
        leader_id: int,
        address: Callable[[int], tuple[str, int] | None],
    ) -> None:
        self.manager = manager
        self.leader_id = leader_id
        self.address = address
        self.partitions: dict[TopicPartition, FollowedPartition] = {}
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._client: BrokerClient | None = None
        self.throttle_budget = ByteBudget()
        # The pipeline's state between responses (``_next_in_pipeline``).
        self._pipeline_correlation_id = 0
        self._pipeline_backoff = False
        self._stopping = False
        self.session = FetchSessionState()
        # The session epoch of the request in flight (FINAL_EPOCH: sessionless).
        self._request_epoch = FINAL_EPOCH
        # The unthrottled fetch positions of the partitions not truncating, the keys to
        # recompute before the next request, and when all are next recomputed.
        self._positions: dict[TopicPartition, FetchPosition] = {}
        self._stale: set[TopicPartition] = set()
        self._full_pass_at = 0.0
        # The partitions waiting for their truncation point (``needs_truncation``).
        self._truncating: set[TopicPartition] = set()

    def add(self, item: FollowedPartition) -> None:
        """Follow ``item`` (replacing what this fetcher had for its partition)."""
        key = (item.partition.topic, item.partition.index)
        self.partitions[key] = item
        self._stale.add(key)
        if item.needs_truncation:
            self._truncating.add(key)
        else:
            self._truncating.discard(key)
        self.wake()

    def remove(self, key: TopicPartition) -> None:
        if self.partitions.pop(key, None) is not None:
            self._stale.add(key)
            self._truncating.discard(key)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"replica-fetcher-{self.leader_id}")

    async def stop(self) -> None:
        """Bounded whatever the leader does (Kafka's fetcher shutdown closes its network
        client too): the task is cancelled and its connection closed, and a task that lost
        its cancellation ends at its loop's next turn (``_stopping``)."""
        self._stopping = True
        self._wake.set()
        task = self._task
        if task is not None:
            task.cancel()  # before the close: no reconnecting meanwhile
        if self._client is not None:
            await self._client.close()
        await cancel_and_wait([task], f"fetcher for leader {self.leader_id}")

    def wake(self) -> None:
        self._wake.set()

    async def _connection(self) -> BrokerClient | None:
        address = self.address(self.leader_id)
        if address is None:
            return None
        if self._client is None or (self._client.host, self._client.port) != address:
            if self._client is not None:
                await self._client.close()
            self.session.reset(other_leader=True)  # its sessions are not ours
            self._client = BrokerClient(
                *address,
                f"gregor-replica-{self.manager.broker_id}",
                timeout=30.0,
                security=self.manager.replication_config.client_security,
            )
        return self._client

    async def _run(self) -> None:
        while not self._stopping:
            try:
                if not self.partitions:
                    self._wake.clear()
                    await self._wake.wait()
                    continue
                client = await self._connection()
                if client is None:
                    await asyncio.sleep(RETRY_BACKOFF_S)
                    continue
                # Matches Kafka's fetcher threads: partitions waiting for their truncation
                # point do not hold up the others. Before, one partition whose leader kept
                # answering OffsetForLeaderEpoch with an error (a leader that had not yet
                # seen its own election) stopped replication of every partition from that
                # leader: their ISRs shrank to the leader, acks=all writes stalled for
                # minutes, and idempotent producers bumped their epochs hundreds of times,
                # re-sending what was stored (chaos seed 202's duplicate storm).
                truncating = self._due_for_truncation(time.monotonic())
                if truncating:
                    await self._truncate(client, truncating)
                if len(self._truncating) < len(self.partitions):  # one is fetchable
                    await self._fetch(client)
                elif not truncating:
                    await asyncio.sleep(RETRY_BACKOFF_S)
            except asyncio.CancelledError:
                raise
            except BrokerConnectionError as error:
                # Whether the leader saw the request in flight is unknown: a full fetch next.
                self.session.reset()
                log.info("fetcher for leader %d: %s; retrying", self.leader_id, error)
                await asyncio.sleep(RETRY_BACKOFF_S)
            except Exception:
                self.session.reset()
                log.exception("fetcher for leader %d failed; retrying", self.leader_id)
                await asyncio.sleep(RETRY_BACKOFF_S)

    # truncation ---------------------------------------------------------------------------

    def _due_for_truncation(self, now: float) -> list[FollowedPartition]:
        """The partitions to ask their truncation point for now (not those retrying
        later, after an error)."""
        partitions = self.partitions
        return [
            item
            for item in (partitions.get(key) for key in self._truncating)
            if item is not None and item.needs_truncation and item.truncation_retry_at <= now
        ]

    def _truncated(self, item: FollowedPartition) -> None:
        """``item`` has its truncation point: it is fetched from its log end now."""
        item.needs_truncation = False
        key = (item.partition.topic, item.partition.index)
        self._stale.add(key)
        self._truncating.discard(key)

    async def _truncate(self, client: BrokerClient, followed: list[FollowedPartition]) -> None:
        if self.manager.truncate_to_high_watermark:
            for item in followed:
                partition_log = item.partition.log
                target = min(partition_log.high_watermark, partition_log.log_end_offset)
                log.warning(
                    "truncating %s-%d from %d to its high watermark %d "
                    "(gregor.unsafe.truncate.to.high.watermark)",
                    item.partition.topic,
                    item.partition.index,
                    partition_log.log_end_offset,
                    target,
                )
                if not self._truncate_log(item, target):
                    continue
                self._truncated(item)
            return
        by_topic: dict[str, list[FollowedPartition]] = {}
        for item in followed:
            by_topic.setdefault(item.partition.topic, []).append(item)
        response = await client.request(
            23,
            OFFSET_FOR_LEADER_EPOCH_VERSION,
            {
                "replica_id": self.manager.broker_id,
                "topics": [
                    {
                        "topic": topic,
                        "partitions": [
                            {
                                "partition": item.partition.index,
                                "current_leader_epoch": item.leader_epoch,
                                "leader_epoch": _latest_epoch(item),
                            }
                            for item in items
                        ],
                    }
                    for topic, items in by_topic.items()
                ],
            },
        )
        for topic in response.topics:
            for answer in topic.partitions:
                item = self.partitions.get((topic.topic, answer.partition))
                if item is None:
                    continue
                if answer.error_code != ErrorCode.none:
                    log.info(
                        "OffsetForLeaderEpoch for %s-%d from %d: %s; retrying",
                        topic.topic,
                        answer.partition,
                        self.leader_id,
                        answer.error_code.name,
                    )
                    item.truncation_retry_at = time.monotonic() + RETRY_BACKOFF_S
                    continue
                self._apply_epoch_end(item, answer.leader_epoch, answer.end_offset)

    def _apply_epoch_end(self, item: FollowedPartition, epoch: int, end_offset: int) -> None:
        partition_log = item.partition.log
        if epoch == UNDEFINED_EPOCH or end_offset < 0:
            # The leader knows nothing of our epochs: fall back to the high watermark,
            # Kafka's behaviour for this case.
            target = min(partition_log.high_watermark, partition_log.log_end_offset)
        else:
            _, local_end = partition_log.leader_epoch_cache.end_offset_for(epoch)
            if local_end < 0:
                local_end = partition_log.log_end_offset
            target = min(end_offset, local_end, partition_log.log_end_offset)
        if target < partition_log.log_end_offset:
            log.info(
                "truncating %s-%d from %d to %d (leader %d, epoch %d ends at %d)",
                item.partition.topic,
                item.partition.index,
                partition_log.log_end_offset,
                target,
                self.leader_id,
                epoch,
                end_offset,
            )
            if not self._truncate_log(item, target):
                return
        # truncate_to held the high watermark at or below the new log end.
        self._truncated(item)

    def _truncate_log(self, item: FollowedPartition, target: int) -> bool:
        """Truncate; False when the disk failed (the partition is then offline here)."""
        try:
            item.partition.log.truncate_to(target)
        except OSError as error:
            self.manager.storage_failed(item.partition, error)
            return False
        return True

    # fetching -----------------------------------------------------------------------------
    def _throttle(self) -> tuple[set[TopicPartition], float | None]:
        """Partitions under a follower throttle, and the rate (None: no throttle)."""
        manager = self.manager
        rate = parse_rate(manager.metadata.dynamic_broker_config(manager.broker_id, FOLLOWER_RATE))
        if rate is None:
            return set(), None
        throttled = set()
        for key, item in self.partitions.items():
            if manager.broker_id in item.partition.isr:
                # Kafka's shouldFollowerThrottle: a replica in the ISR is never held back;
                # the high watermark, and with it every acks=all write, waits for it.
                continue
            topic = manager.metadata.topics.get(key[0])
            config = topic.config if topic is not None else {}
            if is_throttled(config, FOLLOWER_REPLICAS, key[1], manager.broker_id):
                throttled.add(key)
        return throttled, rate

    async def _fetch(self, client: BrokerClient) -> None:
        """Fetch until something needs the fetcher's loop (truncation, a pause, a
        throttle, no partition left): without a follower throttle, round trips run in a
        pipeline, each response applied and the next fetch sent from the connection's
        own callback (``BrokerClient.pipeline``); with one, one round trip per call."""
        throttled, rate = self._throttle()
        skip: set[TopicPartition] = set()
        if rate is not None and throttled and self.throttle_budget.wait_time(rate) > 0:
            skip = throttled
            if len(skip) == len(self.partitions):
                await asyncio.sleep(max(self.throttle_budget.wait_time(rate), 0.01))
                return
        request = self._fetch_request(client, skip, throttled, rate)
        if request is None:  # every fetchable partition is throttled this round
            await asyncio.sleep(max(self.throttle_budget.wait_time(rate or 0.0), 0.01))
            return
        frame, correlation_id = request
        if rate is not None:
            response = await client.exchange(frame)
            if self._apply_response(client, response, correlation_id, throttled, rate):
                await asyncio.sleep(RETRY_BACKOFF_S)
            return
        self._pipeline_backoff = False
        self._pipeline_correlation_id = correlation_id
        await client.pipeline(frame, lambda response: self._next_in_pipeline(client, response))
        if self._pipeline_backoff:
            await asyncio.sleep(RETRY_BACKOFF_S)

    def _next_in_pipeline(self, client: BrokerClient, response: memoryview) -> bytes | None:
        """Apply a response inside the connection's callback; the next fetch, or None to
        hand control back to the fetcher's loop."""
        if self._stopping:
            return None
        if self._apply_response(client, response, self._pipeline_correlation_id, set(), None):
            self._pipeline_backoff = True
            return None
        manager = self.manager
        rate = parse_rate(manager.metadata.dynamic_broker_config(manager.broker_id, FOLLOWER_RATE))
        if rate is not None:
            return None  # a follower throttle now: the loop's budgeted path
        if self._truncating and self._due_for_truncation(time.monotonic()):
            return None  # a new leader epoch or an out-of-range offset: truncate first
        request = self._fetch_request(client, set(), set(), None)
        if request is None:
            return None
        frame, self._pipeline_correlation_id = request
        return frame

    def _fetch_request(
        self,
        client: BrokerClient,
        skip: set[TopicPartition],
        throttled: set[TopicPartition],
        rate: float | None,
    ) -> tuple[bytes, int] | None:
        """The next Fetch frame and its correlation id; None when no partition can be
        fetched (all throttled or truncating)."""
        config = self.manager.replication_config
        partitions = self.partitions
        forgotten: list[TopicPartition] = []
        if rate is None:
            wanted, changed = self._session_positions(config.fetch_max_bytes)
            if not wanted:
                return None
            for key in wanted if changed is None else changed:
                position = wanted.get(key)
                if position is not None and partitions[key].fetch_offset != position.fetch_offset:
                    # A partition whose answers are not yet checked against this fetch
                    # offset (followed afresh since, a new log at the same position) is
                    # sent whatever the session holds: an answer is applied only to the
                    # fetch offset its item was sent with.
                    self.session.resend(key)
            session_id, epoch, sending, forgotten = self.session.build(wanted, changed)
            self._stale.clear()
        else:
            wanted = self._throttled_positions(skip, throttled, rate, config)
            if not wanted:
                return None
            # Under a follower throttle each fetch picks its partitions anew: full fetches
            # without a session (closing ours, if there is one).
            session_id, epoch, sending = self.session.close(), FINAL_EPOCH, wanted
            self._full_pass_at = 0.0  # all recomputed when the session resumes
        # The fetch offset each answer is checked against (``_apply_fetched``): a partition
        # left out of an incremental fetch keeps the one the leader's session holds.
        for key, position in sending.items():
            partitions[key].fetch_offset = position.fetch_offset
        self._request_epoch = epoch
        correlation_id = client.next_correlation_id()
        frame = replica_fetch.encode_request(
            correlation_id,
            client.client_id,
            replica_id=self.manager.broker_id,
            max_wait_ms=config.fetch_wait_max_ms,
            min_bytes=config.fetch_min_bytes,
            max_bytes=config.fetch_response_max_bytes,
            topics=_by_topic(sending),
            session_id=session_id,
            session_epoch=epoch,
            forgotten=_by_topic({key: key[1] for key in forgotten}),
        )
        return frame, correlation_id

    def _session_positions(
        self, max_bytes: int
    ) -> tuple[dict[TopicPartition, FetchPosition], set[TopicPartition] | None]:
        """The unthrottled fetch positions of the partitions not truncating, and the keys
        whose position may differ from the last request's (None: any may)."""
        partitions = self.partitions
        positions = self._positions
        now = time.monotonic()
        if now >= self._full_pass_at:
            self._full_pass_at = now + FULL_PASS_S
            self._stale.clear()
            self._positions = {
                key: _position(key, item, positions.get(key), max_bytes)
                for key, item in partitions.items()
                if not item.needs_truncation
            }
            return self._positions, None
        for key in self._stale:
            item = partitions.get(key)
            if item is None or item.needs_truncation:
                positions.pop(key, None)
            else:
                positions[key] = _position(key, item, positions.get(key), max_bytes)
        return positions, self._stale

    def _throttled_positions(
        self,
        skip: set[TopicPartition],
        throttled: set[TopicPartition],
        rate: float,
        config: ReplicationConfig,
    ) -> dict[TopicPartition, FetchPosition]:
        """Every fetchable partition's position under a follower throttle: a throttled
        partition asks for at most a tenth of a second's worth of the rate."""
        throttled_max_bytes = min(config.fetch_max_bytes, max(int(rate / 10), 1))
        held = self.session.sent
        wanted: dict[TopicPartition, FetchPosition] = {}
        for key, item in self.partitions.items():
            if key in skip or item.needs_truncation:
                continue
            max_bytes = throttled_max_bytes if key in throttled else config.fetch_max_bytes
            wanted[key] = _position(key, item, held.get(key), max_bytes)
        return wanted

    def _apply_response(
        self,
        client: BrokerClient,
        frame: memoryview,
        correlation_id: int,
        throttled: set[TopicPartition],
        rate: float | None,
    ) -> bool:
        """Apply a Fetch response; True when the fetcher should pause before the next.
        A malformed response or a wrong correlation id drops the connection."""
        try:
            received, response = replica_fetch.decode_response(frame)
        except replica_fetch.MalformedResponse as error:
            client.abort()
            raise BrokerConnectionError(f"malformed fetch response: {error}") from error
        if received != correlation_id:
            client.abort()
            raise BrokerConnectionError("response correlation id does not match the request")
        if response.error_code in SESSION_ERRORS:
            # Matches Kafka's FetchSessionHandler: the next fetch is a full one, at once.
            log.info(
                "fetch session %d with leader %d: %s; starting a new one",
                self.session.session_id,
                self.leader_id,
                ErrorCode(response.error_code).name,
            )
            self.session.reset()
            return False
        if response.error_code != ErrorCode.none:
            self.session.reset()
            log.warning(
                "fetch from leader %d: %s", self.leader_id, ErrorCode(response.error_code).name
            )
            return True
        if self._request_epoch != FINAL_EPOCH:
            self.session.answered(self._request_epoch, response.session_id)
        backoff = False
        partitions = self.partitions
        stale = self._stale
        for data in response.partitions:
            key = (data.topic, data.partition)
            item = partitions.get(key)
            if item is None:
                continue
            stale.add(key)  # appended to, or out of range
            if rate is not None and key in throttled:
                before = item.partition.log.log_end_offset
                backoff |= not self._apply_fetched(item, data)
                if item.partition.log.log_end_offset > before:
                    self.throttle_budget.spend(len(data.records), rate)
            else:
                backoff |= not self._apply_fetched(item, data)
        return backoff

    def _apply_fetched(self, item: FollowedPartition, data: FetchedPartition) -> bool:
        """Append what the leader sent; False when the partition needs a pause."""
        partition = item.partition
        partition_log = partition.log
        if item.fetch_offset != partition_log.log_end_offset:
            return True  # answers a request made for an earlier state of this partition
        error = data.error_code
        if error == ErrorCode.offset_out_of_range:
            item.needs_truncation = True
            self._truncating.add((partition.topic, partition.index))
            return False
        if error != ErrorCode.none:
            # NOT_LEADER / FENCED / UNKNOWN_LEADER_EPOCH: metadata will catch up.
            return False
        records = data.records
        if records:
            whole = complete_batches(records)
            if whole:
                buffer = bytearray(whole)
                try:
                    headers = scan_batches(buffer, dense=False)
                except InvalidBatch as invalid:
                    log.error(
                        "leader %d sent a corrupt batch for %s-%d: %s",
                        self.leader_id,
                        partition.topic,
                        partition.index,
                        invalid,
                    )
                    return False
                buffer, headers, cut_at = from_log_end(partition_log, buffer, headers)
                if cut_at is not None:
                    log.warning(
                        "%s-%d: the log end %d is inside the leader's batch at %d; "
                        "cutting the log back to it",
                        partition.topic,
                        partition.index,
                        partition_log.log_end_offset,
                        cut_at,
                    )
                    if not self._truncate_log(item, cut_at):
                        return False
                    if partition_log.log_end_offset != cut_at:
                        return True  # a batch of ours began lower: fetch from the new end
                    # The log ends where the leader's batch begins (an empty log now
                    # starts there, as Kafka's truncateFullyAndStartAt does): take it.
                    buffer, headers, _ = from_log_end(partition_log, buffer, headers)
                if headers:
                    self.manager.append_as_follower(partition, buffer, headers)
        # Matches Kafka: a follower's high watermark is the leader's, capped at its own
        # log end offset, and never moves back.
        if partition_log.maybe_increment_high_watermark(data.high_watermark):
            self.manager.follower_high_watermark_moved(partition)
        return True


def from_log_end(
    partition_log: PartitionLog, buffer: bytearray, headers: list[BatchHeader]
) -> tuple[bytearray, list[BatchHeader], int | None]:
    """What of a leader's answer to append at this log's end: ``(buffer, headers,
    None)`` holding only the batches from the log end on (a buffer of their own: an
    append writes its whole buffer), or the answer unchanged and an offset when the log
    must first be cut back to that offset (then ask again).

    The leader answers with the batch holding the fetch offset. Batches wholly below the
    log end are here already (an answer to an earlier request's offset) and are left
    out. A batch that starts below the log end and ends at or past it means the log ends
    inside one of the leader's batches: a log started inside a batch (Kafka's
    ``truncateFullyAndStartAt`` case, a log start moved by DeleteRecords), or a tail the
    leader's history does not share. Appending what follows that batch would leave a
    hole this replica then claims to hold; keeping the batch's bytes would put offsets
    that go backwards into the segment, where the next start-up's recovery cuts the log
    (and every later batch) off. So the log is cut back to the batch's first offset and
    takes it whole: at once when the log then ends there (an empty log starts there),
    else from the next fetch."""
    end = partition_log.log_end_offset
    first = 0
    while first < len(headers) and headers[first].next_offset <= end:
        first += 1
    if first == len(headers):
        return buffer, [], None
    if headers[first].base_offset < end:
        return buffer, headers, headers[first].base_offset
    if first:
        buffer = bytearray(memoryview(buffer)[headers[first].position :])
        headers = scan_batches(buffer, dense=False)
    return buffer, headers, None


def _position(
    key: TopicPartition, item: FollowedPartition, previous: FetchPosition | None, max_bytes: int
) -> FetchPosition:
    """``item``'s fetch position: ``previous`` itself when nothing in it moved."""
    partition_log = item.partition.log
    offset = partition_log.log_end_offset
    log_start = partition_log.log_start_offset
    if (
        previous is not None
        and previous.fetch_offset == offset
        and previous.current_leader_epoch == item.leader_epoch
        and previous.log_start_offset == log_start
        and previous.partition_max_bytes == max_bytes
    ):
        return previous
    return FetchPosition(key[1], item.leader_epoch, offset, log_start, max_bytes)


def _by_topic(positions: dict[TopicPartition, _T]) -> list[tuple[str, list[_T]]]:
    """``{(topic, partition): value}`` grouped by topic, in first-seen order."""
    grouped: dict[str, list[_T]] = {}
    for (topic, _index), value in positions.items():
        grouped.setdefault(topic, []).append(value)
    return list(grouped.items())


class ReplicaFetcherManager:
    """Keeps one fetcher per leader and the partitions each one follows."""

    def __init__(self, manager: FollowerLogs) -> None:
        self.manager = manager
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self._stopped = False

    def _address(self, broker_id: int) -> tuple[str, int] | None:
        info = self.manager.metadata.brokers.get(broker_id)
        if info is None:
            return None
        return info.endpoint(self.manager.replication_config.inter_broker_listener)

    def follow(self, partition: Partition) -> None:
        """Fetch ``partition`` from its current leader (after truncation)."""
        if self._stopped:
            return  # the broker is stopping: metadata arriving meanwhile starts no fetcher
        key = (partition.topic, partition.index)
        for leader_id, fetcher in self.fetchers.items():
            if leader_id != partition.leader:
                fetcher.remove(key)
        fetcher = self.fetchers.get(partition.leader)
        if fetcher is None:
            fetcher = self.fetchers[partition.leader] = ReplicaFetcher(
                self.manager, partition.leader, self._address
            )
            fetcher.start()
        current = fetcher.partitions.get(key)
        if current is None or current.leader_epoch != partition.leader_epoch:
            fetcher.add(FollowedPartition(partition, partition.leader_epoch))

    def unfollow(self, key: TopicPartition) -> None:
        for fetcher in self.fetchers.values():
            fetcher.remove(key)

    async def stop(self) -> None:
        self._stopped = True
        # Together: each is bounded (``tasks.STOP_TIMEOUT_S``), and so is the whole.
        await asyncio.gather(*(fetcher.stop() for fetcher in list(self.fetchers.values())))
        self.fetchers.clear()
