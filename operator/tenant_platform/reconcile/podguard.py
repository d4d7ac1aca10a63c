"""PodGuardReady: the pod guard and exec guard admission policies, their bindings, enforcement.

Each pass gathers, applies, and for staged enforcement checks and applies again; every decision
and every message is made by status/podguard.py (pure), the manifests by render/podguard.py:

1. ``gather``: whether the API server serves admissionregistration.k8s.io/v1
   ValidatingAdmissionPolicy (Kubernetes 1.30+; otherwise the condition says to use Kyverno or
   Gatekeeper and nothing is written), and both live policies and bindings;
2. apply both policies, then both bindings (server-side apply, written only when they differ)
   with the actions ``target`` chose, and prune stale ones (bindings first); in a dry run
   (``check``) only compare them;
3. for ``Staged`` while the bindings still warn (``wants_check``): prove the policy is live with a
   canary dry run, re-submit every existing pod in the covered namespaces as a server-side dry run
   and read the guard's warnings; also dry-run a pod injected the way the live injector would inject
   (istiod's ``istio-sidecar-injector`` ConfigMap in ``spec.mesh.namespace``: hub, tag, image, CNI),
   so an injector whose istio-init the guard would deny keeps the guard at Warn; when ``promotes``
   (no pod would be denied, the injected one included, and every pod could be checked), apply
   both bindings again with ``[Deny, Audit]``. Once promoted it stays at Deny (no further
   checks): the promotion is recorded on the pod guard policy (an annotation, see
   status/podguard.PROMOTED_ANNOTATION), so a deleted binding comes back at Deny;
4. ``evaluate`` the condition (type-checking warnings the API server recorded on the policies
   included), ``status.podGuard``, the requeue and the PodGuardEnforcing event, and report.

Dry-run verdicts are cached per pod (uid, resourceVersion) and policy content, so while violators
remain only new or changed pods are re-submitted on each requeue. Failed writes and pod checks
become facts (and so conditions); any other API error escapes to reconcile._run_step.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import threading
from collections.abc import Mapping
from typing import Final

from tenant_platform import metrics
from tenant_platform.api.models import TenantPlatform
from tenant_platform.kube import errors
from tenant_platform.kube.client import Kube, Obj, intent_hash
from tenant_platform.reconcile.base import (
    ApplyOutcome,
    CleanupResult,
    StepContext,
    StepResult,
    apply_children,
    child_labels,
    key,
    owner_of,
    selector,
)
from tenant_platform.render import podguard as render_pg
from tenant_platform.status import podguard as pg
from tenant_platform.status import podguard_takeover as tk
from tenant_platform.status.podguard import PodGuardFacts, PodVerdict, Ref, StagedCheck

COMPONENT: Final = "podguard"

_API: Final = render_pg.API_VERSION
_POLICY: Final = render_pg.POLICY_KIND
_BINDING: Final = render_pg.BINDING_KIND


def applied_facts(outcome: ApplyOutcome) -> pg.Applied:
    """What applying the guard did, as the pure evaluation reads it."""
    return pg.Applied(
        objects=tuple(outcome.applied),
        written=outcome.written,
        errors=tuple(outcome.errors),
        forbidden=outcome.forbidden,
        would_apply=tuple(outcome.would_apply),
    )


def gather(ctx: StepContext) -> PodGuardFacts:
    """Whether the kinds are served (else the server's version), and the four live objects."""
    kube = ctx.kube
    if not kube.served(_API, _POLICY):
        _, _, version = kube.server_version()
        return PodGuardFacts(served=False, server_version=version)
    names = render_pg.guard_names(ctx.name)
    live: dict[Ref, Obj | None] = {}
    for name in (names.pod_guard, names.exec_guard):
        for kind in (_POLICY, _BINDING):
            live[(kind, name)] = kube.get(_API, kind, name)
    check = render_pg.takeover_check_name(names.pod_guard)
    live[(_BINDING, check)] = kube.get(_API, _BINDING, check)
    return PodGuardFacts(live=live)


def gather_hand_made(ctx: StepContext) -> tk.HandMade:
    """The hand-made policies and bindings an admin opted in for this platform (docs/migration.md)."""
    return tk.hand_made(ctx.platform, ctx.kube.list(_API, _POLICY), ctx.kube.list(_API, _BINDING))


def covered(ctx: StepContext) -> list[str]:
    """The namespaces the guard covers: those the platform owns (the write gate knows them).

    The policies are cluster-scoped, so the gate cannot see that they name namespaces; a
    platform that owns none of its namespaces writes no policy at all (the gate's refusal, for
    the primary namespace, becomes this step's NamespaceNotOwned condition).
    """
    if ctx.claims is None:
        return list(ctx.platform.spec.all_namespaces)
    namespaces = ctx.claims.covered()
    if not namespaces and not ctx.dry_run:
        ctx.claims.check(ctx.platform.spec.namespace)  # raises errors.NotOwned
    return namespaces


class PodGuardStep:
    name = COMPONENT
    condition_types: tuple[str, ...] = (pg.TYPE,)

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
        facts = gather(ctx)
        takeover: tk.TakeoverFacts | None = None
        if facts.served:
            facts, takeover = self._enforce(ctx, facts, gather_hand_made(ctx))
        verdict = tk.amend(platform, pg.evaluate(platform, facts, dry_run=ctx.dry_run), takeover)
        ctx.events.extend(verdict.events)
        return StepResult(
            verdict.conditions,
            status=verdict.sections,
            progressing=verdict.progressing,
            requeue_after=verdict.requeue_after,
            failed=not facts.applied.ok,
        )

    def _enforce(
        self, ctx: StepContext, facts: PodGuardFacts, hand: tk.HandMade
    ) -> tuple[PodGuardFacts, tk.TakeoverFacts | None]:
        """Apply at the target actions; for Staged, check the pods and promote; take over a hand-made
        guard opted in (status/podguard_takeover.py): the pass's facts."""
        platform = ctx.platform
        namespaces = covered(ctx)
        now = ctx.now.strftime("%Y-%m-%dT%H:%M:%SZ")
        plan = tk.plan(platform, hand, tk.live_policy(platform, facts.live), namespaces, now)
        target = tk.target(pg.target(platform, facts.live), plan)
        desired = self._recorded(
            ctx, render_pg.render(platform, enforcement=target, namespaces=namespaces), target, facts.live, plan
        )
        outcome = self._apply(ctx, desired, facts.live)
        check: StagedCheck | None = None
        promoted = False
        if platform.spec.pod_guard.enforcement != "Staged":
            forget_violations(platform.name)
        if pg.wants_check(platform, target, applied_facts(outcome)):
            check = self._check_pods(ctx, render_pg.guard_names(platform.name).pod_guard, intent_hash(desired[0]))
            metrics.METRICS.pod_guard_violations.labels(platform.name).set(len(check.violators))
            if pg.promotes(check, dry_run=ctx.dry_run):
                target, promoted = "Deny", True
                live = {**facts.live, **{pg.ref(o): o for o in outcome.applied}}
                promoted_intent = self._recorded(
                    ctx, render_pg.render(platform, enforcement=target, namespaces=namespaces), target, live, plan
                )
                promotion = self._apply(ctx, promoted_intent, live)
                promotion.written += outcome.written
                outcome = promotion
        takeover: tk.TakeoverFacts | None = None
        if plan is not None:
            takeover = take_over(ctx, plan, outcome, namespaces)
            if takeover.done:  # the check binding and the annotation go (pruned by this apply)
                live = {**facts.live, **{pg.ref(o): o for o in outcome.applied}}
                final_intent = self._recorded(
                    ctx, render_pg.render(platform, enforcement=target, namespaces=namespaces), target, live, None
                )
                final = self._apply(ctx, final_intent, live)
                final.written += outcome.written
                outcome = final
        applied = applied_facts(outcome)
        facts = dataclasses.replace(facts, target=target, applied=applied, check=check, promoted=promoted)
        return facts, takeover

    @staticmethod
    def _recorded(
        ctx: StepContext,
        desired: list[Obj],
        target: render_pg.Enforcement,
        live: Mapping[Ref, Obj | None],
        plan: tk.Plan | None,
    ) -> list[Obj]:
        """``desired`` with the promotion and a running takeover recorded on the pod guard policy
        (status/podguard.py, status/podguard_takeover.py), plus the takeover's check binding."""
        record = pg.promotion_record(ctx.platform, target, live, ctx.now.strftime("%Y-%m-%dT%H:%M:%SZ"))
        record |= tk.record(plan)
        desired = desired + tk.check_binding(ctx.platform, plan)
        if record:
            policy_name = render_pg.guard_names(ctx.name).pod_guard
            for obj in desired:
                if obj.get("kind") == _POLICY and obj["metadata"]["name"] == policy_name:
                    obj["metadata"].setdefault("annotations", {}).update(record)
        return desired

    @staticmethod
    def _apply(ctx: StepContext, desired: list[Obj], live: Mapping[Ref, Obj | None]) -> ApplyOutcome:
        """Policies then bindings, each written only when it differs from what was read; stale
        ones pruned. In dry-run mode only compared (``would_apply``)."""
        known = {key(obj): live.get(pg.ref(obj)) for obj in desired}
        return apply_children(
            ctx,
            COMPONENT,
            desired,
            live=known,
            prune_kinds=[(_API, _BINDING), (_API, _POLICY)],
            prune_namespaces=[None],
        )

    # ---- staged enforcement: the pod check ------------------------------------------------------

    def _check_pods(self, ctx: StepContext, policy_name: str, policy_hash: str) -> StagedCheck:
        """Re-submit every pod in the covered namespaces as a server-side dry run."""
        kube = ctx.kube
        result = StagedCheck()
        with self._lock:
            cached_hash, cache = self._verdicts.get(ctx.platform.uid or ctx.name, ("", {}))
        if cached_hash != policy_hash:
            cache = {}
        seen: dict[tuple[str, str], PodVerdict] = {}
        for namespace in covered(ctx):
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
        result.injected = self._check_injector(ctx, policy_name, result)
        return result

    def _check_injector(self, ctx: StepContext, policy_name: str, result: StagedCheck) -> pg.InjectedCheck | None:
        """Dry-run a pod injected the way istiod's injection ConfigMap says it injects, in the tenant
        namespace; None when there is no such ConfigMap (no Istio there: the mesh step says so)."""
        spec = ctx.platform.spec
        revision = spec.mesh.injection.revision if spec.mesh.injection.mode == "Revision" else ""
        name = render_pg.injector_configmap_name(revision)
        source = f"{spec.mesh.namespace}/{name}"
        configmap = ctx.kube.get("v1", "ConfigMap", name, spec.mesh.namespace)
        if configmap is None or ctx.kube.get("v1", "Namespace", spec.namespace) is None:
            return None
        try:
            values = json.loads((configmap.get("data") or {}).get("values") or "{}")
            if not isinstance(values, dict):
                raise ValueError("not a JSON object")
        except ValueError as exc:
            return pg.InjectedCheck(source=source, error=f"its data.values is not readable JSON ({exc})")
        injector = render_pg.injector_from_values(values)
        live_error = self._policy_live(ctx.kube, spec.namespace, policy_name)
        if live_error is not None:
            result.inactive.append(f"{spec.namespace} ({live_error})")
            return pg.InjectedCheck(source=source, injector=injector)
        verdict = self._verdict(ctx.kube, render_pg.injected_canary(spec.namespace, injector), policy_name)
        return pg.InjectedCheck(source=source, injector=injector, reasons=tuple(verdict.reasons), error=verdict.error)

    @staticmethod
    def _policy_live(kube: Kube, namespace: str, policy_name: str) -> str | None:
        """None when a canary dry run shows the guard's warning in ``namespace``; else why not."""
        failures = []
        for pod in render_pg.canaries(namespace):
            try:
                _, warnings = kube.create_with_warnings(pod, dry_run=True)
            except errors.KubeError as exc:
                if pg.denied_by_guard(exc.message, policy_name) is not None:
                    return None  # the guard already denies
                failures.append(exc.message or str(exc))
                continue
            return None if pg.guard_warnings(warnings, policy_name) else "the guard did not warn about a canary pod yet"
        return "canary dry runs failed: " + "; ".join(failures)

    @staticmethod
    def _verdict(kube: Kube, pod: Obj, policy_name: str) -> PodVerdict:
        body = render_pg.resubmission(pod) if pod.get("metadata", {}).get("name") else pod
        try:
            try:
                _, warnings = kube.create_with_warnings(body, dry_run=True)
            except errors.Conflict:
                # A pod already has the check name: let the API server pick one.
                meta = body["metadata"]
                meta["generateName"] = meta.pop("name")[: 63 - 5] + "-"
                _, warnings = kube.create_with_warnings(body, dry_run=True)
        except errors.KubeError as exc:
            denial = pg.denied_by_guard(exc.message, policy_name)
            if denial is not None:
                return PodVerdict(reasons=denial)
            return PodVerdict(error=f"the dry run failed: {exc.message or exc}")
        return PodVerdict(reasons=pg.guard_warnings(warnings, policy_name))

    # ---- cleanup --------------------------------------------------------------------------------

    def cleanup(self, ctx: StepContext) -> CleanupResult:
        """Delete both bindings, then both policies: every one carrying our three labels (by
        label, and by name; a hand-made object of our name is left alone), uid as precondition."""
        if ctx.dry_run:
            return CleanupResult(True, "dry run: nothing deleted")
        names = render_pg.guard_names(ctx.name)
        deleted: list[str] = []
        try:
            for kind in (_BINDING, _POLICY):
                try:
                    listed = ctx.kube.list(_API, kind, label_selector=selector(ctx.name, COMPONENT))
                except errors.NotFound:
                    continue  # not served: nothing of ours can exist
                found = {str(o["metadata"]["name"]): o for o in listed}
                for name in (names.pod_guard, names.exec_guard):
                    if name not in found and (live := ctx.kube.get(_API, kind, name)) is not None:
                        found[name] = live
                for name, obj in sorted(found.items()):
                    if owner_of(obj) != ctx.name:
                        continue
                    if ctx.kube.delete(_API, kind, name, uid=obj["metadata"].get("uid")):
                        deleted.append(f"{kind} {name}")
        except errors.KubeError as exc:
            return CleanupResult(False, f"Could not delete the pod guard: {exc.message or exc}")
        with self._lock:
            self._verdicts.pop(ctx.platform.uid or ctx.name, None)
        return CleanupResult(True, "Deleted " + ", ".join(deleted) if deleted else "Nothing to delete")


def take_over(ctx: StepContext, plan: tk.Plan, outcome: ApplyOutcome, namespaces: list[str]) -> tk.TakeoverFacts:
    """One pass of the takeover (status/podguard_takeover.py): prove ours in effect, then delete the
    hand-made bindings, then the hand-made policies; nothing is deleted unless all of it holds."""
    platform = ctx.platform
    if plan.blocked:
        return tk.TakeoverFacts(plan=plan)
    if ctx.dry_run:
        return tk.TakeoverFacts(plan=plan, waiting="dry run: nothing is deleted")
    if not outcome.ok or not tk.ours_at(platform, outcome.applied, plan.mode):
        return tk.TakeoverFacts(plan=plan, waiting=f"the operator's bindings are not yet at {plan.mode}")
    policy = render_pg.guard_names(platform.name).pod_guard
    unproven = [f"{ns} ({why})" for ns in namespaces if (why := _unproven(ctx.kube, ns, policy))]
    if unproven:
        return tk.TakeoverFacts(plan=plan, unproven=tuple(unproven))
    if not tk.settled(plan, written=outcome.written, now=ctx.now):
        return tk.TakeoverFacts(
            plan=plan,
            proven_in=tuple(namespaces),
            waiting=f"ours is shown in effect; the hand-made guard goes once ours has been in place for "
            f"{tk.SETTLE_SECONDS:g} s with nothing rewritten",
        )
    deleted: list[str] = []
    failed: list[str] = []
    for kind, names in ((_BINDING, plan.hand.bindings), (_POLICY, plan.hand.policies)):
        if failed:
            break  # never a policy before every hand-made binding is gone
        for name in names:
            try:
                ctx.kube.delete(_API, kind, name)
                deleted.append(f"{kind} {name}")
            except errors.KubeError as exc:
                failed.append(f"{kind} {name}: {exc.message or exc}")
    return tk.TakeoverFacts(
        plan=plan, proven_in=tuple(namespaces), deleted=tuple(deleted), errors=tuple(failed), done=not failed
    )


def _unproven(kube: Kube, namespace: str, policy_name: str) -> str:
    """ "" when a canary dry run in ``namespace`` brings back our check binding's warning (whoever
    denies the request); else why not."""
    failures = []
    for pod in render_pg.canaries(namespace):
        try:
            _, warnings = kube.create_with_warnings(pod, dry_run=True)
        except errors.KubeError as exc:
            warnings = exc.warnings
            if not warnings:
                failures.append(exc.message or str(exc))
                continue
        if tk.proof_warning(warnings, policy_name):
            return ""
        failures.append("no warning from the check binding yet")
    return "; ".join(failures)


def forget_violations(platform_name: str) -> None:
    """Drop the would-be-denied gauge when no staged check runs for the platform."""
    with contextlib.suppress(KeyError):
        metrics.METRICS.pod_guard_violations.remove(platform_name)


STEP = PodGuardStep()
