"""GregorRebalance resources: compute a plan (``rebalancing.compute_plan``), show it in
status, and execute it only once the resource carries ``gregor.dev/approve: "true"``.

Phases: PendingApproval -> Executing -> Completed, or Refused (the plan is impossible), or
Stopping -> Stopped (``spec.stop: true``: a KIP-455 cancel, every partition still moving is
reassigned back to its original replicas; finished moves stay). Bytes to move come from
the brokers' DescribeLogDirs, and so does progress in bytes. The plan lives in status,
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
from gregor_operator.planners.rebalance import Plan, PlanRefused
from gregor_operator.rebalancing import (
    bytes_progress,
    cancel_moves,
    compute_plan,
    describe,
    finish_moves,
    moves_done,
    partition_sizes,
    plan_from_json,
    plan_to_json,
    read_cluster,
    replica_sizes,
    start_moves,
)
from gregor_operator.status import conditions
from gregor_operator.zookeeper import CONNECTION_ERRORS, ZooKeeperUnavailable

log = logging.getLogger(__name__)
PENDING, EXECUTING, COMPLETED, REFUSED, STOPPING, STOPPED = (
    "PendingApproval", "Executing", "Completed", "Refused", "Stopping", "Stopped",
)  # fmt: skip


def register(registry: kopf.OperatorRegistry, ctx: Context, periodic: Periodic) -> None:
    # uid -> what the last step wrote: the body a step gets (kopf's, or the event spy's)
    # can lag one step behind, and acting twice on one phase must not happen.
    memory: dict[str, dict[str, Any]] = {}

    def step(body: Any, patch: Any, gregor_clusters: Any) -> None:
        uid = body["metadata"].get("uid") or body["metadata"]["name"]
        with ctx.locks[uid]:
            status = {**(body.get("status") or {}), **memory.get(uid, {})}
            locked_step(body, status, patch, gregor_clusters)
            written = dict(patch.get("status") or {})
            memory.setdefault(uid, {}).update(
                {k: written[k] for k in ("phase", "moves", "plan", "cancelled") if k in written}
            )

    def locked_step(body: Any, status: dict[str, Any], patch: Any, gregor_clusters: Any) -> None:
        metadata, spec = body["metadata"], body["spec"]
        namespace, name = metadata["namespace"], metadata["name"]
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
            info = describe(view, mode, plan, partition_sizes(replica_sizes(admin)))
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
        if spec.get("stop") and phase in (PENDING, EXECUTING):
            # KIP-455 cancel: what still moves goes back to its original replicas.
            cancelled = cancel_moves(admin, plan) if phase == EXECUTING else []
            message = (
                f"stopped by spec.stop: {len(cancelled)} partitions moving back to their "
                "original replicas" if cancelled else "stopped by spec.stop before moving"
            )  # fmt: skip
            phase = STOPPING if cancelled else STOPPED
            patch.status.update(
                phase=phase,
                cancelled=[f"{t}-{p}" for t, p in cancelled],
                conditions=conditions(
                    status.get("conditions"), ready=False, reconciling=bool(cancelled),
                    reason=phase, message=message,
                ),
            )  # fmt: skip
            ctx.kube().post_event(body, "Normal", "Stopped", message)
            if not cancelled:
                finish_moves(admin, plan)
            return
        if phase == STOPPING:
            reverted = [tuple(k.rsplit("-", 1)) for k in status.get("cancelled") or ()]
            back = Plan({(t, int(p)): plan.current[(t, int(p))] for t, p in reverted}, plan.current)
            done, total = moves_done(admin, back)
            if done == total and finish_moves(admin, plan):
                phase = STOPPED
                ctx.kube().post_event(
                    body, "Normal", "Stopped", f"{total} partitions back on their original replicas"
                )
            patch.status["phase"] = phase
            patch.status["conditions"] = conditions(
                status.get("conditions"), ready=False, reconciling=phase == STOPPING, reason=phase,
                message=f"{done}/{total} cancelled partitions back on their original replicas",
            )  # fmt: skip
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
            moved, to_move = bytes_progress(plan, replica_sizes(admin))
            patch.status["progress"] = {
                "partitionsMoved": done, "partitionsTotal": total,
                "bytesMoved": moved, "bytesTotal": to_move,
            }  # fmt: skip
            # Completed once the throttles are gone too (else a later step never would).
            if done == total and finish_moves(admin, plan):
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
