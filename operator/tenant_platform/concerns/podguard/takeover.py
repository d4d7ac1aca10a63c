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
   command that deletes them; before, the message says why they are still needed. Nothing is
   ever without enforcement: the hand-made guard stays until an admin deletes it.
3. ``TakeoverBlocked`` (False) when the hand-made guard denies but ``spec.podGuard.enforcement``
   is Warn: ours would never replace it.

``legacy``: per-platform policies and bindings of earlier operator versions (our labels, this
platform's name, not one of the shared names); the operator cannot delete them, the condition's
message names them and the admin's one-liner.
"""

from __future__ import annotations

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
    taken_bindings, denying = [], []
    for binding in bindings:
        name = str(binding["metadata"]["name"])
        names_taken = str((binding.get("spec") or {}).get("policyName") or "") in taken_policies
        opted = opted_in(binding)
        if opted:
            taken_bindings.append(name)
        actions = (binding.get("spec") or {}).get("validationActions") or []
        if (opted or (names_taken and not _owned_by_anyone(binding))) and "Deny" in actions:
            denying.append(name)
    legacy = [f"{manifests.BINDING_KIND} {b['metadata']['name']}" for b in bindings if _legacy(b, platform)]
    legacy += [f"{manifests.POLICY_KIND} {p['metadata']['name']}" for p in policies if _legacy(p, platform)]
    return HandMade(tuple(taken_policies), tuple(sorted(taken_bindings)), tuple(sorted(denying)), tuple(sorted(legacy)))


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
