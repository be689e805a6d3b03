"""``bench.round_trip`` on a real 3-broker cluster, one short run.

The figures it reports (CPU per acknowledged message) are only as good as its
attribution: the partition's leader must be the broker that answered the Produce
requests, the followers must have fetched what was acknowledged (RF=3: both followers in
sync; a follower's fetch carries every produce the client pipelined meanwhile, at most
``MAX_OWED_ANSWERS`` of them, so at least two fetches per that many messages), and the
followers must have done work of their own.
"""

from __future__ import annotations

from pathlib import Path

from bench import round_trip
from gregor_broker.server.connection import MAX_OWED_ANSWERS


def test_round_trip_attributes_each_brokers_share_of_an_acks_all_message(
    tmp_path: Path,
) -> None:
    (result,) = round_trip.run(tmp_path, partitions=1, reps=1, seconds=1, batched=False)

    assert result["messages_per_s"] > 0, result
    leaders = [b for b in result["brokers"] if b["leader"]]
    followers = [b for b in result["brokers"] if not b["leader"]]
    assert len(leaders) == 1 and len(followers) == 2, result
    (leader,) = leaders
    # At least one Produce per acknowledged message (warm-up messages come on top), and
    # a fetch from each follower per round trip: both copy every message.
    assert leader["requests_per_message"]["Produce"] >= 1, result
    assert leader["requests_per_message"]["Fetch"] >= 2 / MAX_OWED_ANSWERS, result
    for follower in followers:
        assert "Produce" not in follower["requests_per_message"], result
        assert follower["cpu_us_per_message"] > 0, result


def test_round_trip_on_one_broker_measures_the_same_workload_at_rf_1(tmp_path: Path) -> None:
    """``--brokers 1``: one broker leads the partition at RF=1 and nobody fetches from it
    to replicate: the figure replication's cost is measured against."""
    (result,) = round_trip.run(tmp_path, partitions=1, reps=1, seconds=1, batched=False, brokers=1)

    assert result["messages_per_s"] > 0, result
    (broker,) = result["brokers"]
    assert broker["leader"], result
    assert broker["requests_per_message"]["Produce"] >= 1, result
    assert "Fetch" not in broker["requests_per_message"], result
    assert broker["cpu_us_per_message"] > 0, result
