"""The Helm chart where users put it: as a subchart, from Flux's HelmRelease values, and through a
real `helm install` / `upgrade` / `uninstall` that must never take the CRD (and with it every
TenantPlatform) away. helm is built by hack/build-tools.sh (tenant_platform.testing.tools).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tenant_platform import __version__
from tenant_platform.testing import tools
from tenant_platform.testing.controlplane import ControlPlane

pytestmark = pytest.mark.timeout(1500)

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "tenant-platform"
CRD_NAME = "tenantplatforms.tenancy.dev"
FLUX = ROOT / "deploy" / "flux"

Obj = dict[str, Any]


def helm(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([str(tools.tool_path("helm")), *args], capture_output=True, text=True, check=False)
    if check:
        assert proc.returncode == 0, f"helm {' '.join(args)}:\n{proc.stdout}\n{proc.stderr}"
    return proc


def docs(text: str) -> list[Obj]:
    return [d for d in yaml.safe_load_all(text) if d]


def dry_run(cp: ControlPlane, objs: list[Obj]) -> list[Obj]:
    out = json.loads(
        cp.kubectl(
            "apply",
            "--server-side",
            "--field-manager=helm-chart-test",
            # A dry run judges the manifests, not who else manages a same-named object in the
            # session's cluster (the operator's RBAC installed by other tests).
            "--force-conflicts",
            "--dry-run=server",
            "-o",
            "json",
            "-f",
            "-",
            input=yaml.safe_dump_all(objs),
        ).stdout
    )
    return out["items"] if out.get("kind") == "List" else [out]


# -- as a subchart -------------------------------------------------------------------------------


def parent_chart(tmp_path: Path, values: Obj) -> Path:
    """A throwaway parent chart that depends on ours (file://), as an umbrella chart would."""
    parent = tmp_path / "parent"
    (parent / "templates").mkdir(parents=True)
    chart = {
        "apiVersion": "v2",
        "name": "parent",
        "version": "0.0.1",
        "dependencies": [
            {
                "name": "tenant-platform",
                "version": yaml.safe_load((CHART / "Chart.yaml").read_text())["version"],
                "repository": f"file://{CHART}",
                "condition": "tenant-platform.enabled",
            }
        ],
    }
    (parent / "Chart.yaml").write_text(yaml.safe_dump(chart))
    (parent / "values.yaml").write_text(yaml.safe_dump(values))
    # A parent template of its own, reading a global the subchart must tolerate.
    (parent / "templates" / "configmap.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: parent-settings\n"
        "data:\n  registry: {{ .Values.global.imageRegistry | quote }}\n"
    )
    helm("dependency", "build", str(parent))
    return parent


SUBCHART_VALUES: Obj = {
    "global": {"imageRegistry": "registry.example.com", "imagePullSecrets": [{"name": "pull"}], "storageClass": "x"},
    "tenant-platform": {
        "enabled": True,
        "image": {"repository": "registry.example.com/tenant-platform-operator"},
        # OpenShift-style: leave the IDs to the SCC by deleting the defaults (Helm's null).
        "podSecurityContext": {"runAsUser": None, "runAsGroup": None, "fsGroup": None},
        "podDisruptionBudget": {"enabled": True},
        "networkPolicy": {"enabled": True},
    },
}


def test_subchart_renders_with_globals_and_applies(
    tmp_path: Path, control_plane: ControlPlane, unique_name: str
) -> None:
    parent = parent_chart(tmp_path, SUBCHART_VALUES)
    helm("lint", "--strict", str(parent))
    namespace = unique_name
    rendered = docs(helm("template", "umbrella", str(parent), "--namespace", namespace).stdout)
    kinds = sorted({d["kind"] for d in rendered})
    assert {"CustomResourceDefinition", "Deployment", "PodDisruptionBudget", "NetworkPolicy", "ConfigMap"} <= set(kinds)
    (deployment,) = [d for d in rendered if d["kind"] == "Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"] == {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
    assert pod["containers"][0]["image"] == f"registry.example.com/tenant-platform-operator:{__version__}"
    # Everything in the release namespace, but the events Role and RoleBinding (the API server takes
    # events about a cluster-scoped object only in `default`) and the cluster-info reader in
    # kube-public (docs/security.md).
    elsewhere = {
        (d["kind"], d["metadata"]["name"]) for d in rendered if d["metadata"].get("namespace", namespace) != namespace
    }
    assert elsewhere == {
        (kind, name)
        for kind in ("Role", "RoleBinding")
        for name in ("tenant-platform-operator-events", "tenant-platform-operator-cluster-info")
    }
    control_plane.kubectl("create", "namespace", namespace)
    try:
        stored = dry_run(control_plane, rendered)
        assert len(stored) == len(rendered)
    finally:
        control_plane.kubectl("delete", "namespace", namespace, "--wait=false")


def test_subchart_condition_and_schema(tmp_path: Path) -> None:
    off = dict(SUBCHART_VALUES, **{"tenant-platform": {"enabled": False}})
    parent = parent_chart(tmp_path, off)
    rendered = docs(helm("template", "umbrella", str(parent)).stdout)
    assert [d["kind"] for d in rendered] == ["ConfigMap"]
    # Enabled, the schema guards the subchart's own values under the parent's key.
    bad = helm(
        "template",
        "umbrella",
        str(parent),
        "--set",
        "tenant-platform.enabled=true",
        "--set",
        "tenant-platform.operator.logFormat=xml",
        check=False,
    )
    assert bad.returncode != 0
    assert "tenant-platform:" in bad.stderr and "logFormat" in bad.stderr, bad.stderr


# -- the Flux example ----------------------------------------------------------------------------


def test_flux_helmrelease_values_render_and_apply(
    tmp_path: Path, control_plane: ControlPlane, unique_name: str
) -> None:
    """The HelmRelease's values pass the chart's schema and render objects the API server takes."""
    (release,) = [d for d in docs((FLUX / "helmrelease.yaml").read_text()) if d["kind"] == "HelmRelease"]
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump(release["spec"]["values"]))
    chart = ROOT / release["spec"]["chart"]["spec"]["chart"]
    assert chart.resolve() == CHART
    namespace = unique_name
    rendered = docs(
        helm("template", release["spec"]["releaseName"], str(chart), "-n", namespace, "-f", str(values)).stdout
    )
    assert "CustomResourceDefinition" in [d["kind"] for d in rendered]
    control_plane.kubectl("create", "namespace", namespace)
    try:
        assert len(dry_run(control_plane, rendered)) == len(rendered)
    finally:
        control_plane.kubectl("delete", "namespace", namespace, "--wait=false")


# -- the CRD through a release's life, on a control plane of its own ------------------------------


def crd_annotations(cp: ControlPlane) -> dict[str, str]:
    crd = json.loads(cp.kubectl("get", "crd", CRD_NAME, "-o", "json").stdout)
    annotations: dict[str, str] = crd["metadata"].get("annotations") or {}
    return annotations


def test_crd_survives_uninstall_and_upgrades_without_a_checkout(tmp_path: Path) -> None:
    """Real `helm install/upgrade/uninstall` (not a template): the CRD and a TenantPlatform outlive
    the release; a CRD an older install left (no Helm metadata) is adopted as docs/upgrade.md says;
    the CRD of a packaged chart (no Git checkout) applies server-side.

    NB: its own control plane: the session's CRD was created by other tests without Helm's metadata.
    """
    with ControlPlane(controller_manager=False) as cp:
        kube = ["--kubeconfig", str(cp.kubeconfig_path)]
        ns = "tenant-platform-system"
        cp.kubectl("create", "namespace", ns)
        # What the chart's crds/ (or kubectl apply -f crds/) left behind, and a platform using it.
        cp.kubectl("apply", "--server-side", "-f", str(ROOT / "crds" / "tenancy.dev_tenantplatforms.yaml"))
        cp.kubectl("wait", "--for=condition=Established", "--timeout=60s", f"crd/{CRD_NAME}")
        cp.kubectl("create", "-f", str(ROOT / "deploy" / "samples" / "tenantplatform.yaml"))

        install = ["install", "tenant-platform", str(CHART), "-n", ns, "--set", "operator.driftInterval=120", *kube]
        upgrade = ["upgrade", "tenant-platform", str(CHART), "-n", ns, "--reset-then-reuse-values", *kube]
        refused = helm(*install, check=False)
        assert refused.returncode != 0
        assert "invalid ownership metadata" in refused.stderr, refused.stderr
        adopt = (ROOT / "docs" / "upgrade.md").read_text()
        for command in (
            f"kubectl label crd {CRD_NAME} app.kubernetes.io/managed-by=Helm",
            f"kubectl annotate crd {CRD_NAME} meta.helm.sh/release-name=tenant-platform "
            "meta.helm.sh/release-namespace=tenant-platform-system",
        ):
            assert command in adopt, f"docs/upgrade.md lacks: {command}"
            cp.kubectl(*command.split()[1:])
        helm(*install)
        assert crd_annotations(cp)["meta.helm.sh/release-name"] == "tenant-platform"

        # A release that stops rendering the CRD leaves it (resource-policy keep).
        helm(*upgrade, "--set", "crds.install=false")
        cp.kubectl("get", "crd", CRD_NAME)
        helm(*upgrade, "--set", "crds.install=true")
        # docs/upgrade.md's upgrade keeps the values set before.
        values = json.loads(helm("get", "values", "tenant-platform", "-n", ns, "-o", "json", *kube).stdout)
        assert values["operator"] == {"driftInterval": 120}

        uninstalled = helm("uninstall", "tenant-platform", "-n", ns, *kube)
        assert "kept due to the resource policy" in uninstalled.stdout, uninstalled.stdout
        assert crd_annotations(cp)["helm.sh/resource-policy"] == "keep"
        cp.kubectl("get", "tenantplatform", "kamiwaza")
        assert cp.kubectl("get", "deployment", "-n", ns, "--ignore-not-found", "-o", "name").stdout == ""
        # The same release installs again over the kept CRD.
        helm(*install)

        # Upgrading the CRD without a Git checkout: from the packaged chart (as a chart
        # repository or OCI registry serves it), rendered and applied server-side.
        package_dir = tmp_path / "packages"
        helm("package", str(CHART), "-d", str(package_dir))
        (archive,) = package_dir.iterdir()
        isolated = tmp_path / "elsewhere"
        isolated.mkdir()
        shutil.copy(archive, isolated)
        crd = helm(
            "template",
            "tenant-platform",
            str(isolated / archive.name),
            "--set",
            "crds.install=true",
            "--show-only",
            "templates/crd.yaml",
        ).stdout
        applied = cp.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=crd)
        assert f"customresourcedefinition.apiextensions.k8s.io/{CRD_NAME} serverside-applied" in applied.stdout
        cp.kubectl("get", "tenantplatform", "kamiwaza")
