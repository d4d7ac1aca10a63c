"""The reconcile core against the real API server: namespaces, installer identity, zero-write
resyncs, pause, invalid spec, conflicts, and cleanup under both deletion policies.

These tests call ``reconcile.run`` and the steps' cleanup directly (as admin); the e2e suite runs
the same code as the operator process under its own RBAC.
"""

from __future__ import annotations

import base64
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import yaml
from tests.support import condition

from tenant_platform import reconcile
from tenant_platform.api import constants
from tenant_platform.config import Settings
from tenant_platform.kube.client import Kube
from tenant_platform.testing.controlplane import ControlPlane
from tenant_platform.testing.wait import wait_for

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
SETTINGS = Settings(drift_interval=30)


def fresh(kube: Kube, name: str) -> dict[str, Any]:
    body = kube.get(constants.API_VERSION, constants.KIND, name)
    assert body is not None
    return body


def run(kube: Kube, name: str, **kwargs: Any) -> reconcile.Outcome:
    return reconcile.run(fresh(kube, name), kube=kube, settings=SETTINGS, now=NOW, **kwargs)


def test_namespaces_and_installer(crd: Kube, make_platform: Any, unique_name: str, control_plane: ControlPlane) -> None:
    extra = f"{unique_name}-ext"
    make_platform(unique_name, unique_name, additionalNamespaces=[extra])
    outcome = run(crd, unique_name)
    status = fresh(crd, unique_name)["status"]
    assert condition(status, "NamespacesReady")["status"] == "True", status
    assert condition(status, "InstallerReady")["status"] == "True", condition(status, "InstallerReady")
    assert status["observedGeneration"] == 1
    assert outcome.status_written
    for ns in (unique_name, extra):
        labels = crd.get("v1", "Namespace", ns)["metadata"]["labels"]  # type: ignore[index]
        assert labels["istio-injection"] == "enabled"
        assert labels["pod-security.kubernetes.io/warn"] == "restricted"
        assert labels["pod-security.kubernetes.io/audit"] == "restricted"
        assert "pod-security.kubernetes.io/enforce" not in labels
        assert labels[constants.LABEL_PLATFORM] == unique_name
    # Installer identity only in the primary namespace.
    assert crd.get("v1", "ServiceAccount", "platform-installer", unique_name) is not None
    assert crd.get("v1", "ServiceAccount", "platform-installer", extra) is None
    # The checklist's can-i checks, through the API with impersonation.
    who = f"--as=system:serviceaccount:{unique_name}:platform-installer"
    expectations = [
        (["create", "deployments", "-n", unique_name], "yes"),
        (["create", "virtualservices.networking.istio.io", "-n", unique_name], "yes"),
        (["create", "endpoints", "-n", unique_name], "yes"),
        (["patch", "pods/status", "-n", unique_name], "yes"),
        (["create", "deployments", "-n", "default"], "no"),
        (["create", "clusterroles"], "no"),
        (["create", "customresourcedefinitions"], "no"),
        (["list", "nodes"], "no"),
    ]
    for args, want in expectations:
        got = control_plane.kubectl("auth", "can-i", *args, who, check=False).stdout.strip()
        assert got == want, (args, got)


def test_no_op_resync_performs_zero_writes(crd: Kube, make_platform: Any, unique_name: str, control_plane: Any) -> None:
    make_platform(unique_name, unique_name)
    # Converge first: staged enforcement waits for its canary to see the new policy (the API
    # server loads policies asynchronously), so it may take a few passes. A no-op resync is a
    # pass over a platform with nothing in progress.
    for _ in range(20):
        outcome = run(crd, unique_name)
        # (Reconciling stays True while a concern waits, e.g. for Istio: no step is in flight then.)
        if not any(r.progressing for r in outcome.results.values()) and not outcome.status_written:
            break
        time.sleep(0.5)
    else:
        raise AssertionError(f"never converged: {condition(outcome.status, 'Ready')}")
    counting = Kube.from_kubeconfig(str(control_plane.kubeconfig_path))
    outcome = run(counting, unique_name)
    reads, writes = counting.counter.snapshot()
    assert writes == 0, counting.counter.by_verb
    assert not outcome.status_written
    assert reads > 0


def test_drift_is_repaired(crd: Kube, make_platform: Any, unique_name: str) -> None:
    make_platform(unique_name, unique_name)
    run(crd, unique_name)
    crd.delete("rbac.authorization.k8s.io/v1", "RoleBinding", "platform-installer-admin", unique_name)
    crd.merge_patch("v1", "Namespace", unique_name, {"metadata": {"labels": {"istio-injection": "disabled"}}})
    run(crd, unique_name)
    assert crd.get("rbac.authorization.k8s.io/v1", "RoleBinding", "platform-installer-admin", unique_name)
    labels = crd.get("v1", "Namespace", unique_name)["metadata"]["labels"]  # type: ignore[index]
    assert labels["istio-injection"] == "enabled"


def test_paused_platform_writes_nothing(crd: Kube, make_platform: Any, unique_name: str, control_plane: Any) -> None:
    make_platform(unique_name, unique_name)
    crd.merge_patch(
        constants.API_VERSION,
        constants.KIND,
        unique_name,
        {"metadata": {"annotations": {constants.ANNOTATION_PAUSED: "true"}}},
    )
    counting = Kube.from_kubeconfig(str(control_plane.kubeconfig_path))
    outcome = reconcile.run(fresh(crd, unique_name), kube=counting, settings=SETTINGS, now=NOW, write_status=False)
    assert counting.counter.snapshot()[1] == 0
    assert crd.get("v1", "Namespace", unique_name) is None
    assert condition(outcome.status, "Reconciling")["reason"] == "Paused"


def test_invalid_spec_stalls_naming_the_field(crd: Kube, make_platform: Any, unique_name: str) -> None:
    make_platform(unique_name, unique_name)
    body = fresh(crd, unique_name)
    # Something the schema cannot express alone: a duration that overflows our parser is caught
    # by the CRD, so fabricate an invalid body as an older CRD version could have stored it.
    body["spec"]["podGuard"]["enforcement"] = "Sometimes"
    outcome = reconcile.run(body, kube=crd, settings=SETTINGS, now=NOW)
    status = fresh(crd, unique_name)["status"]
    assert condition(status, "Stalled")["status"] == "True"
    assert condition(status, "Stalled")["reason"] == "InvalidSpec"
    assert "spec.podGuard.enforcement" in condition(status, "Ready")["message"]
    assert crd.get("v1", "Namespace", unique_name) is None, "nothing is written for an invalid spec"
    assert outcome.status_written


def test_second_platform_claiming_a_namespace_conflicts(crd: Kube, make_platform: Any, unique_name: str) -> None:
    first, second = f"{unique_name}-a", f"{unique_name}-b"
    make_platform(first, unique_name)
    make_platform(second, unique_name, podSecurity={"warn": "baseline", "audit": "baseline"})
    run(crd, first)
    before = crd.get("v1", "Namespace", unique_name)
    run(crd, second)
    after = crd.get("v1", "Namespace", unique_name)
    assert before and after
    assert after["metadata"]["labels"] == before["metadata"]["labels"]
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    namespaces = condition(fresh(crd, second)["status"], "NamespacesReady")
    assert (namespaces["status"], namespaces["reason"]) == ("False", "Conflict")
    assert first in namespaces["message"]


def test_existing_namespace_is_adopted_and_released(crd: Kube, make_platform: Any, unique_name: str) -> None:
    # An existing namespace is adopted only when an admin opted it in (docs/namespaces-and-installer.md).
    crd.create(
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": unique_name,
                "labels": {"team": "ml", "istio-injection": "enabled"},
                "annotations": {"tenancy.dev/adoptable-by": unique_name},
            },
        }
    )
    make_platform(unique_name, unique_name)
    run(crd, unique_name)
    labels = crd.get("v1", "Namespace", unique_name)["metadata"]["labels"]  # type: ignore[index]
    assert labels[constants.LABEL_PLATFORM] == unique_name
    _cleanup(crd, unique_name)
    live = crd.get("v1", "Namespace", unique_name)
    assert live is not None and live["status"]["phase"] == "Active", "an adopted namespace is never deleted"
    labels = live["metadata"]["labels"]
    assert labels["team"] == "ml" and labels["istio-injection"] == "enabled", "labels set by others stay"
    assert constants.LABEL_PLATFORM not in labels
    assert "pod-security.kubernetes.io/warn" not in labels


def test_namespace_dropped_from_the_spec_is_released(crd: Kube, make_platform: Any, unique_name: str) -> None:
    extra = f"{unique_name}-ext"
    make_platform(unique_name, unique_name, additionalNamespaces=[extra])
    run(crd, unique_name)
    assert fresh(crd, unique_name)["status"]["managed"] == {"namespaces": sorted([unique_name, extra])}
    crd.merge_patch(constants.API_VERSION, constants.KIND, unique_name, {"spec": {"additionalNamespaces": []}})
    outcome = run(crd, unique_name)
    assert condition(outcome.status, "NamespacesReady")["status"] == "True"
    status = fresh(crd, unique_name)["status"]
    assert status["managed"] == {"namespaces": [unique_name]}
    live = crd.get("v1", "Namespace", extra)
    assert live is not None and live["status"]["phase"] == "Active", "a released namespace is never deleted"
    labels = live["metadata"].get("labels") or {}
    assert constants.LABEL_PLATFORM not in labels and "istio-injection" not in labels


def _cleanup(kube: Kube, name: str) -> None:
    """reconcile.cleanup as the delete handler runs it: every step must be done at once."""
    outcome = reconcile.cleanup(fresh(kube, name), kube=kube, settings=SETTINGS, now=NOW)
    assert outcome.finished and not outcome.gave_up, outcome.message
    assert all(result.done for result in outcome.results.values()), outcome.results
    assert list(outcome.results) == [step.name for step in reversed(reconcile.steps())]


def test_retain_keeps_namespace_and_data(crd: Kube, make_platform: Any, unique_name: str) -> None:
    make_platform(unique_name, unique_name)
    run(crd, unique_name)
    crd.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "data", "namespace": unique_name},
            "data": {"k": "v"},
        }
    )
    _cleanup(crd, unique_name)
    ns = crd.get("v1", "Namespace", unique_name)
    assert ns is not None and ns["status"]["phase"] == "Active"
    assert crd.get("v1", "ConfigMap", "data", unique_name) is not None
    assert constants.LABEL_PLATFORM not in (ns["metadata"].get("labels") or {})


def test_delete_policy_deletes_namespaces_we_created(crd: Kube, make_platform: Any, unique_name: str) -> None:
    make_platform(unique_name, unique_name, deletionPolicy="Delete")
    run(crd, unique_name)
    _cleanup(crd, unique_name)
    wait_for(lambda: crd.get("v1", "Namespace", unique_name) is None, "the namespace to terminate", 60, interval=0.5)


def test_installer_kubeconfig_secret_works(
    crd: Kube, make_platform: Any, unique_name: str, control_plane: ControlPlane, tmp_path: Any
) -> None:
    make_platform(
        unique_name,
        unique_name,
        installer={"kubeconfigSecret": {"enabled": True, "tokenTTL": "2h"}},
        storage={"verify": False},  # counts the writes of a second pass: no write test in flight
    )
    run(crd, unique_name)
    secret = crd.get("v1", "Secret", "platform-installer-kubeconfig", unique_name)
    assert secret is not None
    kubeconfig = base64.b64decode(secret["data"]["kubeconfig"]).decode()
    path = tmp_path / "installer.kubeconfig"
    path.write_text(kubeconfig)
    installer = Kube.from_kubeconfig(str(path))
    review = installer.request(
        "POST",
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        body={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
    )
    assert review["status"]["userInfo"]["username"] == f"system:serviceaccount:{unique_name}:platform-installer"
    # Not re-minted on the next pass (no write), re-minted once past the renewal point.
    counting = Kube.from_kubeconfig(str(control_plane.kubeconfig_path))
    run(counting, unique_name)
    assert counting.counter.snapshot()[1] == 0, counting.counter.by_verb
    later = datetime.now(UTC) + timedelta(hours=1, minutes=45)  # within the last 30% of a 2h token
    reconcile.run(fresh(crd, unique_name), kube=crd, settings=SETTINGS, now=later)
    renewed = crd.get("v1", "Secret", "platform-installer-kubeconfig", unique_name)
    assert renewed is not None and renewed["data"]["kubeconfig"] != secret["data"]["kubeconfig"]
    assert yaml.safe_load(kubeconfig)["current-context"] == "installer"
