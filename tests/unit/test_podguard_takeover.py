"""status/podguard_takeover.py: which hand-made guard objects are taken, the mode ours start in,
when the takeover waits, the proof read from the API server's warnings, and the condition."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from tenant_platform.api import constants, reasons
from tenant_platform.api.models import TenantPlatform
from tenant_platform.render import podguard as render_pg
from tenant_platform.status import podguard_takeover as tk
from tenant_platform.status.conditions import Condition
from tenant_platform.status.verdict import Verdict

NAMES = render_pg.guard_names("demo")
VAP, VAPB = render_pg.POLICY_KIND, render_pg.BINDING_KIND
NOW = dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.UTC)
START = "2026-11-29T11:59:50Z"
ALL = ["kamiwaza", "kamiwaza-extensions"]


def platform(enforcement: str = "Deny") -> TenantPlatform:
    spec = {
        "namespace": "kamiwaza",
        "additionalNamespaces": ["kamiwaza-extensions"],
        "domain": "kamiwaza.example.com",
        "podGuard": {"enforcement": enforcement},
    }
    return TenantPlatform.from_body({"metadata": {"name": "demo"}, "spec": spec})


def obj(kind: str, name: str, *, adopt: str | None = "demo", labels: dict[str, str] | None = None, **spec: Any) -> Any:
    meta: dict[str, Any] = {"name": name}
    if adopt is not None:
        meta["annotations"] = {constants.ANNOTATION_ADOPTABLE: adopt}
    if labels:
        meta["labels"] = labels
    return {"kind": kind, "metadata": meta, "spec": spec}


def bind(name: str, actions: list[str], policy: str | None = None, **kw: Any) -> Any:
    return obj(VAPB, name, policyName=policy or name, validationActions=actions, **kw)


OURS_LABELS = {constants.LABEL_MANAGED_BY: constants.MANAGED_BY_VALUE, constants.LABEL_PLATFORM: "other"}

# (policies, bindings, taken policies, taken bindings, mode, dangling)
HAND_MADE = [
    pytest.param([], [], (), (), "Warn", (), id="nothing"),
    pytest.param(
        [obj(VAP, "kamiwaza-pod-guard"), obj(VAP, "kamiwaza-exec-guard")],
        [bind("kamiwaza-pod-guard", ["Deny"]), bind("kamiwaza-exec-guard", ["Deny"])],
        ("kamiwaza-exec-guard", "kamiwaza-pod-guard"),
        ("kamiwaza-exec-guard", "kamiwaza-pod-guard"),
        "Deny",
        (),
        id="the checklist's, opted in, denying",
    ),
    pytest.param(
        [obj(VAP, "g")], [bind("g", ["Warn", "Audit"])], ("g",), ("g",), "Warn", (), id="warn only: ours keep the spec"
    ),
    pytest.param(
        [obj(VAP, "g")],
        [bind("g", ["Deny"], adopt=None)],
        ("g",),
        (),
        "Deny",
        ("g",),
        id="a binding not opted in still sets the mode, and is left",
    ),
    pytest.param(
        [obj(VAP, "g", adopt="someone-else"), obj(VAP, "h", adopt=None)],
        [bind("g", ["Deny"], adopt="someone-else")],
        (),
        (),
        "Warn",
        (),
        id="not opted in for us",
    ),
    pytest.param(
        [obj(VAP, "x", labels=OURS_LABELS), obj(VAP, NAMES.pod_guard)],
        [bind("x", ["Deny"], labels=OURS_LABELS)],
        (),
        (),
        "Warn",
        (),
        id="another platform's, or ours by name: never",
    ),
]


@pytest.mark.parametrize(("policies", "bindings", "taken", "taken_bindings", "mode", "dangling"), HAND_MADE)
def test_hand_made(
    *,
    policies: list[Any],
    bindings: list[Any],
    taken: tuple[str, ...],
    taken_bindings: tuple[str, ...],
    mode: str,
    dangling: tuple[str, ...],
) -> None:
    found = tk.hand_made(platform(), policies, bindings)
    assert (found.policies, found.bindings, found.mode, found.dangling) == (taken, taken_bindings, mode, dangling)


DENYING = tk.HandMade(policies=("g",), bindings=("g",), denying=("g",))
WARNING = tk.HandMade(policies=("g",), bindings=("g",))


def ours(record: str | None) -> Any:
    return {"metadata": {"annotations": {tk.TAKEOVER_ANNOTATION: record}}} if record else None


# (spec enforcement, hand-made, our policy's record, covered, mode, since, blocked fragment, target, default)
PLANS = [
    pytest.param("Deny", DENYING, None, ALL, "Deny", "NOW", "", "Deny", "Deny", id="deny"),
    pytest.param("Staged", DENYING, None, ALL, "Deny", "NOW", "", "Deny", "Warn", id="staged starts at Deny"),
    pytest.param("Staged", WARNING, None, ALL, "Warn", "NOW", "", "Warn", "Warn", id="staged, hand-made warns"),
    pytest.param("Staged", WARNING, f"Deny {START}", ALL, "Deny", START, "", "Deny", "Warn", id="resumed after a kill"),
    pytest.param("Deny", DENYING, "garbage", ALL, "Deny", "NOW", "", "Deny", "Deny", id="a damaged record"),
    pytest.param(
        "Warn",
        DENYING,
        None,
        ALL,
        "Deny",
        "NOW",
        "spec.podGuard.enforcement is Warn",
        "Warn",
        "Warn",
        id="warn would lower it",
    ),
    pytest.param(
        "Deny",
        DENYING,
        None,
        ["kamiwaza"],
        "Deny",
        "NOW",
        "does not own kamiwaza-extensions",
        "Deny",
        "Deny",
        id="a namespace not owned",
    ),
]


@pytest.mark.parametrize(
    ("enforcement", "hand", "record", "covered", "mode", "since", "blocked", "target", "default"), PLANS
)
def test_plan(
    *,
    enforcement: str,
    hand: tk.HandMade,
    record: str | None,
    covered: list[str],
    mode: str,
    since: str,
    blocked: str,
    target: str,
    default: render_pg.Enforcement,
) -> None:
    plan = tk.plan(platform(enforcement), hand, ours(record), covered, "NOW")
    assert plan is not None
    assert (plan.mode, plan.since) == (mode, since)
    assert blocked in plan.blocked and bool(plan.blocked) is bool(blocked)
    assert tk.target(default, plan) == target
    assert tk.record(plan) == ({} if blocked else {tk.TAKEOVER_ANNOTATION: f"{mode} {since}"})
    assert len(tk.check_binding(platform(enforcement), plan)) == (0 if blocked else 1)


def test_no_plan_once_nothing_hand_made_is_left() -> None:
    assert tk.plan(platform(), tk.HandMade(), ours(f"Deny {START}"), ALL, "NOW") is None
    assert tk.record(None) == {} and tk.check_binding(platform(), None) == []


def test_the_check_binding_is_a_warn_only_binding_of_our_pod_guard() -> None:
    (check,) = tk.check_binding(platform(), tk.plan(platform(), DENYING, None, ALL, "NOW"))
    assert check["metadata"]["name"] == f"{NAMES.pod_guard}-takeover-check"
    assert check["spec"] == {"policyName": NAMES.pod_guard, "validationActions": ["Warn"]}
    assert len(render_pg.takeover_check_name("x" * 250)) <= 253


def warning(binding: str, policy: str = NAMES.pod_guard) -> str:
    return (
        f"Validation failed for ValidatingAdmissionPolicy '{policy}' with binding '{binding}': hostPID is not allowed"
    )


@pytest.mark.parametrize(
    ("warnings", "proven"),
    [
        ([], False),
        ([warning(NAMES.pod_guard)], False),  # our real binding at Warn proves nothing about the check
        ([warning("kamiwaza-pod-guard", "kamiwaza-pod-guard")], False),
        ([warning("kamiwaza-pod-guard", "kamiwaza-pod-guard"), warning(f"{NAMES.pod_guard}-takeover-check")], True),
    ],
)
def test_proof_is_the_check_bindings_warning(warnings: list[str], proven: bool) -> None:
    assert tk.proof_warning(warnings, NAMES.pod_guard) is proven


@pytest.mark.parametrize(
    ("since", "written", "settled"),
    [(START, 0, True), (START, 1, False), ("2026-11-29T11:59:58Z", 0, False), ("", 0, False)],
)
def test_settled(since: str, written: int, settled: bool) -> None:
    plan = tk.Plan(hand=DENYING, mode="Deny", since=since)
    assert tk.settled(plan, written=written, now=NOW) is settled


def applied(mode: str | None, exec_mode: str | None = None) -> list[Any]:
    out = []
    for name, m in ((NAMES.pod_guard, mode), (NAMES.exec_guard, exec_mode or mode)):
        if m:
            out.append({"kind": VAPB, "metadata": {"name": name}, "spec": {"validationActions": render_pg.ACTIONS[m]}})
    return out


@pytest.mark.parametrize(
    ("objects", "mode", "expected"),
    [
        (applied("Deny"), "Deny", True),
        (applied("Deny", "Warn"), "Deny", False),  # the exec guard's binding counts too
        (applied("Warn"), "Warn", True),
        (applied(None), "Warn", False),
    ],
)
def test_ours_at(objects: list[Any], mode: render_pg.Enforcement, expected: bool) -> None:
    assert tk.ours_at(platform(), objects, mode) is expected


ENFORCING = Condition("PodGuardReady", "True", reasons.PodGuard.ENFORCING, "ours deny")
RUNNING = tk.Plan(hand=DENYING, mode="Deny", since=START)

# (takeover facts, the pod guard's own condition, reason, fragment, progressing)
TAKEOVER_ROWS = [
    pytest.param(
        tk.TakeoverFacts(plan=RUNNING, unproven=("kamiwaza (no warning from the check binding yet)",)),
        ENFORCING,
        reasons.PodGuard.TAKEOVER_IN_PROGRESS,
        "has not yet shown the operator's guard in effect in kamiwaza",
        True,
        id="not yet proven",
    ),
    pytest.param(
        tk.TakeoverFacts(plan=RUNNING, errors=("ValidatingAdmissionPolicyBinding g: forbidden",)),
        ENFORCING,
        reasons.PodGuard.TAKEOVER_IN_PROGRESS,
        "could not delete ValidatingAdmissionPolicyBinding g: forbidden",
        True,
        id="a delete failed",
    ),
    pytest.param(
        tk.TakeoverFacts(plan=tk.Plan(hand=DENYING, mode="Deny", since=START, blocked="it denies")),
        Condition("PodGuardReady", "True", reasons.PodGuard.WARN_ONLY, "ours warn"),
        reasons.PodGuard.TAKEOVER_BLOCKED,
        "(binding g, policy g) is not taken over: it denies. Both guards apply meanwhile.",
        False,
        id="blocked",
    ),
    pytest.param(
        tk.TakeoverFacts(plan=RUNNING),
        Condition("PodGuardReady", "False", reasons.Common.API_ERROR, "could not apply"),
        reasons.Common.API_ERROR,
        "could not apply",
        False,
        id="a problem of the guard itself is kept",
    ),
    pytest.param(
        tk.TakeoverFacts(plan=RUNNING, proven_in=("kamiwaza",), deleted=("b", "p"), done=True),
        ENFORCING,
        reasons.PodGuard.ENFORCING,
        "ours deny",
        False,
        id="done: the guard's own condition",
    ),
]


@pytest.mark.parametrize(("facts", "cond", "reason", "fragment", "progressing"), TAKEOVER_ROWS)
def test_amend(facts: tk.TakeoverFacts, cond: Condition, reason: str, fragment: str, progressing: bool) -> None:
    verdict = tk.amend(platform(), Verdict([cond]), facts)
    assert (verdict.condition.reason, verdict.progressing) == (reason, progressing), verdict.condition.message
    assert fragment in verdict.condition.message
    if progressing:
        assert verdict.requeue_after == tk.REQUEUE_SECONDS
    if facts.done:
        ((_, event_reason, message),) = verdict.events
        assert event_reason == reasons.Event.POD_GUARD_TAKEN_OVER
        assert "shown in effect in kamiwaza, then deleted b, p." in message


def test_every_takeover_reason_has_a_row() -> None:
    rows = {p.values[2] for p in TAKEOVER_ROWS}
    assert {reasons.PodGuard.TAKEOVER_IN_PROGRESS, reasons.PodGuard.TAKEOVER_BLOCKED} <= rows
