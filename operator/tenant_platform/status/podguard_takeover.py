"""PURE decisions of the pod guard takeover: a guard prepared by hand, replaced with no moment
without enforcement (docs/migration.md).

An admin opts hand-made ValidatingAdmissionPolicies and their bindings in with the annotation
``tenancy.dev/adoptable-by: <platform>`` (objects carrying anyone's labels never count). While
any is left, every pass of the pod guard step (reconcile/podguard.py) follows one ``plan``:

1. ours are applied in the mode the hand-made guard enforces: when any hand-made binding (or a
   binding naming a hand-made policy) denies, ours start at ``[Deny, Audit]`` whatever
   ``spec.podGuard.enforcement`` would start with (Staged records it as its promotion); the mode and
   the start are recorded on our pod guard policy (``TAKEOVER_ANNOTATION``, ``record``), so a killed operator
   resumes the same switch;
2. ours are proven in effect: the API server returns only the first denial when several policies
   deny, so a denied dry run says nothing about ours. A temporary second binding of our pod guard
   policy with actions ``[Warn]`` (render/podguard.takeover_check_name) makes the API server send
   our policy's message back as a warning even on a request another policy denies; a canary pod
   submitted as a server-side dry run in every covered namespace must bring that warning back
   (``proven_in``). The exec guard cannot be dry run (a CONNECT has no dry run, and the operator
   deliberately holds no ``pods/exec``); its proof is indirect: its binding is at the target
   actions, and it was written before the check binding whose effect the API server showed (the
   same binding watch feeds admission, in order);
3. only when proven, with nothing of ours written in this pass and at least ``SETTLE_SECONDS``
   after the switch began, the hand-made bindings are deleted, then the hand-made policies; then
   the check binding and the annotation go (the next apply prunes them).

It waits (``TakeoverBlocked``, nothing deleted) when taking over would lower enforcement: a
hand-made guard denies but ``spec.podGuard.enforcement`` is Warn, or the platform does not own every
namespace it names (ours would not cover them).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

from tenant_platform.api import constants, reasons
from tenant_platform.api.models import TenantPlatform
from tenant_platform.render import podguard as render_pg
from tenant_platform.status import conditions, ownership
from tenant_platform.status.podguard import TYPE, Ref, actions_in_effect, mode_of
from tenant_platform.status.verdict import Verdict

Obj = dict[str, Any]

TAKEOVER_ANNOTATION: Final = f"{constants.GROUP}/pod-guard-takeover"
"""On our pod guard policy while a takeover runs: ``<Deny|Warn> <start, RFC 3339>``."""
SETTLE_SECONDS: Final = 5.0
"""The least time between the start of the switch and the first deletion."""
REQUEUE_SECONDS: Final = 5.0
_TIME = "%Y-%m-%dT%H:%M:%SZ"


@dataclass(frozen=True)
class HandMade:
    """The hand-made guard objects opted in for this platform, as listed."""

    policies: tuple[str, ...] = ()
    bindings: tuple[str, ...] = ()
    """Annotated bindings (deleted first)."""
    denying: tuple[str, ...] = ()
    """Bindings that deny, annotated or naming an annotated policy (only read)."""
    dangling: tuple[str, ...] = ()
    """Bindings not opted in that name an annotated policy: left in place (they bind nothing once
    the policy is gone)."""

    @property
    def found(self) -> bool:
        return bool(self.policies or self.bindings)

    @property
    def mode(self) -> render_pg.Enforcement:
        return "Deny" if self.denying else "Warn"


def _owned_by_anyone(obj: Obj) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return labels.get(constants.LABEL_MANAGED_BY) == constants.MANAGED_BY_VALUE or constants.LABEL_PLATFORM in labels


def hand_made(platform: TenantPlatform, policies: Sequence[Obj], bindings: Sequence[Obj]) -> HandMade:
    """The listed policies and bindings an admin opted in for ``platform`` (none of ours)."""
    names = render_pg.guard_names(platform.name)
    ours = {names.pod_guard, names.exec_guard}

    def opted_in(obj: Obj) -> bool:
        name = str((obj.get("metadata") or {}).get("name") or "")
        return name not in ours and not _owned_by_anyone(obj) and ownership.adoptable(obj, "", platform.name)

    taken_policies = sorted(str(p["metadata"]["name"]) for p in policies if opted_in(p))
    taken_bindings, denying, dangling = [], [], []
    for binding in bindings:
        name = str(binding["metadata"]["name"])
        names_taken = str((binding.get("spec") or {}).get("policyName") or "") in taken_policies
        opted = opted_in(binding)
        if opted:
            taken_bindings.append(name)
        elif names_taken and not _owned_by_anyone(binding):
            dangling.append(name)
        actions = (binding.get("spec") or {}).get("validationActions") or []
        if (opted or names_taken) and "Deny" in actions:
            denying.append(name)
    return HandMade(
        tuple(taken_policies), tuple(sorted(taken_bindings)), tuple(sorted(denying)), tuple(sorted(dangling))
    )


@dataclass(frozen=True)
class Plan:
    """One pass of the takeover."""

    hand: HandMade
    mode: render_pg.Enforcement
    """What ours must be at before anything hand-made goes (recorded or found)."""
    since: str
    """When the switch began (recorded on our policy)."""
    blocked: str = ""
    """Why nothing hand-made may go (a sentence), or ""."""


def recorded(policy: Obj | None) -> tuple[render_pg.Enforcement, str] | None:
    """(mode, start) from ``TAKEOVER_ANNOTATION`` on our live pod guard policy, if well formed."""
    value = str((((policy or {}).get("metadata") or {}).get("annotations") or {}).get(TAKEOVER_ANNOTATION) or "")
    mode, _, since = value.partition(" ")
    if mode not in ("Deny", "Warn") or _parse(since) is None:
        return None
    return ("Deny" if mode == "Deny" else "Warn"), since


def _parse(value: str) -> dt.datetime | None:
    try:
        return dt.datetime.strptime(value, _TIME).replace(tzinfo=dt.UTC)
    except ValueError:
        return None


def plan(platform: TenantPlatform, hand: HandMade, policy: Obj | None, covered: Sequence[str], now: str) -> Plan | None:
    """The takeover of this pass; None when nothing hand-made is opted in (or left)."""
    if not hand.found:
        return None
    found = recorded(policy)
    mode: render_pg.Enforcement = "Deny" if hand.mode == "Deny" or (found and found[0] == "Deny") else "Warn"
    since = found[1] if found else now
    requested = platform.spec.pod_guard.enforcement
    blocked = ""
    missing = [n for n in platform.spec.all_namespaces if n not in covered]
    if mode == "Deny" and requested == "Warn":
        blocked = (
            f"the hand-made binding(s) {', '.join(hand.denying)} deny, but spec.podGuard.enforcement is Warn, so "
            "taking over would stop denying; set it to Deny or Staged (ours then start at Deny), or remove the "
            f"annotation {constants.ANNOTATION_ADOPTABLE}"
        )
    elif missing:
        blocked = (
            f"this platform does not own {', '.join(missing)}, so its guard would not cover them and the "
            "hand-made guard stays until it does (NamespacesReady says why)"
        )
    return Plan(hand=hand, mode=mode, since=since, blocked=blocked)


def target(default: render_pg.Enforcement, takeover: Plan | None) -> render_pg.Enforcement:
    """Deny while a takeover of a denying guard runs; ``default`` (status/podguard.target) otherwise."""
    if takeover is not None and not takeover.blocked and takeover.mode == "Deny":
        return "Deny"
    return default


def record(takeover: Plan | None) -> dict[str, str]:
    """What our pod guard policy carries for the takeover (nothing once it is over, or blocked)."""
    if takeover is None or takeover.blocked:
        return {}
    return {TAKEOVER_ANNOTATION: f"{takeover.mode} {takeover.since}"}


def check_binding(platform: TenantPlatform, takeover: Plan | None) -> list[Obj]:
    """The temporary Warn-only binding of our pod guard policy, while the takeover runs."""
    if takeover is None or takeover.blocked:
        return []
    return [render_pg.render_takeover_check(render_pg.guard_names(platform.name).pod_guard)]


def proof_warning(warnings: Sequence[str], policy_name: str) -> bool:
    """Whether our check binding's warning is among a response's warnings."""
    prefix = (
        f"Validation failed for ValidatingAdmissionPolicy '{policy_name}' with binding "
        f"'{render_pg.takeover_check_name(policy_name)}': "
    )
    return any(w.startswith(prefix) for w in warnings)


def settled(takeover: Plan, *, written: int, now: dt.datetime) -> bool:
    """Nothing of ours written in this pass, and the switch began at least SETTLE_SECONDS ago."""
    start = _parse(takeover.since)
    return written == 0 and start is not None and (now - start).total_seconds() >= SETTLE_SECONDS


def ours_at(platform: TenantPlatform, objects: Sequence[Obj], mode: render_pg.Enforcement) -> bool:
    """Both our bindings carry ``mode``'s actions, or (for a Warn takeover) any mode of ours."""
    names = render_pg.guard_names(platform.name)
    wanted: tuple[Ref, Ref] = ((render_pg.BINDING_KIND, names.pod_guard), (render_pg.BINDING_KIND, names.exec_guard))
    by_ref = {(str(o.get("kind")), str((o.get("metadata") or {}).get("name"))): o for o in objects}
    bindings = [by_ref.get(r) for r in wanted]
    if mode == "Deny":
        return mode_of(bindings) == "Deny"
    return all(actions_in_effect(b) is not None for b in bindings)


@dataclass(frozen=True)
class TakeoverFacts:
    """What the takeover did in one pass (reconcile/podguard.py)."""

    plan: Plan
    waiting: str = ""
    """What it waits for before deleting anything (a sentence), or ""."""
    unproven: tuple[str, ...] = ()
    """Covered namespaces where our check binding's warning did not come back (with why)."""
    deleted: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()
    done: bool = False
    """Every hand-made object opted in is gone."""
    proven_in: tuple[str, ...] = field(default_factory=tuple)


def amend(platform: TenantPlatform, verdict: Verdict, facts: TakeoverFacts | None) -> Verdict:
    """The pod guard verdict with the takeover's condition and event.

    A condition that already reports a problem (apply errors, type checking, a staged check that
    waits) is kept; otherwise, while the takeover runs, PodGuardReady is False with
    ``TakeoverInProgress`` (or ``TakeoverBlocked``). When it is done, an event says what went.
    """
    if facts is None:
        return verdict
    cond = verdict.conditions[0]
    keep = cond.status == "False" and cond.reason != reasons.PodGuard.ENFORCEMENT_PENDING
    hand = facts.plan.hand
    if facts.done:
        dangling = (
            f" Left in place (not opted in, they bind nothing now): {', '.join(hand.dangling)}."
            if hand.dangling
            else ""
        )
        event = (
            "Normal",
            reasons.Event.POD_GUARD_TAKEN_OVER,
            f"Took over the hand-made pod guard: ours shown in effect in {', '.join(facts.proven_in)}, then "
            f"deleted {', '.join(facts.deleted)}.{dangling}",
        )
        return replace(verdict, events=[*verdict.events, event])
    if keep:
        return verdict
    objects = ", ".join([*(f"binding {b}" for b in hand.bindings), *(f"policy {p}" for p in hand.policies)])
    if facts.plan.blocked:
        new = conditions.false(
            TYPE,
            reasons.PodGuard.TAKEOVER_BLOCKED,
            f"The hand-made pod guard opted in for this platform ({objects}) is not taken over: {facts.plan.blocked}. "
            "Both guards apply meanwhile.",
        )
        return replace(verdict, conditions=[new], progressing=False)
    if facts.errors:
        detail = "could not delete " + "; ".join(facts.errors)
    elif facts.unproven:
        detail = "the API server has not yet shown the operator's guard in effect in " + "; ".join(facts.unproven)
    else:
        detail = facts.waiting or "waiting"
    new = conditions.false(
        TYPE,
        reasons.PodGuard.TAKEOVER_IN_PROGRESS,
        f"Taking over the hand-made pod guard ({objects}) with ours at {facts.plan.mode} since {facts.plan.since}: "
        f"{detail}. The hand-made guard stays until ours is proven in effect.",
    )
    requeue = REQUEUE_SECONDS if verdict.requeue_after is None else min(verdict.requeue_after, REQUEUE_SECONDS)
    return replace(verdict, conditions=[new], progressing=True, requeue_after=requeue)


def live_policy(platform: TenantPlatform, live: Mapping[Ref, Obj | None]) -> Obj | None:
    return live.get((render_pg.POLICY_KIND, render_pg.guard_names(platform.name).pod_guard))
