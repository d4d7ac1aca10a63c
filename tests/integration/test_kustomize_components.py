"""The kustomize components (deploy/components/<name>): monitoring (ServiceMonitor and PrometheusRule),
pdb and networkpolicy, each added to deploy/base by an overlay as docs/install.md shows. They build
with `kubectl kustomize`, leave the base's objects as they are, hold what the chart renders with
the matching value switched on, and the API server takes them (server-side dry run).

NB: on a control plane of its own: the monitoring component needs the monitoring.coreos.com/v1
CRDs (the stand-ins of test_deploy_manifests.py), which the session's cluster must not serve.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.integration.test_deploy_manifests import MONITORING_CRDS

from tenant_platform.testing import tools
from tenant_platform.testing.controlplane import ControlPlane, find_bin_dir

pytestmark = pytest.mark.timeout(900)

ROOT = Path(__file__).resolve().parents[2]
BASE = ROOT / "deploy" / "base"
COMPONENTS = ROOT / "deploy" / "components"
CHART = ROOT / "deploy" / "helm" / "tenant-platform"
NAMESPACE = "tenant-platform-system"

Obj = dict[str, Any]

# Which objects each component adds, and the chart value that renders the same ones.
ADDS = {
    "monitoring": (
        {"ServiceMonitor", "PrometheusRule"},
        ("metrics.serviceMonitor.enabled", "metrics.prometheusRule.enabled"),
    ),
    "pdb": ({"PodDisruptionBudget"}, ("podDisruptionBudget.enabled",)),
    "networkpolicy": ({"NetworkPolicy"}, ("networkPolicy.enabled",)),
}


def docs(text: str) -> list[Obj]:
    return [d for d in yaml.safe_load_all(text) if d]


def key(obj: Obj) -> tuple[str, str, str]:
    return (obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"])


def kustomize(path: Path) -> list[Obj]:
    proc = subprocess.run(
        [str(find_bin_dir() / "kubectl"), "kustomize", str(path)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return docs(proc.stdout)


def overlay(tmp_path: Path, *components: str) -> Path:
    """An overlay of deploy/base with the components, as docs/install.md writes it."""
    path = tmp_path / ("overlay-" + "-".join(components))
    path.mkdir()
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [os.path.relpath(BASE, path)],  # kustomize takes bases by relative path only
        "components": [os.path.relpath(COMPONENTS / c, path) for c in components],
    }
    (path / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    return path


def chart_objects(*flags: str) -> list[Obj]:
    args = [str(tools.tool_path("helm")), "template", "tenant-platform", str(CHART), "--namespace", NAMESPACE]
    args += ["--api-versions", "monitoring.coreos.com/v1"]
    for flag in flags:
        args += ["--set", f"{flag}=true"]
    proc = subprocess.run(args, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    return docs(proc.stdout)


def without_labels(obj: Obj) -> Obj:
    obj = copy.deepcopy(obj)
    obj["metadata"].pop("labels", None)
    return obj


@pytest.fixture(scope="module")
def monitoring_cluster() -> Iterator[ControlPlane]:
    with ControlPlane(controller_manager=False) as cp:
        cp.kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump_all(MONITORING_CRDS))
        for crd in MONITORING_CRDS:
            cp.kubectl("wait", "--for=condition=Established", "--timeout=60s", f"crd/{crd['metadata']['name']}")
        yield cp


@pytest.mark.parametrize("component", sorted(ADDS))
def test_component_adds_the_charts_objects_to_the_base(tmp_path: Path, component: str) -> None:
    kinds, flags = ADDS[component]
    base = {key(o): o for o in kustomize(BASE)}
    built = {key(o): o for o in kustomize(overlay(tmp_path, component))}
    assert {k: built[k] for k in base} == base  # the base is unchanged
    added = {k: o for k, o in built.items() if k not in base}
    assert {k[0] for k in added} == kinds
    assert all(k[1] == NAMESPACE for k in added)
    chart = {key(o): o for o in chart_objects(*flags) if o["kind"] in kinds}
    assert set(chart) == set(added)
    for k, obj in added.items():
        assert without_labels(obj) == without_labels(chart[k]), k
        assert obj["metadata"]["labels"] == {"app.kubernetes.io/name": "tenant-platform-operator"}


def test_components_together_apply_to_the_api_server(tmp_path: Path, monitoring_cluster: ControlPlane) -> None:
    """Every component (and watch-secrets) on one overlay; the API server takes every object."""
    objs = kustomize(overlay(tmp_path, *sorted(ADDS), "watch-secrets"))
    kinds = {o["kind"] for o in objs}
    assert {"ServiceMonitor", "PrometheusRule", "PodDisruptionBudget", "NetworkPolicy", "Deployment"} <= kinds
    (namespace,) = [o for o in objs if o["kind"] == "Namespace"]
    monitoring_cluster.kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump(namespace))
    proc = monitoring_cluster.kubectl(
        "apply",
        "--server-side",
        "--dry-run=server",
        "--field-manager=components-test",
        "-o",
        "json",
        "-f",
        "-",
        input=yaml.safe_dump_all(objs),
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    stored = json.loads(proc.stdout)
    items = stored["items"] if stored.get("kind") == "List" else [stored]
    assert sorted(map(key, items)) == sorted(map(key, objs))
    by = {key(o): o for o in items}
    pdb = by[("PodDisruptionBudget", NAMESPACE, "tenant-platform-operator")]
    assert pdb["spec"]["maxUnavailable"] == 1 and pdb["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow"
    pod_labels = by[("Deployment", NAMESPACE, "tenant-platform-operator")]["spec"]["template"]["metadata"]["labels"]
    policy = by[("NetworkPolicy", NAMESPACE, "tenant-platform-operator")]["spec"]
    assert policy["podSelector"]["matchLabels"].items() <= pod_labels.items()
    service = by[("Service", NAMESPACE, "tenant-platform-operator-metrics")]
    monitor = by[("ServiceMonitor", NAMESPACE, "tenant-platform-operator")]["spec"]
    assert monitor["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    rule = by[("PrometheusRule", NAMESPACE, "tenant-platform-operator")]["spec"]
    assert len([r for g in rule["groups"] for r in g["rules"]]) == 10
