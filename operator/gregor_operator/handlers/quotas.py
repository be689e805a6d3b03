"""Quota resources → ``/config/users|clients/...`` in Kafka's format, then a
``/config/changes`` notification (``ZkAdmin.set_entity_config``); the node is deleted when
its config becomes empty (the resource is deleted). Finalizer released after bounded
retries when ZooKeeper is gone, as for topics.
"""

from __future__ import annotations

import logging
from typing import Any

import kopf

from gregor_operator import metrics
from gregor_operator.handlers.common import GROUP, VERSION, ClusterNotFound, Context, cluster_of
from gregor_operator.planners.quotas import plan_quota
from gregor_operator.status import conditions
from gregor_operator.zookeeper import CONNECTION_ERRORS, ZooKeeperUnavailable

log = logging.getLogger(__name__)
UNAVAILABLE = (ZooKeeperUnavailable, ClusterNotFound, *CONNECTION_ERRORS)


def register(registry: kopf.OperatorRegistry, ctx: Context) -> None:
    @kopf.on.create(GROUP, VERSION, "quotas", registry=registry)
    @kopf.on.update(GROUP, VERSION, "quotas", field="spec", registry=registry)
    @kopf.on.resume(GROUP, VERSION, "quotas", registry=registry)
    def reconcile_quota(
        body: Any, spec: Any, status: Any, namespace: str, name: str, patch: Any,
        gregor_clusters: Any, **_: Any,
    ):  # fmt: skip
        previous = status.get("conditions")
        plan = plan_quota(namespace, name, spec)
        patch.status["observedGeneration"] = body["metadata"].get("generation")
        if plan.refused:
            patch.status["conditions"] = conditions(
                previous, ready=False, error=plan.refused, reason="Refused"
            )
            kopf.warn(body, reason="PlanRefused", message=plan.refused)
            metrics.PLANS.labels("Quota", "refused").inc()
            return
        try:
            _, connect, _ = cluster_of(ctx, namespace, spec, gregor_clusters)
            admin = ctx.sessions.admin(connect)
            old_path = status.get("entityPath")
            if old_path and old_path != plan.entity_path:
                admin.set_entity_config(old_path, {})
            if admin.get_entity_config(plan.entity_path) != plan.config:
                admin.set_entity_config(plan.entity_path, plan.config)
                message = f"set quota {plan.entity_path} to {plan.config}"
                log.info("quota %s/%s: %s", namespace, name, message)
                kopf.info(body, reason="PlanApplied", message=message)
                metrics.PLANS.labels("Quota", "applied").inc()
        except UNAVAILABLE as error:
            patch.status["conditions"] = conditions(
                previous, ready=False, error=f"Quota {namespace}/{name}: {error}",
                reason="ZooKeeperUnavailable",
            )  # fmt: skip
            raise kopf.TemporaryError(str(error), delay=ctx.config.status_interval) from error
        patch.status["entityPath"] = plan.entity_path
        patch.status["conditions"] = conditions(
            previous, ready=True, message=f"{plan.entity_path}: {plan.config}"
        )

    @kopf.on.delete(GROUP, VERSION, "quotas", registry=registry)
    def delete_quota(
        body: Any, spec: Any, status: Any, namespace: str, name: str, retry: int,
        gregor_clusters: Any, **_: Any,
    ):  # fmt: skip
        path = status.get("entityPath") or plan_quota(namespace, name, spec).entity_path
        if not path:
            return
        try:
            _, connect, _ = cluster_of(ctx, namespace, spec, gregor_clusters)
            ctx.sessions.admin(connect).set_entity_config(path, {})
            kopf.info(body, reason="PlanApplied", message=f"removed quota {path}")
        except UNAVAILABLE as error:
            if retry + 1 < ctx.config.finalizer_retries:
                raise kopf.TemporaryError(
                    str(error), delay=ctx.config.finalizer_retry_delay
                ) from error
            message = (
                f"Quota {namespace}/{name}: finalizer released after {retry + 1} attempts "
                f"without removing {path}: {error}. If the cluster still exists, remove it "
                "with: gregor quotas delete"
            )
            log.warning(message)
            kopf.warn(body, reason="FinalizerReleased", message=message)
