"""The operator's RBAC grants every Kubernetes verb its code visibly uses.

The verbs are derived from the operator's source (tests/chart/operator_api_use.py): kopf
handlers, event posting and direct kubernetes client calls; a new one without its grant
fails here. Calls made through the operator's own wrapper (``gregor_operator.kube``,
kinds chosen at run time) are not visible to a reading of the source: the local e2e run
records every request the operator makes against the emulator and checks that the grants
are exactly those (e2e/test_e2e.py, test_operator_used_exactly_the_rbac_the_chart_grants).
"""

from __future__ import annotations

from .operator_api_use import CLUSTER_SCOPED, derive_grants, granted
from .render import by_kind, one, render


def test_rbac_grants_every_verb_the_operator_code_uses() -> None:
    used = derive_grants()
    assert ("gregor.dev", "topics", "watch") in used, "derivation found no kopf handler"
    namespaced, cluster = granted(render())
    used_cluster = {g for g in used if g[1].split("/")[0] in CLUSTER_SCOPED}
    used_namespaced = used - used_cluster
    assert sorted(used_namespaced - namespaced) == [], "used but not granted (namespaced)"
    assert sorted(used_cluster - cluster) == [], "used but not granted (cluster-wide)"


def test_rbac_is_bound_to_the_operators_service_account_only() -> None:
    objects = render(namespace="kafka")
    account = one(objects, "ServiceAccount")["metadata"]["name"]
    deployment = one(objects, "Deployment", "-operator")
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == account
    for binding in by_kind(objects, "RoleBinding") + by_kind(objects, "ClusterRoleBinding"):
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": account, "namespace": "kafka"}
        ]
    # No wildcard anywhere.
    for role in by_kind(objects, "Role") + by_kind(objects, "ClusterRole"):
        for rule in role["rules"]:
            assert "*" not in rule["verbs"] + rule["resources"] + rule["apiGroups"]
