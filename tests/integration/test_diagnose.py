"""`tenant-platform diagnose` on the real control plane (the seeded cluster): the archive has every
section, holds no Secret value or token present in the cluster (Secrets of every kind created
for it, an environment value and a password argument in pods), and, run as a read-only identity,
names in MISSING.txt what it could not read.
"""

from __future__ import annotations

import base64
import secrets
import tarfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.support import create_namespace, wait_for

from tenant_platform import cli, diagnose
from tenant_platform.kube.client import Kube
from tenant_platform.testing.controlplane import ControlPlane
from tenant_platform.testing.manifests import gpu_pod_manifest, hami_device_uuid
from tenant_platform.testing.operator import REPO, apply_file

pytestmark = pytest.mark.cluster

VIEWER = "support"
RBAC = "rbac.authorization.k8s.io/v1"


@contextmanager
def view_without_tenantplatforms(kube: Kube, viewer: str) -> Iterator[None]:
    """`view` as Kubernetes ships it, for the block: ClusterRoles that aggregate TenantPlatform reads
    into `view` (deploy/base/api-roles.yaml, left by an install test that ran earlier on this
    worker's control plane) are set aside and put back afterwards. Waits until the aggregation
    controller has taken the rules out of `view`, asked as ``viewer``."""
    aside = [
        role
        for role in kube.list(RBAC, "ClusterRole", label_selector="rbac.authorization.k8s.io/aggregate-to-view=true")
        if any("tenancy.dev" in (rule.get("apiGroups") or []) for rule in role.get("rules") or [])
    ]
    for role in aside:
        kube.delete(RBAC, "ClusterRole", role["metadata"]["name"])

    def cannot_list() -> bool | None:
        allowed, _ = kube.can_i(
            user=viewer, groups=["system:authenticated"], verb="list", group="tenancy.dev", resource="tenantplatforms"
        )
        return (not allowed) or None

    try:
        wait_for(cannot_list, "view to lose the aggregated TenantPlatform reads")
        yield
    finally:
        for role in aside:
            meta = role["metadata"]
            kept = {k: meta[k] for k in ("name", "labels", "annotations") if k in meta}
            if kube.get(RBAC, "ClusterRole", meta["name"]) is None:
                kube.create({"apiVersion": RBAC, "kind": "ClusterRole", "metadata": kept, "rules": role.get("rules")})


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def archive(path: Path) -> dict[str, str]:
    with tarfile.open(path, "r:gz") as tar:
        out = {}
        for member in tar.getmembers():
            data = tar.extractfile(member)
            assert data is not None
            out[member.name.removeprefix(diagnose.ROOT + "/")] = data.read().decode()
        return out


def force_delete(kube: Kube, kind: str, name: str, namespace: str) -> None:
    path = kube.path("v1", kind, name, namespace)
    kube.request("DELETE", path, body={"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0})


@pytest.fixture
def world(crd: Kube, unique_name: str, make_platform: Callable[..., dict[str, Any]]) -> Iterator[dict[str, str]]:
    """A platform, an "operator" Deployment, Secrets of every kind, a GPU pod with a secret in its
    environment and arguments; the values a leak would show."""
    ns, op = unique_name, f"{unique_name}-op"
    for name in (ns, op):
        create_namespace(crd, name, wait_sa=True)
    values = {"opaque": secrets.token_urlsafe(24), "env": secrets.token_urlsafe(24), "arg": secrets.token_urlsafe(24)}
    kubeconfig = yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "c", "cluster": {"server": "https://10.0.0.1:6443"}}],
            "users": [{"name": "u", "user": {"token": secrets.token_urlsafe(32)}}],
            "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
            "current-context": "c",
        }
    )
    for name, data in (("creds", {"password": b64(values["opaque"])}), ("kubeconfig", {"value": b64(kubeconfig)})):
        crd.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": ns}, "data": data})
    crd.create(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "kubernetes.io/service-account-token",
            "metadata": {
                "name": "sa-token",
                "namespace": ns,
                "annotations": {"kubernetes.io/service-account.name": "default"},
            },
        }
    )
    wait_for(
        lambda: (crd.get("v1", "Secret", "sa-token", ns) or {}).get("data", {}).get("token"), "the token controller"
    )
    make_platform(ns, ns, gpu={"hami": {"configMapNamespace": ns}})
    container = {
        "name": "operator",
        "image": "registry.k8s.io/pause:3.10.1",
        "args": [f"--password={values['arg']}"],
        "env": [{"name": "AWS_SECRET", "value": values["env"]}],
    }
    labels = {"app.kubernetes.io/name": "tenant-platform-operator"}
    crd.create(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "tenant-platform-operator", "namespace": op, "labels": labels},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}},
            },
        }
    )
    pod = gpu_pod_manifest(
        "trainer", namespace=ns, node_name="gpu-node-1", devices=[(hami_device_uuid("gpu-node-1", 0), 1000, 10)]
    )
    pod["spec"]["containers"][0]["env"] = [{"name": "HF_TOKEN", "value": values["env"]}]
    crd.create(pod)
    crd.create(
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{ns}.1", "namespace": "default"},
            "involvedObject": {"apiVersion": "tenancy.dev/v1alpha1", "kind": "TenantPlatform", "name": ns},
            "reason": "Reconciled",
            "message": "test event",
            "type": "Normal",
        }
    )
    try:
        yield {"namespace": ns, "operator": op, **values}
    finally:
        force_delete(crd, "Pod", "trainer", ns)
        crd.delete("v1", "Event", f"{ns}.1", "default")
        for name in (ns, op):
            crd.delete("v1", "Namespace", name)


def every_secret_value(kube: Kube) -> set[str]:
    """Every Secret value and token in the cluster a leak would show, decoded and as stored:
    whole values, each line of multi-line ones but kubeconfigs, and the token and keys of
    kubeconfigs (other tests' Secrets are in the cluster too, when the files share a control
    plane). Left out:
    values under 8 characters and a token Secret's ``namespace`` (a namespace name)."""
    found: set[str] = set()
    for item in kube.list("v1", "Secret"):
        for key, raw in (item.get("data") or {}).items():
            if key == "namespace":
                continue
            value = base64.b64decode(raw).decode(errors="replace")
            candidates = {value, raw}
            try:
                doc = yaml.safe_load(value)
            except yaml.YAMLError:
                doc = None
            if isinstance(doc, dict) and "users" in doc:
                # A kubeconfig: its credentials, not its structure (a line such as "cluster:" is
                # in any YAML the archive holds).
                for user in doc.get("users") or []:
                    candidates |= {str(v) for v in (user.get("user") or {}).values()}
            else:
                candidates |= set(value.splitlines())
            found |= {c.strip() for c in candidates if len(c.strip()) >= 8 and not c.strip().startswith("-----")}
    return found


def assert_no_secret(files: dict[str, str], values: set[str]) -> None:
    whole = "\n".join(files.values())
    leaked = sorted(v[:12] + "..." for v in values if v in whole)
    assert not leaked, f"Secret values in the archive: {leaked}"


def run(kubeconfig: Path, out: Path, op: str, capsys: pytest.CaptureFixture[str]) -> tuple[dict[str, str], str]:
    assert cli.main(["diagnose", "--kubeconfig", str(kubeconfig), "-o", str(out), "-n", op]) == 0
    return archive(out), capsys.readouterr().err


def test_the_archive_has_every_section_and_no_secret(
    crd: Kube, seeded: ControlPlane, world: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files, err = run(seeded.kubeconfig_path, tmp_path / "d.tar.gz", world["operator"], capsys)
    assert set(diagnose.SECTIONS) <= set(files), set(diagnose.SECTIONS) - set(files)
    for index in range(1, len(diagnose.STAGES) + 1):
        assert f"[{index}/{len(diagnose.STAGES)}]" in err
    ns = world["namespace"]
    assert f"name: {ns}" in files["platforms/platforms.yaml"]
    assert "test event" in files["platforms/events.yaml"]
    assert "name: tenant-platform-operator" in files["operator/deployments.yaml"]
    assert "name: AWS_SECRET" in files["operator/deployments.yaml"]
    assert f"== TenantPlatform {ns}" in files["checks/checks.txt"]
    nodes = yaml.safe_load(files["gpu/nodes.yaml"])["items"]
    node1 = next(n for n in nodes if n["name"] == "gpu-node-1")
    assert len(node1["decoded"]["cards"]) == 8 and node1["decoded"]["cards"][0]["model"] == "NVIDIA H200"
    assert node1["capacityStatus"]["pods"] >= 1
    pods = yaml.safe_load(files["gpu/pods.yaml"])["items"]
    trainer = next(p for p in pods if p["name"] == "trainer")
    assert trainer["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert "kubernetes cluster.local" in files["dns/Corefile"]
    webhook = yaml.safe_load(files["gpu/webhook.yaml"])["items"]
    assert ns in {w["platform"] for w in webhook}
    # The offline fit reads the archive's snapshot.
    snapshot = tmp_path / "fit.yaml"
    snapshot.write_text(files["gpu/fit-snapshot.yaml"])
    assert cli.main(["fit", "--snapshot", str(snapshot), "--memory", "1000"]) == 0
    assert "gpu-node-1" in capsys.readouterr().out
    values = every_secret_value(crd)
    assert world["opaque"] in values  # the Secrets created above are among those looked for
    assert_no_secret(files, values | {world["env"], world["arg"]})
    assert "diagnose never reads Secrets" in files["checks/checks.txt"]


def test_as_a_read_only_identity_missing_names_what_view_cannot_read(
    crd: Kube, seeded: ControlPlane, world: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ns = world["namespace"]
    crd.create({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": VIEWER, "namespace": ns}})
    subject = [{"kind": "ServiceAccount", "name": VIEWER, "namespace": ns}]
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": f"{ns}-view"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": subject,
    }
    crd.create(binding)
    extra = {**binding, "metadata": {"name": f"{ns}-diagnose"}}
    extra["roleRef"] = {**binding["roleRef"], "name": "tenant-platform-diagnose"}
    try:
        token, _ = crd.request_token(ns, VIEWER, expiration_seconds=600)
        kubeconfig = seeded.kubeconfig_for_token(token, tmp_path / "viewer")
        with view_without_tenantplatforms(crd, f"system:serviceaccount:{ns}:{VIEWER}"):
            files, _ = run(kubeconfig, tmp_path / "view.tar.gz", world["operator"], capsys)
        missing = files["MISSING.txt"]
        assert "Nodes: refused (403). Needs: list nodes (cluster)" in missing
        assert "TenantPlatforms: refused (403). Needs: list tenantplatforms.tenancy.dev (cluster)" in missing
        assert set(diagnose.SECTIONS) <= set(files)
        assert_no_secret(files, every_secret_value(crd))
        # With what docs/security.md lists besides view, nothing is refused.
        apply_file(crd, REPO / "deploy" / "diagnose" / "rbac.yaml")
        crd.create(extra)
        files, _ = run(kubeconfig, tmp_path / "full.tar.gz", world["operator"], capsys)
        assert "refused (403)" not in files["MISSING.txt"], files["MISSING.txt"]
        assert f"name: {ns}" in files["platforms/platforms.yaml"]
        assert "gpu-node-1" in files["gpu/nodes.yaml"]
        assert_no_secret(files, every_secret_value(crd))
    finally:
        for name in (f"{ns}-view", f"{ns}-diagnose"):
            crd.delete("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", name)
