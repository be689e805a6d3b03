"""The operator's Topic and scaling planners, and the CRDs' shape (no Kubernetes needed)."""

from __future__ import annotations

from pathlib import Path

import yaml

from gregor_operator.planners.rebalance import Plan
from gregor_operator.planners.scaling import (
    MOVING_OFF,
    REFUSED,
    RUNNING,
    SCALING_DOWN,
    SCALING_UP,
    Observation,
    plan_step,
)
from gregor_operator.planners.topics import TopicSpec, TopicState, config_drift, plan_topic

CRDS = Path(__file__).resolve().parents[3] / "charts" / "gregor" / "crds"
RACKS = {0: "a", 1: "b", 2: "c"}


def spec(partitions=3, replicas=3, **config) -> TopicSpec:
    return TopicSpec("default/orders", "orders", partitions, replicas, config)


def state(partitions=3, topic_id="id-1", **config) -> TopicState:
    return TopicState({p: (0, 1, 2) for p in range(partitions)}, topic_id, config)


def test_topic_shrink_is_refused_naming_object_problem_and_fix():
    plan = plan_topic(spec(3), state(6), RACKS, owned_topic_id="id-1")
    assert plan.refused == (
        "Topic default/orders: cannot shrink partitions from 6 to 3; Kafka partitions can only "
        "grow. Set spec.partitions back to 6, or create a new Topic and move the data."
    )
    assert not plan.changes


def test_topic_grows_with_new_partitions_only_and_adopts_a_foreign_topic():
    plan = plan_topic(spec(5), state(3, topic_id="other"), RACKS, owned_topic_id=None)
    assert plan.adopted and sorted(plan.add_partitions) == [3, 4]
    assert all(sorted(r) == [0, 1, 2] for r in plan.add_partitions.values())


def test_topic_config_is_validated_and_drift_reported():
    refused = plan_topic(spec(**{"retention.ms": "soon"}), None, RACKS).refused
    assert "invalid config 'retention.ms'" in refused and "Fix spec.config" in refused
    assert "'bogus.key'" in plan_topic(spec(**{"bogus.key": "1"}), None, RACKS).refused
    drift = config_drift(spec(**{"retention.ms": "1000"}), {"retention.ms": "5", "x": "1"})
    assert drift == {"retention.ms": "5", "x": "1"}


def test_topic_replica_change_becomes_a_reassignment_and_too_many_replicas_are_refused():
    plan = plan_topic(spec(3, 2), state(3), RACKS, owned_topic_id="id-1")
    assert all(len(r) == 2 for r in plan.reassign.values())
    assert "Lower spec.replicas" in plan_topic(spec(3, 4), None, RACKS).refused


def observation(**fields) -> Observation:
    base = dict(
        desired=3, statefulset=3, registered=RACKS,
        assignment={("t", 0): (0, 1, 2)}, isr={("t", 0): (0, 1, 2)},
    )  # fmt: skip
    base.update(fields)
    return Observation(**base)


def test_scale_down_moves_replicas_first_and_never_shrinks_while_a_leaving_broker_holds_one():
    five = {**RACKS, 3: "a", 4: "b"}
    held = {("t", 0): (3, 4, 2)}
    step = plan_step(
        observation(desired=3, statefulset=5, registered=five, assignment=held, isr=held)
    )
    assert step.phase == MOVING_OFF and step.statefulset is None
    assert set(step.start.target[("t", 0)]) <= {0, 1, 2}
    # Moves done but an ISR not yet full: still no shrink.
    waiting = plan_step(observation(desired=3, statefulset=5, registered=five,
                                    isr={("t", 0): (0, 1)}, phase=MOVING_OFF,
                                    plan=step.plan, plan_done=True))  # fmt: skip
    assert waiting.statefulset is None and "full ISRs" in waiting.message
    shrink = plan_step(observation(desired=3, statefulset=5, registered=five,
                                   phase=MOVING_OFF, plan=step.plan, plan_done=True))  # fmt: skip
    assert shrink.phase == SCALING_DOWN and shrink.statefulset == 3


def test_scale_down_below_the_replication_factor_is_refused_and_changes_nothing():
    step = plan_step(observation(desired=2))
    assert step.phase == REFUSED and step.statefulset is None and step.start is None
    assert "3 replicas but only 2 brokers would remain" in step.refused


def test_scale_up_waits_for_registration_then_moves_onto_new_brokers():
    grow = plan_step(observation(desired=5))
    assert grow.phase == SCALING_UP and grow.statefulset == 5
    waiting = plan_step(observation(desired=5, statefulset=5, phase=SCALING_UP))
    assert waiting.phase == SCALING_UP and "[3, 4]" in waiting.message
    five = {**RACKS, 3: "a", 4: "b"}
    assignment = {("t", p): (0, 1, 2) for p in range(6)}
    move = plan_step(observation(desired=5, statefulset=5, phase=SCALING_UP, registered=five,
                                 assignment=assignment, isr=assignment))  # fmt: skip
    gained = {b for k, r in move.start.target.items() for b in set(r) - set(assignment[k])}
    assert gained == {3, 4}
    done = plan_step(observation(desired=5, statefulset=5, phase="MovingReplicasOn",
                                 registered=five, plan=Plan({}, {}), plan_done=True))  # fmt: skip
    assert done.phase == RUNNING


def test_crds_are_structural_with_status_printer_columns_and_scale_selector():
    crds = {d["spec"]["names"]["kind"]: d for p in CRDS.glob("*.yaml")
            for d in yaml.safe_load_all(p.read_text())}  # fmt: skip
    assert set(crds) == {"Topic", "Quota", "GregorCluster", "GregorRebalance", "User"}

    def structural(schema, path="") -> None:
        assert (
            "type" in schema or schema.get("x-kubernetes-int-or-string")
            or schema.get("x-kubernetes-preserve-unknown-fields")
        ), path  # fmt: skip
        for name, child in (schema.get("properties") or {}).items():
            structural(child, f"{path}.{name}")
        if isinstance(schema.get("items"), dict):
            structural(schema["items"], f"{path}[]")
        if isinstance(schema.get("additionalProperties"), dict):
            structural(schema["additionalProperties"], f"{path}{{}}")

    for kind, crd in crds.items():
        assert crd["spec"]["group"] == "gregor.dev"
        version = crd["spec"]["versions"][0]
        assert version["name"] == "v1alpha1" and "status" in version["subresources"]
        assert version["additionalPrinterColumns"], kind
        structural(version["schema"]["openAPIV3Schema"], kind)
    scale = crds["GregorCluster"]["spec"]["versions"][0]["subresources"]["scale"]
    assert scale["labelSelectorPath"] == ".status.labelSelector"
    rules = crds["Topic"]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"][
        "x-kubernetes-validations"
    ]
    assert any("self.partitions >= oldSelf.partitions" in r["rule"] for r in rules)


def broker_pod_spec(**spec_fields):
    from gregor_operator.planners.cluster_objects import render

    spec = {"replicas": 3, "zookeeper": {"connect": "zk:2181"}, **spec_fields}
    objects = {o["kind"]: o for o in render("gregor", "kafka", spec, 3)}
    return objects["StatefulSet"]["spec"]["template"], objects["ConfigMap"]["data"][
        "server.properties"
    ]


def test_zones_affinity_and_tolerations_reach_the_broker_pods():
    toleration = {"key": "dedicated", "operator": "Equal", "value": "kafka", "effect": "NoSchedule"}
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "kubernetes.io/hostname"}]}}  # fmt: skip
    template, _ = broker_pod_spec(
        rackTopologyKey="example.com/rack",
        zones=["r1", "r2", "r3"],
        affinity=anti,
        tolerations=[toleration],
        nodeSelector={"disk": "ssd"},
    )
    pod = template["spec"]
    (spread,) = pod["topologySpreadConstraints"]
    assert spread["topologyKey"] == "example.com/rack"
    assert spread["whenUnsatisfiable"] == "DoNotSchedule"
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    zone_rule = {"key": "example.com/rack", "operator": "In", "values": ["r1", "r2", "r3"]}
    assert terms["nodeSelectorTerms"] == [{"matchExpressions": [zone_rule]}]
    assert pod["affinity"]["podAntiAffinity"] == anti["podAntiAffinity"]
    assert pod["tolerations"] == [toleration]
    assert pod["nodeSelector"] == {"disk": "ssd"}
    # The rack each broker reports is the same key.
    env = {e["name"]: e for e in pod["containers"][0]["env"]}
    assert "example.com/rack" in env["GREGOR_BROKER_RACK"]["valueFrom"]["fieldRef"]["fieldPath"]
    # No zones, no passthrough: spread only, preferred.
    pod = broker_pod_spec()[0]["spec"]
    assert pod["topologySpreadConstraints"][0]["whenUnsatisfiable"] == "ScheduleAnyway"
    assert "affinity" not in pod and "tolerations" not in pod


def test_metrics_port_is_optional_and_probes_follow_it():
    from gregor_operator.planners.cluster_objects import config_hash

    template, properties = broker_pod_spec()
    container = template["spec"]["containers"][0]
    assert "metrics.port=9404" in properties
    assert {"name": "metrics", "containerPort": 9404} in container["ports"]
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    # The chart's metrics.port in config: the container port and probes follow it.
    template, properties = broker_pod_spec(config={"metrics.port": "9500"})
    assert "metrics.port=9500" in properties
    assert {"name": "metrics", "containerPort": 9500} in template["spec"]["containers"][0]["ports"]
    # Off: no metrics.port, no metrics port, TCP probes on the Kafka port.
    template, properties = broker_pod_spec(metrics={"enabled": False}, config={"metrics.port": 1})
    container = template["spec"]["containers"][0]
    assert "metrics.port" not in properties
    assert [p["name"] for p in container["ports"]] == ["kafka"]
    assert container["readinessProbe"]["tcpSocket"] == {"port": "kafka"}
    assert container["livenessProbe"]["tcpSocket"] == {"port": "kafka"}
    # An operator upgrade alone (new optional fields unset) rolls nothing.
    base = {"replicas": 3, "zookeeper": {"connect": "zk:2181"}, "image": "gregor-broker:1"}
    assert config_hash(base) == config_hash({**base, "zones": None})
    assert config_hash(base) != config_hash({**base, "zones": ["a"]})


def test_an_existing_statefulsets_selector_is_kept_as_it_is_immutable():
    from gregor_operator.planners.cluster_objects import labels, render

    spec = {"replicas": 3, "zookeeper": {"connect": "zk:2181"}}
    old = {"app.kubernetes.io/name": "gregor", "app.kubernetes.io/instance": "gregor"}
    (sts,) = [o for o in render("gregor", "kafka", spec, 3, old) if o["kind"] == "StatefulSet"]
    assert sts["spec"]["selector"]["matchLabels"] == old
    assert sts["spec"]["template"]["metadata"]["labels"] == labels("gregor")  # a superset
    (new,) = [o for o in render("gregor", "kafka", spec, 3) if o["kind"] == "StatefulSet"]
    assert new["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"] == "broker"
