"""Topic resources → ``/brokers/topics``, ``/config/topics`` and ``/admin/*`` in ZooKeeper.

create/update/resume: plan (``planners.topics``) and apply: create with rack-aware
placement, add partitions, throttled reassignment for a replica change, configs (node
first, then the change notification: ``ZkAdmin.set_topic_config``). A timer refreshes the
status (leaders, ISR, under-replicated, offline, drift), retries waiting steps and clears
throttles once a move is done. delete: ``/admin/delete_topics/<t>`` unless
``deletionPolicy: Retain``; the finalizer is released after bounded retries when
ZooKeeper or the cluster is gone, with a Warning event saying so.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import kopf
from kazoo.exceptions import NodeExistsError

from gregor_broker.cluster.admin import (
    TopicAlreadyMarkedForDeletion,
    TopicExists,
    UnknownTopic,
    ZkAdmin,
)
from gregor_broker.cluster.models import PartitionReassignment
from gregor_broker.replication.reassignment_throttles import apply_throttles, remove_throttles
from gregor_operator import metrics
from gregor_operator.handlers.common import (
    GROUP,
    VERSION,
    ClusterNotFound,
    Context,
    cluster_of,
    replacing,
)
from gregor_operator.planners.topics import (
    TopicPlan,
    TopicSpec,
    TopicState,
    config_drift,
    plan_topic,
    topic_status,
)
from gregor_operator.status import conditions
from gregor_operator.zookeeper import CONNECTION_ERRORS, ZooKeeperUnavailable

log = logging.getLogger(__name__)
UNAVAILABLE = (ZooKeeperUnavailable, ClusterNotFound, *CONNECTION_ERRORS)


def read_state(admin: ZkAdmin, topic: str) -> TopicState | None:
    assignment = admin.get_topic(topic)
    if assignment is None:
        return None
    return TopicState(
        partitions={p: tuple(r) for p, r in assignment.partitions.items()},
        topic_id=assignment.topic_id,
        config=admin.get_topic_config(topic),
        reassigning=bool(assignment.adding_replicas or assignment.removing_replicas),
    )


def owner_of(topic_index: Any, key: tuple[str, str]) -> tuple[str, list[str]]:
    """The resource that manages a Kafka topic (the oldest naming it) and all naming it."""
    entries = sorted(topic_index.get(key, ()))
    names = [f"{namespace}/{name}" for _, namespace, name in entries]
    return (names[0] if names else ""), names


def register(registry: kopf.OperatorRegistry, ctx: Context) -> None:
    @kopf.index(GROUP, VERSION, "topics", id="topic_index", registry=registry)
    def topic_index(namespace: str, name: str, spec: Mapping[str, Any], meta: Any, **_: Any):
        cluster = f"{namespace}/{spec['cluster']}" if spec.get("cluster") else "<default>"
        created = meta.get("creationTimestamp") or ""
        return {(cluster, spec.get("topicName") or name): (created, namespace, name)}

    def reconcile(
        body: Any, patch: Any, apply_config: bool, gregor_clusters: Any, topic_index: Any
    ) -> None:
        namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
        uid = body["metadata"].get("uid", f"{namespace}/{name}")
        spec = TopicSpec.from_resource(namespace, name, body.get("spec", {}))
        status = body.get("status") or {}
        previous = status.get("conditions")
        generation = body["metadata"].get("generation")
        try:
            cluster, connect, throttle = cluster_of(ctx, namespace, body["spec"], gregor_clusters)
        except ClusterNotFound as error:
            message = f"Topic {namespace}/{name}: {error}"
            patch.status["conditions"] = conditions(
                previous, ready=False, error=message, reason="ClusterNotFound"
            )
            raise kopf.TemporaryError(message, delay=ctx.config.status_interval) from error
        owner, naming = owner_of(topic_index, (cluster, spec.name))
        if len(naming) > 1:
            others = [n for n in naming if n != f"{namespace}/{name}"]
            if owner != f"{namespace}/{name}":
                message = (
                    f"Topic {namespace}/{name}: Kafka topic {spec.name!r} is already managed "
                    f"by Topic {owner}; two resources cannot name one topic. Delete this "
                    "resource or set another spec.topicName."
                )
                patch.status["conditions"] = conditions(
                    previous, ready=False, error=message, reason="Conflict"
                )
                patch.status["observedGeneration"] = generation
                return
            conflict = (
                f"Topic {namespace}/{name}: also named by {', '.join(others)} (conflict; "
                "this older resource keeps managing the topic)"
            )
        else:
            conflict = None
        with ctx.locks[uid]:
            admin = ctx.sessions.admin(connect)
            state = read_state(admin, spec.name)
            brokers = {b: r.rack for b, r in admin.list_brokers().items()}
            owned = ctx.topic_ids.get(uid) or status.get("topicId")
            plan = plan_topic(spec, state, brokers, owned_topic_id=owned, apply_config=apply_config)
            if plan.refused:
                patch.status["conditions"] = conditions(
                    previous, ready=state is not None, error=plan.refused, reason="Refused"
                )
                patch.status["observedGeneration"] = generation
                if (status.get("conditions") or [{}])[-1].get("message") != plan.refused:
                    kopf.warn(body, reason="PlanRefused", message=plan.refused)
                    metrics.PLANS.labels("Topic", "refused").inc()
                log.info("topic %s/%s: refused: %s", namespace, name, plan.refused)
                return
            apply_plan(admin, spec, state, plan, throttle, body, uid)
            state = read_state(admin, spec.name)
            if (
                state is not None
                and not state.reassigning
                and any(k.endswith("throttled.replicas") for k in state.config)
                and admin.get_reassignment() is None
            ):
                # The move is done: clear its throttles, as kafka-reassign-partitions --verify.
                remove_throttles(admin, [spec.name])
                state = read_state(admin, spec.name)
            fields = status_fields(admin, spec, state)
        waiting = plan.waiting or (
            "replicas moving" if state is not None and state.reassigning else None
        )
        if "drift" in fields:
            # A drift undone (or a spec change the timer saw before its handler) must go.
            fields["drift"] = replacing(status.get("drift"), fields["drift"])
        patch.status.update(fields)
        if apply_config:
            # Only a change handler applies a generation's configs: the status timer,
            # which leaves them alone, claimed a generation whose handler was still
            # being retried (and would yet write the spec's configs).
            patch.status["observedGeneration"] = generation
        patch.status["conditions"] = conditions(
            previous,
            ready=waiting is None and fields.get("offlinePartitions", 0) == 0,
            reconciling=waiting is not None,
            error=conflict,
            reason="Conflict" if conflict else ("Moving" if waiting else "Reconciled"),
            message=waiting or f"Kafka topic {spec.name} matches the spec",
        )

    def apply_plan(
        admin: ZkAdmin,
        spec: TopicSpec,
        state: TopicState | None,
        plan: TopicPlan,
        throttle: int,
        body: Any,
        uid: str,
    ) -> None:
        def done(message: str) -> None:
            log.info("topic %s: %s", spec.resource, message)
            kopf.info(body, reason="PlanApplied", message=message)
            metrics.PLANS.labels("Topic", "applied").inc()

        if plan.create is not None:
            try:
                created = admin.create_topic(spec.name, plan.create, spec.config)
            except TopicExists as error:
                raise kopf.TemporaryError(str(error), delay=1) from error
            ctx.topic_ids[uid] = created.topic_id
            racks = {
                r for replicas in plan.create.values() for r in replicas
            }  # brokers used, for the message
            done(
                f"created Kafka topic {spec.name}: {spec.partitions} partitions x "
                f"{spec.replicas} replicas on brokers {sorted(racks)}"
            )
            return
        assert state is not None
        if plan.adopted:
            ctx.topic_ids[uid] = state.topic_id
            done(f"adopted existing Kafka topic {spec.name} (id {state.topic_id})")
        if plan.add_partitions:
            admin.add_partitions(spec.name, plan.add_partitions)
            done(f"added partitions {sorted(plan.add_partitions)} to {spec.name}")
        if plan.set_config is not None:
            admin.set_topic_config(spec.name, plan.set_config)
            done(f"set configs of {spec.name} to {plan.set_config}")
        if plan.reassign:
            current = {(spec.name, p): tuple(r) for p, r in state.partitions.items()}
            if admin.get_reassignment() is not None:
                raise kopf.TemporaryError(
                    f"Topic {spec.resource}: another reassignment is in flight; the replica "
                    "change waits for it",
                    delay=ctx.config.status_interval,
                )
            apply_throttles(admin, plan.reassign, current, throttle)
            try:
                admin.request_reassignment(PartitionReassignment(plan.reassign))
            except NodeExistsError as error:
                raise kopf.TemporaryError("a reassignment started meanwhile", delay=1) from error
            done(
                f"moving {spec.name} to {spec.replicas} replicas per partition "
                f"(throttle {throttle} B/s)"
            )

    def status_fields(admin: ZkAdmin, spec: TopicSpec, state: TopicState | None) -> dict:
        if state is None:
            return {"topicName": spec.name}
        states = {}
        for partition in state.partitions:
            found = admin.get_partition_state(spec.name, partition)
            states[partition] = (found[0].leader, tuple(found[0].isr)) if found else None
        fields = topic_status(state.partitions, states, set(admin.list_brokers()))
        fields.update(
            topicName=spec.name,
            topicId=state.topic_id,
            drift=config_drift(spec, state.config),
        )
        return fields

    @kopf.on.create(GROUP, VERSION, "topics", registry=registry)
    @kopf.on.update(GROUP, VERSION, "topics", field="spec", registry=registry)
    @kopf.on.resume(GROUP, VERSION, "topics", registry=registry)
    def reconcile_topic(body: Any, patch: Any, gregor_clusters: Any, topic_index: Any, **_: Any):
        try:
            reconcile(body, patch, True, gregor_clusters, topic_index)
        except UNAVAILABLE as error:
            raise kopf.TemporaryError(str(error), delay=ctx.config.status_interval) from error

    @kopf.timer(GROUP, VERSION, "topics", interval=ctx.config.status_interval, registry=registry)
    def refresh_topic(body: Any, patch: Any, gregor_clusters: Any, topic_index: Any, **_: Any):
        if body["metadata"].get("deletionTimestamp"):
            return
        try:
            reconcile(body, patch, False, gregor_clusters, topic_index)
        except UNAVAILABLE as error:
            previous = (body.get("status") or {}).get("conditions")
            patch.status["conditions"] = conditions(
                previous, ready=False, error=str(error), reason="ZooKeeperUnavailable"
            )
        except kopf.TemporaryError:
            pass  # the timer runs again

    @kopf.on.delete(GROUP, VERSION, "topics", registry=registry)
    def delete_topic(
        body: Any, spec: Any, retry: int, gregor_clusters: Any, topic_index: Any, **_: Any
    ):
        namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
        topic = spec.get("topicName") or name
        if spec.get("deletionPolicy") == "Retain":
            kopf.info(body, reason="Retained", message=f"Kafka topic {topic} kept (Retain)")
            return
        try:
            cluster, connect, _ = cluster_of(ctx, namespace, spec, gregor_clusters)
            owner, naming = owner_of(topic_index, (cluster, topic))
            if len(naming) > 1 and owner != f"{namespace}/{name}":
                kopf.info(body, reason="NotOwner", message=f"{topic} is managed by {owner}")
                return
            admin = ctx.sessions.admin(connect)
            admin.request_topic_deletion(topic)
            kopf.info(body, reason="PlanApplied", message=f"deleting Kafka topic {topic}")
            log.info("topic %s/%s: requested deletion of %s", namespace, name, topic)
        except (UnknownTopic, TopicAlreadyMarkedForDeletion):
            return
        except UNAVAILABLE as error:
            if retry + 1 < ctx.config.finalizer_retries:
                raise kopf.TemporaryError(
                    f"Topic {namespace}/{name}: cannot delete {topic} yet: {error}",
                    delay=ctx.config.finalizer_retry_delay,
                ) from error
            message = (
                f"Topic {namespace}/{name}: finalizer released after {retry + 1} attempts "
                f"without deleting Kafka topic {topic}: {error}. If the cluster still "
                f"exists, delete the topic with: gregor topics delete {topic}"
            )
            log.warning(message)
            kopf.warn(body, reason="FinalizerReleased", message=message)
