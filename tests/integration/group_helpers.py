"""Helpers of the consumer-group tests: member processes, producing, offsets."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import confluent_kafka
import confluent_kafka.admin

MEMBER_SCRIPT = Path(__file__).with_name("group_member.py")

# Fast group settings for tests: no initial rebalance delay, short sessions.
GROUP_BROKER_PROPERTIES = {
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "5",
}


def wait_until(
    predicate: Callable[[], bool],
    timeout: float,
    what: str,
    members: list[MemberProcess] | None = None,
) -> float:
    """Poll ``predicate`` until true; returns the time it took, fails with ``what``.

    With ``members``, a member process that died fails the wait at once, and a failure
    shows each member's rebalance events and the end of its stderr.
    """
    started = time.monotonic()
    while not predicate():
        dead = [m for m in members or [] if m.exited()]
        if dead or time.monotonic() - started > timeout:
            problem = (
                f"{len(dead)} member(s) exited" if dead else f"timed out after {timeout:.0f} s"
            )
            details = "".join(m.diagnostics() for m in members or [])
            raise AssertionError(f"{problem} waiting for {what}{details}")
        time.sleep(0.05)
    return time.monotonic() - started


@dataclass
class Event:
    kind: str
    at: float
    partitions: frozenset[int]


@dataclass
class MemberProcess:
    """One consumer-group member, a real subprocess (see group_member.py)."""

    client: str
    bootstrap: str
    group: str
    topic: str
    out: Path
    config: dict[str, object] = field(default_factory=dict)
    process: subprocess.Popen[bytes] | None = None
    ended: bool = False  # the test killed or stopped it

    def start(self) -> MemberProcess:
        args = [sys.executable, str(MEMBER_SCRIPT), self.client, self.bootstrap, self.group]
        args += [self.topic, str(self.out), json.dumps(self.config)]
        self.process = subprocess.Popen(
            args,
            stdout=subprocess.DEVNULL,
            stderr=open(f"{self.out}.stderr", "ab"),  # noqa: SIM115
        )
        return self

    def lines(self) -> list[str]:
        if not self.out.exists():
            return []
        return self.out.read_text().splitlines()

    def events(self) -> list[Event]:
        found = []
        for line in self.lines():
            kind, _, rest = line.partition(" ")
            if kind in ("ASSIGN", "REVOKE", "OWNED"):
                at, _, parts = rest.partition(" ")
                partitions = frozenset(int(p) for p in parts.split(",") if p)
                found.append(Event(kind, float(at), partitions))
        return found

    def owned(self) -> frozenset[int]:
        owned = [e for e in self.events() if e.kind == "OWNED"]
        return owned[-1].partitions if owned else frozenset()

    def processed(self) -> list[tuple[int, int, str]]:
        result = []
        for line in self.lines():
            if line.startswith("MSG "):
                _, partition, offset, value = line.split(" ", 3)
                result.append((int(partition), int(offset), value))
        return result

    def exited(self) -> bool:
        """Whether the process ended on its own (not killed or stopped by the test)."""
        return self.process is not None and not self.ended and self.process.poll() is not None

    def diagnostics(self, lines: int = 25) -> str:
        """The member's rebalance events and the end of its stderr, for a failure."""
        events = [line for line in self.lines() if not line.startswith("MSG ")][-lines:]
        stderr = Path(f"{self.out}.stderr")
        errors = stderr.read_text(errors="replace").splitlines()[-lines:] if stderr.exists() else []
        status = self.process.poll() if self.process is not None else "not started"
        return (
            f"\n--- {self.out.name} (exit status {status}, "
            f"{len(self.processed())} messages processed)\n"
            + "\n".join(events)
            + "\n--- stderr:\n"
            + "\n".join(errors)
        )

    def kill(self) -> None:
        assert self.process is not None
        self.ended = True
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def stop(self, timeout: float = 30) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.ended = True
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics(
        [confluent_kafka.admin.NewTopic(name, partitions, 1)]
    ).values():
        future.result(30)


def produce(bootstrap: str, topic: str, values: list[str], partitions: int) -> None:
    """Produce ``values`` round-robin over the partitions; every one acknowledged."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    failures: list[object] = []
    for i, value in enumerate(values):
        producer.produce(
            topic,
            value.encode(),
            partition=i % partitions,
            on_delivery=lambda error, _m: error is not None and failures.append(error),
        )
    assert producer.flush(30) == 0
    assert failures == []


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "ends"})
    try:
        return {
            p: consumer.get_watermark_offsets(confluent_kafka.TopicPartition(topic, p), 10)[1]
            for p in range(partitions)
        }
    finally:
        consumer.close()


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    # A fresh client each time (quiet: log_level 4), so that broker restarts do not matter.
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap, "log_level": 4})
    request = confluent_kafka.ConsumerGroupTopicPartitions(
        group, [confluent_kafka.TopicPartition(topic, p) for p in range(partitions)]
    )
    result = admin.list_consumer_group_offsets([request])[group].result(10)
    return {tp.partition: tp.offset for tp in result.topic_partitions}
