"""manifests/ is rendered from the chart (scripts/render-manifests): one source of truth
per CRD and for the install bundle. These tests fail when the two drift, and validate
every example custom resource in manifests/examples/ against its CRD's schema.
"""

from __future__ import annotations

import jsonschema
import kubernetes_validate
import yaml

from .render import CRDS, ROOT, crd_schemas, helm
from .test_chart import KUBERNETES_VERSION

MANIFESTS = ROOT / "manifests"


def test_manifest_crds_are_the_charts_crds_byte_for_byte() -> None:
    chart = {p.name: p.read_bytes() for p in CRDS.glob("*.yaml")}
    bundle = {p.name: p.read_bytes() for p in (MANIFESTS / "crds").glob("*.yaml")}
    assert chart, "charts/gregor/crds/ holds no CRD"
    assert bundle == chart, "manifests/crds/ drifted from charts/gregor/crds/: run make manifests"


def test_install_bundle_is_the_chart_rendered_with_default_values() -> None:
    rendered = helm("template", "gregor", "charts/gregor", "--namespace", "gregor").stdout
    bundle = (MANIFESTS / "gregor.yaml").read_text()
    body = "".join(line + "\n" for line in bundle.splitlines() if not line.startswith("# "))
    # The bundle's own three comment lines aside, it is helm's output exactly.
    assert list(yaml.safe_load_all(body)) == list(yaml.safe_load_all(rendered)), (
        "manifests/gregor.yaml drifted from charts/gregor: run make manifests"
    )
    for obj in yaml.safe_load_all(body):
        if obj and obj["apiVersion"].startswith(("v1", "apps/", "policy/", "rbac.")):
            kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


def test_every_example_custom_resource_validates_against_its_crd() -> None:
    schemas = crd_schemas()
    examples = sorted((MANIFESTS / "examples").glob("*.yaml"))
    checked = 0
    for path in examples:
        for obj in yaml.safe_load_all(path.read_text()):
            if not obj:
                continue
            if obj["kind"] in schemas:
                jsonschema.validate(obj, schemas[obj["kind"]])
            else:
                kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
            checked += 1
    kinds = {
        obj["kind"] for path in examples for obj in yaml.safe_load_all(path.read_text()) if obj
    }
    missing = {"Topic", "Quota", "GregorCluster", "GregorRebalance"} - kinds
    assert not missing, f"manifests/examples/ has no example of {sorted(missing)}"
    assert checked
