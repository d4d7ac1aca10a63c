"""Where the pod guard judges and who may change that, against the real API server: the shared
policies judge only the namespaces marked with an enforcement (``tenancy.dev/pod-guard``, written
by the platform that owns them); other namespaces (kube-system included) are untouched; a tenant
admin can edit neither the platform's status nor its namespace's labels and annotations; one
platform neither guards nor unguards another's namespace, whatever its (forged) status says."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from podguard_support import (
    DENY,
    NOW,
    SETTINGS,
    WARN,
    Guard,
    denial,
    fresh,
    guard_denies,
    make_namespace,
    parameter,
    pod,
    sc,
)
from podguard_support import guard as guard  # a module fixture: one guarded namespace here

from tenant_platform import reconcile
from tenant_platform.api import constants
from tenant_platform.concerns.podguard import manifests
from tenant_platform.kube import errors
from tenant_platform.kube.client import Kube
from tenant_platform.testing.wait import wait_for

pytestmark = pytest.mark.cluster


def test_other_namespaces_are_not_guarded(guard: Guard) -> None:
    other = f"pg-unguarded-{uuid.uuid4().hex[:6]}"
    make_namespace(guard.admin, other)
    try:
        guard.admin.create(pod("free", other, hostPID=True, containers=[sc(privileged=True)]), dry_run=True)
    finally:
        guard.admin.delete("v1", "Namespace", other)


def test_a_tenant_admin_cannot_edit_the_parameter(guard: Guard) -> None:
    """The parameter is the cluster-scoped TenantPlatform's status: the ``admin`` the installer holds
    in its namespace does not reach it (RBAC), and the real write is refused."""
    user = f"system:serviceaccount:{guard.namespace}:{guard.installer_sa}"
    groups = ["system:serviceaccounts", f"system:serviceaccounts:{guard.namespace}", "system:authenticated"]
    for verb, sub in (("patch", "status"), ("update", "status"), ("patch", ""), ("update", ""), ("delete", "")):
        allowed, _ = guard.admin.can_i(
            user=user,
            groups=groups,
            verb=verb,
            resource="tenantplatforms",
            group=constants.GROUP,
            subresource=sub,
        )
        assert not allowed, (verb, sub)
    with pytest.raises(errors.Forbidden):
        guard.installer.merge_patch(
            constants.API_VERSION,
            constants.KIND,
            guard.platform.name,
            {"status": {"podGuard": {"namespaces": [], "enforcement": "Warn"}}},
            subresource="status",
        )
    denial(guard.installer, pod("still-denied", guard.namespace, hostPID=True))


def test_a_tenant_admin_cannot_write_its_namespaces_labels_or_annotations(guard: Guard) -> None:
    """What a parameterless guard reads (the namespace's labels and annotations, docs/performance.md)
    is cluster-scoped: the installer's ``admin`` neither patches nor updates its own namespace."""
    user = f"system:serviceaccount:{guard.namespace}:{guard.installer_sa}"
    groups = ["system:serviceaccounts", f"system:serviceaccounts:{guard.namespace}", "system:authenticated"]
    for verb in ("patch", "update", "delete"):
        allowed, _ = guard.admin.can_i(user=user, groups=groups, verb=verb, resource="namespaces")
        assert not allowed, verb
    for meta in ({"labels": {"tenancy.dev/pod-guard": "Warn"}}, {"annotations": {"tenancy.dev/x": "y"}}):
        with pytest.raises(errors.Forbidden):
            guard.installer.merge_patch("v1", "Namespace", guard.namespace, {"metadata": meta})


def warned_dry(kube: Kube, namespace: str) -> bool:
    """A hostPID pod's dry run in ``namespace`` is admitted with the Warn pod guard's warning."""
    _, warnings = kube.create_with_warnings(pod("warned-dry", namespace, hostPID=True), dry_run=True)
    return any(WARN.pod_guard in w for w in warnings)


def test_a_platform_neither_guards_nor_unguards_another_platforms_namespace(
    crd: Kube, make_platform: Callable[..., dict[str, Any]], unique_name: str
) -> None:
    """A full pass writes into a platform's parameter, and marks, only the namespaces it owns; and
    whatever a platform's status says (a forged one), each namespace's guard stays its own
    platform's: the shared policies read the namespaces' marks, not the status."""
    first, second = f"{unique_name}-a", f"{unique_name}-b"
    make_platform(first, first, podGuard={"enforcement": "Deny"})
    make_platform(second, second, additionalNamespaces=[first], podGuard={"enforcement": "Warn"})
    for name in (first, second):
        reconcile.run(fresh(crd, name), kube=crd, settings=SETTINGS, now=NOW)
    assert parameter(crd, first)["namespaces"] == [first]
    assert parameter(crd, second)["namespaces"] == [second]  # not the first one's namespace
    wait_for(lambda: guard_denies(crd, first, DENY.pod_guard), "the first guard to deny", 60, interval=0.2)

    # Each namespace carries its own platform's mark (the namespaces step's claim decides which).
    assert manifests.mark_of(crd.get("v1", "Namespace", first))[0] == "Deny"  # type: ignore[index]
    assert manifests.mark_of(crd.get("v1", "Namespace", second))[0] == "Warn"  # type: ignore[index]

    # A forged status for the second platform, at Warn over the first one's namespace: the guard
    # reads the namespaces' marks, not the status, so nothing changes.
    crd.merge_patch(
        constants.API_VERSION,
        constants.KIND,
        second,
        {"status": {"podGuard": {"namespaces": [first, second], "enforcement": "Warn"}}},
        subresource="status",
    )
    time.sleep(2)  # long enough for an informer to have read it
    assert guard_denies(crd, first, DENY.pod_guard)
    assert warned_dry(crd, second)
    # A forged status naming kube-system at Deny: kube-system carries no mark, so the guard never
    # even evaluates requests there; the second platform's namespace stays at Warn.
    crd.merge_patch(
        constants.API_VERSION,
        constants.KIND,
        second,
        {"status": {"podGuard": {"namespaces": ["kube-system", second], "enforcement": "Deny"}}},
        subresource="status",
    )
    time.sleep(2)
    assert warned_dry(crd, second) and not guard_denies(crd, second, DENY.pod_guard)
    crd.create(pod("kube-system-untouched", "kube-system", hostPID=True), dry_run=True)
    # The next pass puts the second platform's parameter back to what it owns.
    reconcile.run(fresh(crd, second), kube=crd, settings=SETTINGS, now=NOW)
    assert parameter(crd, second)["namespaces"] == [second]
    for name in (second, first):
        reconcile.cleanup(fresh(crd, name), kube=crd, settings=SETTINGS, now=NOW)
