"""FindCoordinator names this broker only once an OffsetCommit sent right after it is
served here, not sent away with NOT_COORDINATOR.

Kafka's controller sends a broker LeaderAndIsr (the group coordinator schedules the
partition's load: COORDINATOR_LOAD_IN_PROGRESS until it is loaded) before the
UpdateMetadata that shows it as the leader, so a FindCoordinator answered from that
metadata names a broker that already knows it leads. Gregor's metadata comes from
ZooKeeper and may name this broker leader of a ``__consumer_offsets`` partition while the
replica manager still holds the partition back (the log manager's threads make its files,
seconds on a busy disk): the coordinator has not heard of that leadership, and a commit
then was answered NOT_COORDINATOR (a raw-protocol test's commit right after its
FindCoordinator, in a parallel run). FindCoordinator waits for the leadership to be taken
here (``TopicAdmin.wait_for_leaders`` with ``leads_as_assigned``), and the leadership
listener starts the load in the same step.

Real coordinator service, replica manager, topic admin and logs (no socket, no
ZooKeeper); the slow disk is ``slow_file_system``'s gate before a partition's files.
"""

from __future__ import annotations

import asyncio
import datetime
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode
from tests.one_broker import BROKER_ID, one_broker

from gregor_broker.cluster.metadata_cache import MetadataCache
from gregor_broker.coordinator.records import OFFSETS_TOPIC
from gregor_broker.coordinator.service import CoordinatorService
from gregor_broker.log.log_manager import LogManager
from gregor_broker.protocol import entities
from gregor_broker.protocol.wire import RequestHeader
from gregor_broker.replication.replica_manager import ReplicaManager
from gregor_broker.server.authorizer import Authorizer
from gregor_broker.server.handlers.groups import handle_find_coordinator, handle_offset_commit
from gregor_broker.server.request_router import RequestContext
from gregor_broker.server.topic_admin import TopicAdmin

FIND_COORDINATOR, OFFSET_COMMIT = 10, 8
GROUP, TOPIC = "retaining", "retained"
PARTITIONS = 50  # offsets.topic.num.partitions


@dataclass
class Services:
    metadata: MetadataCache
    coordinator: CoordinatorService
    authorizer: Authorizer = field(default_factory=Authorizer)  # none: everything allowed


def build(tmp_path: Path) -> tuple[Services, LogManager, ReplicaManager]:
    """One broker whose metadata has ``__consumer_offsets`` (created, every partition led
    by this broker) and a topic to commit offsets of, as a watcher delivers them."""
    broker = one_broker(tmp_path, {"offsets.topic.num.partitions": str(PARTITIONS)})
    # No ZooKeeper: the topic exists already, so nothing is written.
    topics = TopicAdmin(broker.config, broker.metadata, None, broker.replicas.leads_as_assigned)  # type: ignore[arg-type]
    coordinator = CoordinatorService(broker.config, broker.metadata, broker.replicas, topics)
    broker.lead(OFFSETS_TOPIC, PARTITIONS)
    broker.lead(TOPIC, 1)
    return Services(broker.metadata, coordinator), broker.logs, broker.replicas


def context(api_key: int, version: int) -> RequestContext:
    return RequestContext(RequestHeader(api_key, version, 7, "readiness-test", 0), None)  # type: ignore[arg-type]


def request(api_key: int, version: int, **fields: Any) -> Any:
    return entities.build(entities.payload_class(api_key, version, "request"), fields)


def test_an_offset_commit_right_after_find_coordinator_is_served_here(
    tmp_path: Path, slow_file_system: threading.Event
) -> None:
    services, logs, replicas = build(tmp_path)

    async def scenario() -> None:
        pending = services.metadata.take_changed_topics()
        while pending:  # as the sliced reconcile applies the metadata
            pending = replicas.reconcile(pending, max_changes=8)
        find = asyncio.ensure_future(
            handle_find_coordinator(
                services, context(FIND_COORDINATOR, 0), request(FIND_COORDINATOR, 0, key=GROUP)
            )
        )
        await asyncio.sleep(0.3)
        # Named leader in the metadata, but the partitions are not led here yet.
        assert services.metadata.topic_has_leaders(OFFSETS_TOPIC)
        assert not find.done(), find.result().body
        slow_file_system.set()
        found = (await asyncio.wait_for(find, 10)).body
        assert (found["error_code"], found["node_id"]) == (ErrorCode.none, BROKER_ID), found
        commit = request(
            OFFSET_COMMIT,
            2,
            group_id=GROUP,
            generation_id_or_member_epoch=-1,
            member_id="",
            retention_time=datetime.timedelta(milliseconds=-1),
            topics=[
                {
                    "name": TOPIC,
                    "partitions": [
                        {"partition_index": 0, "committed_offset": 5, "committed_metadata": ""}
                    ],
                }
            ],
        )
        answer = await handle_offset_commit(services, context(OFFSET_COMMIT, 2), commit)
        codes = [p["error_code"] for t in answer.body["topics"] for p in t["partitions"]]
        assert codes == [ErrorCode.none]

    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(scenario())
    finally:
        loop.close()
        logs.close()
