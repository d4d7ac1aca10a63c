"""The pod guard step against the real API server: it applies the shared policies and bindings
(everyone's, owned by no platform) and writes the platform's parameter (its ``status.podGuard``)
first; a resync and a check write nothing; drift of a binding or of the parameter is repaired;
cleanup deletes nothing (the parameter goes with the platform); per-platform guards an earlier
version left are named, not deleted; Warn warns."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from podguard_support import (
    DEFAULT_REPOSITORIES,
    DENY,
    VAP,
    WARN,
    actions,
    context,
    fresh,
    guard_denies,
    make_namespace,
    parameter,
    pod,
    recording,
)
from tests.support import sole_condition

from tenant_platform.api import constants
from tenant_platform.concerns.podguard import manifests
from tenant_platform.concerns.podguard.step import STEP
from tenant_platform.kube.client import Kube
from tenant_platform.testing.steps import reconcile_step
from tenant_platform.testing.wait import wait_for

pytestmark = pytest.mark.cluster


def test_step_deny_mode_zero_write_resync_and_cleanup(
    crd: Kube, make_platform: Callable[..., dict[str, Any]], unique_name: str
) -> None:
    make_namespace(crd, unique_name, claimed_by=unique_name)
    body = make_platform(unique_name, unique_name, podGuard={"enforcement": "Deny"})
    kube = recording(crd)
    ctx = context(kube, body)
    result = reconcile_step(STEP, ctx)
    status, reason, message = sole_condition(result, "PodGuardReady")
    assert (status, reason) == ("True", "Enforcing"), message
    assert DENY.pod_guard in message and "for the namespaces labelled tenancy.dev/pod-guard=Deny" in message
    # The namespace carries the mark the shared policies select (only cluster-scoped rights write it).
    assert manifests.mark_of(crd.get("v1", "Namespace", unique_name)) == ("Deny", ",".join(DEFAULT_REPOSITORIES))
    param = {"enforcement": "Deny", "namespaces": [unique_name], "proxyImageRepositories": DEFAULT_REPOSITORIES}
    assert result.status["podGuard"] == {**param, "requested": "Deny"}
    # The parameter is on the API server already (written by the step, before any check), and
    # the end-of-pass status write is told so.
    assert parameter(crd, unique_name) == param
    assert ctx.status_written == {"podGuard": param}
    for name in manifests.SHARED_NAMES:
        for kind in ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"):
            live = kube.get(VAP, kind, name)
            assert live is not None
            labels = live["metadata"]["labels"]
            assert labels[constants.LABEL_COMPONENT] == "podguard"
            assert constants.LABEL_PLATFORM not in labels  # everyone's, not this platform's
            assert not live["metadata"].get("ownerReferences")  # never collected with a platform
    for name in (DENY.pod_guard, DENY.exec_guard):
        assert actions(kube, name) == ["Deny", "Audit"]
    for name in (WARN.pod_guard, WARN.exec_guard):
        assert actions(kube, name) == ["Warn", "Audit"]
    wait_for(lambda: guard_denies(crd, unique_name, DENY.pod_guard), "the guard to deny", 60, interval=0.2)

    # A no-op resync writes nothing (the parameter is found on the API server).
    body = fresh(crd, unique_name)
    _, writes = kube.counter.snapshot()
    again = reconcile_step(STEP, context(kube, body))
    assert again.conditions[0].status == "True"
    assert kube.counter.snapshot()[1] == writes

    # check (dry run) reports in place and writes nothing.
    checked = reconcile_step(STEP, context(kube, body, dry_run=True))
    assert checked.conditions[0].status == "True", checked.conditions
    assert kube.counter.snapshot()[1] == writes

    # Drift is repaired: the shared binding, and the parameter.
    kube.merge_patch(
        VAP, "ValidatingAdmissionPolicyBinding", DENY.pod_guard, {"spec": {"validationActions": ["Audit"]}}
    )
    drifted = reconcile_step(STEP, context(kube, body, dry_run=True))
    assert (drifted.conditions[0].status, drifted.conditions[0].reason) == ("False", "WouldApply")
    reconcile_step(STEP, context(kube, body))
    assert actions(kube, DENY.pod_guard) == ["Deny", "Audit"]
    crd.merge_patch(
        constants.API_VERSION,
        constants.KIND,
        unique_name,
        {"status": {"podGuard": {"namespaces": [], "enforcement": "Warn"}}},
        subresource="status",
    )
    drifted = reconcile_step(STEP, context(kube, fresh(crd, unique_name), dry_run=True))
    assert drifted.conditions[0].reason == "WouldApply"
    assert "status.podGuard" in drifted.conditions[0].message
    reconcile_step(STEP, context(kube, fresh(crd, unique_name)))
    assert parameter(crd, unique_name) == param

    # Cleanup deletes nothing: the shared objects stay; the parameter goes with the platform.
    cleaned = STEP.cleanup(context(kube, body))
    assert cleaned.done, cleaned.message
    assert kube.deleted == []
    for name in manifests.SHARED_NAMES:
        assert kube.get(VAP, "ValidatingAdmissionPolicy", name) is not None
    crd.delete(constants.API_VERSION, constants.KIND, unique_name)
    wait_for(
        lambda: not guard_denies(crd, unique_name, DENY.pod_guard),
        "the guard to be gone with the platform",
        60,
        interval=0.2,
    )
    crd.delete("v1", "Namespace", unique_name)


def test_per_platform_guards_of_earlier_versions_are_named_not_deleted(
    crd: Kube, make_platform: Callable[..., dict[str, Any]], unique_name: str
) -> None:
    """What an earlier version left (per-platform names, our labels with the platform's name) is
    named in PodGuardReady with the admin's one-liner; the step deletes nothing."""
    make_namespace(crd, unique_name, claimed_by=unique_name)
    body = make_platform(unique_name, unique_name, podGuard={"enforcement": "Deny"})
    old = f"tenant-platform-{unique_name}-pod-guard"
    labels = {
        constants.LABEL_MANAGED_BY: constants.MANAGED_BY_VALUE,
        constants.LABEL_PLATFORM: unique_name,
        constants.LABEL_COMPONENT: "podguard",
    }
    literal = manifests.GuardParam((unique_name,), "Deny", ("docker.io/istio/proxyv2",))
    policy = manifests.render_pod_guard_policy("Deny", literal, unique_name)
    policy["metadata"] = {"name": old, "labels": labels}
    binding = manifests.render_binding(old, "Deny", shared=False)
    binding["metadata"]["labels"] = labels
    for obj in (policy, binding):
        crd.apply(obj)
    kube = recording(crd)
    result = reconcile_step(STEP, context(kube, body))
    status, reason, message = sole_condition(result)
    assert (status, reason) == ("True", "Enforcing"), message
    assert f"ValidatingAdmissionPolicy {old}" in message
    assert f"-l tenancy.dev/component=podguard,tenancy.dev/tenant-platform={unique_name}" in message
    assert kube.deleted == []
    for kind in ("ValidatingAdmissionPolicyBinding", "ValidatingAdmissionPolicy"):
        assert crd.get(VAP, kind, old) is not None
        crd.delete(VAP, kind, old)
    crd.delete("v1", "Namespace", unique_name)


def test_step_warn_mode(crd: Kube, make_platform: Callable[..., dict[str, Any]], unique_name: str) -> None:
    make_namespace(crd, unique_name, claimed_by=unique_name)
    body = make_platform(unique_name, unique_name, podGuard={"enforcement": "Warn"})
    result = reconcile_step(STEP, context(crd, body))
    assert sole_condition(result)[:2] == ("True", "WarnOnly")
    assert result.status["podGuard"]["enforcement"] == "Warn"
    assert parameter(crd, unique_name)["enforcement"] == "Warn"

    def warned() -> list[str] | None:
        _, warnings = crd.create_with_warnings(pod("warned", unique_name, hostIPC=True))
        return [w for w in warnings if WARN.pod_guard in w] or None

    (warning,) = wait_for(warned, "the guard to warn", 60, interval=0.2)
    assert "host namespaces are not allowed: hostIPC" in warning
    assert STEP.cleanup(context(crd, body)).done
    crd.delete("v1", "Namespace", unique_name)
