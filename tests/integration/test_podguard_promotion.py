"""Once staged enforcement promoted the pod guard to Deny, it never falls back to Warn: the
promotion is recorded on the pod guard policy (an object the operator owns), so a binding
deleted by someone comes back at Deny, and a violating pod admitted while it was gone does not
send the guard back to staging. On the real API server."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.integration.test_podguard import (
    actions,
    context,
    eventually,
    guard_denies,
    make_namespace,
    pod,
    reconcile_until,
)

from tenant_platform.api import constants
from tenant_platform.reconcile import podguard as pg_step
from tenant_platform.render import podguard
from tenant_platform.status import podguard as pg


def test_promotion_survives_a_deleted_binding_and_a_new_violator(
    crd: Any, make_platform: Callable[..., dict[str, Any]], unique_name: str
) -> None:
    make_namespace(crd, unique_name, adoptable_by=unique_name)
    make_platform(unique_name, unique_name, podGuard={"enforcement": "Staged"})
    names = podguard.guard_names(unique_name)
    crd.create(pod("fine", unique_name))
    result = reconcile_until(crd, unique_name, lambda r: r.conditions[0].status == "True", "promotion")
    assert result.conditions[0].reason == "Enforcing"
    policy = crd.get(podguard.API_VERSION, podguard.POLICY_KIND, names.pod_guard)
    promoted_at = policy["metadata"]["annotations"][pg.PROMOTED_ANNOTATION]
    assert promoted_at

    # Someone deletes the pod guard's binding; meanwhile a violating pod is admitted.
    crd.delete(podguard.API_VERSION, podguard.BINDING_KIND, names.pod_guard)
    crd.create(pod("bad", unique_name, hostPID=True))
    body = crd.get(constants.API_VERSION, constants.KIND, unique_name) or {}
    again = pg_step.STEP.reconcile(context(crd, body))
    assert actions(crd, names.pod_guard) == ["Deny", "Audit"], "re-created at Deny, not Warn"
    assert actions(crd, names.exec_guard) == ["Deny", "Audit"]
    assert again.status["podGuard"]["enforcement"] == "Deny"
    assert again.conditions[0].reason == "Enforcing", again.conditions[0].message
    live = crd.get(podguard.API_VERSION, podguard.POLICY_KIND, names.pod_guard)
    assert live["metadata"]["annotations"][pg.PROMOTED_ANNOTATION] == promoted_at  # kept, not re-stamped
    eventually("the guard to deny again", lambda: guard_denies(crd, unique_name, names.pod_guard))

    # Back to Warn by the spec: the promotion is forgotten (a later Staged starts over).
    crd.merge_patch(constants.API_VERSION, constants.KIND, unique_name, {"spec": {"podGuard": {"enforcement": "Warn"}}})
    body = crd.get(constants.API_VERSION, constants.KIND, unique_name) or {}
    pg_step.STEP.reconcile(context(crd, body))
    live = crd.get(podguard.API_VERSION, podguard.POLICY_KIND, names.pod_guard)
    assert pg.PROMOTED_ANNOTATION not in (live["metadata"].get("annotations") or {})
    assert actions(crd, names.pod_guard) == ["Warn", "Audit"]
    assert pg_step.STEP.cleanup(context(crd, body)).done
    crd.delete("v1", "Namespace", unique_name)
