"""GregorCluster resources: the owned objects (``planners.cluster_objects``), safe scaling
(``planners.scaling``: replicas move before a broker goes), and preferred-leader
rebalancing every check interval (its own fixed schedule, ``Periodic.on_schedule``: a check
is never later than one interval after the previous one, whatever the reconcile steps do).

One reconcile step runs on create/update/resume and every status interval (``periodic``:
not a kopf timer, which would put a finalizer on the resource); each step observes
(StatefulSet, ZooKeeper), asks the planner what to do, does it, and writes the phase and
progress to status. The plan in flight lives in status, so a restarted operator picks up
where the last one stopped.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import kopf

from gregor_broker.cluster.reassignment import imbalanced_brokers
from gregor_operator import metrics
from gregor_operator.handlers.common import GROUP, VERSION, Context
from gregor_operator.periodic import Periodic
from gregor_operator.planners.cluster_objects import (
    CONFIG_HASH_ANNOTATION,
    POD_INDEX_LABEL,
    label_selector,
    render,
)
from gregor_operator.planners.cluster_objects import (
    labels as cluster_labels,
)
from gregor_operator.planners.cluster_security import SecurityRefused
from gregor_operator.planners.rebalance import plan_preferred_leaders
from gregor_operator.planners.rolling import BrokerPod, plan_roll
from gregor_operator.planners.scaling import (
    CREATING,
    DEGRADED,
    REFUSED,
    RUNNING,
    Observation,
    plan_step,
)
from gregor_operator.rebalancing import (
    bytes_progress,
    finish_moves,
    moves_done,
    plan_from_json,
    plan_to_json,
    read_cluster,
    replica_sizes,
    roll_observation,
    start_moves,
)
from gregor_operator.status import conditions
from gregor_operator.zookeeper import CONNECTION_ERRORS, ZooKeeperUnavailable

log = logging.getLogger(__name__)
REAPPLY_S = 60.0
ROLLING = "RollingRestart"
ROLL_REFUSED = "RollingRestartRefused"


def register(registry: kopf.OperatorRegistry, ctx: Context, periodic: Periodic) -> None:
    applied: dict[str, tuple[str, float]] = {}  # uid -> (owned objects as applied, when)
    # uid -> the last step's phase, message and plan: the status in kopf's body may lag one
    # step behind (a timer and an update handler in a row), ZooKeeper state never does.
    memory: dict[str, dict[str, Any]] = {}

    api = ctx.kube

    def step(body: Any, patch: Any) -> None:
        uid = body["metadata"].get("uid") or body["metadata"]["name"]
        with ctx.locks[uid]:
            # A timer's body can be older than an update just handled: decide on the current
            # spec, never on a stale one (a stale smaller replicas reads as a scale-down),
            # and on the last step's phase and plan (kept in memory; status on a restart).
            fresh = api().get_custom(
                "gregorclusters", body["metadata"]["namespace"], body["metadata"]["name"]
            )
            if fresh is None:
                return
            try:
                locked_step(fresh, patch, uid)
            except SecurityRefused as error:
                where = f"{body['metadata']['namespace']}/{body['metadata']['name']}"
                message = f"GregorCluster {where}: {error}"
                patch.status["conditions"] = conditions(
                    (fresh.get("status") or {}).get("conditions"),
                    ready=False, error=message, reason="Refused",
                )  # fmt: skip
                api().post_event(fresh, "Warning", "PlanRefused", message)

    def locked_step(body: Any, patch: Any, uid: str) -> None:
        metadata, spec = body["metadata"], body["spec"]
        namespace, name = metadata["namespace"], metadata["name"]
        status = dict(body.get("status") or {})
        status.update(memory.get(uid, {}))
        rebalancing = spec.get("rebalancing") or {}
        throttle = int(rebalancing.get("throttleBytesPerSecond") or ctx.config.default_throttle)
        statefulset = api().get("StatefulSet", namespace, name)
        current = statefulset["spec"]["replicas"] if statefulset else None
        admin = ctx.sessions.admin(spec["zookeeper"]["connect"])
        view = read_cluster(admin)
        plan = plan_from_json(status["plan"]) if status.get("plan") else None
        done, total = moves_done(admin, plan) if plan else (0, 0)
        in_flight = admin.get_reassignment() is not None
        observed = Observation(
            desired=int(spec["replicas"]),
            statefulset=current,
            registered=view.brokers,
            assignment=view.assignment,
            isr=view.isr,
            phase=status.get("phase") or CREATING,
            plan=plan,
            # Done once the controller has dropped the request too: only then can
            # finish_moves clear the throttles (the plan is forgotten right after).
            plan_done=plan is not None and done == total and not in_flight,
            reassignment_in_flight=in_flight,
            auto_rebalance=rebalancing.get("autoRebalanceOnScale", True),
        )
        decided = plan_step(observed)
        replicas = decided.statefulset if decided.statefulset is not None else current
        kept = ((statefulset or {}).get("spec") or {}).get("selector", {}).get("matchLabels")
        apply_owned(body, render(name, namespace, spec, replicas, kept), uid)
        if plan is not None and done == total and decided.plan is None:
            finish_moves(admin, plan)
        phase, message = decided.phase, decided.message
        if decided.start is not None and not start_moves(admin, decided.start, throttle):
            phase, message = (
                status.get("phase") or RUNNING,
                "waiting: a reassignment is in flight",
            )
            decided_plan = plan
        else:
            decided_plan = decided.plan
        if decided.statefulset is not None and decided.statefulset != current:
            log.info("cluster %s/%s: StatefulSet replicas %s -> %s", namespace, name,
                     current, decided.statefulset)  # fmt: skip
        for event in decided.events:
            log.info("cluster %s/%s: %s", namespace, name, event)
            api().post_event(body, "Normal", "PlanApplied", event)
            metrics.PLANS.labels("GregorCluster", "applied").inc()
        if decided.refused and status.get("message") != decided.refused:
            log.info("cluster %s/%s: refused: %s", namespace, name, decided.refused)
            api().post_event(body, "Warning", "PlanRefused", decided.refused)
            metrics.PLANS.labels("GregorCluster", "refused").inc()
        pods = broker_pods(namespace, name)
        refused = decided.refused
        rolling = None
        quiet = decided.start is None and decided.statefulset in (None, current)
        if phase in (RUNNING, DEGRADED) and quiet and not observed.reassignment_in_flight:
            observation = roll_observation(admin, view, spec, current or 0, pods)
            rolling = plan_roll(observation, status.get("phase") == ROLLING)
        if rolling is not None:
            phase = ROLL_REFUSED if rolling.refused else ROLLING
            message, refused = rolling.message, rolling.refused
            if rolling.refused and status.get("message") != rolling.message:
                log.info("cluster %s/%s: %s", namespace, name, rolling.refused)
                api().post_event(body, "Warning", "PlanRefused", rolling.refused)
                metrics.PLANS.labels("GregorCluster", "refused").inc()
            if rolling.restart is not None:
                pod = pods[rolling.restart]
                event = f"{rolling.message}: deleting pod {pod.name} (template changed)"
                log.info("cluster %s/%s: %s", namespace, name, event)
                api().post_event(body, "Normal", "RollingRestart", event)
                metrics.PLANS.labels("GregorCluster", "applied").inc()
                api().delete("Pod", namespace, pod.name)
        elif status.get("phase") in (ROLLING, ROLL_REFUSED) and phase == RUNNING:
            api().post_event(body, "Normal", "RollingRestart", "every broker runs the new template")
        memory[uid] = {
            "phase": phase,
            "message": message,
            "plan": plan_to_json(decided_plan) if decided_plan is not None else None,
        }
        led: dict[int, int] = {}
        held: dict[int, int] = {}
        for key, assigned in view.assignment.items():
            leader = view.leaders.get(key, -1)
            led[leader] = led.get(leader, 0) + 1
            for replica in assigned:
                held[replica] = held.get(replica, 0) + 1
        metrics.CLUSTER_BROKERS.labels(f"{namespace}/{name}").set(len(view.brokers))
        sts_status = (statefulset or {}).get("status") or {}
        progress = None
        if decided_plan is not None:
            done, total = moves_done(admin, decided_plan)
            # Bytes as a GregorRebalance counts them: what the added replicas hold
            # (DescribeLogDirs; a broker that does not answer within 3 s holds nothing).
            moved, to_move = bytes_progress(decided_plan, replica_sizes(admin, timeout=3.0))
            progress = {
                "partitionsMoved": done, "partitionsTotal": total,
                "bytesMoved": moved, "bytesTotal": to_move,
            }  # fmt: skip
        patch.status.update(
            {
                "observedGeneration": metadata.get("generation"),
                "replicas": replicas,
                "readyReplicas": sts_status.get("readyReplicas", 0),
                "labelSelector": label_selector(name),
                "phase": phase,
                "message": message,
                "plan": plan_to_json(decided_plan) if decided_plan is not None else None,
                "progress": progress,
                "rollingRestart": {
                    "brokersPending": list(rolling.pending),
                    "brokersUpdated": [b for b in range(current or 0) if b not in rolling.pending],
                    "restarting": rolling.restart,
                }
                if rolling is not None
                else None,
                "brokers": [
                    {
                        "id": broker,
                        "rack": rack or "",
                        "ready": broker in pods and pods[broker].ready,
                        "partitionsLed": led.get(broker, 0),
                        "partitionsHeld": held.get(broker, 0),
                    }
                    for broker, rack in sorted(view.brokers.items())
                ],
                "conditions": conditions(
                    status.get("conditions"),
                    ready=phase == RUNNING,
                    reconciling=phase not in (RUNNING, REFUSED, ROLL_REFUSED),
                    error=refused,
                    reason=phase,
                    message=message,
                ),
            }
        )

    def apply_owned(body: Any, objects: list[dict[str, Any]], uid: str) -> None:
        """Create or merge the owned objects; unchanged ones only every REAPPLY_SECONDS
        (ten requests a step otherwise, which slow every step on a busy API server)."""
        rendered = json.dumps(objects, sort_keys=True)
        last = applied.get(uid)
        if last is not None and last[0] == rendered and time.monotonic() - last[1] < REAPPLY_S:
            return
        for obj in objects:
            kopf.adopt(obj, owner=body)
            api().apply(obj)
        applied[uid] = (rendered, time.monotonic())

    def broker_pods(namespace: str, name: str) -> dict[int, BrokerPod]:
        """The cluster's broker pods by ordinal, as the rolling restart sees them."""
        found: dict[int, BrokerPod] = {}
        for pod in api().list("Pod", namespace, label_selector(name)):
            meta = pod["metadata"]
            labels = meta.get("labels") or {}
            if any(labels.get(k) != v for k, v in cluster_labels(name).items()):
                continue  # the selector again: not every API server stand-in applies it
            index = labels.get(POD_INDEX_LABEL) or meta["name"].rsplit("-", 1)[-1]
            if not str(index).isdigit():
                continue
            states = (pod.get("status") or {}).get("conditions") or ()
            found[int(index)] = BrokerPod(
                name=meta["name"],
                config_hash=(meta.get("annotations") or {}).get(CONFIG_HASH_ANNOTATION),
                ready=any(c.get("type") == "Ready" and c.get("status") == "True" for c in states),
                terminating=bool(meta.get("deletionTimestamp")),
            )
        return found

    def leader_check_interval(body: Any) -> float:
        rebalancing = (body.get("spec") or {}).get("rebalancing") or {}
        return float(rebalancing.get("preferredLeaderCheckIntervalSeconds", 300))

    def check_preferred_leaders(body: Any) -> None:
        """Kafka's auto leader rebalance, from outside: when some broker leads fewer of
        the partitions it is the preferred replica of than the threshold allows, elect the
        preferred replicas that are in their ISR. Reads ZooKeeper itself, not a reconcile
        step's view, and takes no lock: a step in progress (a scale, a rolling restart
        waiting on an ISR) must not delay it past its interval."""
        spec, name = body["spec"], body["metadata"]["name"]
        try:
            admin = ctx.sessions.admin(spec["zookeeper"]["connect"])
            view = read_cluster(admin)
            threshold = int((spec.get("rebalancing") or {}).get("imbalanceThresholdPercent", 10))
            states = {k: (v, view.leaders.get(k, -1)) for k, v in view.assignment.items()}
            if not imbalanced_brokers(states, threshold):
                return
            partitions = plan_preferred_leaders(
                view.assignment, view.leaders, view.brokers, view.isr
            )
            if not partitions or admin.client.exists("/admin/preferred_replica_election"):
                return
            admin.request_preferred_replica_election(partitions)
        except (ZooKeeperUnavailable, *CONNECTION_ERRORS) as error:
            metrics.RECONCILE_ERRORS.labels("GregorCluster").inc()
            log.warning("cluster %s: preferred leader check: %s", name, str(error) or repr(error))
            return
        message = f"preferred leader election for {len(partitions)} partitions"
        log.info("cluster %s: %s", name, message)
        api().post_event(body, "Normal", "PlanApplied", message)
        metrics.PLANS.labels("GregorCluster", "applied").inc()

    periodic.on_schedule("gregorclusters", leader_check_interval, check_preferred_leaders)

    @kopf.on.create(GROUP, VERSION, "gregorclusters", registry=registry)
    @kopf.on.update(GROUP, VERSION, "gregorclusters", field="spec", registry=registry)
    @kopf.on.resume(GROUP, VERSION, "gregorclusters", registry=registry)
    def reconcile_cluster(body: Any, patch: Any, **_: Any) -> None:
        try:
            step(body, patch)
        except (ZooKeeperUnavailable, *CONNECTION_ERRORS) as error:
            metrics.RECONCILE_ERRORS.labels("GregorCluster").inc()
            raise kopf.TemporaryError(str(error), delay=ctx.config.status_interval) from error

    def step_cluster(body: Any) -> None:
        metadata = body["metadata"]
        patch = kopf.Patch()
        try:
            step(body, patch)
        except (ZooKeeperUnavailable, *CONNECTION_ERRORS) as error:
            metrics.RECONCILE_ERRORS.labels("GregorCluster").inc()
            log.warning("cluster %s: %s", metadata["name"], str(error) or repr(error))
            return
        if patch:
            api().patch_custom_status("gregorclusters", metadata["namespace"], metadata["name"],
                                      dict(patch))  # fmt: skip

    periodic.every("gregorclusters", step_cluster)

    @kopf.on.event(GROUP, VERSION, "gregorclusters", registry=registry)
    def track_gregorclusters(type: str | None, body: Any, **_: Any) -> None:
        periodic.track("gregorclusters", type, body)
