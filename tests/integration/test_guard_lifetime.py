"""The pod guard lives as long as someone holds ``admin`` in the namespace (issue 24 item 4), on
the real API server.

- **Retain**: a TenantPlatform deleted with ``deletionPolicy: Retain`` leaves its namespaces and the
  installer's ``admin`` RoleBinding; its guard stays for those namespaces (the retained guard,
  docs/pod-guard.md "Removal") until an admin releases them. Asked as the installer
  ServiceAccount itself (its own token), a server-side dry run of a hostPath or privileged pod is
  refused in every retained namespace once the TenantPlatform is gone; a compliant pod is still
  admitted; after the admin's release the namespace is unguarded again (the admin's choice).
- **Coverage**: a hand-made guard shaped exactly like the checklist's (``kamiwaza-tenant-pod-guard``
  and ``kamiwaza-tenant-exec-guard``, bindings with ``matchResources.namespaceSelector`` by name over
  ``kamiwaza`` and ``kamiwaza-extensions``, ``[Deny, Audit]``), opted in with docs/migration.md's
  own command: a platform naming only ``kamiwaza`` never calls it redundant (it names
  ``kamiwaza-extensions``); naming both, it does, and following the advice leaves both namespaces
  guarded by ours.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from networking_support import context
from tests.checklist_support import CHECKLIST_GUARD, CHECKLIST_NAMESPACES, admin_by_hand, checklist_guard
from tests.support import create_namespace, sole_condition

from tenant_platform import reconcile
from tenant_platform.api import constants
from tenant_platform.api.models import TenantPlatform
from tenant_platform.api.reasons import PodGuard
from tenant_platform.concerns.podguard import manifests
from tenant_platform.concerns.podguard import step as podguard
from tenant_platform.config import Settings
from tenant_platform.kube import errors
from tenant_platform.kube.client import Kube
from tenant_platform.testing.controlplane import ControlPlane
from tenant_platform.testing.steps import reconcile_step
from tenant_platform.testing.wait import wait_for

VAP = "admissionregistration.k8s.io/v1"
SETTINGS = Settings(drift_interval=30)


def pod(namespace: str, kind: str) -> dict[str, Any]:
    """A pod the baseline denies (``hostPath``, ``privileged``), or a compliant one (``plain``)."""
    spec: dict[str, Any] = {"containers": [{"name": "app", "image": "registry.example.com/app:1"}]}
    if kind == "hostPath":
        spec["volumes"] = [{"name": "host", "hostPath": {"path": "/"}}]
        spec["containers"][0]["volumeMounts"] = [{"name": "host", "mountPath": "/host"}]
    elif kind == "privileged":
        spec["containers"][0]["securityContext"] = {"privileged": True}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"generateName": f"lifetime-{kind.lower()}-", "namespace": namespace},
        "spec": spec,
    }


def refusal(kube: Kube, namespace: str, kind: str) -> str | None:
    """Why a server-side dry-run create of ``pod(namespace, kind)`` was refused (None: admitted)."""
    try:
        kube.create(pod(namespace, kind), dry_run=True)
    except errors.KubeError as exc:
        return exc.message or str(exc)
    return None


def fresh(kube: Kube, name: str) -> dict[str, Any]:
    body = kube.get(constants.API_VERSION, constants.KIND, name)
    assert body is not None
    return body


def installer_client(admin: Kube, cp: ControlPlane, namespace: str, sa: str, directory: Path) -> Kube:
    """A client authenticating as the installer ServiceAccount with its own token."""
    token, _ = admin.request_token(namespace, sa, expiration_seconds=3600)
    return Kube.from_kubeconfig(str(cp.kubeconfig_for_token(token, directory / f"{namespace}-{sa}.kubeconfig")))


@pytest.fixture
def retained(crd: Kube, unique_name: str) -> Iterator[list[str]]:
    namespaces = [unique_name, f"{unique_name}-ext"]
    yield namespaces
    for ns in namespaces:
        with contextlib.suppress(errors.KubeError):
            crd.delete("v1", "Namespace", ns)


def test_after_a_retain_deletion_the_installer_cannot_start_a_node_takeover_pod(  # noqa: PLR0917 (fixtures)
    crd: Kube,
    as_operator: Kube,
    make_platform: Any,
    unique_name: str,
    retained: list[str],
    control_plane: ControlPlane,
    tmp_path: Path,
) -> None:
    tenant, extra = retained
    make_platform(
        unique_name, tenant, additionalNamespaces=[extra], deletionPolicy="Retain", podGuard={"enforcement": "Deny"}
    )
    now = datetime.now(UTC)
    reconcile.run(fresh(crd, unique_name), kube=crd, settings=SETTINGS, now=now)
    sa = TenantPlatform.from_body(fresh(crd, unique_name)).spec.installer.service_account_name
    installer = installer_client(crd, control_plane, tenant, sa, tmp_path)
    # While the platform exists its guard denies (the policies load asynchronously).
    wait_for(lambda: refusal(installer, tenant, "hostPath"), "the platform's guard denies", 30, interval=0.2)

    # The deletion pass as the operator runs it: its own identity, under deploy/base's RBAC and fences.
    outcome = reconcile.cleanup(fresh(crd, unique_name), kube=as_operator, settings=SETTINGS, now=now)
    assert outcome.finished and not outcome.gave_up, outcome.message
    crd.merge_patch(constants.API_VERSION, constants.KIND, unique_name, {"metadata": {"finalizers": None}})
    crd.delete(constants.API_VERSION, constants.KIND, unique_name)
    wait_for(lambda: crd.get(constants.API_VERSION, constants.KIND, unique_name) is None, "the TenantPlatform gone", 30)

    # Retained: the namespaces, and the installer's admin RoleBinding (its token still works).
    for ns in retained:
        live = crd.get("v1", "Namespace", ns)
        assert live is not None and live["status"]["phase"] == "Active"
        assert constants.LABEL_PLATFORM not in (live["metadata"].get("labels") or {})
    assert crd.get("rbac.authorization.k8s.io/v1", "RoleBinding", f"{sa}-admin", tenant) is not None
    assert refusal(installer, tenant, "plain") is None, "the retained install keeps working"
    # ... istio-init included, from the repositories the platform allowed, and only from them.
    injector = manifests.injector_from_values({"global": {"hub": "docker.io/istio", "tag": "1.28.0"}})
    injected = manifests.injected_canary(tenant, injector)
    installer.create(injected, dry_run=True)
    injected["spec"]["initContainers"][0]["image"] = "evil.example.com/istio/proxyv2:1.28.0"
    with pytest.raises(errors.KubeError, match="retained"):
        installer.create(injected, dry_run=True)

    # From the first moment and after: refused as the installer, and the guard (not only RBAC)
    # refuses even a cluster admin, in every retained namespace.
    for _ in range(2):
        for ns in retained:
            for kind in ("hostPath", "privileged"):
                why = refusal(installer, ns, kind)
                assert why is not None, f"the installer created a {kind} pod in retained namespace {ns}"
                by_guard = refusal(crd, ns, kind)
                assert by_guard is not None and "ValidatingAdmissionPolicy" in by_guard, (ns, kind, by_guard)
        # The exec guard too: Forbidden (not NotFound) for an exec into istio-init.
        path = f"/api/v1/namespaces/{tenant}/pods/any/exec?container=istio-init&command=sh"
        with pytest.raises(errors.KubeError, match=manifests.retained_names("Deny").exec_guard):
            installer.request("POST", path)
        time.sleep(1)

    # An admin releases a namespace (docs/pod-guard.md): from then on it is theirs, unguarded.
    crd.merge_patch(
        "v1",
        "Namespace",
        tenant,
        {
            "metadata": {
                "labels": {manifests.RETAINED_LABEL: None},
                "annotations": {manifests.RETAINED_ANNOTATION: None},
            }
        },
    )
    wait_for(lambda: refusal(crd, tenant, "hostPath") is None, "the released namespace unguarded", 30, interval=0.2)
    assert refusal(crd, extra, "hostPath") is not None, "the other retained namespace stays guarded"


# ---- a hand-made guard shaped exactly like the checklist's ----------------------------------------


@pytest.fixture
def checklist(crd: Kube) -> Iterator[None]:
    for ns in CHECKLIST_NAMESPACES:
        assert crd.get("v1", "Namespace", ns) is None, f"namespace {ns} is left from another test"
    yield
    for kind in ("ValidatingAdmissionPolicyBinding", "ValidatingAdmissionPolicy"):
        for name in CHECKLIST_GUARD:
            with contextlib.suppress(errors.KubeError):
                crd.delete(VAP, kind, name)
    for ns in CHECKLIST_NAMESPACES:
        with contextlib.suppress(errors.KubeError):
            crd.delete("v1", "Namespace", ns)
    # Other tests expect no "kamiwaza" namespace (e.g. test_check's dry run).
    wait_for(
        lambda: all(crd.get("v1", "Namespace", ns) is None for ns in CHECKLIST_NAMESPACES),
        "the checklist's namespaces gone",
        120,
        interval=0.5,
    )


def settled_condition(kube: Kube, name: str) -> tuple[str, str, str]:
    """PodGuardReady after two passes (the second with the guard already in place), each as a
    freshly started operator would run it."""
    reconcile_step(podguard.PodGuardStep(), context(kube, fresh(kube, name)))
    return sole_condition(reconcile_step(podguard.PodGuardStep(), context(kube, fresh(kube, name))))


def test_checklist_guard_is_redundant_only_where_ours_covers_all_it_covered(
    crd: Kube, make_platform: Any, unique_name: str, checklist: None, control_plane: ControlPlane
) -> None:
    primary, extensions = CHECKLIST_NAMESPACES
    for ns in CHECKLIST_NAMESPACES:
        create_namespace(crd, ns, wait_sa=True, adoptable_by=unique_name)
    checklist_guard(crd)
    # docs/migration.md's command, as written there, opts the checklist's guard in.
    control_plane.kubectl(
        "annotate",
        "validatingadmissionpolicy,validatingadmissionpolicybinding",
        *CHECKLIST_GUARD,
        f"{constants.ANNOTATION_ADOPTABLE}={unique_name}",
    )
    wait_for(lambda: refusal(crd, extensions, "hostPath"), "the checklist's guard in effect", 30, interval=0.2)

    # A platform naming only kamiwaza: ours guards kamiwaza; the hand-made guard also covers
    # kamiwaza-extensions, so it is never called redundant, and the message names the namespace.
    make_platform(unique_name, primary, podGuard={"enforcement": "Deny"})
    crd.merge_patch("v1", "Namespace", primary, {"metadata": {"labels": {constants.LABEL_PLATFORM: unique_name}}})
    status, reason, message = settled_condition(crd, unique_name)
    assert (status, reason) == ("True", PodGuard.HAND_MADE_GUARD_COVERS_MORE), message
    assert extensions in message and "kubectl delete" not in message, message

    # Naming both: redundant, with the command that deletes exactly the checklist's objects.
    more = {"spec": {"additionalNamespaces": [extensions]}}
    crd.merge_patch(constants.API_VERSION, constants.KIND, unique_name, more)
    crd.merge_patch("v1", "Namespace", extensions, {"metadata": {"labels": {constants.LABEL_PLATFORM: unique_name}}})
    status, reason, message = settled_condition(crd, unique_name)
    assert (status, reason) == ("True", PodGuard.HAND_MADE_GUARD_REDUNDANT), message
    command = message.split("an admin does: ", 1)[1]
    assert command == (
        f"kubectl delete validatingadmissionpolicybinding {' '.join(sorted(CHECKLIST_GUARD))} && "
        f"kubectl delete validatingadmissionpolicy {' '.join(sorted(CHECKLIST_GUARD))}"
    ), message

    # Following the advice leaves both namespaces guarded (by ours).
    control_plane.kubectl(*command.split(" && ")[0].split()[1:])
    control_plane.kubectl(*command.split(" && ")[1].split()[1:])
    ours = manifests.guard_names("Deny").pod_guard
    for ns in CHECKLIST_NAMESPACES:
        wait_for(lambda ns=ns: ours in (refusal(crd, ns, "hostPath") or ""), f"ours denies in {ns}", 30, interval=0.2)


# ---- a namespace dropped from the spec while the platform lives -------------------------------------


def test_a_namespace_dropped_from_the_spec_keeps_the_guard_it_had(  # noqa: PLR0917 (fixtures)
    crd: Kube,
    as_operator: Kube,
    make_platform: Any,
    unique_name: str,
    retained: list[str],
    control_plane: ControlPlane,
    tmp_path: Path,
) -> None:
    """``spec.namespace`` is immutable, so our installer's bindings never sit in a namespace the
    spec drops; but an admin may have granted the installer ``admin`` in an additional namespace
    too (the checklist does, in ``kamiwaza-extensions``). Dropped from ``additionalNamespaces``, the
    namespace is released (never deleted) and keeps the guard it had, as the retained guard."""
    tenant, extra = retained
    make_platform(unique_name, tenant, additionalNamespaces=[extra], podGuard={"enforcement": "Deny"})
    now = datetime.now(UTC)
    reconcile.run(fresh(crd, unique_name), kube=crd, settings=SETTINGS, now=now)
    sa = TenantPlatform.from_body(fresh(crd, unique_name)).spec.installer.service_account_name
    installer = installer_client(crd, control_plane, tenant, sa, tmp_path)
    # The checklist's hand-made grant: the installer is admin in the extensions namespace too.
    admin_by_hand(crd, extra, sa, tenant)
    shared = manifests.guard_names("Deny").pod_guard
    wait_for(
        lambda: shared in (refusal(installer, extra, "hostPath") or ""), "the shared guard in extra", 30, interval=0.2
    )

    # The spec drops it; the pass as the operator runs it (its own identity, deploy/base's RBAC).
    crd.merge_patch(constants.API_VERSION, constants.KIND, unique_name, {"spec": {"additionalNamespaces": []}})
    reconcile.run(fresh(crd, unique_name), kube=as_operator, settings=SETTINGS, now=datetime.now(UTC))
    assert refusal(installer, extra, "plain") is None, "the installer still holds admin there"
    retained_policy = manifests.retained_names("Deny").pod_guard
    for kind in ("hostPath", "privileged"):
        why = refusal(installer, extra, kind)
        assert why is not None, f"the installer created a {kind} pod in the dropped namespace"
        assert retained_policy in why, (kind, why)
    live = crd.get("v1", "Namespace", extra)
    assert live is not None and live["status"]["phase"] == "Active"
    labels = live["metadata"].get("labels") or {}
    assert constants.LABEL_PLATFORM not in labels, labels  # released
    assert manifests.mark_of(live) == ("", ""), labels  # the shared guard's mark gone ...
    assert labels.get(manifests.RETAINED_LABEL) == "Deny", labels  # ... the retained one in its place
    # The platform's own namespace is guarded as before.
    assert shared in (refusal(installer, tenant, "hostPath") or "")
