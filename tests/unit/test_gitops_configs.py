"""The kube-state-metrics and Flux examples in docs/gitops/ reference what really exists.

kube-state-metrics cannot be built here, so its config is checked against its documented shape,
the CRD's schema and status documents the operator's code computed (tests/fixtures/status/).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tenant_platform.api import constants

ROOT = Path(__file__).resolve().parents[2]
KSM = ROOT / "docs" / "gitops" / "kube-state-metrics.yaml"
FLUX = ROOT / "docs" / "gitops" / "flux-kustomizations.yaml"
CRD = ROOT / "crds" / "tenancy.dev_tenantplatforms.yaml"
FIXTURES = ROOT / "tests" / "fixtures" / "status"
# metav1.ObjectMeta fields a TenantPlatform can carry (the CRD schema does not list them).
OBJECT_META = {"name", "generation", "deletionTimestamp", "creationTimestamp", "labels", "annotations", "uid"}


def _schema_at(schema: dict[str, Any], path: list[str]) -> dict[str, Any] | None:
    node = schema
    for key in path:
        if node.get("type") == "array":
            node = node["items"]
        props = node.get("properties") or {}
        if key not in props:
            return None
        node = props[key]
    return node


def _crd_schema() -> dict[str, Any]:
    crd = yaml.safe_load(CRD.read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == constants.VERSION]
    return version["schema"]["openAPIV3Schema"]


def _fixture_values(path: list[str]) -> list[Any]:
    values = []
    for fixture in FIXTURES.glob("*.yaml"):
        node: Any = yaml.safe_load(fixture.read_text())
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        if node is not None:
            values.append(node)
    return values


def test_ksm_config_targets_our_kind() -> None:
    config = yaml.safe_load(KSM.read_text())
    assert config["kind"] == "CustomResourceStateMetrics"
    (resource,) = config["spec"]["resources"]
    assert resource["groupVersionKind"] == {
        "group": constants.GROUP,
        "version": constants.VERSION,
        "kind": constants.KIND,
    }
    assert resource["labelsFromPath"] == {"name": ["metadata", "name"]}


def test_ksm_metrics_reference_real_paths() -> None:
    config = yaml.safe_load(KSM.read_text())
    (resource,) = config["spec"]["resources"]
    schema = _crd_schema()
    names = set()
    for metric in resource["metrics"]:
        names.add(metric["name"])
        assert metric["help"]
        assert metric["each"]["type"] == "Gauge"
        gauge = metric["each"]["gauge"]
        path = gauge["path"]
        if path[0] == "metadata":
            assert len(path) == 2
            assert path[1] in OBJECT_META
            continue
        node = _schema_at(schema, path)
        assert node is not None, f"{path} is not in the CRD schema"
        if node.get("type") == "array":
            # A list of objects: labels and the value come from each item's fields.
            assert node.get("x-kubernetes-list-type") == "map"
            item = node["items"]
            for sub in [*gauge.get("labelsFromPath", {}).values(), gauge["valueFrom"]]:
                assert _schema_at(item, sub) is not None, f"{path}+{sub} is not in the CRD schema"
            items = [i for value in _fixture_values(path) for i in value]
            assert items, f"no status fixture has {path}"
            for item_value in items:
                for sub in [*gauge.get("labelsFromPath", {}).values(), gauge["valueFrom"]]:
                    assert sub[0] in item_value
                # What kube-state-metrics can turn into a number: booleans as strings.
                assert item_value[gauge["valueFrom"][0]] in {"True", "False", "Unknown"}
        else:
            assert node.get("type") == "integer"
            assert all(isinstance(v, int) for v in _fixture_values(path)), path
            assert _fixture_values(path), f"no status fixture has {path}"
    assert names == {
        "status_condition",
        "status_observed_generation",
        "metadata_generation",
        "metadata_deletion_timestamp",
    }


def test_flux_example_installs_base_and_health_checks_our_kind() -> None:
    docs = list(yaml.safe_load_all(FLUX.read_text()))
    kinds = [(d["apiVersion"], d["kind"]) for d in docs]
    assert kinds == [
        ("source.toolkit.fluxcd.io/v1", "GitRepository"),
        ("kustomize.toolkit.fluxcd.io/v1", "Kustomization"),
        ("kustomize.toolkit.fluxcd.io/v1", "Kustomization"),
    ]
    operator, platforms = docs[1], docs[2]
    path = ROOT / operator["spec"]["path"]
    assert (path / "kustomization.yaml").is_file(), "the operator Kustomization must point at the kustomize base"
    assert operator["spec"]["wait"] is True
    assert platforms["spec"]["dependsOn"] == [{"name": operator["metadata"]["name"]}]
    (check,) = platforms["spec"]["healthChecks"]
    assert check["apiVersion"] == constants.API_VERSION
    assert check["kind"] == constants.KIND
    sample = yaml.safe_load((ROOT / "deploy" / "samples" / "tenantplatform.yaml").read_text())
    assert check["name"] == sample["metadata"]["name"]


def test_docs_show_the_shipped_flux_health_check_exprs() -> None:
    """docs/gitops.md shows the healthCheckExprs recipe that tests/integration/test_judges.py tests."""
    docs = list(yaml.safe_load_all(FLUX.read_text()))
    (shipped,) = [d["spec"]["healthCheckExprs"] for d in docs if "healthCheckExprs" in d["spec"]]
    text = (ROOT / "docs" / "gitops.md").read_text()
    start = text.index("```yaml\n  healthCheckExprs:\n") + len("```yaml\n")
    shown = yaml.safe_load(text[start : text.index("```", start)])["healthCheckExprs"]
    assert shown == shipped
    (entry,) = shipped
    assert (entry["apiVersion"], entry["kind"]) == (constants.API_VERSION, constants.KIND)
    assert set(entry) == {"apiVersion", "kind", "inProgress", "failed", "current"}
