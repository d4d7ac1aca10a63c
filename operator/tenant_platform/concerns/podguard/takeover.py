"""PURE decisions about a pod guard prepared by hand, and left over from earlier versions
(docs/migration.md).

An admin opts hand-made ValidatingAdmissionPolicies and their bindings in with the annotation
``tenancy.dev/adoptable-by: <platform>`` (objects carrying anyone's labels never count). The
operator's identity may not delete any policy or binding (deploy/base/rbac.yaml: it changes only
the shared guard's, by name), so nothing hand-made is deleted by it; instead:

1. while a hand-made binding opted in (or one naming an opted-in policy) denies, this platform's
   guard starts at Deny for ``Staged`` too (``denies``; status/podguard.target), so the guard never
   steps down when the admin deletes the hand-made one;
2. once this platform's guard denies in every namespace the platform names, and was in place
   already when the pass began (the API server has loaded it), PodGuardReady says
   the hand-made objects are redundant (``HandMadeGuardRedundant``, still True) and names the
   command that deletes them, but only when the platform names every namespace the hand-made
   bindings covered (``covers``: the names their namespace selectors, and their policies', are
   bounded to); when they covered more, or namespaces not given by name (``unbounded``), it says
   ``HandMadeGuardCoversMore`` (True) naming them, and no command: following the advice must
   never leave a namespace unguarded. Before, the message says why they are still needed.
   Nothing is ever without enforcement: the hand-made guard stays until an admin deletes it.
3. ``TakeoverBlocked`` (False) when the hand-made guard denies but ``spec.podGuard.enforcement``
   is Warn: ours would never replace it.

``legacy``: per-platform policies and bindings of earlier operator versions (our labels, this
platform's name, not one of the shared names); the operator cannot delete them, the condition's
message names them and the admin's one-liner.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from tenant_platform.api import constants, reasons
from tenant_platform.api.models import TenantPlatform
from tenant_platform.concerns.podguard import manifests
from tenant_platform.concerns.podguard.verdict import TYPE
from tenant_platform.core import conditions, ownership
from tenant_platform.core.conditions import Condition
from tenant_platform.core.verdict import Verdict

Obj = dict[str, Any]

LEGACY_SELECTOR: Final = f"{constants.LABEL_COMPONENT}=podguard,{constants.LABEL_PLATFORM}"
"""Selects the per-platform guard objects of earlier versions (the shared ones carry no platform)."""


@dataclass(frozen=True)
class HandMade:
    """The hand-made guard objects opted in for this platform, as listed, and our leftovers."""

    policies: tuple[str, ...] = ()
    bindings: tuple[str, ...] = ()
    denying: tuple[str, ...] = ()
    """Bindings that deny, annotated or naming an annotated policy."""
    legacy: tuple[str, ...] = ()
    """``Kind name`` of this platform's per-platform guard objects from an earlier version."""
    covers: tuple[str, ...] = ()
    """The namespaces the counted bindings are bounded to by name (their selectors, and their
    policies', by ``kubernetes.io/metadata.name``)."""
    unbounded: tuple[str, ...] = ()
    """Counted bindings whose namespaces are not bounded by name (each with what selects them)."""

    @property
    def found(self) -> bool:
        return bool(self.policies or self.bindings)

    @property
    def denies(self) -> bool:
        return bool(self.denying)


def _labels(obj: Obj) -> dict[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def _owned_by_anyone(obj: Obj) -> bool:
    labels = _labels(obj)
    return labels.get(constants.LABEL_MANAGED_BY) == constants.MANAGED_BY_VALUE or constants.LABEL_PLATFORM in labels


def _legacy(obj: Obj, platform: TenantPlatform) -> bool:
    labels = _labels(obj)
    name = str((obj.get("metadata") or {}).get("name") or "")
    return (
        labels.get(constants.LABEL_MANAGED_BY) == constants.MANAGED_BY_VALUE
        and labels.get(constants.LABEL_PLATFORM) == platform.name
        and labels.get(constants.LABEL_COMPONENT) == "podguard"
        and name not in manifests.SHARED_NAMES
        and name not in manifests.all_names(platform.name)  # a target cluster's current ones
    )


NAME_LABEL: Final = "kubernetes.io/metadata.name"
"""The label the API server sets on every namespace to its name (immutable)."""


def named(selector: Any) -> frozenset[str] | None:
    """The namespace names a label selector is bounded to (``matchLabels`` or ``In`` on
    ``kubernetes.io/metadata.name``, intersected), or None when it is not bounded by name (absent
    or empty: every namespace; other labels only: whatever namespace carries them, now or later)."""
    if not isinstance(selector, dict):
        return None
    bounds: list[frozenset[str]] = []
    labels = selector.get("matchLabels") or {}
    if NAME_LABEL in labels:
        bounds.append(frozenset({str(labels[NAME_LABEL])}))
    for expression in selector.get("matchExpressions") or []:
        if expression.get("key") == NAME_LABEL and expression.get("operator") == "In":
            bounds.append(frozenset(str(v) for v in expression.get("values") or []))
    if not bounds:
        return None
    return frozenset.intersection(*bounds)


def coverage(binding: Obj, policy: Obj | None) -> frozenset[str] | None:
    """The namespaces a binding applies its policy in, by name: its own selector
    (``matchResources.namespaceSelector``) and the policy's (``matchConstraints.namespaceSelector``)
    both hold, so the narrower bound wins; None when neither is bounded by name. Match conditions
    are not read (they can only narrow it: the bound stays an upper one)."""
    own = named(((binding.get("spec") or {}).get("matchResources") or {}).get("namespaceSelector"))
    constraints = ((policy or {}).get("spec") or {}).get("matchConstraints") or {}
    theirs = named(constraints.get("namespaceSelector"))
    if own is None:
        return theirs
    return own if theirs is None else own & theirs


def _selectors(binding: Obj, policy: Obj | None) -> str:
    own = ((binding.get("spec") or {}).get("matchResources") or {}).get("namespaceSelector")
    theirs = (((policy or {}).get("spec") or {}).get("matchConstraints") or {}).get("namespaceSelector")
    found = [json.dumps(s, sort_keys=True, separators=(",", ":")) for s in (own, theirs) if s]
    return f"namespaceSelector {' and '.join(found)}" if found else "every namespace"


def hand_made(platform: TenantPlatform, policies: Sequence[Obj], bindings: Sequence[Obj]) -> HandMade:
    """The listed policies and bindings an admin opted in for ``platform`` (none of ours), and
    this platform's leftovers of earlier versions."""

    def opted_in(obj: Obj) -> bool:
        name = str((obj.get("metadata") or {}).get("name") or "")
        return (
            name not in manifests.SHARED_NAMES
            and not _owned_by_anyone(obj)
            and ownership.adoptable(obj, "", platform.name)
        )

    taken_policies = sorted(str(p["metadata"]["name"]) for p in policies if opted_in(p))
    by_name = {str(p["metadata"]["name"]): p for p in policies}
    taken_bindings, denying, unbounded = [], [], []
    covers: set[str] = set()
    for binding in bindings:
        name = str(binding["metadata"]["name"])
        policy_name = str((binding.get("spec") or {}).get("policyName") or "")
        names_taken = policy_name in taken_policies
        opted = opted_in(binding)
        if opted:
            taken_bindings.append(name)
        counted = opted or (names_taken and not _owned_by_anyone(binding))
        actions = (binding.get("spec") or {}).get("validationActions") or []
        if counted and "Deny" in actions:
            denying.append(name)
        if counted:
            bound = coverage(binding, by_name.get(policy_name))
            if bound is None:
                unbounded.append(f"{name} ({_selectors(binding, by_name.get(policy_name))})")
            else:
                covers |= bound
    legacy = [f"{manifests.BINDING_KIND} {b['metadata']['name']}" for b in bindings if _legacy(b, platform)]
    legacy += [f"{manifests.POLICY_KIND} {p['metadata']['name']}" for p in policies if _legacy(p, platform)]
    return HandMade(
        tuple(taken_policies),
        tuple(sorted(taken_bindings)),
        tuple(sorted(denying)),
        tuple(sorted(legacy)),
        covers=tuple(sorted(covers)),
        unbounded=tuple(sorted(unbounded)),
    )


def _noted(cond: Condition, note: str) -> Condition:
    """``cond`` with ``note`` added to its message."""
    return Condition(cond.type, cond.status, reasons.member(cond.reason), cond.message + note)


def _objects(hand: HandMade) -> str:
    return ", ".join([*(f"binding {b}" for b in hand.bindings), *(f"policy {p}" for p in hand.policies)])


def _delete_command(hand: HandMade) -> str:
    parts = []
    if hand.bindings:
        parts.append(f"kubectl delete validatingadmissionpolicybinding {' '.join(hand.bindings)}")
    if hand.policies:
        parts.append(f"kubectl delete validatingadmissionpolicy {' '.join(hand.policies)}")
    return " && ".join(parts)


def amend(platform: TenantPlatform, verdict: Verdict, hand: HandMade | None, *, denies_everywhere: bool) -> Verdict:
    """The pod guard verdict with what the hand-made guard and the leftovers call for.

    ``denies_everywhere``: this platform's guard is in place at Deny over every namespace the
    platform names, and nothing of it was written in this pass. A condition that reports a
    problem is kept (a note added).
    """
    if hand is None:
        return verdict
    cond = verdict.conditions[0]
    legacy = (
        f" Per-platform guard objects of an earlier operator version remain ({', '.join(hand.legacy)}); the "
        "operator may not delete them: kubectl delete validatingadmissionpolicybinding,validatingadmissionpolicy "
        f"-l {LEGACY_SELECTOR}={platform.name}"
        if hand.legacy
        else ""
    )
    if not hand.found:
        return replace(verdict, conditions=[_noted(cond, legacy)]) if legacy else verdict
    objects = _objects(hand)
    if hand.denies and platform.spec.pod_guard.enforcement == "Warn":
        new = conditions.false(
            TYPE,
            reasons.PodGuard.TAKEOVER_BLOCKED,
            f"The hand-made pod guard opted in for this platform ({objects}) is not replaced: the hand-made "
            f"binding(s) {', '.join(hand.denying)} deny, but spec.podGuard.enforcement is Warn, so deleting them "
            f"would stop denying. Set it to Deny or Staged, or remove the annotation {constants.ANNOTATION_ADOPTABLE}. "
            "Both guards apply meanwhile." + legacy,
        )
        return replace(verdict, conditions=[new], progressing=False)
    uncovered = sorted(set(hand.covers) - set(platform.spec.all_namespaces))
    if cond.status == "True" and denies_everywhere and (uncovered or hand.unbounded):
        beyond = []
        if uncovered:
            beyond.append(f"namespace(s) {', '.join(uncovered)}, which this platform does not name")
        if hand.unbounded:
            beyond.append(f"namespaces not given by name (binding(s) {'; '.join(hand.unbounded)})")
        new = conditions.true(
            TYPE,
            reasons.PodGuard.HAND_MADE_GUARD_COVERS_MORE,
            cond.message + f" The hand-made pod guard opted in for this platform ({objects}) also covers "
            f"{' and '.join(beyond)}: it is still needed there, so keep it. Name those namespaces in "
            "spec.namespace/spec.additionalNamespaces, or narrow the hand-made bindings to this platform's "
            "namespaces, before deleting it." + legacy,
        )
        return replace(verdict, conditions=[new])
    if cond.status == "True" and denies_everywhere:
        new = conditions.true(
            TYPE,
            reasons.PodGuard.HAND_MADE_GUARD_REDUNDANT,
            cond.message + f" The hand-made pod guard opted in for this platform ({objects}) is now redundant; "
            f"the operator does not delete policies, an admin does: {_delete_command(hand)}" + legacy,
        )
        return replace(verdict, conditions=[new])
    note = (
        f" The hand-made pod guard opted in for this platform ({objects}) is still needed: this platform's guard "
        "does not yet deny in every namespace the platform names, or was written only in this pass."
    )
    return replace(verdict, conditions=[_noted(cond, note + legacy)])
