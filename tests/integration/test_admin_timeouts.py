"""CreateTopics, CreatePartitions and DeleteTopics that outlast their timeout.

Kafka answers each topic whose change it has not seen done within the request's timeout
with REQUEST_TIMED_OUT (``DelayedCreatePartitions``, ``DelayedDeleteTopics``); the
change is in ZooKeeper and completes later. Here the controller is paused (SIGSTOP), so
nothing can complete until it resumes, and the requests go to the other broker.
"""

from __future__ import annotations

import uuid

from kio.schema.errors import ErrorCode

from gregor_broker.cluster.admin import ZkAdmin
from gregor_broker.devtools.local_cluster import zookeeper_client

from .broker_helpers import create_topic, produce_values, wait_for
from .raw_requests import RawClient, request

TIMEOUT_MS = 1500


def test_admin_requests_answer_request_timed_out_while_the_controller_cannot_act(
    broker_factory,
) -> None:
    session = {"zookeeper.session.timeout.ms": "40000"}  # the paused one keeps its session
    controller = broker_factory(1, **session)
    client = zookeeper_client(controller.zookeeper_connect)
    admin = ZkAdmin(client)
    try:
        assert wait_for(lambda: admin.get_controller() is not None, 60)
        assert admin.get_controller().broker_id == 1, "broker 1 was alone"
        other = broker_factory(2, **session)
        create_topic(other.bootstrap, "grows", partitions=1)
        create_topic(other.bootstrap, "goes", partitions=1)
        controller.pause()
        try:
            with RawClient(other.bootstrap) as raw:
                created = raw.call(
                    19,
                    7,
                    request(
                        19,
                        7,
                        topics=[
                            {
                                "name": "waits",
                                "num_partitions": -1,
                                "replication_factor": -1,
                                "assignments": [{"partition_index": 0, "broker_ids": [2]}],
                                "configs": [],
                            }
                        ],
                        timeout=TIMEOUT_MS,
                        validate_only=False,
                    ),
                )
                [topic] = created.topics
                assert topic.error_code == ErrorCode.request_timed_out, topic
                assert "partitions without a leader: [0]" in topic.error_message
                grown = raw.call(
                    37,
                    3,
                    request(
                        37,
                        3,
                        topics=[{"name": "grows", "count": 2, "assignments": None}],
                        timeout=TIMEOUT_MS,
                        validate_only=False,
                    ),
                )
                [result] = grown.results
                assert result.error_code == ErrorCode.request_timed_out, result
                # Kafka's ZooKeeper mode: deletion is the controller's work.
                deleted = raw.call(
                    20,
                    6,
                    request(
                        20,
                        6,
                        topics=[{"name": "goes", "topic_id": uuid.UUID(int=0)}],
                        timeout=TIMEOUT_MS,
                    ),
                )
                [gone] = deleted.responses
                assert gone.error_code == ErrorCode.request_timed_out, gone
                assert "still in this broker's metadata" in gone.error_message
        finally:
            controller.resume()
        # Each change was made and completes once the controller acts again.
        assert len(produce_values(other.bootstrap, "waits", [b"late"])) == 1
        assert wait_for(lambda: admin.get_topic("goes") is None, 60)
        log = other.log_path.read_text()
        assert "CreateTopics of waits not done after 1.5 s" in log
        assert "CreatePartitions of grows not done after 1.5 s" in log
    finally:
        client.stop()
        client.close()
