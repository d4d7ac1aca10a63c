"""Once staged enforcement promoted the pod guard to Deny, it never falls back to Warn: the
promotion is the platform's own ``status.podGuard`` (the shared guard's parameter, written by the
step), so a shared binding deleted by someone comes back as it was, and a violating pod admitted
while it was gone does not send the guard back to staging. A full pass that changes nothing
writes nothing (the parameter is not flipped back and forth). On the real API server."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from podguard_support import (
    DENY,
    NOW,
    SETTINGS,
    actions,
    context,
    fresh,
    guard_denies,
    make_namespace,
    parameter,
    pod,
    reconcile_until,
)
from tests.support import condition

from tenant_platform import reconcile
from tenant_platform.api import constants
from tenant_platform.concerns.podguard import manifests, step
from tenant_platform.kube import errors
from tenant_platform.kube.client import Kube
from tenant_platform.testing.steps import reconcile_step
from tenant_platform.testing.wait import wait_for

pytestmark = pytest.mark.cluster


def test_promotion_survives_a_deleted_binding_and_a_new_violator(
    crd: Any, make_platform: Callable[..., dict[str, Any]], unique_name: str
) -> None:
    make_namespace(crd, unique_name, adoptable_by=unique_name, claimed_by=unique_name)
    make_platform(unique_name, unique_name, podGuard={"enforcement": "Staged"})
    crd.create(pod("fine", unique_name))
    result = reconcile_until(crd, unique_name, lambda r: r.conditions[0].status == "True", "promotion")
    assert result.conditions[0].reason == "Enforcing"
    assert parameter(crd, unique_name)["enforcement"] == "Deny"
    # What the end-of-pass write would add (the check's record) goes in as a full pass would.
    crd.merge_patch(constants.API_VERSION, constants.KIND, unique_name, {"status": result.status}, subresource="status")

    # Someone deletes the pod guard's Deny binding; meanwhile a violating pod is admitted.
    crd.delete(manifests.API_VERSION, manifests.BINDING_KIND, DENY.pod_guard)

    def admitted() -> bool:
        try:
            crd.create(pod("bad", unique_name, hostPID=True))
        except errors.Forbidden:
            return False  # the API server has not seen the deletion yet
        return True

    wait_for(admitted, "a violating pod to be admitted without the binding", 60, interval=0.2)
    again = reconcile_step(step.STEP, context(crd, fresh(crd, unique_name)))
    assert actions(crd, DENY.pod_guard) == ["Deny", "Audit"], "re-created"
    assert parameter(crd, unique_name)["enforcement"] == "Deny", "not sent back to Warn"
    assert again.conditions[0].reason == "Enforcing", again.conditions[0].message
    wait_for(lambda: guard_denies(crd, unique_name, DENY.pod_guard), "the guard to deny again", 60, interval=0.2)

    # Back to Warn by the spec: the promotion is forgotten (a later Staged starts over).
    crd.merge_patch(constants.API_VERSION, constants.KIND, unique_name, {"spec": {"podGuard": {"enforcement": "Warn"}}})
    reconcile_step(step.STEP, context(crd, fresh(crd, unique_name)))
    assert parameter(crd, unique_name)["enforcement"] == "Warn"
    crd.merge_patch(
        constants.API_VERSION, constants.KIND, unique_name, {"spec": {"podGuard": {"enforcement": "Staged"}}}
    )
    restarted = reconcile_step(step.STEP, context(crd, fresh(crd, unique_name)))
    assert restarted.conditions[0].reason == "ViolatingPodsFound"  # the hostPID pod, checked again
    assert parameter(crd, unique_name)["enforcement"] == "Warn"
    crd.delete("v1", "Namespace", unique_name)


def test_a_full_pass_writes_the_parameter_first_and_a_no_op_pass_writes_nothing(
    crd: Kube, make_platform: Callable[..., dict[str, Any]], unique_name: str
) -> None:
    """reconcile.run: the step writes status.podGuard (one field manager, the status subresource)
    before its check; the end-of-pass write sends only what still differs, so the enforcement is
    never written back to an older value; a later pass that finds everything in place writes no
    status at all."""
    make_platform(unique_name, unique_name, podGuard={"enforcement": "Staged"})

    def passed() -> dict[str, Any] | None:
        outcome = reconcile.run(fresh(crd, unique_name), kube=crd, settings=SETTINGS, now=NOW)
        return outcome.status if condition(outcome.status, "PodGuardReady")["status"] == "True" else None

    status = wait_for(passed, "promotion by full passes", 60, interval=0.2)
    assert status["podGuard"]["enforcement"] == "Deny"
    assert parameter(crd, unique_name) == status["podGuard"]
    stable = wait_for(
        lambda: (
            None
            if (o := reconcile.run(fresh(crd, unique_name), kube=crd, settings=SETTINGS, now=NOW)).status_written
            else o
        ),
        "a pass that changes nothing",
        60,
        interval=0.2,
    )
    assert not stable.status_written
    patches = crd.counter.by_verb.get("PATCH", 0)  # status, parameter and server-side applies
    outcome = reconcile.run(fresh(crd, unique_name), kube=crd, settings=SETTINGS, now=NOW)
    assert not outcome.status_written
    assert crd.counter.by_verb.get("PATCH", 0) == patches
    assert parameter(crd, unique_name)["enforcement"] == "Deny"
