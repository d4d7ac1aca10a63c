"""The GPU share (spec.gpu.share), proved by the API server (docs/gpu.md, "A GPU share per tenant").

A platform with a share gets our ResourceQuota in each of its namespaces; the quota controller
(kube-controller-manager's resourcequota controller, which the test control plane runs) computes
its status; then pods asking HAMi's resources, created AS THE INSTALLER IDENTITY (the token the
installer step minted into its kubeconfig Secret), are admitted up to the share and refused
beyond it by the real ResourceQuota admission, and ``status.gpuShare`` and GPUShareReady follow
used/hard as pods come and go. The installer may read the quota but not change, delete or add
one (the ``admin`` ClusterRole grants resourcequotas read-only; the installer Role grants none).
A changed quota is repaired, a lowered share is reported above usage (pods are never evicted),
and a removed share removes the quotas.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from tenant_platform import metrics, reconcile
from tenant_platform.api import constants
from tenant_platform.concerns.gpushare import manifests
from tenant_platform.config import Settings
from tenant_platform.kube import errors
from tenant_platform.kube.client import Kube
from tenant_platform.testing.controlplane import ControlPlane
from tenant_platform.testing.wait import wait_for

SETTINGS = Settings(drift_interval=30)
QUOTA = manifests.QUOTA_NAME
SHARE = {"cards": 2, "memoryMiB": 20000, "coresPercent": 150}
GPU, MEM, CORES = "nvidia.com/gpu", "nvidia.com/gpumem", "nvidia.com/gpucores"


@pytest.fixture
def fresh_metrics(monkeypatch: pytest.MonkeyPatch) -> Iterator[metrics.Metrics]:
    fresh = metrics.Metrics(CollectorRegistry())
    monkeypatch.setattr(metrics, "METRICS", fresh)
    yield fresh


def body(kube: Kube, name: str) -> dict[str, Any]:
    found = kube.get(constants.API_VERSION, constants.KIND, name)
    assert found is not None
    return found


def run(kube: Kube, name: str) -> dict[str, Any]:
    """One pass; the status as the API server then holds it."""
    reconcile.run(body(kube, name), kube=kube, settings=SETTINGS, now=datetime.now(UTC))
    status: dict[str, Any] = body(kube, name)["status"]
    return status


def share_condition(status: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in status["conditions"] if c["type"] == constants.GPU_SHARE_READY)


def converge(kube: Kube, name: str, reason: str) -> dict[str, Any]:
    """Passes until GPUShareReady has ``reason`` (the quota controller computes status within seconds)."""
    seen: list[dict[str, Any]] = []

    def settled() -> dict[str, Any] | None:
        status = run(kube, name)
        seen.append(share_condition(status))
        return status if seen[-1]["reason"] == reason else None

    found: dict[str, Any] = wait_for(settled, f"GPUShareReady {reason} (last: {seen[-1:] if seen else None})", 60)
    return found


def gpu_pod(name: str, namespace: str, gpu: int, mem: int = 0, cores: int = 0) -> dict[str, Any]:
    limits = {GPU: str(gpu)}
    if mem:
        limits[MEM] = str(mem)
    if cores:
        limits[CORES] = str(cores)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "containers": [{"name": "train", "image": "registry.example.com/train:1", "resources": {"limits": limits}}]
        },
    }


def installer_client(kube: Kube, namespace: str, tmp_path: Path) -> Kube:
    """The installer identity, from the kubeconfig the installer step minted (its own token)."""
    secret = kube.get("v1", "Secret", "platform-installer-kubeconfig", namespace)
    assert secret is not None
    path = tmp_path / "installer.kubeconfig"
    path.write_bytes(base64.b64decode(secret["data"]["kubeconfig"]))
    installer = Kube.from_kubeconfig(str(path))
    review = installer.request(
        "POST",
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        body={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
    )
    assert review["status"]["userInfo"]["username"] == f"system:serviceaccount:{namespace}:platform-installer"
    return installer


def used(kube: Kube, namespace: str) -> dict[str, str]:
    quota = kube.get("v1", "ResourceQuota", QUOTA, namespace)
    assert quota is not None
    return dict((quota.get("status") or {}).get("used") or {})


def refused(installer: Kube, pod: dict[str, Any]) -> str:
    with pytest.raises(errors.Forbidden) as caught:
        installer.create(pod)
    return str(caught.value)


def test_the_share_is_enforced_by_the_api_server(  # noqa: PLR0917 (fixtures)
    crd: Kube,
    make_platform: Any,
    unique_name: str,
    control_plane: ControlPlane,
    fresh_metrics: metrics.Metrics,
    tmp_path: Path,
) -> None:
    ns, extra = unique_name, f"{unique_name}-b"
    make_platform(
        unique_name,
        ns,
        additionalNamespaces=[extra],
        installer={"kubeconfigSecret": {"enabled": True}},
        gpu={"share": SHARE},
        # The write test has pods of its own to write and clean up; the no-write pass below is
        # about the quotas (tests/integration/test_storage.py proves the write test).
        storage={"verify": False},
    )
    status = converge(crd, unique_name, "ShareEnforced")

    # One quota per namespace, ours, with the whole share (canonical quantities), computed.
    for namespace in (ns, extra):
        quota = crd.get("v1", "ResourceQuota", QUOTA, namespace)
        assert quota is not None
        labels = quota["metadata"]["labels"]
        assert labels[constants.LABEL_MANAGED_BY] == constants.MANAGED_BY_VALUE
        assert labels[constants.LABEL_PLATFORM] == unique_name
        assert labels[constants.LABEL_COMPONENT] == "gpushare"
        hard = {f"requests.{GPU}": "2", f"requests.{MEM}": "20k", f"requests.{CORES}": "150"}
        assert quota["spec"]["hard"] == hard
        assert quota["status"]["hard"] == hard
    assert status["gpuShare"]["resources"] == [
        {"resource": GPU, "share": 2, "used": 0, "usedRatio": 0.0},
        {"resource": MEM, "share": 20000, "used": 0, "usedRatio": 0.0},
        {"resource": CORES, "share": 150, "used": 0, "usedRatio": 0.0},
    ]
    assert "bounds each of its 2 namespaces to 2 nvidia.com/gpu" in share_condition(status)["message"]

    # A converged pass writes nothing (the quota's intent reads back equal: no rewrite loop).
    counting = Kube.from_kubeconfig(str(control_plane.kubeconfig_path))
    run(counting, unique_name)
    assert counting.counter.snapshot()[1] == 0, counting.counter.by_verb

    # As the installer: admitted up to the share ...
    installer = installer_client(crd, ns, tmp_path)
    installer.create(gpu_pod("train-a", ns, 1, mem=12000, cores=50))
    installer.create(gpu_pod("train-b", ns, 1, mem=8000, cores=50))
    # ... and refused beyond it, by quota admission (cards, then memory, then cores).
    message = refused(installer, gpu_pod("train-c", ns, 1))
    assert f"exceeded quota: {QUOTA}" in message and f"requests.{GPU}" in message, message
    assert installer.get("v1", "Pod", "train-c", ns) is None
    assert used(crd, ns)[f"requests.{GPU}"] == "2"
    # The other namespace holds the whole share too (docs/gpu.md: per namespace, not split).
    for name in ("other-a", "other-b"):
        crd.create(gpu_pod(name, extra, 1))
    assert f"exceeded quota: {QUOTA}" in refused(crd, gpu_pod("other-c", extra, 1))

    status = run(crd, unique_name)
    condition = share_condition(status)
    assert (condition["status"], condition["reason"]) == ("True", "ShareExhausted"), condition
    assert f"namespace {ns} uses all 2 nvidia.com/gpu" in condition["message"]
    assert f"namespace {ns} uses all 20000 nvidia.com/gpumem" in condition["message"]
    primary = next(q for q in status["gpuShare"]["namespaces"] if q["namespace"] == ns)
    assert primary == {
        "namespace": ns,
        "quota": QUOTA,
        "hard": {GPU: 2, MEM: 20000, CORES: 150},
        "used": {GPU: 2, MEM: 20000, CORES: 100},
    }
    assert [(r["used"], r["usedRatio"]) for r in status["gpuShare"]["resources"]] == [
        (4, 2.0),
        (20000, 1.0),
        (100, 0.6667),
    ]
    # Both namespaces count toward the platform's use: 4 of a share of 2 cards.
    assert (
        fresh_metrics.registry.get_sample_value(metrics.QUOTA_USED_RATIO, {"platform": unique_name, "resource": GPU})
        == 2.0
    )

    # A pod ends: the quota controller gives its share back, status follows, the next pod fits.
    installer.delete("v1", "Pod", "train-a", ns)
    for name in ("other-a", "other-b"):
        crd.delete("v1", "Pod", name, extra)
    wait_for(lambda: used(crd, ns).get(f"requests.{GPU}") == "1", "the quota controller to release train-a", 60)
    wait_for(lambda: used(crd, extra).get(f"requests.{GPU}") == "0", "the quota controller to release other-*", 60)
    status = converge(crd, unique_name, "ShareEnforced")
    assert [r["used"] for r in status["gpuShare"]["resources"]] == [1, 8000, 50]
    installer.create(gpu_pod("train-c", ns, 1, mem=4000))
    message = refused(installer, gpu_pod("train-d", ns, 0, mem=9000))
    assert f"requests.{MEM}" in message, message

    # Attacker view: the installer reads the quota but may not change, delete or add one.
    assert installer.get("v1", "ResourceQuota", QUOTA, ns) is not None
    with pytest.raises(errors.Forbidden):
        installer.merge_patch("v1", "ResourceQuota", QUOTA, {"spec": {"hard": {f"requests.{GPU}": "9"}}}, namespace=ns)
    with pytest.raises(errors.Forbidden):
        installer.delete("v1", "ResourceQuota", QUOTA, ns)
    with pytest.raises(errors.Forbidden):
        installer.create(
            {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "mine", "namespace": ns}, "spec": {}}
        )
    user = f"system:serviceaccount:{ns}:platform-installer"
    groups = ["system:serviceaccounts", f"system:serviceaccounts:{ns}"]
    for verb in ("create", "update", "patch", "delete", "deletecollection"):
        allowed, _ = crd.can_i(user=user, groups=groups, verb=verb, resource="resourcequotas", namespace=ns)
        assert not allowed, f"the installer may {verb} resourcequotas"
        allowed, _ = crd.can_i(
            user=user, groups=groups, verb=verb, resource="resourcequotas", subresource="status", namespace=ns
        )
        assert not allowed, f"the installer may {verb} resourcequotas/status"

    # Someone else (an admin) changes the quota: the next pass repairs it.
    crd.merge_patch("v1", "ResourceQuota", QUOTA, {"spec": {"hard": {f"requests.{GPU}": "100"}}}, namespace=ns)
    run(crd, unique_name)
    repaired = crd.get("v1", "ResourceQuota", QUOTA, ns)
    assert repaired is not None and repaired["spec"]["hard"][f"requests.{GPU}"] == "2"

    # The share lowered below what runs: reported, nothing evicted, new pods refused.
    lowered = {"cards": 1, "memoryMiB": None, "coresPercent": None}
    crd.merge_patch(constants.API_VERSION, constants.KIND, unique_name, {"spec": {"gpu": {"share": lowered}}})
    status = converge(crd, unique_name, "UsageAboveShare")
    condition = share_condition(status)
    assert condition["status"] == "False"
    assert f"namespace {ns} uses 2 nvidia.com/gpu, above the share of 1" in condition["message"]
    assert {p["metadata"]["name"] for p in crd.list("v1", "Pod", ns)} == {"train-b", "train-c"}
    quota = crd.get("v1", "ResourceQuota", QUOTA, ns)
    assert quota is not None and quota["spec"]["hard"] == {f"requests.{GPU}": "1"}  # memory and cores dropped
    assert [r["resource"] for r in status["gpuShare"]["resources"]] == [GPU]
    assert (
        fresh_metrics.registry.get_sample_value(metrics.QUOTA_USED_RATIO, {"platform": unique_name, "resource": MEM})
        is None
    )

    # The share removed: every quota of ours goes, and the section and the gauge with it.
    crd.merge_patch(constants.API_VERSION, constants.KIND, unique_name, {"spec": {"gpu": {"share": None}}})
    status = converge(crd, unique_name, "NoShare")
    assert "gpuShare" not in status
    for namespace in (ns, extra):
        assert crd.get("v1", "ResourceQuota", QUOTA, namespace) is None
    assert (
        fresh_metrics.registry.get_sample_value(metrics.QUOTA_USED_RATIO, {"platform": unique_name, "resource": GPU})
        is None
    )
    installer.create(gpu_pod("train-e", ns, 4))  # no quota, no bound


def test_as_the_operator_identity(as_operator: Kube, crd: Kube, make_platform: Any, unique_name: str) -> None:
    """Under deploy/base/rbac.yaml (RBAC and the writes-fence): the quotas are applied, read back
    and pruned by the operator's own identity."""
    settings = Settings(operator_namespace="tenant-platform-system")
    make_platform(unique_name, unique_name, gpu={"share": {"cards": 1}})

    def reason() -> str:
        body = crd.get(constants.API_VERSION, constants.KIND, unique_name)
        assert body is not None
        status = reconcile.run(body, kube=as_operator, settings=settings, now=datetime.now(UTC)).status
        return str(share_condition(status)["reason"])

    wait_for(lambda: reason() == "ShareEnforced", "ShareEnforced as the operator", 60, interval=1)
    quota = crd.get("v1", "ResourceQuota", QUOTA, unique_name)
    assert quota is not None and quota["spec"]["hard"] == {f"requests.{GPU}": "1"}
    crd.merge_patch(constants.API_VERSION, constants.KIND, unique_name, {"spec": {"gpu": {"share": None}}})
    wait_for(lambda: reason() == "NoShare", "NoShare as the operator", 30, interval=1)
    assert crd.get("v1", "ResourceQuota", QUOTA, unique_name) is None
