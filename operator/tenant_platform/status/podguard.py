"""PURE decisions of the pod guard step (PodGuardReady): staged enforcement and the condition.

reconcile/podguard.py gathers, applies and re-checks; this module decides from what it found,
one pass at a time (the state machine lives in the live bindings, nothing else is remembered):

- ``target``: the actions the bindings get this pass: Deny for ``Deny``, and for ``Staged`` once
  promoted earlier (recorded on the pod guard policy, ``PROMOTED_ANNOTATION``, or both live
  bindings already deny: it stays there); Warn otherwise;
- ``promotion_record``: that annotation, kept while ``Staged`` stays at Deny;
- ``wants_check``: ``Staged``, still at Warn, and the guard applied cleanly as rendered: re-submit
  the existing pods as dry runs;
- ``promotes``: that check found every pod checked and none denied, and this is not a dry run:
  apply the bindings again at Deny;
- ``evaluate``: from every fact of the pass, the condition (reason from ``reasons.PodGuard``), the
  ``status.podGuard`` section, progressing, the requeue and the promotion event.

It also reads the API server's answers: the guard's own messages among a dry run's warnings, the
reasons in a denial, and the type-checking warnings recorded on the policies.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from tenant_platform.api import constants, reasons
from tenant_platform.api.models import TenantPlatform
from tenant_platform.api.status.podguard import InEffect, PodGuardStatus
from tenant_platform.render import podguard as render_pg
from tenant_platform.status import conditions
from tenant_platform.status.conditions import Condition
from tenant_platform.status.verdict import Event, Verdict

Obj = dict[str, Any]
Ref = tuple[str, str]
"""(kind, name) of a policy or binding."""

TYPE: Final = constants.POD_GUARD_READY
MAX_EXAMPLES: Final = 5
# Requeue while staged enforcement waits for violators to go (the step caches verdicts).
STAGED_REQUEUE_SECONDS: Final = 30.0
# Requeue soon after writing a policy, to pick up the API server's type-checking result.
TYPE_CHECK_REQUEUE_SECONDS: Final = 10.0


@dataclass
class PodVerdict:
    """One pod's dry-run result: the guard's reasons (empty: admitted), or why it was not checked."""

    reasons: list[str] = field(default_factory=list)
    error: str = ""


@dataclass(frozen=True)
class InjectedCheck:
    """The dry run of a pod injected the way the live injector would inject (render_pg.injected_canary)."""

    source: str
    """The injector's ConfigMap, ``namespace/name``."""
    injector: render_pg.Injector | None = None
    reasons: tuple[str, ...] = ()
    """The guard's reasons (empty: admitted)."""
    error: str = ""
    """Why the pod could not be checked (unreadable values, a failed dry run)."""


@dataclass
class StagedCheck:
    """What re-submitting the existing pods found (built up pod by pod by the step)."""

    checked: int = 0
    violators: list[tuple[str, list[str]]] = field(default_factory=list)
    unchecked: list[tuple[str, str]] = field(default_factory=list)
    inactive: list[str] = field(default_factory=list)
    """Namespaces where the canary showed the policy not (yet) in effect."""
    injected: InjectedCheck | None = None
    """The injector canary; None when no injector ConfigMap exists (no Istio, or not yet)."""

    @property
    def clean(self) -> bool:
        injected_ok = self.injected is None or not (self.injected.reasons or self.injected.error)
        return injected_ok and not (self.violators or self.unchecked or self.inactive)

    def examples(self) -> list[str]:
        return [f"{name}: {'; '.join(reasons)}" for name, reasons in self.violators[:MAX_EXAMPLES]]


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
    """Everything one pass found, in the order the step learns it."""

    served: bool = True
    """The API server serves admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy."""
    server_version: str = ""
    """Read only when not served."""
    live: Mapping[Ref, Obj | None] = field(default_factory=dict)
    """The policies and bindings as found before any write, by (kind, name)."""
    target: render_pg.Enforcement = "Warn"
    """The actions the bindings were applied with (after a promotion: Deny)."""
    applied: Applied = Applied()
    check: StagedCheck | None = None
    """The staged check, when one ran."""
    promoted: bool = False
    """This pass switched both bindings to Deny."""


# ---- reading the API server's answers -------------------------------------------------------------


def ref(obj: Obj) -> Ref:
    return (str(obj.get("kind")), str(obj.get("metadata", {}).get("name")))


def actions_in_effect(binding: Obj | None) -> render_pg.Enforcement | None:
    """'Deny' or 'Warn' when a live binding carries exactly that mode's actions, else None."""
    if not binding:
        return None
    actions = sorted(binding.get("spec", {}).get("validationActions") or [])
    if actions == sorted(render_pg.ACTIONS["Deny"]):
        return "Deny"
    if actions == sorted(render_pg.ACTIONS["Warn"]):
        return "Warn"
    return None


def mode_of(bindings: Sequence[Obj | None]) -> InEffect:
    """'Deny' or 'Warn' when both bindings exist and carry that mode's actions, else 'None'."""
    modes = {actions_in_effect(b) for b in bindings}
    if len(bindings) != 2 or len(modes) != 1:
        return "None"
    return modes.pop() or "None"


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
        if obj.get("kind") != render_pg.POLICY_KIND:
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
        if obj.get("kind") == render_pg.POLICY_KIND
    )


# ---- staged enforcement ---------------------------------------------------------------------------


def binding_refs(platform: TenantPlatform) -> tuple[Ref, Ref]:
    names = render_pg.guard_names(platform.name)
    return (render_pg.BINDING_KIND, names.pod_guard), (render_pg.BINDING_KIND, names.exec_guard)


PROMOTED_ANNOTATION = f"{constants.GROUP}/pod-guard-promoted-at"
"""On the pod guard's policy: when staged enforcement was promoted to Deny. The record of the
promotion lives on an object we own, so a binding deleted by someone, or a pod that cannot be
checked afterwards, never sends the guard back to Warn."""


def promoted_at(platform: TenantPlatform, live: Mapping[Ref, Obj | None]) -> str:
    """The promotion recorded on the live pod guard policy ("" when none)."""
    policy = live.get((render_pg.POLICY_KIND, render_pg.guard_names(platform.name).pod_guard)) or {}
    return str(((policy.get("metadata") or {}).get("annotations") or {}).get(PROMOTED_ANNOTATION) or "")


def target(platform: TenantPlatform, live: Mapping[Ref, Obj | None]) -> render_pg.Enforcement:
    """Deny for Deny, and for Staged once promoted (recorded on the policy, or both live bindings
    deny); Warn otherwise."""
    requested = platform.spec.pod_guard.enforcement
    promoted = bool(promoted_at(platform, live)) or all(
        actions_in_effect(live.get(r)) == "Deny" for r in binding_refs(platform)
    )
    return "Deny" if requested == "Deny" or (requested == "Staged" and promoted) else "Warn"


def promotion_record(
    platform: TenantPlatform, target: render_pg.Enforcement, live: Mapping[Ref, Obj | None], now: str
) -> dict[str, str]:
    """The annotation the pod guard policy carries: for Staged at Deny, when it was promoted (kept
    from the live policy, else ``now``); nothing otherwise (a change of mode forgets it)."""
    if platform.spec.pod_guard.enforcement != "Staged" or target != "Deny":
        return {}
    return {PROMOTED_ANNOTATION: promoted_at(platform, live) or now}


def wants_check(platform: TenantPlatform, target: render_pg.Enforcement, applied: Applied) -> bool:
    """Staged, still warning, and the guard in place as rendered: check the existing pods."""
    staged = platform.spec.pod_guard.enforcement == "Staged"
    return staged and target == "Warn" and applied.ok and not applied.would_apply


def promotes(check: StagedCheck, *, dry_run: bool) -> bool:
    """Every pod was checked and none would be denied: switch to Deny (never in a dry run)."""
    return check.clean and not dry_run


# ---- the verdict ----------------------------------------------------------------------------------


def evaluate(platform: TenantPlatform, facts: PodGuardFacts, *, dry_run: bool) -> Verdict:
    """PodGuardReady, ``status.podGuard``, progressing, requeue and the promotion event."""
    requested = platform.spec.pod_guard.enforcement
    if not facts.served:
        return Verdict(
            [_unsupported(facts.server_version)],
            sections={"podGuard": PodGuardStatus(enforcement="None", requested=requested).dump()},
        )
    if dry_run:
        bindings = [facts.live.get(r) for r in binding_refs(platform)]
    else:
        applied = {ref(o): o for o in facts.applied.objects}
        bindings = [applied[r] for r in binding_refs(platform) if r in applied]
    in_effect = mode_of(bindings)
    cond, progressing, requeue = _condition(platform, facts, in_effect=in_effect, dry_run=dry_run)
    if facts.applied.written and requeue is None:
        requeue = TYPE_CHECK_REQUEUE_SECONDS
    events: list[Event] = []
    if facts.promoted and facts.applied.ok:
        events.append(
            (
                "Normal",
                reasons.Event.POD_GUARD_ENFORCING,
                f"No existing pod in {', '.join(platform.spec.all_namespaces)} would be denied: the pod guard and "
                "exec guard now deny (staged enforcement complete).",
            )
        )
    return Verdict(
        [cond],
        sections={"podGuard": section(platform, in_effect, facts.check).dump()},
        progressing=progressing,
        requeue_after=requeue,
        events=events,
    )


def section(platform: TenantPlatform, in_effect: InEffect, check: StagedCheck | None) -> PodGuardStatus:
    """``status.podGuard``: what the check found; once promoted, what the last check recorded."""
    requested = platform.spec.pod_guard.enforcement
    if check is not None:
        return PodGuardStatus(
            enforcement=in_effect,
            requested=requested,
            pods_that_would_be_denied=len(check.violators),
            examples=tuple(check.examples()),
            pods_not_checked=len(check.unchecked) if check.unchecked else None,
        )
    # Promoted earlier (Staged): keep what the last check recorded.
    previous = (platform.status.get("podGuard") or {}) if requested == "Staged" else {}
    count = previous.get("podsThatWouldBeDenied")
    examples = previous.get("examples")
    return PodGuardStatus(
        enforcement=in_effect,
        requested=requested,
        pods_that_would_be_denied=count if isinstance(count, int) else None,
        examples=tuple(str(e) for e in examples) if isinstance(examples, list) else None,
    )


def _join(items: Sequence[str], limit: int = MAX_EXAMPLES) -> str:
    shown = "; ".join(items[:limit])
    return shown + (f"; and {len(items) - limit} more" if len(items) > limit else "")


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
    bad_repos = render_pg.invalid_proxy_repositories(platform.spec.pod_guard.proxy_image_repositories)
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
        return _waiting(check), True, STAGED_REQUEUE_SECONDS
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
    return _in_place(platform, applied, in_effect)


def _waiting(check: StagedCheck) -> Condition:
    """Staged enforcement waits: the injector's pods or existing pods would be denied, pods could
    not be checked, or the policy is not live."""
    injected = check.injected
    if injected is not None and injected.injector is not None and injected.reasons:
        return _injected_denied(injected, injected.injector)
    if injected is not None and injected.error:
        return conditions.false(
            TYPE,
            reasons.PodGuard.PODS_NOT_CHECKED,
            f"Staged enforcement is waiting: a pod injected the way the injector in {injected.source} injects "
            f"could not be checked: {injected.error}. Fix the cause or set spec.podGuard.enforcement to Deny "
            "after checking an injected pod yourself.",
        )
    if check.violators:
        return conditions.false(
            TYPE,
            reasons.PodGuard.VIOLATING_PODS_FOUND,
            f"Staged enforcement is waiting: {len(check.violators)} existing pod(s) would be denied: "
            + _join(check.examples())
            + ". The guards stay at [Warn, Audit] until these pods are fixed or removed, then switch to "
            "[Deny, Audit] by themselves.",
        )
    if check.unchecked:
        return conditions.false(
            TYPE,
            reasons.PodGuard.PODS_NOT_CHECKED,
            f"Staged enforcement is waiting: {len(check.unchecked)} pod(s) could not be re-submitted as a "
            "dry run, so the guard cannot tell whether they would be denied: "
            + _join([f"{n}: {e}" for n, e in check.unchecked])
            + ". Fix the cause (for example quota or a missing ServiceAccount) or set "
            "spec.podGuard.enforcement to Deny after reviewing them.",
        )
    return conditions.false(
        TYPE,
        reasons.PodGuard.WAITING_FOR_POLICY,
        "Staged enforcement is waiting for the API server to load the pod guard policy in: "
        + ", ".join(check.inactive)
        + ".",
    )


def _in_place(platform: TenantPlatform, applied: Applied, in_effect: InEffect) -> tuple[Condition, bool, float | None]:
    """The guard is applied as rendered: at the requested actions yet, or not."""
    names = render_pg.guard_names(platform.name)
    namespaces = ", ".join(platform.spec.all_namespaces)
    requested = platform.spec.pod_guard.enforcement
    wanted = "Warn" if requested == "Warn" else "Deny"
    if in_effect != wanted:
        return (
            conditions.false(
                TYPE,
                reasons.PodGuard.ENFORCEMENT_PENDING,
                f"The bindings {names.pod_guard} and {names.exec_guard} are at {in_effect}, "
                f"not yet at the requested {wanted}.",
            ),
            True,
            None,
        )
    pending = type_check_pending(applied.objects)
    note = " The API server has not reported type checking for the policies yet." if pending else ""
    if wanted == "Warn":
        return (
            conditions.true(
                TYPE,
                reasons.PodGuard.WARN_ONLY,
                f"The pod guard and exec guard are bound with [Warn, Audit] in {namespaces}: violating requests "
                "are admitted with a warning (spec.podGuard.enforcement: Warn)." + note,
            ),
            False,
            None,
        )
    staged = " Staged enforcement found no pod that would be denied." if requested == "Staged" else ""
    return (
        conditions.true(
            TYPE,
            reasons.PodGuard.ENFORCING,
            f"The pod guard and exec guard deny violating requests in {namespaces} "
            f"(bindings {names.pod_guard} and {names.exec_guard} at [Deny, Audit]).{staged}{note}",
        ),
        False,
        None,
    )


def _injected_denied(injected: InjectedCheck, injector: render_pg.Injector) -> Condition:
    """The live injector's pods would be denied: name the image and the field to change."""
    image = injector.init_image
    container = "istio-validation" if injector.cni else render_pg.ISTIO_INIT_NAME
    mode = "CNI on" if injector.cni else "CNI off"
    image_denied = any("image" in r for r in injected.reasons)
    if injector.privileged:
        fix = (
            f"the injector sets global.proxy.privileged true ({injected.source}), which makes {container} "
            "privileged; set it to false"
        )
    elif image_denied:
        fix = (
            f"add {render_pg.repository_of(image)} to spec.podGuard.proxyImageRepositories, or point the "
            f"injector's global.hub (now {injector.hub or 'unset'}) at an allowed repository"
        )
    else:
        fix = "fix what the guard names in the injector's configuration"
    return conditions.false(
        TYPE,
        reasons.PodGuard.INJECTED_POD_WOULD_BE_DENIED,
        f"Staged enforcement is waiting: a pod injected the way the injector in {injected.source} injects "
        f"({container} image {image}, {mode}) would be denied: {_join(list(injected.reasons), 3)}. To fix: "
        f"{fix}. The guards stay at [Warn, Audit] until then.",
    )
