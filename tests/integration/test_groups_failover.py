"""Consumer groups share partitions and survive a member's crash (confluent-kafka and
kafka-python, members as real processes).

Three members of one group share a 6-partition topic two partitions each. One member
is killed with SIGKILL: it cannot leave the group, so the coordinator notices only when
its session times out (session.timeout.ms=6000) and rebalances; the two survivors then
own all six partitions. Every message is processed at least once and the committed
offsets reach the end of every partition.
"""

from __future__ import annotations

import time

import pytest

from .group_helpers import (
    GROUP_BROKER_PROPERTIES,
    MemberProcess,
    committed_offsets,
    create_topic,
    end_offsets,
    produce,
    wait_until,
)

PARTITIONS = 6
SESSION_TIMEOUT_S = 6.0


@pytest.mark.parametrize("client", ["confluent", "kafka-python"])
def test_three_members_share_partitions_and_take_over_from_a_killed_member(
    broker_factory, tmp_path, client
) -> None:
    broker = broker_factory(**GROUP_BROKER_PROPERTIES)
    bootstrap = broker.bootstrap
    topic, group = f"orders-{client}", f"billing-{client}"
    create_topic(bootstrap, topic, PARTITIONS)
    members = [
        MemberProcess(
            client,
            bootstrap,
            group,
            topic,
            tmp_path / f"member-{i}.log",
            {"process.delay.s": 0.01},
        ).start()
        for i in range(3)
    ]
    try:
        wait_until(
            lambda: (
                sorted(len(m.owned()) for m in members) == [2, 2, 2]
                and frozenset().union(*(m.owned() for m in members)) == frozenset(range(6))
            ),
            90,
            "three members to own two partitions each",
            members,
        )
        # The first batch goes in once the group is balanced: produced earlier, the
        # members that joined first could process all of it (the victim's partitions
        # included) before the last member joined, leaving the victim nothing to do.
        first = [f"a{i}" for i in range(600)]
        produce(bootstrap, topic, first, PARTITIONS)
        victim, survivors = members[0], members[1:]
        wait_until(
            lambda: len(victim.processed()) >= 20, 30, "the victim to process messages", members
        )
        victim_partitions = victim.owned()
        victim.kill()
        killed_at = time.time()
        second = [f"b{i}" for i in range(600)]
        produce(bootstrap, topic, second, PARTITIONS)

        took = wait_until(
            lambda: frozenset().union(*(m.owned() for m in survivors)) == frozenset(range(6)),
            SESSION_TIMEOUT_S + 30,
            "the survivors to own every partition",
            members,
        )
        takeover = min(
            e.at
            for m in survivors
            for e in m.events()
            if e.kind == "OWNED" and e.at > killed_at and e.partitions & victim_partitions
        )
        print(
            f"{client}: partitions {sorted(victim_partitions)} taken over "
            f"{takeover - killed_at:.2f} s after SIGKILL (observed after {took:.2f} s)"
        )
        assert takeover - killed_at < SESSION_TIMEOUT_S + 10

        expected = end_offsets(bootstrap, topic, PARTITIONS)
        assert sum(expected.values()) == 1200
        wait_until(
            lambda: committed_offsets(bootstrap, group, topic, PARTITIONS) == expected,
            60,
            "the committed offsets to reach the end of every partition",
            members,
        )
        processed = {value for m in members for _, _, value in m.processed()}
        assert processed >= set(first) | set(second), "a message was never processed"
    finally:
        for member in members:
            member.stop()
