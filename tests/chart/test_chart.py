"""The gregor Helm chart, rendered by the real helm binary over the value sets users run:
it lints strictly, every rendered object is valid against Kubernetes' own schemas
(kubernetes-validate --strict) or its CRD's schema (jsonschema), and the values that
matter reach the objects that use them (storage, zones, probes, ZooKeeper, HPA, metrics).
"""

from __future__ import annotations

from typing import Any

import jsonschema
import kubernetes_validate
import pytest

from .render import CHART, by_kind, crd_schemas, helm, one, render

KUBERNETES_VERSION = "1.30.0"
# Custom resources of other projects the chart may render (validated only when enabled
# and known: the prometheus-operator's CRD is not ours to ship).
FOREIGN_KINDS = {"ServiceMonitor", "PodMonitor"}

BROKER_PLACEMENT: dict[str, Any] = {
    "zones": ["zone-a", "zone-b", "zone-c"],
    "affinity": {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["nvme"]}]}
                ]
            }
        },
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "topologyKey": "kubernetes.io/hostname",
                    "labelSelector": {"matchLabels": {"app.kubernetes.io/component": "broker"}},
                }
            ]
        },
    },
    "tolerations": [
        {"key": "dedicated", "operator": "Equal", "value": "kafka", "effect": "NoSchedule"}
    ],
    "nodeSelector": {"node.example.com/pool": "kafka"},
}

VALUE_SETS: dict[str, dict[str, Any]] = {
    "default": {},
    "one-zone": {"brokers": {"zones": ["zone-a"]}},
    "three-zones": {"brokers": {"zones": ["zone-a", "zone-b", "zone-c"], "replicas": 6}},
    "hpa": {"autoscaling": {"enabled": True, "minReplicas": 3, "maxReplicas": 12}},
    "metrics-off": {"metrics": {"enabled": False}},
    "service-monitor": {"metrics": {"serviceMonitor": {"enabled": True}}},
    "placement": {"brokers": BROKER_PLACEMENT},
    "sasl-ssl": {
        "security": {
            "clientProtocol": "SASL_SSL",
            "interBrokerProtocol": "SASL_SSL",
            "tls": {"secretName": "gregor-tls", "clientAuth": "requested"},
            "interBroker": {"credentialsSecret": "gregor-broker-login"},
        }
    },
    "ssl-clients": {"security": {"clientProtocol": "SSL", "tls": {"secretName": "gregor-tls"}}},
    "external-zookeeper": {
        "zookeeper": {"enabled": False, "external": {"connect": "zk-0.zk:2181,zk-1.zk:2181/gregor"}}
    },
}


def _merged(overrides: dict[str, Any]) -> dict[str, Any]:
    """Top-level keys for --set-json: helm merges nested maps key by key."""
    return overrides


@pytest.fixture(scope="module", params=sorted(VALUE_SETS))
def rendered(request: pytest.FixtureRequest) -> tuple[str, list[dict[str, Any]]]:
    return request.param, render(_merged(VALUE_SETS[request.param]))


def test_helm_lint_strict_passes_for_every_value_set() -> None:
    for name, values in VALUE_SETS.items():
        args = ["lint", "--strict", str(CHART)]
        for key, value in values.items():
            import json

            args += ["--set-json", f"{key}={json.dumps(value)}"]
        result = helm(*args, check=False)
        assert result.returncode == 0, f"{name}: {result.stdout}{result.stderr}"


def test_every_rendered_object_is_valid_against_its_schema(
    rendered: tuple[str, list[dict[str, Any]]],
) -> None:
    name, objects = rendered
    schemas = crd_schemas()
    for obj in objects:
        label = f"{name}: {obj['kind']} {obj['metadata']['name']}"
        if obj["kind"] in schemas:
            jsonschema.validate(obj, schemas[obj["kind"]])
        elif obj["kind"] in FOREIGN_KINDS:
            assert obj["apiVersion"] == "monitoring.coreos.com/v1", label
        else:
            try:
                kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
            except kubernetes_validate.ValidationError as error:
                pytest.fail(f"{label}: {error.message} at {list(error.path)}")


def test_crds_are_valid_kubernetes_objects() -> None:
    for obj in render(include_crds=True):
        if obj["kind"] == "CustomResourceDefinition":
            kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
    assert {"Topic", "Quota", "GregorCluster", "GregorRebalance"} <= set(crd_schemas())


def test_storage_class_and_size_reach_the_broker_and_zookeeper_volume_claims() -> None:
    objects = render(
        {
            "brokers": {"storage": {"storageClassName": "local-nvme", "size": "250Gi"}},
            "zookeeper": {"storage": {"storageClassName": "local-ssd", "size": "7Gi"}},
        }
    )
    cluster = one(objects, "GregorCluster")
    assert cluster["spec"]["storage"] == {"storageClassName": "local-nvme", "size": "250Gi"}
    (claim,) = one(objects, "StatefulSet", "-zookeeper")["spec"]["volumeClaimTemplates"]
    assert claim["spec"]["storageClassName"] == "local-ssd"
    assert claim["spec"]["resources"]["requests"]["storage"] == "7Gi"


def test_zones_reach_spread_constraints_and_node_affinity() -> None:
    zones = ["zone-a", "zone-b", "zone-c"]
    objects = render({"brokers": {"zones": zones, "rackTopologyKey": "example.com/rack"}})
    pod = one(objects, "StatefulSet", "-zookeeper")["spec"]["template"]["spec"]
    by_key = {c["topologyKey"]: c for c in pod["topologySpreadConstraints"]}
    assert by_key["example.com/rack"]["whenUnsatisfiable"] == "DoNotSchedule"
    assert by_key["example.com/rack"]["maxSkew"] == 1
    selector = by_key["example.com/rack"]["labelSelector"]["matchLabels"]
    assert selector["app.kubernetes.io/component"] == "zookeeper"
    (term,) = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert term["matchExpressions"] == [
        {"key": "example.com/rack", "operator": "In", "values": zones}
    ]
    # The brokers' rack label is the same key.
    assert one(objects, "GregorCluster")["spec"]["rackTopologyKey"] == "example.com/rack"

    # One zone: pinned to it, spread over nodes only (a zone constraint would be moot).
    pod = one(render({"brokers": {"zones": ["zone-a"]}}), "StatefulSet", "-zookeeper")
    spec = pod["spec"]["template"]["spec"]
    assert [c["topologyKey"] for c in spec["topologySpreadConstraints"]] == [
        "kubernetes.io/hostname"
    ]
    expressions = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert expressions["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == ["zone-a"]


def test_zookeeper_disruption_budget_keeps_a_quorum() -> None:
    for replicas, unavailable in ((1, 0), (3, 1), (5, 2)):
        objects = render({"zookeeper": {"replicas": replicas}})
        assert one(objects, "PodDisruptionBudget")["spec"]["maxUnavailable"] == unavailable
        config = one(objects, "ConfigMap", "-zookeeper")["data"]["zoo.cfg"]
        assert config.count("\nserver.") == replicas
    even = helm("template", "g", str(CHART), "--set", "zookeeper.replicas=2", check=False)
    assert even.returncode != 0 and "/zookeeper/replicas" in even.stderr


def test_zookeeper_connect_string_is_the_ensemble_or_the_external_one() -> None:
    cluster = one(render(namespace="kafka"), "GregorCluster")
    assert cluster["spec"]["zookeeper"]["connect"] == ",".join(
        f"gregor-zookeeper-{i}.gregor-zookeeper-headless.kafka.svc:2181" for i in range(3)
    )
    external = render(
        {"zookeeper": {"enabled": False, "external": {"connect": "zk-0.zk:2181/gregor"}}}
    )
    assert one(external, "GregorCluster")["spec"]["zookeeper"]["connect"] == "zk-0.zk:2181/gregor"
    assert not by_kind(external, "StatefulSet")
    assert not by_kind(external, "PodDisruptionBudget")
    missing = helm("template", "g", str(CHART), "--set", "zookeeper.enabled=false", check=False)
    assert missing.returncode != 0 and "external" in missing.stderr


def test_probes_point_at_the_endpoints_the_processes_serve() -> None:
    objects = render({"operator": {"port": 8181}})
    container = one(objects, "Deployment", "-operator")["spec"]["template"]["spec"]["containers"][0]
    (port,) = container["ports"]
    assert port == {"name": "http", "containerPort": 8181}
    # The operator's own CLI parses the rendered args and serves /healthz on that port.
    from gregor_operator.cli import parser

    args = parser().parse_args(container["args"])
    assert args.command == "run"
    assert args.http_port == 8181
    assert args.namespace == ["gregor"]
    for probe in ("livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"] == {"path": "/healthz", "port": "http"}
    # ZooKeeper: ready only with a quorum (srvr's Mode line), alive while the port answers.
    zk = one(objects, "StatefulSet", "-zookeeper")["spec"]["template"]["spec"]["containers"][0]
    assert "srvr" in " ".join(zk["readinessProbe"]["exec"]["command"])
    assert zk["livenessProbe"]["tcpSocket"]["port"] == "client"
    assert {"name": "client", "containerPort": 2181} in zk["ports"]


def _broker_statefulset(objects: list[dict[str, Any]], namespace: str = "gregor") -> dict:
    """The broker StatefulSet the operator makes from the chart's GregorCluster (its own
    renderer, as it runs in the cluster), and the ConfigMap with server.properties."""
    from gregor_operator.planners.cluster_objects import render as owned_objects

    cluster = one(objects, "GregorCluster")
    name, spec = cluster["metadata"]["name"], cluster["spec"]
    owned = owned_objects(name, namespace, spec, spec["replicas"])
    return {o["kind"]: o for o in owned}


def test_metrics_enabled_and_port_reach_the_broker_pods() -> None:
    """metrics.enabled and metrics.port go to the GregorCluster's spec.metrics; the
    operator turns them into the brokers' metrics.port, a container port named metrics
    and HTTP probes on it, or (off) no metrics.port and TCP probes on the Kafka port."""
    objects = render({"metrics": {"port": 9500}})
    assert one(objects, "GregorCluster")["spec"]["metrics"] == {"enabled": True, "port": 9500}
    owned = _broker_statefulset(objects)
    (container,) = owned["StatefulSet"]["spec"]["template"]["spec"]["containers"]
    assert {"name": "metrics", "containerPort": 9500} in container["ports"]
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert "metrics.port=9500\n" in owned["ConfigMap"]["data"]["server.properties"]

    objects = render({"metrics": {"enabled": False}})
    assert one(objects, "GregorCluster")["spec"]["metrics"]["enabled"] is False
    owned = _broker_statefulset(objects)
    (container,) = owned["StatefulSet"]["spec"]["template"]["spec"]["containers"]
    assert [p["name"] for p in container["ports"]] == ["kafka"]
    assert container["readinessProbe"]["tcpSocket"] == {"port": "kafka"}
    assert container["livenessProbe"]["tcpSocket"] == {"port": "kafka"}
    assert "metrics.port" not in owned["ConfigMap"]["data"]["server.properties"]


def test_pod_monitor_selects_the_broker_pods_only() -> None:
    """The PodMonitor scrapes the brokers' container port "metrics": its selector is the
    labels the operator gives the broker pods (component=broker included), and it picks
    no pod of the release's ZooKeeper or operator, which share name and instance."""
    from gregor_operator.planners.cluster_objects import labels as broker_labels

    for release in ("gregor", "prod"):  # fullname = release, or release-gregor
        monitored = render({"metrics": {"serviceMonitor": {"enabled": True}}}, release=release)
        cluster = one(monitored, "GregorCluster")["metadata"]["name"]
        pods = one(monitored, "PodMonitor")
        selector = pods["spec"]["selector"]["matchLabels"]
        assert selector == broker_labels(cluster)
        assert selector["app.kubernetes.io/component"] == "broker"
        assert pods["spec"]["podMetricsEndpoints"][0]["port"] == "metrics"
        owned = _broker_statefulset(monitored)
        workloads = [owned["StatefulSet"], *by_kind(monitored, "StatefulSet")]
        workloads += by_kind(monitored, "Deployment")
        picked = [
            w["metadata"]["name"]
            for w in workloads
            if selector.items() <= w["spec"]["template"]["metadata"]["labels"].items()
        ]
        assert picked == [cluster], picked
        (container,) = owned["StatefulSet"]["spec"]["template"]["spec"]["containers"]
        assert "metrics" in {p["name"] for p in container["ports"]}
    operator = one(monitored, "ServiceMonitor")
    service = one(monitored, "Service", "-operator")
    assert operator["spec"]["selector"]["matchLabels"] == service["spec"]["selector"]
    assert operator["spec"]["endpoints"][0]["port"] in {p["name"] for p in service["spec"]["ports"]}
    off = render({"metrics": {"enabled": False, "serviceMonitor": {"enabled": True}}})
    assert not by_kind(off, "ServiceMonitor") and not by_kind(off, "PodMonitor")


def test_broker_placement_reaches_the_gregorcluster_and_the_broker_pods() -> None:
    """brokers.zones, .affinity, .tolerations and .nodeSelector go to the GregorCluster,
    and from there (the operator's renderer) to the broker pod template: tolerations and
    node selector as given, the user's affinity with the zones added to its node selector
    term, and the brokers spread over the zones."""
    objects = render({"brokers": BROKER_PLACEMENT})
    spec = one(objects, "GregorCluster")["spec"]
    for key, value in BROKER_PLACEMENT.items():
        assert spec[key] == value, key
    statefulset = _broker_statefulset(objects)["StatefulSet"]
    kubernetes_validate.validate(statefulset, KUBERNETES_VERSION, strict=True)
    pod = statefulset["spec"]["template"]["spec"]
    assert pod["tolerations"] == BROKER_PLACEMENT["tolerations"]
    assert pod["nodeSelector"] == BROKER_PLACEMENT["nodeSelector"]
    affinity = pod["affinity"]
    assert affinity["podAntiAffinity"] == BROKER_PLACEMENT["affinity"]["podAntiAffinity"]
    (term,) = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert term["matchExpressions"] == [
        {"key": "disk", "operator": "In", "values": ["nvme"]},
        {
            "key": "topology.kubernetes.io/zone",
            "operator": "In",
            "values": BROKER_PLACEMENT["zones"],
        },
    ]
    (spread,) = pod["topologySpreadConstraints"]
    assert spread["topologyKey"] == "topology.kubernetes.io/zone"
    assert spread["whenUnsatisfiable"] == "DoNotSchedule"

    # Nothing set: none of them in the GregorCluster or the pods.
    default = render()
    spec = one(default, "GregorCluster")["spec"]
    assert not {"zones", "affinity", "tolerations", "nodeSelector"} & set(spec)
    pod = _broker_statefulset(default)["StatefulSet"]["spec"]["template"]["spec"]
    assert not {"affinity", "tolerations", "nodeSelector"} & set(pod)


def test_hpa_targets_the_gregorcluster_scale_subresource() -> None:
    assert not by_kind(render(), "HorizontalPodAutoscaler")
    objects = render({"autoscaling": {"enabled": True, "minReplicas": 3, "maxReplicas": 12}})
    hpa = one(objects, "HorizontalPodAutoscaler")
    cluster = one(objects, "GregorCluster")
    assert hpa["spec"]["scaleTargetRef"] == {
        "apiVersion": "gregor.dev/v1alpha1",
        "kind": "GregorCluster",
        "name": cluster["metadata"]["name"],
    }
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (3, 12)
    # The CRD's scale subresource is what makes the target valid.
    crd = next(
        o
        for o in render(include_crds=True)
        if o["kind"] == "CustomResourceDefinition" and o["spec"]["names"]["kind"] == "GregorCluster"
    )
    scale = next(v for v in crd["spec"]["versions"] if v["served"])["subresources"]["scale"]
    assert scale["specReplicasPath"] == ".spec.replicas"
    assert scale["labelSelectorPath"]


def test_broker_config_and_image_reach_the_gregorcluster() -> None:
    objects = render(
        {
            "brokers": {
                "image": {"repository": "registry.example/gregor-broker", "tag": "9.9.9"},
                "config": {"min.insync.replicas": 2, "log.retention.hours": 24},
            }
        }
    )
    spec = one(objects, "GregorCluster")["spec"]
    assert spec["image"] == "registry.example/gregor-broker:9.9.9"
    assert spec["config"]["min.insync.replicas"] == "2"
    assert spec["config"]["log.retention.hours"] == "24"
    default = one(render(), "GregorCluster")["spec"]
    assert default["image"].endswith(":" + CHART_APP_VERSION())


def CHART_APP_VERSION() -> str:
    import yaml

    return str(yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"])


def test_pods_the_chart_renders_run_as_non_root_without_privilege_escalation() -> None:
    for obj in by_kind(render(), "Deployment") + by_kind(render(), "StatefulSet"):
        pod = obj["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        for container in pod["containers"]:
            assert container["securityContext"]["allowPrivilegeEscalation"] is False


def _match_labels(obj: Any) -> list[dict[str, str]]:
    """Every label selector inside ``obj``: ``matchLabels`` anywhere (workloads, PDBs,
    spread constraints, affinity terms) and a Service's ``spec.selector``."""
    found = []
    if isinstance(obj, dict):
        if obj.get("kind") == "Service" and obj.get("spec", {}).get("selector"):
            found.append(obj["spec"]["selector"])
        for key, value in obj.items():
            if key == "matchLabels" and isinstance(value, dict):
                found.append(value)
            else:
                found += _match_labels(value)
    elif isinstance(obj, list):
        for item in obj:
            found += _match_labels(item)
    return found


def test_every_selector_picks_the_pods_of_one_workload_only() -> None:
    """The brokers, ZooKeeper and the operator run side by side with the release's labels.
    A Service, PodDisruptionBudget, workload selector, spread constraint or affinity term
    of one must select its own pods only: a broker PDB that counts ZooKeeper pods lets a
    drain take a broker and a ZooKeeper member, or blocks drains it should allow."""
    from gregor_operator.planners.cluster_objects import render as owned_objects

    objects = render()
    cluster = one(objects, "GregorCluster")
    name, spec = cluster["metadata"]["name"], cluster["spec"]
    objects += owned_objects(name, "gregor", spec, spec["replicas"])
    workloads = by_kind(objects, "StatefulSet") + by_kind(objects, "Deployment")
    assert len(workloads) == 3  # brokers, ZooKeeper, the operator
    pod_labels = {
        w["metadata"]["name"]: w["spec"]["template"]["metadata"]["labels"] for w in workloads
    }
    for obj in objects:
        if obj["kind"] in FOREIGN_KINDS:
            continue
        for selector in _match_labels(obj):
            picked = sorted(
                workload
                for workload, labels in pod_labels.items()
                if selector.items() <= labels.items()
            )
            assert len(picked) == 1, (
                f"{obj['kind']} {obj['metadata']['name']}: {selector} selects the pods of {picked}"
            )


@pytest.mark.parametrize(
    ("values", "named"),
    [
        ({"brokers": {"replicas": 0}}, "replicas"),
        ({"brokers": {"replica": 3}}, "replica"),  # a typo is refused, not ignored
        ({"brokers": {"storage": {"size": "lots"}}}, "size"),
        ({"brokers": {"config": {"Log Retention": 1}}}, "Log Retention"),
        ({"zookeeper": {"replicas": 2}}, "replicas"),
        ({"autoscaling": {"enabled": "yes"}}, "enabled"),
        ({"security": {"clientProtocol": "TLS"}}, "clientProtocol"),
        ({"security": {"tls": {"clientAuth": "always"}}}, "clientAuth"),
    ],
)
def test_values_schema_refuses_bad_values_naming_them(values: dict[str, Any], named: str) -> None:
    """values.schema.json is what stops a bad install: helm refuses to render with it."""
    import json

    args = ["template", "g", str(CHART)]
    for key, value in values.items():
        args += ["--set-json", f"{key}={json.dumps(value)}"]
    result = helm(*args, check=False)
    assert result.returncode != 0, f"{values} rendered"
    assert "schema" in result.stderr and named in result.stderr, result.stderr


def test_security_values_reach_the_gregorcluster_and_need_their_secrets() -> None:
    """SASL_SSL listeners with certificates from a Secret: the GregorCluster carries them
    (the operator renders listeners and env from it); nothing security-related by default."""
    default = one(render({}), "GregorCluster")
    assert "security" not in default["spec"]
    values = {
        "security": {
            "clientProtocol": "SASL_SSL",
            "interBrokerProtocol": "SASL_SSL",
            "tls": {"secretName": "gregor-tls", "clientAuth": "required"},
            "interBroker": {"credentialsSecret": "gregor-broker-login"},
        }
    }
    security = one(render(values), "GregorCluster")["spec"]["security"]
    assert security == {
        "clientProtocol": "SASL_SSL",
        "interBrokerProtocol": "SASL_SSL",
        "saslMechanisms": ["SCRAM-SHA-512"],
        "tls": {"secretName": "gregor-tls", "clientAuth": "required",
                "endpointIdentification": True},
        "interBroker": {"mechanism": "SCRAM-SHA-512", "credentialsSecret": "gregor-broker-login"},
    }  # fmt: skip
    # SSL between brokers, PLAINTEXT clients: no SASL settings rendered.
    ssl_only = one(render({"security": {"interBrokerProtocol": "SSL",
                                        "tls": {"secretName": "t"}}}), "GregorCluster")  # fmt: skip
    assert set(ssl_only["spec"]["security"]) == {"clientProtocol", "interBrokerProtocol", "tls"}
    import json

    for broken, named in (
        ({"security": {"clientProtocol": "SSL"}}, "security.tls.secretName"),
        ({"security": {"interBrokerProtocol": "SASL_PLAINTEXT"}}, "credentialsSecret"),
    ):
        args = ["template", "g", str(CHART)]
        for key, value in broken.items():
            args += ["--set-json", f"{key}={json.dumps(value)}"]
        result = helm(*args, check=False)
        assert result.returncode != 0 and named in result.stderr, result.stderr
