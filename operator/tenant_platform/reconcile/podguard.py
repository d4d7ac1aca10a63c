"""PodGuardReady: the pod guard and exec guard admission policies, their bindings, enforcement.

Each pass:
1. checks that the API server serves admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy
   (Kubernetes 1.30+); otherwise the condition says to use Kyverno or Gatekeeper;
2. applies both policies, then both bindings (server-side apply, written only when they differ)
   with the actions of the enforcement in effect, and prunes stale ones (bindings first);
3. for ``Staged``, while the bindings still warn: proves the policy is live with a canary dry run,
   re-submits every existing pod in the covered namespaces as a server-side dry run, reads the
   guard's warnings, records the result in ``status.podGuard`` and switches both bindings to
   ``[Deny, Audit]`` only when no pod would be denied and every pod could be checked. Once
   promoted it stays at Deny (no further checks);
4. reports type-checking warnings the API server recorded on the policies.

Dry-run verdicts are cached per pod (uid, resourceVersion) and policy content, so while violators
remain only new or changed pods are re-submitted on each requeue.
"""

from __future__ import annotations

import contextlib
import copy
import threading
from dataclasses import dataclass, field
from typing import Any, Final

from tenant_platform import metrics
from tenant_platform.api import constants
from tenant_platform.api.models import TenantPlatform
from tenant_platform.kube import errors
from tenant_platform.kube.client import Kube, Obj, intent_hash, is_subset
from tenant_platform.reconcile.base import (
    ApplyOutcome,
    CleanupResult,
    StepContext,
    StepResult,
    child_labels,
    key,
    prune_children,
    selector,
    stamp,
)
from tenant_platform.render import podguard as render_pg
from tenant_platform.status import conditions
from tenant_platform.status.conditions import Condition

COMPONENT: Final = "podguard"
TYPE: Final = constants.POD_GUARD_READY

REASON_ENFORCING: Final = "Enforcing"
REASON_WARN_ONLY: Final = "WarnOnly"
REASON_UNSUPPORTED: Final = "UnsupportedKubernetesVersion"
REASON_VIOLATING_PODS: Final = "ViolatingPodsFound"
REASON_PODS_NOT_CHECKED: Final = "PodsNotChecked"
REASON_WAITING_FOR_POLICY: Final = "WaitingForPolicy"
REASON_TYPE_CHECKING: Final = "TypeCheckingWarnings"
REASON_INVALID_REPOSITORY: Final = "InvalidProxyImageRepository"
# Dry run (`check`): reasons starting with "Would" mean the operator does it itself when it runs.
REASON_WOULD_APPLY: Final = "WouldApply"
REASON_WOULD_ENFORCE: Final = "WouldEnforce"
REASON_ENFORCEMENT_PENDING: Final = "EnforcementPending"

MAX_EXAMPLES: Final = 5
CHECK_SUFFIX: Final = "-guard-check"
CANARY_PREFIX: Final = "tenant-platform-guard-canary-"
# Requeue while staged enforcement waits for violators to go (verdicts are cached, see above).
STAGED_REQUEUE_SECONDS: Final = 30.0
# Requeue soon after writing a policy, to pick up the API server's type-checking result.
TYPE_CHECK_REQUEUE_SECONDS: Final = 10.0

_API: Final = render_pg.API_VERSION
_POLICY: Final = render_pg.POLICY_KIND
_BINDING: Final = render_pg.BINDING_KIND


@dataclass
class PodVerdict:
    """One pod's dry-run result: the guard's reasons (empty: admitted), or why it was not checked."""

    reasons: list[str] = field(default_factory=list)
    error: str = ""


@dataclass
class StagedCheck:
    checked: int = 0
    violators: list[tuple[str, list[str]]] = field(default_factory=list)
    unchecked: list[tuple[str, str]] = field(default_factory=list)
    inactive: list[str] = field(default_factory=list)
    """Namespaces where the canary showed the policy not (yet) in effect."""

    @property
    def clean(self) -> bool:
        return not (self.violators or self.unchecked or self.inactive)

    def examples(self) -> list[str]:
        return [f"{name}: {'; '.join(reasons)}" for name, reasons in self.violators[:MAX_EXAMPLES]]


@dataclass
class GuardApply(ApplyOutcome):
    would_apply: list[str] = field(default_factory=list)
    """Dry-run mode: objects that differ from their rendered intent (nothing is written)."""
    forbidden: bool = False
    """An apply was refused by RBAC."""


def actions_in_effect(binding: Obj | None) -> str | None:
    """'Deny' or 'Warn' when a live binding carries exactly that mode's actions, else None."""
    if not binding:
        return None
    actions = sorted(binding.get("spec", {}).get("validationActions") or [])
    for mode, wanted in render_pg.ACTIONS.items():
        if actions == sorted(wanted):
            return mode
    return None


def guard_warnings(warnings: list[str], policy_name: str) -> list[str]:
    """The messages of ``policy_name`` among a response's warnings (the API server's prefix cut)."""
    prefix = f"Validation failed for ValidatingAdmissionPolicy '{policy_name}' with binding '"
    found = []
    for text in warnings:
        if text.startswith(prefix):
            rest = text[len(prefix) :]
            _, sep, message = rest.partition("': ")
            found.append(message if sep else rest)
    return found


def check_name(pod_name: str) -> str:
    """A name for the dry-run copy, distinct from the original, at most 63 characters."""
    stem = pod_name[: 63 - len(CHECK_SUFFIX)].rstrip("-.")
    if f"{stem}{CHECK_SUFFIX}" == pod_name:  # a long name that already ends with the suffix
        stem = stem[:-1].rstrip("-.")
    return f"{stem}{CHECK_SUFFIX}"


def resubmission(pod: Obj) -> Obj:
    """The pod's spec as a new object for a dry-run create: server-set and node fields stripped."""
    meta = pod.get("metadata", {})
    new_meta: Obj = {"name": check_name(meta["name"]), "namespace": meta["namespace"]}
    for field_ in ("labels", "annotations"):
        if meta.get(field_):
            new_meta[field_] = copy.deepcopy(meta[field_])
    spec = copy.deepcopy(pod.get("spec") or {})
    # Set on bound pods, forbidden on create, or recomputed by admission from the class names.
    for field_ in ("nodeName", "ephemeralContainers", "priority"):
        spec.pop(field_, None)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": new_meta, "spec": spec}


def canaries(namespace: str) -> list[Obj]:
    """Pods the guard warns about, to prove the policy is in effect in a namespace.

    The first (hostPID) is the obvious one. A namespace that enforces Pod Security rejects it
    before the guard runs, so the second is restricted-compliant and trips only the guard's
    AppArmor annotation rule (an empty value is neither runtime/default nor localhost/*).
    """
    image = "tenant-platform.invalid/canary:0"
    return [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"generateName": CANARY_PREFIX, "namespace": namespace},
            "spec": {
                "hostPID": True,
                "automountServiceAccountToken": False,
                "containers": [{"name": "canary", "image": image}],
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "generateName": CANARY_PREFIX,
                "namespace": namespace,
                "annotations": {"container.apparmor.security.beta.kubernetes.io/canary": ""},
            },
            "spec": {
                "automountServiceAccountToken": False,
                "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
                "containers": [
                    {
                        "name": "canary",
                        "image": image,
                        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
                    }
                ],
            },
        },
    ]


def _join(items: list[str], limit: int = MAX_EXAMPLES) -> str:
    shown = "; ".join(items[:limit])
    return shown + (f"; and {len(items) - limit} more" if len(items) > limit else "")


class PodGuardStep:
    name = COMPONENT
    condition_types: tuple[str, ...] = (TYPE,)

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # platform uid -> (policy hash, {(pod uid, resourceVersion): verdict})
        self._verdicts: dict[str, tuple[str, dict[tuple[str, str], PodVerdict]]] = {}

    # ---- render ---------------------------------------------------------------------------------

    def render(self, platform: TenantPlatform) -> list[Obj]:
        """The four manifests with our labels (bindings with the mode's initial actions)."""
        objs = render_pg.render(platform)
        for obj in objs:
            obj.setdefault("metadata", {}).setdefault("labels", {}).update(child_labels(platform.name, COMPONENT))
        return objs

    # ---- reconcile ------------------------------------------------------------------------------

    def reconcile(self, ctx: StepContext) -> StepResult:
        platform = ctx.platform
        kube = ctx.kube
        requested = platform.spec.pod_guard.enforcement
        names = render_pg.guard_names(platform.name)
        namespaces = platform.spec.all_namespaces

        if not kube.served(_API, _POLICY):
            _, _, version = kube.server_version()
            return StepResult(
                [
                    conditions.false(
                        TYPE,
                        REASON_UNSUPPORTED,
                        f"Kubernetes {version or '(unknown version)'} does not serve admissionregistration.k8s.io/v1 "
                        "ValidatingAdmissionPolicy (Kubernetes 1.30 or later), so the pod guard cannot be installed. "
                        "Enforce the same rules with Kyverno or Gatekeeper (see docs/pod-guard.md), or upgrade.",
                    )
                ],
                status={"podGuard": {"enforcement": "None", "requested": requested}},
            )

        live: dict[str, Obj | None] = {}
        for name in (names.pod_guard, names.exec_guard):
            live[f"{_POLICY}/{name}"] = kube.get(_API, _POLICY, name)
            live[f"{_BINDING}/{name}"] = kube.get(_API, _BINDING, name)
        promoted = all(
            actions_in_effect(live[f"{_BINDING}/{n}"]) == "Deny" for n in (names.pod_guard, names.exec_guard)
        )

        if requested == "Deny" or (requested == "Staged" and promoted):
            target: render_pg.Enforcement = "Deny"
        else:
            target = "Warn"
        desired = render_pg.render(platform, enforcement=target)
        outcome = self._apply(ctx, desired, live)

        check: StagedCheck | None = None
        if requested != "Staged":
            forget_violations(platform.name)
        if requested == "Staged" and target == "Warn" and outcome.ok and not outcome.would_apply:
            check = self._check_pods(ctx, names.pod_guard, intent_hash(desired[0]))
            metrics.METRICS.pod_guard_violations.labels(platform.name).set(len(check.violators))
            if check.clean and not ctx.dry_run:
                target = "Deny"
                desired = render_pg.render(platform, enforcement=target)
                promotion = self._apply(ctx, desired, {**live, **{_ref(o): o for o in outcome.applied}})
                promotion.written += outcome.written
                outcome = promotion
                if outcome.ok:
                    ctx.events.append(
                        (
                            "Normal",
                            "PodGuardEnforcing",
                            f"No existing pod in {', '.join(namespaces)} would be denied: the pod guard and "
                            "exec guard now deny (staged enforcement complete).",
                        )
                    )

        if ctx.dry_run:
            after = [live[f"{_BINDING}/{n}"] for n in (names.pod_guard, names.exec_guard)]
        else:
            after = [o for o in outcome.applied if o.get("kind") == _BINDING]
        in_effect = mode_of(after)
        section = self._section(platform, requested, in_effect, check)
        cond, progressing, requeue = self._condition(
            ctx, requested=requested, target=target, in_effect=in_effect, outcome=outcome, check=check
        )
        if outcome.written and requeue is None:
            requeue = TYPE_CHECK_REQUEUE_SECONDS
        return StepResult(
            [cond],
            status={"podGuard": section},
            progressing=progressing,
            requeue_after=requeue,
            failed=not outcome.ok,
        )

    def _apply(self, ctx: StepContext, desired: list[Obj], live: dict[str, Obj | None]) -> GuardApply:
        """Policies then bindings, each written only when it differs; in dry-run mode only compared."""
        outcome = GuardApply()
        for obj in desired:
            stamped = stamp(copy.deepcopy(obj), ctx, COMPONENT)
            current = live.get(_ref(obj))
            if ctx.dry_run:
                if current is None or not is_subset(stamped, current):
                    outcome.would_apply.append(f"{obj['kind']} {obj['metadata']['name']}")
                if current is not None:
                    outcome.applied.append(current)
                continue
            try:
                applied, wrote = ctx.kube.ensure(stamped, live=current)
            except errors.KubeError as exc:
                outcome.errors.append(f"{obj['kind']} {obj['metadata']['name']}: {exc.message or exc}")
                outcome.forbidden = outcome.forbidden or isinstance(exc, errors.Forbidden)
                continue
            applied.setdefault("apiVersion", obj["apiVersion"])
            applied.setdefault("kind", obj["kind"])
            outcome.applied.append(applied)
            outcome.written += int(wrote)
        if not ctx.dry_run:
            prune_children(
                ctx,
                COMPONENT,
                wanted={key(o) for o in desired},
                kinds=[(_API, _BINDING), (_API, _POLICY)],
                namespaces=[None],
                outcome=outcome,
            )
        return outcome

    # ---- staged enforcement ---------------------------------------------------------------------

    def _check_pods(self, ctx: StepContext, policy_name: str, policy_hash: str) -> StagedCheck:
        """Re-submit every pod in the covered namespaces as a server-side dry run."""
        kube = ctx.kube
        result = StagedCheck()
        with self._lock:
            cached_hash, cache = self._verdicts.get(ctx.platform.uid or ctx.name, ("", {}))
        if cached_hash != policy_hash:
            cache = {}
        seen: dict[tuple[str, str], PodVerdict] = {}
        for namespace in ctx.platform.spec.all_namespaces:
            try:
                pods = kube.list("v1", "Pod", namespace)
            except errors.NotFound:
                continue
            except errors.KubeError as exc:
                result.unchecked.append((f"{namespace}/*", f"listing pods failed: {exc.message or exc}"))
                continue
            pods = [p for p in pods if not p.get("metadata", {}).get("deletionTimestamp")]
            if not pods:
                continue
            live_error = self._policy_live(kube, namespace, policy_name)
            if live_error is not None:
                result.inactive.append(f"{namespace} ({live_error})")
                continue
            for pod in sorted(pods, key=lambda p: str(p["metadata"]["name"])):
                meta = pod["metadata"]
                ident = (str(meta.get("uid", "")), str(meta.get("resourceVersion", "")))
                verdict = cache.get(ident) if all(ident) else None
                if verdict is None:
                    verdict = self._verdict(kube, pod, policy_name)
                if not verdict.error and all(ident):
                    seen[ident] = verdict
                label = f"{namespace}/{meta['name']}"
                if verdict.error:
                    result.unchecked.append((label, verdict.error))
                elif verdict.reasons:
                    result.checked += 1
                    result.violators.append((label, verdict.reasons))
                else:
                    result.checked += 1
        with self._lock:
            self._verdicts[ctx.platform.uid or ctx.name] = (policy_hash, seen)
        return result

    @staticmethod
    def _policy_live(kube: Kube, namespace: str, policy_name: str) -> str | None:
        """None when a canary dry run shows the guard's warning in ``namespace``; else why not."""
        failures = []
        for pod in canaries(namespace):
            try:
                _, warnings = kube.create_with_warnings(pod, dry_run=True)
            except errors.KubeError as exc:
                if policy_name in exc.message:
                    return None  # the guard already denies
                failures.append(exc.message or str(exc))
                continue
            return None if guard_warnings(warnings, policy_name) else "the guard did not warn about a canary pod yet"
        return "canary dry runs failed: " + "; ".join(failures)

    @staticmethod
    def _verdict(kube: Kube, pod: Obj, policy_name: str) -> PodVerdict:
        body = resubmission(pod)
        try:
            try:
                _, warnings = kube.create_with_warnings(body, dry_run=True)
            except errors.Conflict:
                # A pod already has the check name: let the API server pick one.
                meta = body["metadata"]
                meta["generateName"] = meta.pop("name")[: 63 - 5] + "-"
                _, warnings = kube.create_with_warnings(body, dry_run=True)
        except errors.KubeError as exc:
            if policy_name in exc.message:
                return PodVerdict(reasons=[exc.message.rpartition("denied request: ")[2] or exc.message])
            return PodVerdict(error=f"the dry run failed: {exc.message or exc}")
        return PodVerdict(reasons=guard_warnings(warnings, policy_name))

    # ---- status ---------------------------------------------------------------------------------

    def _section(
        self, platform: TenantPlatform, requested: str, in_effect: str, check: StagedCheck | None
    ) -> dict[str, Any]:
        section: dict[str, Any] = {"enforcement": in_effect, "requested": requested}
        if check is not None:
            section["podsThatWouldBeDenied"] = len(check.violators)
            section["examples"] = check.examples()
            if check.unchecked:
                section["podsNotChecked"] = len(check.unchecked)
        elif requested == "Staged":
            # Promoted earlier: keep what the last check recorded.
            previous = platform.status.get("podGuard") or {}
            for field_ in ("podsThatWouldBeDenied", "examples"):
                if field_ in previous:
                    section[field_] = previous[field_]
        return section

    def _condition(
        self,
        ctx: StepContext,
        *,
        requested: str,
        target: str,
        in_effect: str,
        outcome: GuardApply,
        check: StagedCheck | None,
    ) -> tuple[Condition, bool, float | None]:
        """(condition, progressing, requeue_after)."""
        names = render_pg.guard_names(ctx.name)
        namespaces = ", ".join(ctx.platform.spec.all_namespaces)
        if outcome.would_apply:
            return (
                conditions.false(
                    TYPE,
                    REASON_WOULD_APPLY,
                    "The guard is not in place as rendered; the operator would apply: "
                    + _join(outcome.would_apply)
                    + ". With enforcement Staged it then checks the existing pods before denying.",
                ),
                False,
                None,
            )
        if not outcome.ok:
            if outcome.forbidden:
                reason = constants.REASON_FORBIDDEN
                hint = " Grant the operator the RBAC in deploy/ (validatingadmissionpolicies and bindings)."
            else:
                reason, hint = constants.REASON_API_ERROR, ""
            return (
                conditions.false(
                    TYPE, reason, "Could not apply the pod guard policies: " + _join(outcome.errors) + "." + hint
                ),
                True,
                None,
            )

        warnings = self._type_check_warnings(outcome)
        if warnings:
            return (
                conditions.false(
                    TYPE,
                    REASON_TYPE_CHECKING,
                    "The API server reports type-checking warnings for the guard policies (an operator bug; "
                    "please report it): " + _join(warnings, 3) + ".",
                ),
                False,
                None,
            )
        bad_repos = render_pg.invalid_proxy_repositories(ctx.platform.spec.pod_guard.proxy_image_repositories)
        if bad_repos:
            return (
                conditions.false(
                    TYPE,
                    REASON_INVALID_REPOSITORY,
                    "spec.podGuard.proxyImageRepositories has entries that cannot be matched safely: "
                    + ", ".join(repr(r) for r in bad_repos)
                    + ". Give full repository names with a '/' and no tag or digest (e.g. "
                    "docker.io/istio/proxyv2); until then istio-init from them is denied.",
                ),
                False,
                None,
            )

        if check is not None and not check.clean:
            if check.violators:
                message = (
                    f"Staged enforcement is waiting: {len(check.violators)} existing pod(s) would be denied: "
                    + _join(check.examples())
                    + ". The guards stay at [Warn, Audit] until these pods are fixed or removed, then switch to "
                    "[Deny, Audit] by themselves."
                )
                reason = REASON_VIOLATING_PODS
            elif check.unchecked:
                message = (
                    f"Staged enforcement is waiting: {len(check.unchecked)} pod(s) could not be re-submitted as a "
                    "dry run, so the guard cannot tell whether they would be denied: "
                    + _join([f"{n}: {e}" for n, e in check.unchecked])
                    + ". Fix the cause (for example quota or a missing ServiceAccount) or set "
                    "spec.podGuard.enforcement to Deny after reviewing them."
                )
                reason = REASON_PODS_NOT_CHECKED
            else:
                message = (
                    "Staged enforcement is waiting for the API server to load the pod guard policy in: "
                    + ", ".join(check.inactive)
                    + "."
                )
                reason = REASON_WAITING_FOR_POLICY
            return conditions.false(TYPE, reason, message), True, STAGED_REQUEUE_SECONDS

        if ctx.dry_run and requested == "Staged" and target == "Warn":
            return (
                conditions.false(
                    TYPE,
                    REASON_WOULD_ENFORCE,
                    "Staged enforcement found no pod that would be denied; the next reconcile switches the guards "
                    "to [Deny, Audit].",
                ),
                False,
                None,
            )

        wanted = "Warn" if requested == "Warn" else "Deny"
        if in_effect != wanted:
            return (
                conditions.false(
                    TYPE,
                    REASON_ENFORCEMENT_PENDING,
                    f"The bindings {names.pod_guard} and {names.exec_guard} are at {in_effect}, "
                    f"not yet at the requested {wanted}.",
                ),
                True,
                None,
            )
        pending = self._type_check_pending(outcome)
        note = " The API server has not reported type checking for the policies yet." if pending else ""
        if wanted == "Warn":
            return (
                conditions.true(
                    TYPE,
                    REASON_WARN_ONLY,
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
                REASON_ENFORCING,
                f"The pod guard and exec guard deny violating requests in {namespaces} "
                f"(bindings {names.pod_guard} and {names.exec_guard} at [Deny, Audit]).{staged}{note}",
            ),
            False,
            None,
        )

    @staticmethod
    def _type_check_warnings(outcome: GuardApply) -> list[str]:
        found = []
        for obj in outcome.applied:
            if obj.get("kind") != _POLICY:
                continue
            status = obj.get("status") or {}
            if status.get("observedGeneration") != obj.get("metadata", {}).get("generation"):
                continue
            for warning in (status.get("typeChecking") or {}).get("expressionWarnings") or []:
                text = str(warning.get("warning", "")).strip().splitlines()
                found.append(f"{obj['metadata']['name']} {warning.get('fieldRef', '')}: {text[0] if text else ''}")
        return found

    @staticmethod
    def _type_check_pending(outcome: GuardApply) -> bool:
        return any(
            (obj.get("status") or {}).get("observedGeneration") != obj.get("metadata", {}).get("generation")
            for obj in outcome.applied
            if obj.get("kind") == _POLICY
        )

    # ---- cleanup --------------------------------------------------------------------------------

    def cleanup(self, ctx: StepContext) -> CleanupResult:
        """Delete both bindings, then both policies (ours by name and by label)."""
        if ctx.dry_run:
            return CleanupResult(True, "dry run: nothing deleted")
        names = render_pg.guard_names(ctx.name)
        deleted: list[str] = []
        try:
            for kind in (_BINDING, _POLICY):
                targets = {names.pod_guard, names.exec_guard}
                try:
                    listed = ctx.kube.list(_API, kind, label_selector=selector(ctx.name, COMPONENT))
                except errors.NotFound:
                    listed = []  # not served: nothing of ours can exist
                    targets = set()
                targets |= {str(o["metadata"]["name"]) for o in listed}
                for name in sorted(targets):
                    if ctx.kube.delete(_API, kind, name):
                        deleted.append(f"{kind} {name}")
        except errors.KubeError as exc:
            return CleanupResult(False, f"Could not delete the pod guard: {exc.message or exc}")
        with self._lock:
            self._verdicts.pop(ctx.platform.uid or ctx.name, None)
        return CleanupResult(True, "Deleted " + ", ".join(deleted) if deleted else "Nothing to delete")


def forget_violations(platform_name: str) -> None:
    """Drop the would-be-denied gauge when no staged check runs for the platform."""
    with contextlib.suppress(KeyError):
        metrics.METRICS.pod_guard_violations.remove(platform_name)


def _ref(obj: Obj) -> str:
    return f"{obj.get('kind')}/{obj.get('metadata', {}).get('name')}"


def mode_of(bindings: list[Obj | None]) -> str:
    """'Deny' or 'Warn' when both bindings exist and carry that mode's actions, else 'None'."""
    modes = {actions_in_effect(b) for b in bindings}
    if len(bindings) != 2 or len(modes) != 1:
        return "None"
    return modes.pop() or "None"


STEP = PodGuardStep()
