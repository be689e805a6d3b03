"""cooperative-sticky (KIP-429) with confluent-kafka: incremental rebalancing.

The broker only carries the protocol's subscriptions and assignments; the clients do
the incremental work. Two members own six partitions; a third joins. With a
cooperative protocol the first two keep consuming the partitions they keep: each gives
up only the partitions that move (no stop-the-world revocation of everything), and the
newcomer ends up with its share.
"""

from __future__ import annotations

from .group_helpers import (
    GROUP_BROKER_PROPERTIES,
    MemberProcess,
    create_topic,
    produce,
    wait_until,
)

PARTITIONS = 6


def test_cooperative_sticky_moves_only_the_partitions_that_change_owner(
    broker_factory, tmp_path
) -> None:
    broker = broker_factory(**GROUP_BROKER_PROPERTIES)
    bootstrap = broker.bootstrap
    topic, group = "clicks", "sessionizer"
    create_topic(bootstrap, topic, PARTITIONS)
    produce(bootstrap, topic, [f"c{i}" for i in range(60)], PARTITIONS)
    config = {
        "partition.assignment.strategy": "cooperative-sticky",
        # Generous: on a loaded CI machine a starved member must not be expired (that
        # makes librdkafka drop all its partitions, which is not what this test is about).
        "session.timeout.ms": 20000,
    }

    def member(i: int) -> MemberProcess:
        return MemberProcess(
            "confluent", bootstrap, group, topic, tmp_path / f"member-{i}.log", dict(config)
        )

    members = [member(0).start(), member(1).start()]
    try:
        wait_until(
            lambda: sorted(len(m.owned()) for m in members) == [3, 3],
            60,
            "two members to own three partitions each",
            members,
        )
        before = [m.owned() for m in members]
        # Only what happens from here on counts: on a slow machine the first member may
        # have owned all six partitions alone before the second joined.
        seen = [len(m.events()) for m in members]
        members.append(member(2).start())
        wait_until(
            lambda: (
                sorted(len(m.owned()) for m in members) == [2, 2, 2]
                and frozenset().union(*(m.owned() for m in members)) == frozenset(range(6))
            ),
            60,
            "three members to own two partitions each",
            members,
        )
        for old, owned_before, skip in zip(members[:2], before, seen, strict=True):
            kept = old.owned()
            assert kept <= owned_before, "an old member gained partitions it did not own"
            later = old.events()[skip:]
            revoked = set().union(*(e.partitions for e in later if e.kind == "REVOKE"))
            # Incremental: only the partition that moved was revoked, never the kept ones.
            assert revoked == owned_before - kept
            assert not revoked & kept
        assert all(e.kind != "REVOKE" or e.partitions for m in members for e in m.events()), (
            "an empty stop-the-world revocation happened"
        )
    finally:
        for m in members:
            m.stop()
