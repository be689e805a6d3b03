"""Static membership (KIP-345): a member restarted under the same group.instance.id
within the session timeout takes its old place without a rebalance.

Three confluent-kafka members with group.instance.id share six partitions. One is
killed with SIGKILL (so it cannot leave) and restarted at once. The coordinator maps
the new member id onto the old instance and hands back the old assignment: the other
members see no revoke or assign callback, and the restarted one owns what it owned.
"""

from __future__ import annotations

import time

from .group_helpers import GROUP_BROKER_PROPERTIES, MemberProcess, create_topic, wait_until

PARTITIONS = 6


def test_a_static_member_restarted_within_the_session_timeout_causes_no_rebalance(
    broker_factory, tmp_path
) -> None:
    broker = broker_factory(**GROUP_BROKER_PROPERTIES)
    bootstrap = broker.bootstrap
    topic, group = "sensors", "dashboards"
    create_topic(bootstrap, topic, PARTITIONS)

    def member(i: int, run: int) -> MemberProcess:
        return MemberProcess(
            "confluent",
            bootstrap,
            group,
            topic,
            tmp_path / f"member-{i}-run-{run}.log",
            {"group.instance.id": f"dashboard-{i}", "session.timeout.ms": 20000},
        )

    members = [member(i, 0).start() for i in range(3)]
    try:
        wait_until(
            lambda: sorted(len(m.owned()) for m in members) == [2, 2, 2],
            60,
            "three static members to own two partitions each",
            members,
        )
        before = {i: m.owned() for i, m in enumerate(members)}
        events_before = [len(m.events()) for m in members[1:]]

        members[0].kill()
        restarted = member(0, 1).start()
        members.append(restarted)
        wait_until(
            lambda: restarted.owned() == before[0],
            30,
            "the restarted member's assignment",
            members,
        )
        # Give a rebalance, if one were coming, time to show up in the others' callbacks.
        time.sleep(3)
        assert [len(m.events()) for m in members[1:3]] == events_before, (
            "a rebalance reached the other members"
        )
        assert {i: members[i].owned() for i in (1, 2)} == {i: before[i] for i in (1, 2)}
        assert [e.kind for e in restarted.events()] == ["ASSIGN", "OWNED"]
    finally:
        for m in members:
            m.stop()
