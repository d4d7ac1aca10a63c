"""Staged enforcement against the real API server: the guard warns while the pods already running
would be denied (named in PodGuardReady and ``status.podGuard``), and promotes itself to Deny once
none would; then it stays there without more dry runs. In a namespace enforcing Pod Security the
restricted canary proves the guard live. (What happens after the promotion:
test_podguard_promotion.py.)"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from podguard_support import (
    DEFAULT_REPOSITORIES,
    DENY,
    NOW,
    SETTINGS,
    WARN,
    classic,
    context,
    fresh,
    guard_denies,
    guard_warns,
    make_namespace,
    parameter,
    pod,
    reconcile_until,
    sc,
)
from tests.support import condition

from tenant_platform import reconcile
from tenant_platform.api import constants
from tenant_platform.concerns.podguard.step import STEP
from tenant_platform.kube.client import Kube
from tenant_platform.reconcile import registry
from tenant_platform.testing.steps import reconcile_step
from tenant_platform.testing.wait import wait_for

pytestmark = pytest.mark.cluster


def test_staged_waits_for_violators_then_denies(
    crd: Kube, make_platform: Callable[..., dict[str, Any]], unique_name: str
) -> None:
    extra = f"{unique_name}-x"
    for ns in (unique_name, extra):
        make_namespace(crd, ns, adoptable_by=unique_name, claimed_by=unique_name)
    body = make_platform(unique_name, unique_name, additionalNamespaces=[extra], podGuard={"enforcement": "Warn"})
    reconcile_step(STEP, context(crd, body))
    assert parameter(crd, unique_name)["enforcement"] == "Warn"
    wait_for(
        lambda: guard_warns(crd, extra, WARN.pod_guard),
        "the guard to warn",
        60,
        interval=0.2,
    )
    # Existing pods: one violating (admitted with a warning while the guard only warns), two fine.
    crd.create(pod("bad", extra, volumes=[{"name": "host", "hostPath": {"path": "/var/run"}}]))
    crd.create(classic("meshed", unique_name))
    crd.create(pod("fine", extra))

    crd.merge_patch(
        constants.API_VERSION, constants.KIND, unique_name, {"spec": {"podGuard": {"enforcement": "Staged"}}}
    )
    result = reconcile_until(
        crd, unique_name, lambda r: r.conditions[0].reason == "ViolatingPodsFound", "the staged check to find bad"
    )
    cond = result.conditions[0]
    assert cond.status == "False"
    assert f"{extra}/bad: hostPath volumes are not allowed: host" in cond.message
    assert result.progressing
    assert result.status["podGuard"] == {
        "enforcement": "Warn",
        "requested": "Staged",
        "namespaces": [unique_name, extra],
        "proxyImageRepositories": DEFAULT_REPOSITORIES,
        "podsThatWouldBeDenied": 1,
        "examples": [f"{extra}/bad: hostPath volumes are not allowed: host"],
    }
    assert parameter(crd, unique_name)["enforcement"] == "Warn"
    # Still waiting on the next pass (verdicts cached; the parameter never promoted).
    again = reconcile_step(STEP, context(crd, fresh(crd, unique_name)))
    assert again.conditions[0].reason == "ViolatingPodsFound"
    assert parameter(crd, unique_name)["enforcement"] == "Warn"

    # The whole reconcile writes the same into the TenantPlatform's status.
    if any(step.name == STEP.name for step in registry.STEPS):
        reconcile.run(fresh(crd, unique_name), kube=crd, settings=SETTINGS, now=NOW)
        status = fresh(crd, unique_name)["status"]
        assert status["podGuard"]["podsThatWouldBeDenied"] == 1
        assert status["podGuard"]["examples"] == [f"{extra}/bad: hostPath volumes are not allowed: host"]
        guard_cond = condition(status, "PodGuardReady")
        assert guard_cond["reason"] == "ViolatingPodsFound"
        assert f"{extra}/bad" in guard_cond["message"]
        assert status["podGuard"]["enforcement"] == "Warn"

    crd.delete("v1", "Pod", "bad", extra)
    wait_for(lambda: crd.get("v1", "Pod", "bad", extra) is None, "pod bad to be gone", 60, interval=0.2)
    result = reconcile_until(crd, unique_name, lambda r: r.conditions[0].status == "True", "promotion")
    assert result.conditions[0].reason == "Enforcing"
    assert "Staged enforcement found no pod that would be denied" in result.conditions[0].message
    assert result.status["podGuard"] == {
        "enforcement": "Deny",
        "requested": "Staged",
        "namespaces": [unique_name, extra],
        "proxyImageRepositories": DEFAULT_REPOSITORIES,
        "podsThatWouldBeDenied": 0,
        "examples": [],
    }
    assert parameter(crd, unique_name)["enforcement"] == "Deny"  # written by the step itself
    wait_for(lambda: guard_denies(crd, extra, DENY.pod_guard), "the guard to deny", 60, interval=0.2)

    # Promoted: stays at Deny, no more dry runs, keeps recording.
    body = fresh(crd, unique_name)
    body["status"] = {"podGuard": result.status["podGuard"]}
    _, writes_before = crd.counter.snapshot()
    dry_runs_before = crd.counter.by_verb.get("POST (dry-run)", 0)
    later = reconcile_step(STEP, context(crd, body))
    assert later.conditions[0].status == "True"
    assert later.status["podGuard"]["podsThatWouldBeDenied"] == 0
    assert crd.counter.snapshot()[1] == writes_before
    assert crd.counter.by_verb.get("POST (dry-run)", 0) == dry_runs_before
    assert STEP.cleanup(context(crd, body)).done
    for ns in (unique_name, extra):
        crd.delete("v1", "Namespace", ns)


def test_staged_in_a_namespace_enforcing_pod_security(
    crd: Kube, make_platform: Callable[..., dict[str, Any]], unique_name: str
) -> None:
    """The hostPID canary is rejected by Pod Security there; the restricted canary proves the guard live."""
    make_namespace(
        crd, unique_name, labels={"pod-security.kubernetes.io/enforce": "restricted"}, claimed_by=unique_name
    )
    crd.create(
        pod(
            "restricted",
            unique_name,
            securityContext={"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
            containers=[sc(allowPrivilegeEscalation=False, capabilities={"drop": ["ALL"]})],
        )
    )
    body = make_platform(unique_name, unique_name, podGuard={"enforcement": "Staged"})
    result = reconcile_until(crd, unique_name, lambda r: r.conditions[0].status == "True", "promotion")
    assert result.status["podGuard"]["enforcement"] == "Deny"
    assert STEP.cleanup(context(crd, body)).done
    crd.delete("v1", "Namespace", unique_name)
