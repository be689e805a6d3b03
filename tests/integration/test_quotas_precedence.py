"""Kafka's eight quota levels on a live broker: the most specific configured quota wins.

For each level, a client whose quota at that level is tiny (and every less specific level
huge) is throttled, and a client whose quota at that level is huge (and every less
specific level tiny) is not. Brokers here use two 1-second quota windows, so a throttle
lasts at most 2 s. Unauthenticated clients are the user ANONYMOUS.
"""

from __future__ import annotations

import time

import confluent_kafka
import pytest

from gregor_broker.cluster.client_quotas import read_all_quota_configs
from gregor_broker.server.quotas import ANONYMOUS

from .broker_helpers import create_topic
from .quota_helpers import set_quota, zk_admin

D = "<default>"
TINY = 1000  # bytes/s: one 40 kB message is far over it
HUGE = 10**9
SHORT_WINDOWS = {"quota.window.num": "2", "quota.window.size.seconds": "1"}


def levels(client_id: str) -> list[tuple[str | None, str | None]]:
    """Kafka's precedence, most specific first, for ANONYMOUS and ``client_id``."""
    return [
        (ANONYMOUS, client_id),
        (ANONYMOUS, D),
        (ANONYMOUS, None),
        (D, client_id),
        (D, D),
        (D, None),
        (None, client_id),
        (None, D),
    ]


def produce_once(bootstrap: str, client_id: str) -> int:
    """Produce one 40 kB message; the largest throttle time the client was told, in ms."""
    throttles = [0]
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": client_id,
            "acks": "1",
            "throttle_cb": lambda event: throttles.append(round(event.throttle_time * 1000)),
        }
    )
    producer.produce("precedence", b"p" * 40_000)
    assert producer.flush(30) == 0
    producer.poll(0.2)  # throttle events are served by poll
    return max(throttles)


def configure(admin, entities: dict[tuple[str | None, str | None], int]) -> None:
    for entity in read_all_quota_configs(admin):
        set_quota(admin, *entity)  # no values: the node is deleted
    for entity, rate in entities.items():
        set_quota(admin, *entity, producer_byte_rate=rate)
    time.sleep(1)  # /config/changes reaches the broker in milliseconds


@pytest.mark.parametrize("level", range(8), ids=lambda i: f"level-{i + 1}")
def test_the_most_specific_configured_quota_applies(broker_factory, zk_connect, level) -> None:
    broker = broker_factory(**SHORT_WINDOWS)
    create_topic(broker.bootstrap, "precedence")
    with zk_admin(zk_connect) as admin:
        # This level tiny, every less specific one huge: this level's quota throttles.
        client_id = f"tiny-{level + 1}"
        entities = levels(client_id)
        configure(admin, {entities[level]: TINY} | dict.fromkeys(entities[level + 1 :], HUGE))
        assert produce_once(broker.bootstrap, client_id) > 0, "this level's quota must apply"
        if level == 7:
            return  # nothing is less specific than /config/clients/<default>
        # This level huge, every less specific one tiny: the less specific ones are ignored.
        time.sleep(2.1)  # the throttled usage above leaves the 2 x 1 s window
        client_id = f"huge-{level + 1}"
        entities = levels(client_id)
        configure(admin, {entities[level]: HUGE} | dict.fromkeys(entities[level + 1 :], TINY))
        assert produce_once(broker.bootstrap, client_id) == 0, "less specific quotas must lose"
