"""GregorRebalance resources: compute a plan (``rebalancing.compute_plan``), show it in
status, and execute it only once the resource carries ``gregor.dev/approve: "true"``.

Phases: PendingApproval -> Executing -> Completed, or Refused (the plan is impossible) or
Stopped (``spec.stop: true``: moves not yet started are dropped; a reassignment already in
ZooKeeper finishes, as Kafka's cannot be cancelled half-way here). The plan lives in status,
so a restarted operator continues an approved rebalance where it was.
"""

from __future__ import annotations

import logging
from typing import Any

import kopf

from gregor_operator import metrics
from gregor_operator.handlers.common import APPROVE_ANNOTATION, GROUP, VERSION, Context
from gregor_operator.planners.rebalance import PlanRefused
from gregor_operator.rebalancing import (
    compute_plan,
    describe,
    finish_moves,
    moves_done,
    plan_from_json,
    plan_to_json,
    read_cluster,
    start_moves,
)
from gregor_operator.status import conditions
from gregor_operator.zookeeper import CONNECTION_ERRORS, ZooKeeperUnavailable

log = logging.getLogger(__name__)
PENDING, EXECUTING, COMPLETED, REFUSED, STOPPED = (
    "PendingApproval", "Executing", "Completed", "Refused", "Stopped",
)  # fmt: skip


def register(registry: kopf.OperatorRegistry, ctx: Context) -> None:
    def step(body: Any, patch: Any, gregor_clusters: Any) -> None:
        metadata, spec = body["metadata"], body["spec"]
        namespace, name = metadata["namespace"], metadata["name"]
        status = body.get("status") or {}
        phase = status.get("phase")
        if phase in (COMPLETED, REFUSED, STOPPED):
            return
        found = list(gregor_clusters.get((namespace, spec["cluster"]), ()))
        if not found or not found[0].get("connect"):
            message = (
                f"GregorRebalance {namespace}/{name}: GregorCluster {spec['cluster']} not found"
            )
            patch.status["conditions"] = conditions(
                status.get("conditions"), ready=False, error=message, reason="ClusterNotFound"
            )
            return
        throttle = int(
            spec.get("throttleBytesPerSecond") or found[0].get("throttle")
            or ctx.config.default_throttle
        )  # fmt: skip
        admin = ctx.sessions.admin(found[0]["connect"])
        if phase is None:
            view = read_cluster(admin, spec.get("excludedTopics") or ())
            mode = spec.get("mode", "full")
            try:
                plan = compute_plan(view, mode, spec.get("brokers") or ())
            except PlanRefused as refusal:
                message = f"GregorRebalance {namespace}/{name}: {refusal}"
                patch.status.update(phase=REFUSED, conditions=conditions(
                    None, ready=False, error=message, reason=REFUSED))  # fmt: skip
                kopf.warn(body, reason="PlanRefused", message=message)
                metrics.PLANS.labels("GregorRebalance", "refused").inc()
                return
            info = describe(view, mode, plan)
            patch.status.update(
                phase=PENDING,
                plan=info,
                moves=plan_to_json(plan),
                observedGeneration=metadata.get("generation"),
                conditions=conditions(
                    None, ready=False, reason=PENDING,
                    message=f"{info['replicaMoves']} replica moves planned; annotate "
                    f'{APPROVE_ANNOTATION}="true" to execute',
                ),
            )  # fmt: skip
            return
        plan = plan_from_json(status.get("moves") or {})
        if spec.get("stop"):
            patch.status.update(phase=STOPPED, conditions=conditions(
                status.get("conditions"), ready=False, reason=STOPPED,
                message="stopped by spec.stop"))  # fmt: skip
            finish_moves(admin, plan)
            return
        approved = (metadata.get("annotations") or {}).get(APPROVE_ANNOTATION) == "true"
        if phase == PENDING and approved:
            if spec.get("mode") == "preferred-leaders":
                elect = [tuple(p.rsplit("-", 1)) for p in status["plan"].get(
                    "preferredLeaderElections", [])]  # fmt: skip
                if elect:
                    admin.request_preferred_replica_election((t, int(p)) for t, p in elect)
                patch.status["phase"] = COMPLETED
                return
            if not start_moves(admin, plan, throttle):
                return  # another reassignment is in flight: try again on the next timer
            kopf.info(
                body,
                reason="PlanApplied",
                message=f"executing {plan.replica_moves} replica moves at {throttle} B/s",
            )
            metrics.PLANS.labels("GregorRebalance", "applied").inc()
            phase = EXECUTING
        if phase == EXECUTING:
            done, total = moves_done(admin, plan)
            patch.status["progress"] = {"partitionsMoved": done, "partitionsTotal": total}
            if done == total:
                finish_moves(admin, plan)
                phase = COMPLETED
                kopf.info(body, reason="Completed", message=f"moved {total} partitions")
            patch.status["phase"] = phase
            patch.status["conditions"] = conditions(
                status.get("conditions"), ready=phase == COMPLETED,
                reconciling=phase == EXECUTING, reason=phase,
                message=f"{done}/{total} partitions moved",
            )  # fmt: skip

    @kopf.on.create(GROUP, VERSION, "gregorrebalances", registry=registry)
    @kopf.on.resume(GROUP, VERSION, "gregorrebalances", registry=registry)
    @kopf.on.update(GROUP, VERSION, "gregorrebalances", registry=registry)
    def reconcile_rebalance(body: Any, patch: Any, gregor_clusters: Any, **_: Any) -> None:
        try:
            step(body, patch, gregor_clusters)
        except (ZooKeeperUnavailable, *CONNECTION_ERRORS) as error:
            raise kopf.TemporaryError(str(error), delay=ctx.config.status_interval) from error

    @kopf.timer(
        GROUP, VERSION, "gregorrebalances", interval=ctx.config.status_interval, registry=registry
    )
    def progress_rebalance(body: Any, patch: Any, gregor_clusters: Any, **_: Any) -> None:
        if body["metadata"].get("deletionTimestamp"):
            return
        try:
            step(body, patch, gregor_clusters)
        except (ZooKeeperUnavailable, *CONNECTION_ERRORS) as error:
            log.warning("rebalance %s: %s", body["metadata"]["name"], error)
