"""A partition leader (not the transaction coordinator) SIGKILLed while transactions
commit, on 3 brokers with replication factor 3 and ``min.insync.replicas=2`` (issue 15's
acceptance): every transaction ends committed or aborted on every partition, read_committed
never sees aborted data, and that still holds once the killed broker is back and has
caught up.

make test runs one run; ``GREGOR_LONG_TESTS=1`` (``make test-long``) runs 20 more, each
on a fresh cluster with its own kill moment. Counts: docs/transactions.md.
"""

from __future__ import annotations

import random
import time

import pytest

from .group_helpers import wait_until
from .txn_client_helpers import (
    TXN_BROKER_PROPERTIES,
    CommitLoop,
    check_all_or_nothing,
    coordinator_address,
    create_rf3_topic,
    partition_leaders,
    transactional_producer,
    wait_for_state,
)

PARTITIONS = 3
TOPICS = ["lead-a", "lead-b"]
LONG_RUNS = 20


def _leader_killed_mid_commit(cluster_factory, seed: int) -> None:
    rng = random.Random(seed)
    cluster = cluster_factory(timeout=180, **TXN_BROKER_PROPERTIES)
    bootstrap = cluster.bootstrap_servers
    for topic in TOPICS:
        create_rf3_topic(bootstrap, topic, PARTITIONS)
    transactional_id = f"killed-leader-{seed}"
    producer = transactional_producer(bootstrap, transactional_id)
    producer.init_transactions(60)
    coordinator, _host, _port = coordinator_address(bootstrap, transactional_id)
    leaders = {
        leader
        for topic in TOPICS
        for leader in partition_leaders(bootstrap, topic).values()
        if leader != coordinator
    }
    assert leaders, "every partition is led by the coordinator"
    victim = rng.choice(sorted(leaders))
    loop = CommitLoop(producer, TOPICS, PARTITIONS)
    loop.start()
    first = rng.randint(3, 10)
    wait_until(
        lambda: len(loop.committed) >= first or bool(loop.failures),
        60,
        "commits before the kill",
    )
    # Strike while a commit is in flight: the markers are on their way to the leaders.
    loop.commit_started.clear()
    assert loop.commit_started.wait(60)
    time.sleep(rng.uniform(0.0, 0.05))
    cluster.broker(victim).kill()
    struck = loop.in_commit
    loop.stop()
    assert coordinator_address(bootstrap, transactional_id)[0] == coordinator
    wait_for_state(bootstrap, transactional_id, {"CompleteCommit", "CompleteAbort"}, timeout=90)
    before = check_all_or_nothing(bootstrap, loop)
    # The killed leader comes back, truncates to its new leader's log and catches up.
    cluster.broker(victim).restart()
    after = check_all_or_nothing(bootstrap, loop)
    assert after == before
    moment = "between commits" if struck is None else f"during the commit of {struck}"
    print(
        f"leader {victim} killed {moment} (coordinator {coordinator}): "
        f"{len(loop.attempted)} transactions, {len(loop.committed)} committed, "
        f"{len(loop.aborted)} aborted"
    )


def test_partition_leader_killed_mid_commit(cluster_factory):
    _leader_killed_mid_commit(cluster_factory, seed=1)


@pytest.mark.long
@pytest.mark.parametrize("run", range(LONG_RUNS))
def test_partition_leader_killed_mid_commit_repeatedly(cluster_factory, run):
    _leader_killed_mid_commit(cluster_factory, seed=1000 + run)
