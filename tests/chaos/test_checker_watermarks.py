"""The chaos checker survives a partition without a leader at the end of a campaign:
it asks again after retriable errors and reports what never answered (no cluster)."""

from __future__ import annotations

import confluent_kafka
import pytest

from .checker import Verdict, read_high_watermarks


def _not_leader() -> confluent_kafka.KafkaException:
    return confluent_kafka.KafkaException(
        confluent_kafka.KafkaError(confluent_kafka.KafkaError.NOT_LEADER_FOR_PARTITION)
    )


def test_a_high_watermark_is_asked_again_while_the_leader_moves() -> None:
    answers = {0: [_not_leader(), _not_leader(), 42], 1: [7]}

    def query(partition: int) -> int:
        answer = answers[partition].pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    verdict = Verdict()
    read_high_watermarks(query, 2, verdict, wait_s=5, backoff_s=0.01)
    assert verdict.high_watermarks == {0: 42, 1: 7}
    assert verdict.unread == []


@pytest.mark.parametrize("code", ["NOT_LEADER_FOR_PARTITION", "INVALID_REQUEST"])
def test_a_partition_without_a_high_watermark_is_reported_unavailable(code: str) -> None:
    def query(partition: int) -> int:
        if partition == 1:
            raise confluent_kafka.KafkaException(
                confluent_kafka.KafkaError(getattr(confluent_kafka.KafkaError, code))
            )
        return 5

    verdict = Verdict()
    read_high_watermarks(query, 3, verdict, wait_s=0.2, backoff_s=0.01)
    assert verdict.high_watermarks == {0: 5, 2: 5}
    assert len(verdict.unread) == 1 and verdict.unread[0].startswith("partition 1: unavailable")
    assert verdict.violations() == 1
