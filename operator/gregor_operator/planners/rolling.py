"""Which broker a rolling restart restarts next, if any (pure).

The StatefulSet is ``OnDelete``: a changed pod template (configs, image, resources; the
``gregor.dev/config-hash`` annotation) reaches a broker only when the operator deletes its
pod. Like Strimzi's KafkaRoller, one broker at a time, and only safely:

- before each restart, every broker already on the new template must be Ready, registered
  and back in the ISR of every partition it replicates (so the previous restart is over);
- a broker is restarted only if every partition whose ISR it is in keeps at least
  ``min.insync.replicas`` in-sync replicas without it (its controlled shutdown then moves
  leadership away and leaves the ISR; acks=all producers keep writing);
- brokers that are not Ready go first (they serve nothing), the controller last;
- a partition that would go offline (the broker is its only in-sync replica) or can never
  keep its min ISR through a restart (replicas - 1 < min.insync.replicas) refuses that
  broker's restart, with the partitions and the fix named; partitions merely catching up
  make it wait. No timeout ever forces a restart.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

Key = tuple[str, int]


@dataclass(frozen=True)
class BrokerPod:
    name: str
    config_hash: str | None  # the pod's gregor.dev/config-hash annotation
    ready: bool
    terminating: bool = False


@dataclass(frozen=True)
class RollObservation:
    desired_hash: str
    replicas: int  # the StatefulSet's; brokers 0..replicas-1
    pods: Mapping[int, BrokerPod]  # by ordinal (= broker id); missing: not (re)created yet
    registered: frozenset[int]
    controller: int | None
    assignment: Mapping[Key, tuple[int, ...]]
    isr: Mapping[Key, tuple[int, ...]]
    min_isr: Mapping[str, int]  # per topic (topic override, else the brokers' default)


@dataclass(frozen=True)
class RollStep:
    pending: tuple[int, ...]  # brokers still on the old template
    restart: int | None = None  # delete this broker's pod now
    message: str = ""
    refused: str | None = None  # no pending broker can ever be restarted safely as things are


def _name(key: Key) -> str:
    return f"{key[0]}-{key[1]}"


def _few(keys: list[Key], limit: int = 5) -> str:
    names = ", ".join(_name(k) for k in sorted(keys)[:limit])
    return names + (f" and {len(keys) - limit} more" if len(keys) > limit else "")


def restart_blockers(broker: int, o: RollObservation) -> tuple[list[Key], list[Key], list[Key]]:
    """Partitions that stop ``broker``'s restart: ``(offline, never_safe, catching_up)``."""
    offline: list[Key] = []
    never_safe: list[Key] = []
    catching_up: list[Key] = []
    for key, replicas in o.assignment.items():
        isr = set(o.isr.get(key, ()))
        if broker not in replicas or broker not in isr:
            continue  # its restart does not shrink this ISR
        remaining = isr - {broker}
        wanted = o.min_isr.get(key[0], 1)
        if not remaining:
            offline.append(key)
        elif len(replicas) - 1 < wanted:
            never_safe.append(key)
        elif len(remaining) < wanted:
            catching_up.append(key)
    return offline, never_safe, catching_up


def _not_back(o: RollObservation, pending: tuple[int, ...]) -> str | None:
    """Why the last restart is not over yet (a pod missing or terminating, or a broker on
    the new template not Ready, not registered or not in every ISR); None when it is."""
    for b in range(o.replicas):
        pod = o.pods.get(b)
        if pod is None or pod.terminating:
            return f"waiting for broker {b}'s pod to be recreated"
    for b in range(o.replicas):
        if b in pending:
            continue
        if not o.pods[b].ready:
            return f"waiting for broker {b} (restarted) to be Ready"
        if b not in o.registered:
            return f"waiting for broker {b} to register"
        lagging = [k for k, r in o.assignment.items() if b in r and b not in o.isr.get(k, ())]
        if lagging:
            return (
                f"waiting for broker {b} to rejoin the ISR of {len(lagging)} partitions "
                f"({_few(lagging)})"
            )
    return None


def plan_roll(o: RollObservation, rolling: bool = False) -> RollStep | None:
    """The next step of a rolling restart; None when every broker runs the template (and,
    with ``rolling``, a roll was under way: once the last restarted broker is back)."""
    brokers = range(o.replicas)
    pending = tuple(b for b in brokers if b in o.pods and o.pods[b].config_hash != o.desired_hash)
    if not pending and not rolling:
        return None
    waiting = _not_back(o, pending)
    if waiting is not None:
        return RollStep(pending, message=waiting)
    if not pending:
        return None
    waits: list[str] = []
    refusals: list[str] = []
    order = sorted(pending, key=lambda b: (b == o.controller, o.pods[b].ready, b))
    for b in order:
        if b == o.controller and len(pending) > 1:
            continue  # the controller goes last
        offline, never_safe, catching_up = restart_blockers(b, o)
        if offline:
            refusals.append(
                f"restarting broker {b} would take {_few(offline)} offline (broker {b} is "
                "its only in-sync replica)"
            )
        elif never_safe:
            refusals.append(
                f"restarting broker {b} would take {_few(never_safe)} below "
                "min.insync.replicas (too few replicas to restart any of them safely)"
            )
        elif catching_up:
            waits.append(
                f"broker {b}: {_few(catching_up)} would drop below min.insync.replicas; "
                "waiting for their ISR to fill"
            )
        else:
            done = o.replicas - len(pending)
            return RollStep(
                pending,
                restart=b,
                message=f"restarting broker {b} ({done} of {o.replicas} brokers updated)",
            )
    if waits:
        return RollStep(pending, message="; ".join(waits))
    reason = "; ".join(refusals)
    return RollStep(
        pending,
        message=reason,
        refused=f"rolling restart refused: {reason}. Raise those topics' replication factor "
        "(Topic spec.replicas) or lower their min.insync.replicas; to accept the outage, "
        "delete the broker's pod by hand",
    )
