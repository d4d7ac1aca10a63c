"""PURE decisions of the pod guard step (PodGuardReady): staged enforcement and the condition.

concerns/podguard/step.py gathers and applies, round by round; this module decides from what it
found, one pass at a time. The state lives in the platform's own ``status.podGuard`` (the values
the shared policies were given; they read them from the namespaces' mark,
concerns/podguard/manifests.py), nothing else is remembered:

- ``target``: the enforcement the parameter gets this pass: Deny for ``Deny``, and for ``Staged``
  once the parameter is at Deny (promoted earlier, or Deny before: it stays there), or while a hand-made
  guard opted in for this platform denies (concerns/podguard/takeover.py); Warn otherwise;
- ``param`` / ``param_fields``: the parameter (namespaces owned, enforcement, validated proxy
  repositories) and its fields in ``status.podGuard``; ``param_written``: whether the API server
  already has them;
- ``wants_check``: ``Staged``, still at Warn, and the guard in place: re-submit the existing pods
  as dry runs;
- ``promotes``: that check found every pod checked and none denied, and this is not a dry run:
  write the parameter again at Deny;
- ``writes``: what a round writes (the namespaces' marks, the guard's objects, the parameter
  published through the pipeline) and that another round follows; ``shared_guard``: the
  labelled guard, or an earlier version's parameter guard kept while some platform's namespaces
  are unmarked; ``judged``: the pass's facts once the writes are done;
- ``evaluate``: from every fact of the pass, the condition (reason from ``reasons.PodGuard``), the
  ``status.podGuard`` section, progressing, the requeue and the promotion event.

It also reads the API server's answers: the guard's own messages among a dry run's warnings, the
reasons in a denial, and the type-checking warnings recorded on the policies.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from tenant_platform.api import constants, reasons
from tenant_platform.api.models import TenantPlatform
from tenant_platform.api.status.podguard import InEffect, PodGuardStatus
from tenant_platform.concerns.podguard import manifests
from tenant_platform.concerns.podguard.check import StagedCheck, waiting
from tenant_platform.concerns.podguard.check import join as _join
from tenant_platform.core import conditions
from tenant_platform.core.conditions import Condition
from tenant_platform.core.verdict import Event, Verdict

Obj = dict[str, Any]
Ref = tuple[str, str]
"""(kind, name) of a policy or binding."""

TYPE: Final = constants.POD_GUARD_READY
# Requeue while staged enforcement waits for violators to go (the step caches verdicts).
STAGED_REQUEUE_SECONDS: Final = 30.0
# Requeue soon after writing a policy, to pick up the API server's type-checking result.
TYPE_CHECK_REQUEUE_SECONDS: Final = 10.0
PARAM_WOULD_APPLY: Final = "status.podGuard (the guard's parameter)"
"""What a dry run lists among the objects it would apply when the parameter differs."""


@dataclass(frozen=True)
class Applied:
    """What applying the four objects did (in a dry run: what comparing them found)."""

    objects: tuple[Obj, ...] = ()
    """The objects as they are now (applied, or in a dry run as found)."""
    written: int = 0
    errors: tuple[str, ...] = ()
    forbidden: bool = False
    """An apply was refused by RBAC."""
    would_apply: tuple[str, ...] = ()
    """Dry run: objects that differ from their rendered intent."""

    @property
    def ok(self) -> bool:
        return not self.errors


@dataclass(frozen=True)
class PodGuardFacts:
    """Everything one pass found, in the order the step learns it (round by round)."""

    served: bool = True
    """The API server serves admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy."""
    server_version: str = ""
    """Read only when not served."""
    live: Mapping[Ref, Obj | None] = field(default_factory=dict)
    """The policies and bindings by (kind, name): as found before any write, then as this pass's
    writes left them."""
    shared: bool = True
    """The shared policies (selecting the namespaces' marks); False for spec.target (the
    platform's own policies in the target cluster, its parameter inlined)."""
    namespaces: tuple[str, ...] = ()
    """The namespaces the guard covers: those of the platform's that it owns."""
    found: Mapping[str, Any] = field(default_factory=dict)
    """``status.podGuard`` as the API server held it when the pass began (not as the pass's body
    had it: a body older than the step's last write must not send a promotion back)."""
    hand_made_denies: bool = False
    """A hand-made guard opted in for this platform denies (concerns/podguard/takeover.py)."""
    marks: Mapping[str, manifests.Mark | None] = field(default_factory=dict)
    """Shared: the guard's mark on the namespaces it covers and on those its parameter listed
    before (None: no such namespace), as found before any write."""
    parameter_guard: bool = False
    """Shared: the live shared policies are still of the parameter guard's shape (an earlier
    version's): the step switches them only once ``unmarked`` is empty."""
    unmarked: tuple[str, ...] = ()
    """Shared, while ``parameter_guard``: the other platforms' namespaces (``platform/namespace``)
    whose mark does not say what their parameter says yet."""
    round: int = 1
    """1: nothing written yet; 2: the guard applied (and its parameter published), the staged
    check run if wanted; 3: promoted to Deny after a clean check (see ``writes``)."""
    param: manifests.GuardParam | None = None
    """The parameter of this pass (after a promotion: at Deny)."""
    param_written: bool = False
    """Shared: the API server holds ``param`` in status.podGuard (written this pass, or already)."""
    param_error: str = ""
    """Shared: writing the parameter failed (why)."""
    applied: Applied = Applied()
    check: StagedCheck | None = None
    """The staged check, when one ran."""
    promoted: bool = False
    """This pass switched the guard to Deny."""

    @property
    def target(self) -> manifests.Enforcement:
        return self.param.enforcement if self.param is not None else "Warn"


# ---- reading the API server's answers -------------------------------------------------------------


def ref(obj: Obj) -> Ref:
    return (str(obj.get("kind")), str(obj.get("metadata", {}).get("name")))


def actions_in_effect(binding: Obj | None) -> manifests.Enforcement | None:
    """'Deny' or 'Warn' when a live binding carries exactly that mode's actions, else None."""
    if not binding:
        return None
    actions = sorted(binding.get("spec", {}).get("validationActions") or [])
    if actions == sorted(manifests.ACTIONS["Deny"]):
        return "Deny"
    if actions == sorted(manifests.ACTIONS["Warn"]):
        return "Warn"
    return None


def guard_warnings(warnings: list[str], policy_name: str) -> list[str]:
    """The messages of ``policy_name`` among a response's warnings (the API server's prefix cut)."""
    prefix = f"Validation failed for ValidatingAdmissionPolicy '{policy_name}' with binding '"
    found: list[str] = []
    for text in warnings:
        if text.startswith(prefix):
            rest = text[len(prefix) :]
            _, sep, message = rest.partition("': ")
            message = message if sep else rest
            if message not in found:  # one message per rule, whichever binding warned
                found.append(message)
    return found


def denied_by_guard(message: str, policy_name: str) -> list[str] | None:
    """The reasons in an API error that is the guard's denial; None for any other error."""
    if policy_name not in message:
        return None
    return [message.rpartition("denied request: ")[2] or message]


def type_check_warnings(objects: Sequence[Obj]) -> list[str]:
    """The type-checking warnings recorded on the policies for their current generation."""
    found = []
    for obj in objects:
        if obj.get("kind") != manifests.POLICY_KIND:
            continue
        status = obj.get("status") or {}
        if status.get("observedGeneration") != obj.get("metadata", {}).get("generation"):
            continue
        for warning in (status.get("typeChecking") or {}).get("expressionWarnings") or []:
            text = str(warning.get("warning", "")).strip().splitlines()
            found.append(f"{obj['metadata']['name']} {warning.get('fieldRef', '')}: {text[0] if text else ''}")
    return found


def type_check_pending(objects: Sequence[Obj]) -> bool:
    """A policy whose current generation the API server has not type-checked yet."""
    return any(
        (obj.get("status") or {}).get("observedGeneration") != obj.get("metadata", {}).get("generation")
        for obj in objects
        if obj.get("kind") == manifests.POLICY_KIND
    )


# ---- staged enforcement and the parameter --------------------------------------------------------


def previous(platform: TenantPlatform) -> dict[str, Any]:
    """``status.podGuard`` as the pass found it."""
    found = platform.status.get("podGuard")
    return found if isinstance(found, dict) else {}


def promoted(platform: TenantPlatform, found: Mapping[str, Any] | None = None) -> bool:
    """Staged, and the parameter (``found``, as read live; else the pass's body) is at Deny already:
    promoted by an earlier pass, or Deny before the spec said Staged. It stays there; Warn in
    between (the spec set to Warn) forgets it."""
    before = previous(platform) if found is None else found
    return platform.spec.pod_guard.enforcement == "Staged" and before.get("enforcement") == "Deny"


def target(
    platform: TenantPlatform, *, hand_made_denies: bool = False, found: Mapping[str, Any] | None = None
) -> manifests.Enforcement:
    """Deny for Deny, for Staged once promoted, and for Staged while a hand-made guard opted in for
    this platform denies (never less than what is there); Warn otherwise."""
    requested = platform.spec.pod_guard.enforcement
    if requested == "Deny" or (requested == "Staged" and (promoted(platform, found) or hand_made_denies)):
        return "Deny"
    return "Warn"


def param(
    platform: TenantPlatform, enforcement: manifests.Enforcement, namespaces: Sequence[str]
) -> manifests.GuardParam:
    """This platform's parameter: the namespaces it owns (never another's), the enforcement, the
    validated proxy repositories."""
    repositories = manifests.valid_proxy_repositories(platform.spec.pod_guard.proxy_image_repositories)
    return manifests.GuardParam(tuple(namespaces), enforcement, tuple(repositories))


def param_fields(value: manifests.GuardParam) -> dict[str, Any]:
    """The parameter's fields in ``status.podGuard`` (what the shared policies read)."""
    return {
        "namespaces": list(value.namespaces),
        "enforcement": value.enforcement,
        "proxyImageRepositories": list(value.proxy_image_repositories),
    }


def param_written(status_section: Mapping[str, Any], value: manifests.GuardParam) -> bool:
    """Whether ``status.podGuard`` as found already holds ``value``."""
    return all(status_section.get(k) == v for k, v in param_fields(value).items())


def binding_refs(enforcement: manifests.Enforcement, platform_name: str = "") -> tuple[Ref, Ref]:
    names = manifests.guard_names(enforcement, platform_name)
    return (manifests.BINDING_KIND, names.pod_guard), (manifests.BINDING_KIND, names.exec_guard)


def guard_in_place(objects: Sequence[Obj], enforcement: manifests.Enforcement, platform_name: str = "") -> bool:
    """Both policies of ``enforcement`` exist and both their bindings carry its actions."""
    by_ref = {ref(o): o for o in objects}
    names = manifests.guard_names(enforcement, platform_name)
    policies = all((manifests.POLICY_KIND, n) in by_ref for n in (names.pod_guard, names.exec_guard))
    bindings = [by_ref.get(r) for r in binding_refs(enforcement, platform_name)]
    return policies and all(actions_in_effect(b) == enforcement for b in bindings)


def wants_check(platform: TenantPlatform, facts: PodGuardFacts) -> bool:
    """Staged, still warning, and the guard in place as rendered (its parameter written): check
    the existing pods."""
    staged = platform.spec.pod_guard.enforcement == "Staged"
    applied = facts.applied
    in_place = applied.ok and not applied.would_apply and (facts.param_written or not facts.shared)
    return staged and facts.target == "Warn" and in_place


def promotes(check: StagedCheck, *, dry_run: bool) -> bool:
    """Every pod was checked and none would be denied: switch to Deny (never in a dry run)."""
    return check.clean and not dry_run


# ---- the rounds of a pass ------------------------------------------------------------------------


def intended(platform: TenantPlatform, facts: PodGuardFacts, *, dry_run: bool) -> manifests.GuardParam:
    """The parameter this pass gives the guard: at ``target``, and at Deny once this pass's check
    found every pod checked and none denied (``promotes``)."""
    value = param(
        platform, target(platform, hand_made_denies=facts.hand_made_denies, found=facts.found), facts.namespaces
    )
    if facts.check is not None and promotes(facts.check, dry_run=dry_run):
        value = dataclasses.replace(value, enforcement="Deny")
    return value


def on_server(facts: PodGuardFacts, written: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """``status.podGuard`` on the API server now: as this pass published it, else as found."""
    return written if written is not None else facts.found


def writes(
    platform: TenantPlatform, facts: PodGuardFacts, *, dry_run: bool, written: Mapping[str, Any] | None = None
) -> Verdict | None:
    """The writes of this round, or None when this round judges (``judged`` and ``evaluate``).

    Round 1: apply the guard (shared: the shared objects; spec.target: the platform's own, the
    parameter inlined) and publish the parameter when the API server does not hold it (as found,
    or as this pass published it: ``written``); then another round. Round 2, after a clean staged
    check (never in a dry run): the parameter at Deny, published (shared) or applied inlined
    (spec.target); then a last round. The conditions are the next round's to decide.
    """
    value = intended(platform, facts, dry_run=dry_run)
    promoting = facts.round == 2 and facts.check is not None and promotes(facts.check, dry_run=dry_run)
    if facts.round == 1:
        desired = (
            [*marks_to_write(facts, value), *shared_guard(facts)]
            if facts.shared
            else manifests.render(value, platform.name)
        )
    elif promoting:
        desired = marks_to_write(facts, value) if facts.shared else manifests.render(value, platform.name)
    else:
        return None
    verdict = Verdict(conditions=[], desired=desired, again=True)
    now = on_server(facts, written)
    if facts.shared and not dry_run and not param_written(now, value):
        # One merge patch of status.podGuard: what the API server holds, with the parameter's fields.
        verdict = verdict.but(sections={"podGuard": {**now, **param_fields(value)}}, publish=("podGuard",))
    return verdict


def shared_guard(facts: PodGuardFacts) -> list[Obj]:
    """The shared names as this round applies them: the labelled guard; but while the live ones are
    still the parameter guard and some platform's namespaces are not marked yet, the parameter
    guard as it is (re-created where drifted), so that no namespace is ever without a guard."""
    if facts.parameter_guard and facts.unmarked:
        return manifests.render_parameter_guard()
    return manifests.render()


def marks_to_write(facts: PodGuardFacts, value: manifests.GuardParam) -> list[Obj]:
    """The namespaces' marks that differ from ``value`` (before the policies: a namespace carries
    its mark before the labelled guard can judge it), and the removal of the mark from namespaces
    the parameter listed before but that the platform no longer owns."""
    wanted = manifests.mark_for(value.enforcement, value.proxy_image_repositories)
    # A namespace found missing (None) is not patched: there is nothing to guard in it.
    out = [
        manifests.guard_mark(ns, wanted)
        for ns in value.namespaces
        if (mark := facts.marks.get(ns, ("", ""))) is not None and mark != wanted
    ]
    for ns, mark in sorted(facts.marks.items()):
        if ns not in value.namespaces and mark is not None and mark != ("", ""):
            out.append(manifests.guard_mark(ns, None))
    return out


Kept = dict[str, tuple[manifests.Enforcement, tuple[str, ...]]]
"""Namespaces to keep guarded by the retained guard: name -> (enforcement, proxy repositories)."""


def dropped(facts: PodGuardFacts) -> Kept:
    """The namespaces this platform's guard covered and no longer does while the platform lives
    (dropped from the spec, or ``spec.namespace`` changed): they stay, released, with whatever
    was granted there (our installer's identity in a former ``spec.namespace`` among it), so they
    keep the guard they had, as the retained guard (docs/pod-guard.md, "Removal"), before this
    round narrows the platform's own. Shared: the namespaces whose mark this round removes, at
    their mark's enforcement; spec.target: those ``status.podGuard`` listed, at its enforcement."""
    kept: Kept = {}
    if facts.shared:
        for ns, mark in sorted(facts.marks.items()):
            if ns in facts.namespaces or mark is None or mark == ("", ""):
                continue
            enforcement: manifests.Enforcement = "Deny" if mark[0] != "Warn" else "Warn"
            kept[ns] = (enforcement, tuple(r for r in mark[1].split(",") if r))
        return kept
    before = [str(n) for n in facts.found.get("namespaces") or []]
    if facts.found.get("enforcement") not in manifests.ENFORCEMENTS:
        return kept  # the guard was never in place (enforcement None)
    found_enforcement: manifests.Enforcement = "Warn" if facts.found.get("enforcement") == "Warn" else "Deny"
    repositories = tuple(
        manifests.valid_proxy_repositories([str(r) for r in facts.found.get("proxyImageRepositories") or []])
    )
    for ns in before:
        if ns not in facts.namespaces:
            kept[ns] = (found_enforcement, repositories)
    return kept


def marks_now(facts: PodGuardFacts, *, dry_run: bool) -> dict[str, manifests.Mark | None]:
    """The namespaces' marks as the pass's writes left them (a dry run: as found)."""
    marks = dict(facts.marks)
    if not dry_run:
        for obj in facts.applied.objects:
            if obj.get("kind") == "Namespace":
                marks[str(obj["metadata"]["name"])] = manifests.mark_of(obj)
    return marks


def judged(
    platform: TenantPlatform,
    facts: PodGuardFacts,
    *,
    dry_run: bool,
    written: Mapping[str, Any] | None = None,
    publish_error: str = "",
) -> PodGuardFacts:
    """The pass's facts as ``evaluate`` judges them once the writes are done: the parameter, whether
    the API server holds it (a dry run lists it among what it would apply), why publishing it
    failed, and whether this pass promoted the guard."""
    value = intended(platform, facts, dry_run=dry_run)
    held = facts.shared and param_written(on_server(facts, written), value)
    applied = facts.applied
    if facts.shared and dry_run and not held:
        applied = dataclasses.replace(applied, would_apply=(*applied.would_apply, PARAM_WOULD_APPLY))
    return dataclasses.replace(
        facts,
        param=value,
        param_written=held,
        param_error=publish_error,
        applied=applied,
        promoted=facts.round > 2 and facts.check is not None and promotes(facts.check, dry_run=dry_run),
    )


def denies_everywhere(platform: TenantPlatform, facts: PodGuardFacts, *, dry_run: bool, settled: bool) -> bool:
    """This platform's guard denies in every namespace the platform names and was in place already
    when the pass began (``settled``: nothing of it written in this pass), so the API server has
    had a whole requeue interval to load it (a judged ``facts``)."""
    return (
        settled
        and facts.param is not None
        and set(platform.spec.all_namespaces) <= set(facts.param.namespaces)
        and in_effect(facts, platform_name=platform.name, dry_run=dry_run) == "Deny"
    )


# ---- the verdict ----------------------------------------------------------------------------------


def in_effect(facts: PodGuardFacts, *, platform_name: str, dry_run: bool) -> InEffect:
    """The enforcement that judges this platform's namespaces now: the parameter's, when the
    policies and bindings of that enforcement are in place and, shared, the parameter is on the
    API server and (the labelled guard) every namespace carries the mark; else None."""
    if facts.param is None:
        return "None"
    objects = [o for o in facts.live.values() if o] if dry_run else list(facts.applied.objects)
    owner = "" if facts.shared else platform_name
    if not guard_in_place(objects, facts.target, owner) or (facts.shared and not facts.param_written):
        return "None"
    if facts.shared and not labelled_guard_waits(facts):
        wanted = manifests.mark_for(facts.param.enforcement, facts.param.proxy_image_repositories)
        marks = marks_now(facts, dry_run=dry_run)
        if any(marks.get(ns, ("", "")) not in (wanted, None) for ns in facts.param.namespaces):
            return "None"
    return facts.target


def labelled_guard_waits(facts: PodGuardFacts) -> bool:
    """Shared: the parameter guard stays in place this pass (some platform's namespaces unmarked)."""
    return facts.shared and facts.parameter_guard and bool(facts.unmarked)


def evaluate(platform: TenantPlatform, facts: PodGuardFacts, *, dry_run: bool) -> Verdict:
    """PodGuardReady, ``status.podGuard``, progressing, requeue and the promotion event; failed
    when a write failed (the policies, or the parameter)."""
    requested = platform.spec.pod_guard.enforcement
    if not facts.served:
        return Verdict(
            [_unsupported(facts.server_version)],
            sections={"podGuard": PodGuardStatus(enforcement="None", requested=requested).dump()},
        )
    effective = in_effect(facts, platform_name=platform.name, dry_run=dry_run)
    cond, progressing, requeue = _condition(platform, facts, in_effect=effective, dry_run=dry_run)
    if facts.applied.written and requeue is None:
        requeue = TYPE_CHECK_REQUEUE_SECONDS
    events: list[Event] = []
    if facts.promoted and facts.applied.ok and not facts.param_error:
        covered = ", ".join(facts.param.namespaces) if facts.param else ""
        events.append(
            (
                "Normal",
                reasons.Event.POD_GUARD_ENFORCING,
                f"No existing pod in {covered} would be denied: the pod guard and exec guard now deny "
                "(staged enforcement complete).",
            )
        )
    return Verdict(
        [cond],
        sections={"podGuard": section(platform, facts).dump()},
        progressing=progressing,
        requeue_after=requeue,
        events=events,
        failed=not facts.applied.ok or bool(facts.param_error),
    )


def section(platform: TenantPlatform, facts: PodGuardFacts) -> PodGuardStatus:
    """``status.podGuard``: the parameter, and what the check found; once promoted, what the last
    check recorded. The enforcement is the parameter's (never None while there is one: a failed
    apply must not switch the guard off)."""
    requested = platform.spec.pod_guard.enforcement
    value, check = facts.param, facts.check
    base: dict[str, Any] = {"enforcement": value.enforcement if value else "None", "requested": requested}
    if value is not None:
        base |= {"namespaces": value.namespaces, "proxy_image_repositories": value.proxy_image_repositories}
    if check is not None:
        return PodGuardStatus(
            **base,
            pods_that_would_be_denied=len(check.violators),
            examples=tuple(check.examples()),
            pods_not_checked=len(check.unchecked) if check.unchecked else None,
        )
    # Promoted earlier (Staged): keep what the last check recorded.
    before = previous(platform) if requested == "Staged" else {}
    count = before.get("podsThatWouldBeDenied")
    examples = before.get("examples")
    return PodGuardStatus(
        **base,
        pods_that_would_be_denied=count if isinstance(count, int) else None,
        examples=tuple(str(e) for e in examples) if isinstance(examples, list) else None,
    )


def _unsupported(version: str) -> Condition:
    return conditions.false(
        TYPE,
        reasons.PodGuard.UNSUPPORTED_KUBERNETES_VERSION,
        f"Kubernetes {version or '(unknown version)'} does not serve admissionregistration.k8s.io/v1 "
        "ValidatingAdmissionPolicy (Kubernetes 1.30 or later), so the pod guard cannot be installed. "
        "Enforce the same rules with Kyverno or Gatekeeper (see docs/pod-guard.md), or upgrade.",
    )


def _condition(
    platform: TenantPlatform, facts: PodGuardFacts, *, in_effect: InEffect, dry_run: bool
) -> tuple[Condition, bool, float | None]:
    """(condition, progressing, requeue_after), the first that applies in the order below."""
    applied, check = facts.applied, facts.check
    requested = platform.spec.pod_guard.enforcement
    if applied.would_apply:
        return (
            conditions.false(
                TYPE,
                reasons.PodGuard.WOULD_APPLY,
                "The guard is not in place as rendered; the operator would apply: "
                + _join(applied.would_apply)
                + ". With enforcement Staged it then checks the existing pods before denying.",
            ),
            False,
            None,
        )
    if not applied.ok:
        if applied.forbidden:
            reason = reasons.Common.FORBIDDEN
            hint = " Grant the operator the RBAC in deploy/ (validatingadmissionpolicies and bindings)."
        else:
            reason, hint = reasons.Common.API_ERROR, ""
        message = "Could not apply the pod guard policies: " + _join(applied.errors) + "." + hint
        return conditions.false(TYPE, reason, message), True, None
    if facts.param_error:
        message = (
            "Could not write the pod guard's parameter (status.podGuard), which the shared policies read: "
            + facts.param_error
            + "."
        )
        return conditions.false(TYPE, reasons.Common.API_ERROR, message), True, None

    warnings = type_check_warnings(applied.objects)
    if warnings:
        return (
            conditions.false(
                TYPE,
                reasons.PodGuard.TYPE_CHECKING_WARNINGS,
                "The API server reports type-checking warnings for the guard policies (an operator bug; "
                "please report it): " + _join(warnings, 3) + ".",
            ),
            False,
            None,
        )
    bad_repos = manifests.invalid_proxy_repositories(platform.spec.pod_guard.proxy_image_repositories)
    if bad_repos:
        return (
            conditions.false(
                TYPE,
                reasons.PodGuard.INVALID_PROXY_IMAGE_REPOSITORY,
                "spec.podGuard.proxyImageRepositories has entries that cannot be matched safely: "
                + ", ".join(repr(r) for r in bad_repos)
                + ". Give full repository names with a '/' and no tag or digest (e.g. "
                "docker.io/istio/proxyv2); until then istio-init from them is denied.",
            ),
            False,
            None,
        )
    if check is not None and not check.clean:
        return waiting(check), True, STAGED_REQUEUE_SECONDS
    if dry_run and requested == "Staged" and facts.target == "Warn":
        return (
            conditions.false(
                TYPE,
                reasons.PodGuard.WOULD_ENFORCE,
                "Staged enforcement found no pod that would be denied; the next reconcile switches the guards "
                "to [Deny, Audit].",
            ),
            False,
            None,
        )
    return _in_place(platform, facts, in_effect)


def _in_place(
    platform: TenantPlatform, facts: PodGuardFacts, in_effect: InEffect
) -> tuple[Condition, bool, float | None]:
    """The guard is applied as rendered: at the requested enforcement yet, or not."""
    requested = platform.spec.pod_guard.enforcement
    wanted: manifests.Enforcement = "Warn" if requested == "Warn" else "Deny"
    names = manifests.guard_names(wanted, "" if facts.shared else platform.name)
    namespaces = ", ".join(facts.param.namespaces) if facts.param else ""
    if in_effect != wanted:
        return (
            conditions.false(
                TYPE,
                reasons.PodGuard.ENFORCEMENT_PENDING,
                f"The pod guard is at {in_effect}, not yet at the requested {wanted}.",
            ),
            True,
            None,
        )
    pending = type_check_pending(facts.applied.objects)
    # Switching to the labelled guard waits for other platforms' passes: look again soon.
    retry = STAGED_REQUEUE_SECONDS if labelled_guard_waits(facts) else None
    note = " The API server has not reported type checking for the policies yet." if pending else ""
    if not facts.shared:
        how = f"policies {names.pod_guard} and {names.exec_guard}"
    elif labelled_guard_waits(facts):
        how = (
            f"policies {names.pod_guard} and {names.exec_guard}, with this TenantPlatform as their parameter; "
            "they become the labelled guard once every TenantPlatform's namespaces carry their label "
            f"{manifests.GUARD_LABEL}, still missing in {_join(list(facts.unmarked), 3)}"
        )
    else:
        how = (
            f"policies {names.pod_guard} and {names.exec_guard}, for the namespaces labelled "
            f"{manifests.GUARD_LABEL}={wanted}"
        )
    if wanted == "Warn":
        return (
            conditions.true(
                TYPE,
                reasons.PodGuard.WARN_ONLY,
                f"The pod guard and exec guard warn in {namespaces} ({how}, bound with [Warn, Audit]): violating "
                "requests are admitted with a warning (spec.podGuard.enforcement: Warn)." + note,
            ),
            False,
            retry,
        )
    staged = " Staged enforcement found no pod that would be denied." if requested == "Staged" else ""
    return (
        conditions.true(
            TYPE,
            reasons.PodGuard.ENFORCING,
            f"The pod guard and exec guard deny violating requests in {namespaces} ({how}, bound with "
            f"[Deny, Audit]).{staged}{note}",
        ),
        False,
        retry,
    )
