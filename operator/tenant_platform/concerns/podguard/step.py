"""PodGuardReady: the shared pod guard and exec guard admission policies, their bindings, and
this platform's parameter (docs/pod-guard.md, docs/security.md "One shared pod guard").

Each pass gathers, applies, writes the parameter and for staged enforcement checks and writes it
again; every decision and every message is made by concerns/podguard/verdict.py (pure), the manifests by
concerns/podguard/manifests.py:

1. ``gather``: whether the API server serves admissionregistration.k8s.io/v1
   ValidatingAdmissionPolicy (Kubernetes 1.30+; otherwise the condition says to use Kyverno or
   Gatekeeper and nothing is written), the four policies and bindings, and every policy and
   binding (hand-made ones opted in, our leftovers of earlier versions: concerns/podguard/takeover.py);
2. apply the shared policies and bindings (server-side apply, written only when they differ; the
   same for every platform, with no ownerReference and no platform label, never pruned), then
   write the parameter into ``status.podGuard`` (namespaces owned, enforcement, validated proxy
   repositories) when the API server does not hold it yet: the API server reads it from the
   TenantPlatform, so it must be there before the check (``StepContext.status_written`` tells the
   end-of-pass status write). In a dry run (``check``) only compare. With ``spec.target`` the
   TenantPlatform is not in the target cluster: the platform's own policies are applied there,
   the parameter inlined (and pruned by label);
3. for ``Staged`` while the parameter says Warn (``wants_check``): prove the policy is live with a
   canary dry run, re-submit every existing pod in the covered namespaces as a server-side dry run
   and read the guard's warnings; also dry-run a pod injected the way the live injector would inject
   (istiod's ``istio-sidecar-injector`` ConfigMap in ``spec.mesh.namespace``: hub, tag, image, CNI),
   so an injector whose istio-init the guard would deny keeps the guard at Warn; when ``promotes``
   (no pod would be denied, the injected one included, and every pod could be checked), write the
   parameter at Deny. Once promoted it stays at Deny (the status says so; no further checks);
4. ``evaluate`` the condition (type-checking warnings the API server recorded on the policies
   included), ``status.podGuard``, the requeue and the PodGuardEnforcing event, and report.

Dry-run verdicts are cached per pod (uid, resourceVersion) and policy content, so while violators
remain only new or changed pods are re-submitted on each requeue. Failed writes and pod checks
become facts (and so conditions); any other API error escapes to reconcile._run_step. Deleting a
platform deletes its parameter with it, so its guard goes; the shared objects stay (inert
without parameters) and the operator may not delete them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import threading
from collections.abc import Mapping
from typing import Any, Final

from tenant_platform import metrics
from tenant_platform.api import constants
from tenant_platform.api.models import TenantPlatform
from tenant_platform.concerns.podguard import check as pgc
from tenant_platform.concerns.podguard import manifests as render_pg
from tenant_platform.concerns.podguard import takeover as tk
from tenant_platform.concerns.podguard import verdict as pg
from tenant_platform.concerns.podguard.check import PodVerdict, StagedCheck
from tenant_platform.concerns.podguard.verdict import PodGuardFacts, Ref
from tenant_platform.framework.base import (
    ApplyOutcome,
    CleanupResult,
    StepContext,
    StepResult,
    apply_children,
    ensure_one,
    key,
    owner_of,
    selector,
)
from tenant_platform.kube import errors
from tenant_platform.kube.client import Kube, Obj, intent_hash

COMPONENT: Final = "podguard"

_API: Final = render_pg.API_VERSION
_POLICY: Final = render_pg.POLICY_KIND
_BINDING: Final = render_pg.BINDING_KIND


def shared_labels() -> dict[str, str]:
    """The shared objects' labels: ours and the component, no platform (they are everyone's)."""
    return {constants.LABEL_MANAGED_BY: constants.MANAGED_BY_VALUE, constants.LABEL_COMPONENT: COMPONENT}


def shared_objects() -> list[Obj]:
    """The shared policies and bindings with our labels, as the step applies them."""
    objs = render_pg.render()
    for obj in objs:
        obj.setdefault("metadata", {}).setdefault("labels", {}).update(shared_labels())
    return objs


def applied_facts(outcome: ApplyOutcome) -> pg.Applied:
    """What applying the guard did, as the pure evaluation reads it."""
    return pg.Applied(
        objects=tuple(outcome.applied),
        written=outcome.written,
        errors=tuple(outcome.errors),
        forbidden=outcome.forbidden,
        would_apply=tuple(outcome.would_apply),
    )


def owner_name(ctx: StepContext) -> str:
    """ "" for the shared guard; the platform's name for its own guard in a target cluster."""
    return "" if ctx.management is None else ctx.name


def gather(ctx: StepContext) -> PodGuardFacts:
    """Whether the kinds are served (else the server's version), and the eight live objects."""
    kube = ctx.kube
    if not kube.served(_API, _POLICY):
        _, _, version = kube.server_version()
        return PodGuardFacts(served=False, server_version=version)
    live: dict[Ref, Obj | None] = {}
    for name in render_pg.all_names(owner_name(ctx)):
        for kind in (_POLICY, _BINDING):
            live[(kind, name)] = kube.get(_API, kind, name)
    return PodGuardFacts(live=live, shared=ctx.management is None)


def gather_hand_made(ctx: StepContext) -> tk.HandMade:
    """The hand-made policies and bindings an admin opted in for this platform (docs/migration.md),
    and this platform's per-platform leftovers of earlier versions."""
    return tk.hand_made(ctx.platform, ctx.kube.list(_API, _POLICY), ctx.kube.list(_API, _BINDING))


def covered(ctx: StepContext) -> list[str]:
    """The namespaces the guard covers: those the platform owns (the write gate knows them)."""
    if ctx.claims is None:
        return list(ctx.platform.spec.all_namespaces)
    return ctx.claims.covered()


class PodGuardStep:
    name = COMPONENT
    condition_types: tuple[str, ...] = (pg.TYPE,)

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # platform uid -> (policy hash, {(pod uid, resourceVersion): verdict})
        self._verdicts: dict[str, tuple[str, dict[tuple[str, str], PodVerdict]]] = {}

    # ---- render ---------------------------------------------------------------------------------

    def render(self, platform: TenantPlatform) -> list[Obj]:
        """The shared policies and bindings with our labels (the same for every platform)."""
        return shared_objects()

    # ---- reconcile ------------------------------------------------------------------------------

    def reconcile(self, ctx: StepContext) -> StepResult:
        platform = ctx.platform
        facts = gather(ctx)
        hand: tk.HandMade | None = None
        if facts.served:
            hand = gather_hand_made(ctx)
            facts = self._enforce(ctx, facts, hand)
        verdict = pg.evaluate(platform, facts, dry_run=ctx.dry_run)
        # Redundant only once the guard was already in place when this pass began (nothing of it
        # written now): the API server has had a whole requeue interval to load it.
        settled = facts.applied.written == 0 and "podGuard" not in ctx.status_written
        everywhere = (
            settled
            and facts.param is not None
            and set(platform.spec.all_namespaces) <= set(facts.param.namespaces)
            and pg.in_effect(facts, platform_name=platform.name, dry_run=ctx.dry_run) == "Deny"
        )
        verdict = tk.amend(platform, verdict, hand, denies_everywhere=everywhere)
        ctx.events.extend(verdict.events)
        if ctx.claims is not None and facts.param is not None and not facts.param.namespaces and not ctx.dry_run:
            ctx.claims.check(platform.spec.namespace)  # owns none: the gate's refusal is the condition
        return StepResult(
            verdict.conditions,
            status=verdict.sections,
            progressing=verdict.progressing,
            requeue_after=verdict.requeue_after,
            failed=not facts.applied.ok or bool(facts.param_error),
        )

    def _enforce(self, ctx: StepContext, facts: PodGuardFacts, hand: tk.HandMade) -> PodGuardFacts:
        """Apply the guard, write the parameter at the target; for Staged, check the pods and
        promote: the pass's facts."""
        platform = ctx.platform
        namespaces = covered(ctx)
        found = self._found(ctx)
        value = pg.param(platform, pg.target(platform, hand_made_denies=hand.denies, found=found), namespaces)
        outcome = self._apply(ctx, value, facts.live)
        facts = dataclasses.replace(facts, param=value, applied=applied_facts(outcome))
        facts = self._write_param(ctx, facts, found)
        check: StagedCheck | None = None
        if platform.spec.pod_guard.enforcement != "Staged":
            forget_violations(platform.name)
        if pg.wants_check(platform, facts):
            policy = render_pg.guard_names("Warn", owner_name(ctx)).pod_guard
            check = self._check_pods(ctx, namespaces, policy, intent_hash({"param": pg.param_fields(value)}))
            metrics.METRICS.pod_guard_violations.labels(platform.name).set(len(check.violators))
            facts = dataclasses.replace(facts, check=check)
            if pg.promotes(check, dry_run=ctx.dry_run):
                value = dataclasses.replace(value, enforcement="Deny")
                facts = dataclasses.replace(facts, param=value, promoted=True)
                if facts.shared:
                    facts = self._write_param(ctx, facts, found)
                else:
                    live = {**facts.live, **{pg.ref(o): o for o in outcome.applied}}
                    promotion = self._apply(ctx, value, live)
                    promotion.written += outcome.written
                    facts = dataclasses.replace(facts, applied=applied_facts(promotion))
        return facts

    @staticmethod
    def _found(ctx: StepContext) -> dict[str, Any]:
        """``status.podGuard`` as the API server (or the read cache) has it now, not as the pass's
        body had it: a body older than the step's last write must not send a promotion back."""
        if ctx.management is not None:
            return pg.previous(ctx.platform)
        body = ctx.kube.get(constants.API_VERSION, constants.KIND, ctx.name) or {}
        found = (body.get("status") or {}).get("podGuard")
        return found if isinstance(found, dict) else pg.previous(ctx.platform)

    def _apply(self, ctx: StepContext, value: render_pg.GuardParam, live: Mapping[Ref, Obj | None]) -> ApplyOutcome:
        """The shared objects (each written only when it differs from what was read; never pruned),
        or in a target cluster the platform's own with ``value`` inlined (stale ones pruned). In
        dry-run mode only compared (``would_apply``)."""
        if ctx.management is not None:
            desired = render_pg.render(value, ctx.name)
            known = {key(obj): live.get(pg.ref(obj)) for obj in desired}
            return apply_children(
                ctx,
                COMPONENT,
                desired,
                live=known,
                prune_kinds=[(_API, _BINDING), (_API, _POLICY)],
                prune_namespaces=[None],
            )
        outcome = ApplyOutcome()
        for obj in shared_objects():
            ensure_one(ctx, obj, live.get(pg.ref(obj)), outcome)
        return outcome

    @staticmethod
    def _write_param(ctx: StepContext, facts: PodGuardFacts, found_live: Mapping[str, Any]) -> PodGuardFacts:
        """Shared: put the parameter into ``status.podGuard`` unless the API server holds it (as
        the pass found it, or as this step last wrote it); a dry run only compares."""
        if not facts.shared or facts.param is None:
            return facts
        written = ctx.status_written.get("podGuard")
        found = written if isinstance(written, dict) else dict(found_live)
        if pg.param_written(found, facts.param):
            return dataclasses.replace(facts, param_written=True)
        if ctx.dry_run:
            would = (*facts.applied.would_apply, "status.podGuard (the guard's parameter)")
            return dataclasses.replace(facts, applied=dataclasses.replace(facts.applied, would_apply=would))
        fields = pg.param_fields(facts.param)
        try:
            ctx.kube.merge_patch(
                constants.API_VERSION, constants.KIND, ctx.name, {"status": {"podGuard": fields}}, subresource="status"
            )
        except errors.KubeError as exc:
            return dataclasses.replace(facts, param_error=exc.message or str(exc))
        ctx.status_written["podGuard"] = {**found, **fields}
        return dataclasses.replace(facts, param_written=True)

    # ---- staged enforcement: the pod check ------------------------------------------------------

    def _check_pods(self, ctx: StepContext, namespaces: list[str], policy_name: str, policy_hash: str) -> StagedCheck:
        """Re-submit every pod in the covered namespaces as a server-side dry run."""
        kube = ctx.kube
        result = StagedCheck()
        with self._lock:
            cached_hash, cache = self._verdicts.get(ctx.platform.uid or ctx.name, ("", {}))
        if cached_hash != policy_hash:
            cache = {}
        seen: dict[tuple[str, str], PodVerdict] = {}
        for namespace in namespaces:
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

    def _check_injector(self, ctx: StepContext, policy_name: str, result: StagedCheck) -> pgc.InjectedCheck | None:
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
            return pgc.InjectedCheck(source=source, error=f"its data.values is not readable JSON ({exc})")
        injector = render_pg.injector_from_values(values)
        live_error = self._policy_live(ctx.kube, spec.namespace, policy_name)
        if live_error is not None:
            result.inactive.append(f"{spec.namespace} ({live_error})")
            return pgc.InjectedCheck(source=source, injector=injector)
        verdict = self._verdict(ctx.kube, render_pg.injected_canary(spec.namespace, injector), policy_name)
        return pgc.InjectedCheck(source=source, injector=injector, reasons=tuple(verdict.reasons), error=verdict.error)

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
        """Shared guard: nothing to delete (the parameter goes with the TenantPlatform, the shared
        objects stay for the others). Target cluster: the platform's own bindings, then policies,
        every one carrying our three labels (by label, and by name; a hand-made object of our name
        is left alone), uid as precondition."""
        with self._lock:
            self._verdicts.pop(ctx.platform.uid or ctx.name, None)
        if ctx.management is None:
            return CleanupResult(
                True, "Nothing to delete: the guard's parameter goes with the TenantPlatform; the shared policies stay"
            )
        if ctx.dry_run:
            return CleanupResult(True, "dry run: nothing deleted")
        deleted: list[str] = []
        try:
            for kind in (_BINDING, _POLICY):
                try:
                    listed = ctx.kube.list(_API, kind, label_selector=selector(ctx.name, COMPONENT))
                except errors.NotFound:
                    continue  # not served: nothing of ours can exist
                found = {str(o["metadata"]["name"]): o for o in listed}
                for name in render_pg.all_names(ctx.name):
                    if name not in found and (live := ctx.kube.get(_API, kind, name)) is not None:
                        found[name] = live
                for name, obj in sorted(found.items()):
                    if owner_of(obj) != ctx.name:
                        continue
                    if ctx.kube.delete(_API, kind, name, uid=obj["metadata"].get("uid")):
                        deleted.append(f"{kind} {name}")
        except errors.KubeError as exc:
            return CleanupResult(False, f"Could not delete the pod guard: {exc.message or exc}")
        return CleanupResult(True, "Deleted " + ", ".join(deleted) if deleted else "Nothing to delete")


def forget_violations(platform_name: str) -> None:
    """Drop the would-be-denied gauge when no staged check runs for the platform."""
    with contextlib.suppress(KeyError):
        metrics.METRICS.pod_guard_violations.remove(platform_name)


STEP = PodGuardStep()
