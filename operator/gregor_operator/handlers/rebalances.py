"""GregorRebalance resources: compute a plan (``rebalancing.compute_plan``), show it in
status, and execute it only once the resource carries ``gregor.dev/approve: "true"``.

Phases: PendingApproval -> Executing -> Completed, or Refused (the plan is impossible) or
Stopped (``spec.stop: true``: moves not yet started are dropped; a reassignment already in
ZooKeeper finishes, as Kafka's cannot be cancelled half-way here). The plan lives in status,
so a restarted operator continues an approved rebalance where it was. Progress is checked
every status interval by ``periodic`` (not a kopf timer: that would add a finalizer).
"""

from __future__ import annotations

import logging
from typing import Any

import kopf

from gregor_operator import metrics
from gregor_operator.handlers.common import (
    APPROVE_ANNOTATION,
    GROUP,
    VERSION,
    Context,
    cluster_index_value,
)
from gregor_operator.periodic import Periodic
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


def register(registry: kopf.OperatorRegistry, ctx: Context, periodic: Periodic) -> None:
    def step(body: Any, patch: Any, gregor_clusters: Any) -> None:
        uid = body["metadata"].get("uid") or body["metadata"]["name"]
        with ctx.locks[uid]:
            locked_step(body, patch, gregor_clusters)

    def locked_step(body: Any, patch: Any, gregor_clusters: Any) -> None:
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
                ctx.kube().post_event(body, "Warning", "PlanRefused", message)
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
            ctx.kube().post_event(
                body, "Normal", "PlanApplied",
                f"executing {plan.replica_moves} replica moves at {throttle} B/s",
            )  # fmt: skip
            metrics.PLANS.labels("GregorRebalance", "applied").inc()
            phase = EXECUTING
        if phase == EXECUTING:
            done, total = moves_done(admin, plan)
            patch.status["progress"] = {"partitionsMoved": done, "partitionsTotal": total}
            if done == total:
                finish_moves(admin, plan)
                phase = COMPLETED
                ctx.kube().post_event(body, "Normal", "Completed", f"moved {total} partitions")
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

    def progress_rebalance(body: Any) -> None:
        metadata = body["metadata"]
        clusters = {
            key: [cluster_index_value(cluster.get("spec") or {})]
            for key, cluster in periodic.live("gregorclusters").items()
        }
        patch = kopf.Patch()
        try:
            step(body, patch, clusters)
        except (ZooKeeperUnavailable, *CONNECTION_ERRORS) as error:
            log.warning("rebalance %s: %s", metadata["name"], error)
            return
        if patch:
            ctx.kube().patch_custom_status(
                "gregorrebalances", metadata["namespace"], metadata["name"], dict(patch)
            )

    periodic.every("gregorrebalances", progress_rebalance)

    @kopf.on.event(GROUP, VERSION, "gregorrebalances", registry=registry)
    def track_gregorrebalances(type: str | None, body: Any, **_: Any) -> None:
        periodic.track("gregorrebalances", type, body)
