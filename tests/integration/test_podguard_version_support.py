"""Which Kubernetes the pod guard supports: where the v1 ValidatingAdmissionPolicy kinds are not
served (before 1.30, or emulated), the step reports UnsupportedKubernetesVersion, naming the
alternatives, and writes nothing; the session's own server (``--k8s`` / ``TENANT_PLATFORM_K8S``)
decides by its version."""

from __future__ import annotations

import uuid

import pytest
from podguard_support import context
from tests.support import platform_body, sole_condition

from tenant_platform.concerns.podguard.step import STEP
from tenant_platform.kube.client import Kube
from tenant_platform.testing.controlplane import ControlPlane
from tenant_platform.testing.steps import reconcile_step

pytestmark = pytest.mark.cluster


def test_cluster_without_v1_validating_admission_policy(control_plane: ControlPlane) -> None:
    """Emulates a cluster before 1.30: the v1 kinds are not served (and the plugin is off)."""
    resources = "admissionregistration.k8s.io/v1/validatingadmissionpolicies"
    with ControlPlane(
        bin_dir=control_plane.bin_dir,
        controller_manager=False,
        extra_apiserver_args=[
            "--disable-admission-plugins=ValidatingAdmissionPolicy",
            f"--runtime-config={resources}=false,{resources[: -len('policies')]}policybindings=false",
        ],
    ) as old:
        kube = Kube.from_kubeconfig(str(old.kubeconfig_path))
        body = platform_body("old-cluster", "kamiwaza", uid="u-1", domain="x.example.com")
        result = reconcile_step(STEP, context(kube, body))
        status, reason, message = sole_condition(result)
        assert (status, reason) == ("False", "UnsupportedKubernetesVersion")
        assert "Kyverno or Gatekeeper" in message
        assert "docs/pod-guard.md" in message
        assert result.status["podGuard"] == {"enforcement": "None", "requested": "Staged"}
        assert kube.counter.snapshot()[1] == 0
        assert STEP.cleanup(context(kube, body)).done


def test_the_session_servers_version_decides_support(admin_kube: Kube) -> None:
    """On the real server the session runs (--k8s / TENANT_PLATFORM_K8S): before 1.30 (a real 1.29
    from hack/k8s-1.29) the step reports UnsupportedKubernetesVersion naming the version and writes
    nothing; from 1.30 on the v1 kinds are served and the step does not say so."""
    major, minor, git_version = admin_kube.server_version()
    body = platform_body(
        f"version-{uuid.uuid4().hex[:6]}", f"version-{uuid.uuid4().hex[:6]}", uid="u-1", domain="v.example.com"
    )
    result = reconcile_step(STEP, context(admin_kube, body, dry_run=True))
    status, reason, message = sole_condition(result)
    if (major, minor) < (1, 30):
        assert (status, reason) == ("False", "UnsupportedKubernetesVersion"), message
        assert f"Kubernetes {git_version} does not serve" in message, message
        assert admin_kube.counter.snapshot()[1] == 0
        assert "Kyverno or Gatekeeper" in message
    else:
        assert reason != "UnsupportedKubernetesVersion", message
        assert admin_kube.served("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy")
