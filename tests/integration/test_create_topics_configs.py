"""CreateTopics v5+ answers each new topic with its configs (KIP-525), as Kafka does: every
topic config once, its value, where it comes from (the request's override, the broker's
static config, or Kafka's default) and whether it is read-only or sensitive; a
DescribeConfigs of the topic then tells the same."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from gregor_broker.config import TOPIC_CONFIGS, ConfigSource

from .quota_helpers import kafka_request

CREATE_TOPICS, DESCRIBE_CONFIGS = 19, 32
TOPIC_RESOURCE = 2


def test_create_topics_answers_the_new_topics_configs_with_their_sources(broker_factory):
    broker = broker_factory(**{"log.retention.hours": "24"})
    created = kafka_request(
        broker.bootstrap,
        CREATE_TOPICS,
        7,
        {
            "topics": [
                {
                    "name": "configured",
                    "num_partitions": 1,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [{"name": "cleanup.policy", "value": "compact"}],
                }
            ],
            "timeout": 30000,
            "validate_only": False,
        },
    )
    [topic] = created.topics
    assert topic.error_code is ErrorCode.none
    configs = {c.name: c for c in topic.configs}
    assert sorted(configs) == sorted(TOPIC_CONFIGS)
    policy = configs["cleanup.policy"]
    assert (policy.value, policy.config_source) == ("compact", ConfigSource.TOPIC_CONFIG)
    retention = configs["retention.ms"]
    assert retention.value == str(24 * 3600 * 1000)
    assert retention.config_source == ConfigSource.STATIC_BROKER_CONFIG
    segment = configs["segment.bytes"]
    assert segment.config_source == ConfigSource.DEFAULT_CONFIG
    assert not any(c.read_only or c.is_sensitive for c in configs.values())

    described = kafka_request(
        broker.bootstrap,
        DESCRIBE_CONFIGS,
        4,
        {
            "resources": [
                {"resource_type": TOPIC_RESOURCE, "resource_name": "configured",
                 "configuration_keys": None}
            ],
            "include_synonyms": False,
            "include_documentation": False,
        },
    )  # fmt: skip
    [result] = described.results
    assert result.error_code is ErrorCode.none
    assert {c.name: (c.value, c.config_source) for c in result.configs} == {
        name: (c.value, c.config_source) for name, c in configs.items()
    }
