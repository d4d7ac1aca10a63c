"""concerns/podguard/takeover.py: which hand-made guard objects are opted in, whether they deny,
our leftovers of earlier versions, and what PodGuardReady says about them (the operator deletes
none of them)."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest
from tests.support import platform

from tenant_platform.api import constants, reasons
from tenant_platform.concerns.podguard import manifests, takeover
from tenant_platform.core.conditions import Condition
from tenant_platform.core.verdict import Verdict

NAMES = manifests.guard_names("Deny")
VAP, VAPB = manifests.POLICY_KIND, manifests.BINDING_KIND
ALL = ["kamiwaza", "kamiwaza-extensions"]


demo = partial(
    platform,
    "demo",
    namespace="kamiwaza",
    additionalNamespaces=["kamiwaza-extensions"],
    domain="kamiwaza.example.com",
    podGuard={"enforcement": "Deny"},
)


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
LEGACY_LABELS = {
    constants.LABEL_MANAGED_BY: constants.MANAGED_BY_VALUE,
    constants.LABEL_PLATFORM: "demo",
    constants.LABEL_COMPONENT: "podguard",
}
SHARED_LABELS = {constants.LABEL_MANAGED_BY: constants.MANAGED_BY_VALUE, constants.LABEL_COMPONENT: "podguard"}

# (policies, bindings, taken policies, taken bindings, denies, legacy)
HAND_MADE = [
    pytest.param([], [], (), (), False, (), id="nothing"),
    pytest.param(
        [obj(VAP, "kamiwaza-pod-guard"), obj(VAP, "kamiwaza-exec-guard")],
        [bind("kamiwaza-pod-guard", ["Deny"]), bind("kamiwaza-exec-guard", ["Deny"])],
        ("kamiwaza-exec-guard", "kamiwaza-pod-guard"),
        ("kamiwaza-exec-guard", "kamiwaza-pod-guard"),
        True,
        (),
        id="the checklist's, opted in, denying",
    ),
    pytest.param(
        [obj(VAP, "g")], [bind("g", ["Warn", "Audit"])], ("g",), ("g",), False, (), id="warn only: ours keep the spec"
    ),
    pytest.param(
        [obj(VAP, "g")],
        [bind("g", ["Deny"], adopt=None)],
        ("g",),
        (),
        True,
        (),
        id="a binding not opted in still counts as denying",
    ),
    pytest.param(
        [obj(VAP, "g", adopt="someone-else"), obj(VAP, "h", adopt=None)],
        [bind("g", ["Deny"], adopt="someone-else")],
        (),
        (),
        False,
        (),
        id="not opted in for us",
    ),
    pytest.param(
        [obj(VAP, "x", labels=OURS_LABELS), obj(VAP, NAMES.pod_guard)],
        [bind("x", ["Deny"], labels=OURS_LABELS)],
        (),
        (),
        False,
        (),
        id="another platform's, or ours by name: never",
    ),
    pytest.param(
        [
            obj(VAP, "tenant-platform-demo-pod-guard", adopt=None, labels=LEGACY_LABELS),
            obj(VAP, NAMES.pod_guard, labels=SHARED_LABELS),
        ],
        [bind("tenant-platform-demo-pod-guard", ["Deny", "Audit"], adopt=None, labels=LEGACY_LABELS)],
        (),
        (),
        False,
        (f"{VAPB} tenant-platform-demo-pod-guard", f"{VAP} tenant-platform-demo-pod-guard"),
        id="this platform's per-platform guard of an earlier version: reported",
    ),
    pytest.param(
        [obj(VAP, manifests.guard_names("Deny", "demo").pod_guard, adopt=None, labels=LEGACY_LABELS)],
        [],
        (),
        (),
        False,
        (),
        id="a target cluster's current per-platform guard: not a leftover",
    ),
]


@pytest.mark.parametrize(("policies", "bindings", "taken", "taken_bindings", "denies", "legacy"), HAND_MADE)
def test_hand_made(
    *,
    policies: list[Any],
    bindings: list[Any],
    taken: tuple[str, ...],
    taken_bindings: tuple[str, ...],
    denies: bool,
    legacy: tuple[str, ...],
) -> None:
    found = takeover.hand_made(demo(), policies, bindings)
    assert (found.policies, found.bindings, found.denies) == (taken, taken_bindings, denies)
    assert sorted(found.legacy) == sorted(legacy)


NAME_IN = {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": ALL}]}

# (policy's namespaceSelector, binding's namespaceSelector, covers, unbounded)
COVERAGE = [
    pytest.param(None, NAME_IN, ALL, (), id="the checklist's: the binding by name"),
    pytest.param(NAME_IN, None, ALL, (), id="the policy by name"),
    pytest.param(
        NAME_IN,
        {"matchLabels": {"kubernetes.io/metadata.name": "kamiwaza"}},
        ["kamiwaza"],
        (),
        id="both by name: the narrower",
    ),
    pytest.param(
        None,
        {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["x"]}]},
        [],
        (
            'g (namespaceSelector {"matchExpressions":[{"key":"kubernetes.io/metadata.name","operator":"NotIn",'
            '"values":["x"]}]})',
        ),
        id="NotIn: not bounded by name",
    ),
    pytest.param(
        None,
        {"matchLabels": {"team": "ml"}},
        [],
        ('g (namespaceSelector {"matchLabels":{"team":"ml"}})',),
        id="another label: whatever namespace carries it, now or later",
    ),
    pytest.param(None, None, [], ("g (every namespace)",), id="no selector: every namespace"),
]


@pytest.mark.parametrize(("policy_selector", "binding_selector", "covers", "unbounded"), COVERAGE)
def test_what_a_hand_made_binding_covers(
    policy_selector: Any, binding_selector: Any, covers: list[str], unbounded: tuple[str, ...]
) -> None:
    policy = obj(VAP, "g", **({"matchConstraints": {"namespaceSelector": policy_selector}} if policy_selector else {}))
    kw = {"matchResources": {"namespaceSelector": binding_selector}} if binding_selector else {}
    found = takeover.hand_made(demo(), [policy], [bind("g", ["Deny", "Audit"], **kw)])
    assert (list(found.covers), found.unbounded) == (covers, unbounded)


def test_a_binding_of_an_opted_in_policy_counts_even_when_not_annotated() -> None:
    policy = obj(VAP, "g")
    found = takeover.hand_made(
        demo(), [policy], [bind("g", ["Deny"], adopt=None, matchResources={"namespaceSelector": NAME_IN})]
    )
    assert found.covers == tuple(ALL)


DENYING = takeover.HandMade(policies=("g",), bindings=("g",), denying=("g",))
WARNING = takeover.HandMade(policies=("g",), bindings=("g",))
LEFTOVER = takeover.HandMade(legacy=(f"{VAP} tenant-platform-demo-pod-guard",))
ENFORCING = Condition("PodGuardReady", "True", reasons.PodGuard.ENFORCING, "ours deny.")
WAITING = Condition("PodGuardReady", "False", reasons.PodGuard.VIOLATING_PODS_FOUND, "pods would be denied.")

# (hand-made, spec enforcement, our condition, ours denies everywhere, reason, status, fragment)
AMEND_ROWS = [
    pytest.param(
        DENYING,
        "Deny",
        ENFORCING,
        True,
        reasons.PodGuard.HAND_MADE_GUARD_REDUNDANT,
        "True",
        "ours deny. The hand-made pod guard opted in for this platform (binding g, policy g) is now redundant; the "
        "operator does not delete policies, an admin does: kubectl delete validatingadmissionpolicybinding g && "
        "kubectl delete validatingadmissionpolicy g",
        id="ours deny everywhere: redundant, the admin deletes",
    ),
    pytest.param(
        takeover.HandMade(policies=("g",), bindings=("g",), denying=("g",), covers=(*ALL, "other")),
        "Deny",
        ENFORCING,
        True,
        reasons.PodGuard.HAND_MADE_GUARD_COVERS_MORE,
        "True",
        "ours deny. The hand-made pod guard opted in for this platform (binding g, policy g) also covers "
        "namespace(s) other, which this platform does not name: it is still needed there, so keep it.",
        id="it covered more than ours: kept, the namespaces named, no command",
    ),
    pytest.param(
        takeover.HandMade(policies=("g",), bindings=("g",), denying=("g",), unbounded=("g (every namespace)",)),
        "Deny",
        ENFORCING,
        True,
        reasons.PodGuard.HAND_MADE_GUARD_COVERS_MORE,
        "True",
        "also covers namespaces not given by name (binding(s) g (every namespace)): it is still needed there",
        id="it covered namespaces not by name: kept",
    ),
    pytest.param(
        takeover.HandMade(policies=("g",), bindings=("g",), denying=("g",), covers=("kamiwaza",)),
        "Deny",
        ENFORCING,
        True,
        reasons.PodGuard.HAND_MADE_GUARD_REDUNDANT,
        "True",
        "is now redundant",
        id="it covered fewer than ours: redundant",
    ),
    pytest.param(
        DENYING,
        "Staged",
        WAITING,
        False,
        reasons.PodGuard.VIOLATING_PODS_FOUND,
        "False",
        "pods would be denied. The hand-made pod guard opted in for this platform (binding g, policy g) is still "
        "needed",
        id="ours not denying yet: still needed",
    ),
    pytest.param(
        WARNING,
        "Deny",
        ENFORCING,
        False,
        reasons.PodGuard.ENFORCING,
        "True",
        "is still needed: this platform's guard does not yet deny in every namespace the platform names, or was "
        "written only in this pass.",
        id="a namespace not owned: still needed",
    ),
    pytest.param(
        DENYING,
        "Warn",
        ENFORCING,
        False,
        reasons.PodGuard.TAKEOVER_BLOCKED,
        "False",
        "the hand-made binding(s) g deny, but spec.podGuard.enforcement is Warn, so deleting them would stop denying",
        id="spec at Warn: blocked",
    ),
    pytest.param(
        LEFTOVER,
        "Deny",
        ENFORCING,
        True,
        reasons.PodGuard.ENFORCING,
        "True",
        "ours deny. Per-platform guard objects of an earlier operator version remain (ValidatingAdmissionPolicy "
        "tenant-platform-demo-pod-guard); the operator may not delete them: kubectl delete "
        "validatingadmissionpolicybinding,validatingadmissionpolicy -l tenancy.dev/component=podguard,"
        "tenancy.dev/tenant-platform=demo",
        id="leftovers of an earlier version: the admin's one-liner",
    ),
]


@pytest.mark.parametrize(("hand", "enforcement", "cond", "everywhere", "reason", "status", "fragment"), AMEND_ROWS)
def test_amend(  # noqa: PLR0917 (one row's columns)
    hand: takeover.HandMade,
    enforcement: str,
    cond: Condition,
    everywhere: bool,
    reason: str,
    status: str,
    fragment: str,
) -> None:
    verdict = takeover.amend(
        demo(podGuard={"enforcement": enforcement}), Verdict([cond]), hand, denies_everywhere=everywhere
    )
    (new,) = verdict.conditions
    assert (new.reason, new.status) == (reason, status), new.message
    assert fragment in new.message
    if reason == reasons.PodGuard.HAND_MADE_GUARD_COVERS_MORE:
        assert "kubectl delete" not in new.message, "no advice that would leave a namespace unguarded"


def test_nothing_found_leaves_the_verdict() -> None:
    verdict = Verdict([ENFORCING])
    assert takeover.amend(demo(), verdict, takeover.HandMade(), denies_everywhere=True) is verdict
    assert takeover.amend(demo(), verdict, None, denies_everywhere=True) is verdict


def test_every_takeover_reason_has_a_row() -> None:
    rows = {p.values[4] for p in AMEND_ROWS}
    assert {
        reasons.PodGuard.HAND_MADE_GUARD_REDUNDANT,
        reasons.PodGuard.HAND_MADE_GUARD_COVERS_MORE,
        reasons.PodGuard.TAKEOVER_BLOCKED,
    } <= rows
