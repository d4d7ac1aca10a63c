"""PodGuardReady: the shared pod guard and exec guard admission policies, their bindings, the
mark on this platform's namespaces they select, and ``status.podGuard`` (docs/pod-guard.md,
docs/security.md "One shared pod guard").

The step follows the contract (framework/contract.py) in rounds; every decision and every
message is made by concerns/podguard/verdict.py and takeover.py (pure), the manifests by
concerns/podguard/manifests.py:

1. round 1, ``gather``: whether the API server serves admissionregistration.k8s.io/v1
   ValidatingAdmissionPolicy (Kubernetes 1.30+; otherwise the condition says to use Kyverno or
   Gatekeeper and nothing is written), the four policies and bindings, every policy and binding
   (hand-made ones opted in, our leftovers of earlier versions: concerns/podguard/takeover.py), the
   namespaces covered, their marks (``tenancy.dev/pod-guard`` and the repositories annotation)
   and ``status.podGuard`` as the API server holds it, and, while the live shared policies are
   still an earlier version's parameter guard, the other platforms' namespaces not marked yet;
   ``evaluate`` (``pg.writes``) names the marks to write (merge patches, before the policies),
   the shared policies and bindings to apply (the parameter guard kept while some platform is
   unmarked) and, when the API server does not hold it yet, publishes the values (namespaces
   owned, enforcement, validated proxy repositories) into ``status.podGuard`` (``Verdict.publish``:
   the pipeline writes it); ``apply`` applies them (server-side apply, written only when they
   differ; the same for every platform, with no ownerReference and no platform label, never
   pruned). In a dry run (``check``) only compared. With ``spec.target`` the TenantPlatform is not
   in the target cluster: the platform's own policies are applied there, the parameter inlined
   (and pruned by label);
2. round 2, ``gather`` reads nothing again (the objects are as round 1's writes left them) and,
   for ``Staged`` while the parameter says Warn (``wants_check``), proves the policy is live with a
   canary dry run, re-submits every existing pod in the covered namespaces as a server-side dry
   run and reads the guard's warnings; also dry-runs a pod injected the way the live injector
   would inject (istiod's ``istio-sidecar-injector`` ConfigMap in ``spec.mesh.namespace``: hub,
   tag, image, CNI), so an injector whose istio-init the guard would deny keeps the guard at Warn;
   when ``promotes`` (no pod would be denied, the injected one included, and every pod could be
   checked), ``evaluate`` marks the namespaces Deny and publishes ``status.podGuard`` at Deny
   (spec.target: applies the guard inlined) and asks for round 3. Once promoted it stays at
   Deny (the status says so; no further checks);
3. the last round judges (``pg.judged``, ``pg.evaluate``, ``tk.amend``): the condition
   (type-checking warnings the API server recorded on the policies included), ``status.podGuard``,
   the requeue and the PodGuardEnforcing event.

Dry-run verdicts are cached per pod (uid, resourceVersion) and policy content, so while violators
remain only new or changed pods are re-submitted on each requeue. Failed writes (the parameter's
publish included) and pod checks become facts (and so conditions); any other API error escapes to
the pipeline (reconcile/pipeline.py ``run_step``). The shared objects stay when a platform is
deleted (the operator may not delete them); the namespaces the deletion leaves behind get the
retained guard and then lose the shared mark (``retain``, docs/pod-guard.md "Removal"), and so do
those the platform stops covering while it lives (``keep_dropped``); with ``spec.target`` the same
happens in the target, before the platform's own policies stop naming them.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import json
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from tenant_platform import metrics
from tenant_platform.api import constants
from tenant_platform.api.models import TenantPlatform
from tenant_platform.concerns.podguard import check, manifests, takeover, verdict
from tenant_platform.concerns.podguard.check import PodVerdict, StagedCheck
from tenant_platform.concerns.podguard.verdict import PodGuardFacts, Ref
from tenant_platform.core.identities import NAMESPACE_CREATED_ANNOTATION
from tenant_platform.core.verdict import Verdict
from tenant_platform.framework.base import (
    ApplyOutcome,
    CleanupResult,
    StepContext,
    apply_children,
    ensure_one,
    key,
    labelled_platform,
    owner_of,
    selector,
)
from tenant_platform.framework.contract import Action, Given
from tenant_platform.kube import errors
from tenant_platform.kube.client import Kube, Obj, intent_hash, is_subset

COMPONENT: Final = "podguard"

_API: Final = manifests.API_VERSION
_POLICY: Final = manifests.POLICY_KIND
_BINDING: Final = manifests.BINDING_KIND


def shared_labels() -> dict[str, str]:
    """The shared objects' labels: ours and the component, no platform (they are everyone's)."""
    return {constants.LABEL_MANAGED_BY: constants.MANAGED_BY_VALUE, constants.LABEL_COMPONENT: COMPONENT}


def shared_objects() -> list[Obj]:
    """The shared policies and bindings with our labels, as the step applies them."""
    objs = manifests.render()
    for obj in objs:
        obj.setdefault("metadata", {}).setdefault("labels", {}).update(shared_labels())
    return objs


def unmarked_platforms(ctx: StepContext) -> tuple[str, ...]:
    """The other platforms' namespaces (``platform/namespace``) whose guard mark does not say what
    their parameter (``status.podGuard``) says: while there are any, the parameter guard stays.
    A platform being deleted counts too (its namespaces get the retained guard once it is gone)."""
    labelled = {
        str(n["metadata"]["name"]): manifests.mark_of(n)
        for n in ctx.kube.list("v1", "Namespace", None, label_selector=manifests.GUARD_LABEL)
    }
    missing: list[str] = []
    for body in ctx.platforms():
        name = str((body.get("metadata") or {}).get("name", ""))
        found = (body.get("status") or {}).get("podGuard") or {}
        enforcement = found.get("enforcement") if isinstance(found, dict) else None
        if name == ctx.name or enforcement not in manifests.ENFORCEMENTS:
            continue
        wanted = manifests.mark_for(enforcement, [str(r) for r in found.get("proxyImageRepositories") or []])
        missing += [f"{name}/{ns}" for ns in found.get("namespaces") or [] if labelled.get(str(ns)) != wanted]
    return tuple(missing)


def mark(ctx: StepContext, intent: Obj, outcome: ApplyOutcome) -> None:
    """Write a namespace's guard mark (a merge patch: never creates the namespace). In a dry run
    only listed in ``would_apply``."""
    name = str(intent["metadata"]["name"])
    what = f"Namespace {name} (label {manifests.GUARD_LABEL})"
    if ctx.dry_run:
        outcome.would_apply.append(what)
        return
    meta = {k: v for k, v in intent["metadata"].items() if k != "name"}
    try:
        if mark_removed(intent):
            applied = unmark(ctx.kube, name, ctx.name)
            if applied is None:
                return
        else:
            applied = ctx.kube.merge_patch("v1", "Namespace", name, {"metadata": meta})
    except errors.NotFound:
        return  # gone meanwhile: nothing to guard there
    except errors.KubeError as exc:
        outcome.errors.append(f"{what}: {exc.message or exc}")
        outcome.forbidden = outcome.forbidden or isinstance(exc, errors.Forbidden)
        return
    applied.setdefault("apiVersion", "v1")
    applied.setdefault("kind", "Namespace")
    outcome.applied.append(applied)
    outcome.written += 1


def unmark(kube: Kube, name: str, platform_name: str) -> Obj | None:
    """Remove the shared guard's mark from a namespace this platform no longer owns (or leaves
    behind), unless another platform claims it (its mark is its own), and only if the namespace is
    unchanged since it was read (a JSON patch testing its resourceVersion: a claim in between
    makes it fail, and the next pass looks again). None: nothing removed."""
    live = kube.get("v1", "Namespace", name)
    if live is None or labelled_platform(live) not in (None, platform_name):
        return None
    meta = live.get("metadata") or {}
    ops: list[Obj] = [{"op": "test", "path": "/metadata/resourceVersion", "value": meta.get("resourceVersion")}]
    for field_, key_ in (("labels", manifests.GUARD_LABEL), ("annotations", manifests.GUARD_ANNOTATION)):
        if key_ in (meta.get(field_) or {}):
            ops.append({"op": "remove", "path": f"/metadata/{field_}/{key_.replace('~', '~0').replace('/', '~1')}"})
    if len(ops) == 1:
        return None
    try:
        return kube.json_patch("v1", "Namespace", name, ops)
    except (errors.Conflict, errors.Invalid):
        return None  # changed since it was read: the next pass decides again


def applied_facts(outcome: ApplyOutcome, *, written_before: int = 0) -> verdict.Applied:
    """What applying the guard did, as the pure evaluation reads it (``written_before``: what an
    earlier round of the pass wrote)."""
    return verdict.Applied(
        objects=tuple(outcome.applied),
        written=outcome.written + written_before,
        errors=tuple(outcome.errors),
        forbidden=outcome.forbidden,
        would_apply=tuple(outcome.would_apply),
    )


def owner_name(ctx: StepContext) -> str:
    """ "" for the shared guard; the platform's name for its own guard in a target cluster."""
    return "" if ctx.management is None else ctx.name


def gather_hand_made(ctx: StepContext) -> takeover.HandMade:
    """The hand-made policies and bindings an admin opted in for this platform (docs/migration.md),
    and this platform's per-platform leftovers of earlier versions."""
    return takeover.hand_made(ctx.platform, ctx.kube.list(_API, _POLICY), ctx.kube.list(_API, _BINDING))


def covered(ctx: StepContext) -> list[str]:
    """The namespaces the guard covers: those the platform owns (the write gate knows them)."""
    if ctx.claims is None:
        return list(ctx.platform.spec.all_namespaces)
    return ctx.claims.covered()


def found_param(ctx: StepContext) -> dict[str, Any]:
    """``status.podGuard`` as the API server (or the read cache) has it now, not as the pass's
    body had it: a body older than the step's last write must not send a promotion back."""
    if ctx.management is not None:
        return verdict.previous(ctx.platform)
    body = ctx.kube.get(constants.API_VERSION, constants.KIND, ctx.name) or {}
    found = (body.get("status") or {}).get("podGuard")
    return found if isinstance(found, dict) else verdict.previous(ctx.platform)


def published(given: Given) -> tuple[Mapping[str, Any] | None, str, bool]:
    """``status.podGuard`` as this pass published it (None: not published), why publishing it
    failed ("" when it did not; reconcile/pipeline.py ``run_rounds`` maps a section whose publish
    failed to the error for the round after), and whether this pass wrote it."""
    value = given.status_written.get("podGuard")
    if isinstance(value, errors.KubeError):
        return None, value.message or str(value), False
    return (value, "", True) if isinstance(value, dict) else (None, "", False)


@dataclass(frozen=True)
class Facts:
    """One round's facts: the guard's, and the hand-made guard opted in for this platform (None
    when the kinds are not served)."""

    guard: PodGuardFacts
    hand: takeover.HandMade | None = None


@dataclass(frozen=True)
class _Round:
    """What one round of a pass read and wrote, for the next round of the same pass (``ctx``: the
    pass's context, weakly: the entry goes with it)."""

    ctx: weakref.ref[StepContext]
    facts: Facts
    outcome: ApplyOutcome | None


class PodGuardStep:
    name = COMPONENT
    condition_types: tuple[str, ...] = (verdict.TYPE,)

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # platform uid -> (policy hash, {(pod uid, resourceVersion): verdict})
        self._verdicts: dict[str, tuple[str, dict[tuple[str, str], PodVerdict]]] = {}
        # id of a pass's StepContext -> its last round (read by the next round's gather)
        self._rounds: dict[int, _Round] = {}

    def action(self, platform: TenantPlatform) -> Action:
        return Action(f"reconcile {self.name}", retry_soon=True)

    # ---- render ---------------------------------------------------------------------------------

    def render(self, platform: TenantPlatform) -> list[Obj]:
        """The shared policies and bindings with our labels (the same for every platform)."""
        return shared_objects()

    # ---- gather ---------------------------------------------------------------------------------

    def gather(self, ctx: StepContext) -> Facts:
        """Round 1: whether the kinds are served (else the server's version), the eight live
        objects, the hand-made guard, the covered namespaces and the parameter on the API server.
        Later rounds of the pass read nothing again: the objects are as the earlier round's writes
        left them (the API server's answers); in round 2 the staged check runs when wanted (the
        guard in place at Warn, its parameter on the API server)."""
        with self._lock:
            earlier = self._rounds.pop(id(ctx), None)
        if earlier is None or earlier.ctx() is not ctx:
            return self._first_round(ctx)
        guard = earlier.facts.guard
        if earlier.outcome is not None:
            outcome = earlier.outcome
            applied = applied_facts(outcome, written_before=guard.applied.written)
            # A later round may write only some objects (a promotion: the namespaces' marks): what
            # the earlier rounds applied stays what they left.
            merged = {verdict.ref(o): o for o in (*guard.applied.objects, *applied.objects)}
            applied = dataclasses.replace(
                applied,
                objects=tuple(merged.values()),
                errors=(*guard.applied.errors, *applied.errors),
                forbidden=guard.applied.forbidden or applied.forbidden,
                would_apply=(*guard.applied.would_apply, *applied.would_apply),
            )
            guard = dataclasses.replace(
                guard, live={**guard.live, **{verdict.ref(o): o for o in outcome.applied}}, applied=applied
            )
        guard = dataclasses.replace(guard, round=guard.round + 1)
        if guard.round == 2:
            written = ctx.status_written.get("podGuard")
            now = verdict.judged(
                ctx.platform, guard, dry_run=ctx.dry_run, written=written if isinstance(written, dict) else None
            )
            if now.param is not None and verdict.wants_check(ctx.platform, now):
                policy = manifests.guard_names("Warn", owner_name(ctx)).pod_guard
                value_hash = intent_hash({"param": verdict.param_fields(now.param)})
                check = self._check_pods(ctx, list(guard.namespaces), policy, value_hash)
                guard = dataclasses.replace(guard, check=check)
        return Facts(guard, earlier.facts.hand)

    def _first_round(self, ctx: StepContext) -> Facts:
        kube = ctx.kube
        if not kube.served(_API, _POLICY):
            _, _, version = kube.server_version()
            return Facts(PodGuardFacts(served=False, server_version=version))
        live: dict[Ref, Obj | None] = {}
        for name in manifests.all_names(owner_name(ctx)):
            for kind in (_POLICY, _BINDING):
                live[(kind, name)] = kube.get(_API, kind, name)
        hand = gather_hand_made(ctx)
        namespaces = tuple(covered(ctx))
        found = found_param(ctx)
        marks: dict[str, manifests.Mark | None] = {}
        parameter_guard, unmarked = False, tuple[str, ...]()
        if ctx.management is None:
            before = [str(n) for n in found.get("namespaces") or []]
            for name in dict.fromkeys([*namespaces, *before]):
                live_ns = kube.get("v1", "Namespace", name)
                if name not in namespaces and labelled_platform(live_ns or {}) not in (None, ctx.name):
                    continue  # another platform's now: its mark is its own
                marks[name] = manifests.mark_of(live_ns)
            parameter_guard = any(manifests.is_parameter_guard(live.get((_POLICY, n))) for n in manifests.SHARED_NAMES)
            if parameter_guard:
                unmarked = unmarked_platforms(ctx)
        guard = PodGuardFacts(
            live=live,
            shared=ctx.management is None,
            namespaces=namespaces,
            found=found,
            hand_made_denies=hand.denies,
            marks=marks,
            parameter_guard=parameter_guard,
            unmarked=unmarked,
        )
        return Facts(guard, hand)

    # ---- evaluate (pure) ------------------------------------------------------------------------

    def evaluate(self, given: Given, facts: Facts) -> Verdict:
        """The writes of this round (``pg.writes``), or the judgement: PodGuardReady with what the
        hand-made guard calls for, ``status.podGuard``, the requeue and the promotion event."""
        platform, guard = given.platform, facts.guard
        if not guard.served:
            return verdict.evaluate(platform, guard, dry_run=given.dry_run)
        written, error, wrote = published(given)
        step = verdict.writes(platform, guard, dry_run=given.dry_run, written=written)
        if step is not None:
            return step
        judged = verdict.judged(platform, guard, dry_run=given.dry_run, written=written, publish_error=error)
        decided = verdict.evaluate(platform, judged, dry_run=given.dry_run)
        # Redundant only once the guard was already in place when this pass began (nothing of it
        # written now): the API server has had a whole requeue interval to load it.
        settled = judged.applied.written == 0 and not wrote
        everywhere = verdict.denies_everywhere(platform, judged, dry_run=given.dry_run, settled=settled)
        return takeover.amend(platform, decided, facts.hand, denies_everywhere=everywhere)

    # ---- apply ----------------------------------------------------------------------------------

    def apply(self, ctx: StepContext, facts: Facts, decided: Verdict) -> Verdict:
        """Apply what the verdict names (nothing in a dry run: only compared); the parameter is
        published by the pipeline (``Verdict.publish``). The outcome is the next round's fact."""
        platform, guard = ctx.platform, facts.guard
        if guard.served and platform.spec.pod_guard.enforcement != "Staged":
            forget_violations(platform.name)
        if guard.check is not None:
            metrics.METRICS.pod_guard_violations.labels(platform.name).set(len(guard.check.violators))
        outcome = None
        if decided.desired:
            desired, kept_errors = keep_dropped(ctx, guard, decided.desired)
            # Nothing to apply (spec.target, the retained guard not in effect yet): nothing is
            # applied, and nothing pruned either; the platform's own guard stays as it was.
            outcome = self._apply(ctx, desired, guard) if desired else ApplyOutcome()
            outcome.errors.extend(kept_errors)
        if decided.again:
            with self._lock:
                self._rounds[id(ctx)] = _Round(weakref.ref(ctx), facts, outcome)
            weakref.finalize(ctx, self._forget_round, id(ctx))
        elif guard.served and not guard.namespaces and ctx.claims is not None and not ctx.dry_run:
            # Owns none: the write gate's refusal is the condition (the pipeline reports it).
            with contextlib.suppress(errors.NotOwned):
                ctx.claims.check(platform.spec.namespace)
        return decided

    def _forget_round(self, ctx_id: int) -> None:
        """A pass's context is gone: so is what its rounds left (a pass that ended early)."""
        with self._lock:
            entry = self._rounds.get(ctx_id)
            if entry is not None and entry.ctx() is None:
                del self._rounds[ctx_id]

    def _apply(self, ctx: StepContext, desired: Sequence[Obj], guard: PodGuardFacts) -> ApplyOutcome:
        """The shared objects (each written only when it differs from what was read; never pruned),
        or in a target cluster the platform's own with the parameter inlined (stale ones pruned).
        In dry-run mode only compared (``would_apply``)."""
        live = guard.live
        if not guard.shared:
            known = {key(obj): live.get(verdict.ref(obj)) for obj in desired}
            return apply_children(
                ctx,
                COMPONENT,
                desired,
                live=known,
                prune_kinds=[(_API, _BINDING), (_API, _POLICY)],
                prune_namespaces=[None],
            )
        outcome = ApplyOutcome()
        for obj in desired:
            if obj["kind"] == "Namespace":
                mark(ctx, obj, outcome)
                continue
            stamped = copy.deepcopy(obj)
            stamped.setdefault("metadata", {}).setdefault("labels", {}).update(shared_labels())
            ensure_one(ctx, stamped, live.get(verdict.ref(stamped)), outcome)
        return outcome

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
                decided = cache.get(ident) if all(ident) else None
                if decided is None:
                    decided = self._verdict(kube, pod, policy_name)
                if not decided.error and all(ident):
                    seen[ident] = decided
                label = f"{namespace}/{meta['name']}"
                if decided.error:
                    result.unchecked.append((label, decided.error))
                elif decided.reasons:
                    result.checked += 1
                    result.violators.append((label, decided.reasons))
                else:
                    result.checked += 1
        with self._lock:
            self._verdicts[ctx.platform.uid or ctx.name] = (policy_hash, seen)
        result.injected = self._check_injector(ctx, policy_name, result)
        return result

    def _check_injector(self, ctx: StepContext, policy_name: str, result: StagedCheck) -> check.InjectedCheck | None:
        """Dry-run a pod injected the way istiod's injection ConfigMap says it injects, in the tenant
        namespace; None when there is no such ConfigMap (no Istio there: the mesh step says so)."""
        spec = ctx.platform.spec
        revision = spec.mesh.injection.revision if spec.mesh.injection.mode == "Revision" else ""
        name = manifests.injector_configmap_name(revision)
        source = f"{spec.mesh.namespace}/{name}"
        configmap = ctx.kube.get("v1", "ConfigMap", name, spec.mesh.namespace)
        if configmap is None or ctx.kube.get("v1", "Namespace", spec.namespace) is None:
            return None
        try:
            values = json.loads((configmap.get("data") or {}).get("values") or "{}")
            if not isinstance(values, dict):
                raise ValueError("not a JSON object")
        except ValueError as exc:
            return check.InjectedCheck(source=source, error=f"its data.values is not readable JSON ({exc})")
        injector = manifests.injector_from_values(values)
        live_error = self._policy_live(ctx.kube, spec.namespace, policy_name)
        if live_error is not None:
            result.inactive.append(f"{spec.namespace} ({live_error})")
            return check.InjectedCheck(source=source, injector=injector)
        decided = self._verdict(ctx.kube, manifests.injected_canary(spec.namespace, injector), policy_name)
        return check.InjectedCheck(
            source=source, injector=injector, reasons=tuple(decided.reasons), error=decided.error
        )

    @staticmethod
    def _policy_live(kube: Kube, namespace: str, policy_name: str) -> str | None:
        """None when a canary dry run shows the guard's warning in ``namespace``; else why not."""
        failures = []
        for pod in manifests.canaries(namespace):
            try:
                _, warnings = kube.create_with_warnings(pod, dry_run=True)
            except errors.KubeError as exc:
                if verdict.denied_by_guard(exc.message, policy_name) is not None:
                    return None  # the guard already denies
                failures.append(exc.message or str(exc))
                continue
            return (
                None
                if verdict.guard_warnings(warnings, policy_name)
                else "the guard did not warn about a canary pod yet"
            )
        return "canary dry runs failed: " + "; ".join(failures)

    @staticmethod
    def _verdict(kube: Kube, pod: Obj, policy_name: str) -> PodVerdict:
        body = manifests.resubmission(pod) if pod.get("metadata", {}).get("name") else pod
        try:
            try:
                _, warnings = kube.create_with_warnings(body, dry_run=True)
            except errors.Conflict:
                # A pod already has the check name: let the API server pick one.
                meta = body["metadata"]
                meta["generateName"] = meta.pop("name")[: 63 - 5] + "-"
                _, warnings = kube.create_with_warnings(body, dry_run=True)
        except errors.KubeError as exc:
            denial = verdict.denied_by_guard(exc.message, policy_name)
            if denial is not None:
                return PodVerdict(reasons=denial)
            return PodVerdict(error=f"the dry run failed: {exc.message or exc}")
        return PodVerdict(reasons=verdict.guard_warnings(warnings, policy_name))

    # ---- cleanup --------------------------------------------------------------------------------

    def cleanup(self, ctx: StepContext) -> CleanupResult:
        """First, in either cluster, the namespaces it guarded get the retained guard (``retain``;
        until it is in effect in each, the cleanup is not done). Shared guard: nothing to delete
        (the parameter goes with the TenantPlatform, the shared objects stay for the others).
        Target cluster: then the platform's own bindings, then policies, every one carrying our
        three labels (by label, and by name; a hand-made object of our name is left alone), uid as
        precondition."""
        with self._lock:
            self._verdicts.pop(ctx.platform.uid or ctx.name, None)
        kept = retain(ctx)
        if ctx.management is None or not kept.done:
            return kept
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
                for name in manifests.all_names(ctx.name):
                    if name not in found and (live := ctx.kube.get(_API, kind, name)) is not None:
                        found[name] = live
                for name, obj in sorted(found.items()):
                    if owner_of(obj) != ctx.name:
                        continue
                    if ctx.kube.delete(_API, kind, name, uid=obj["metadata"].get("uid")):
                        deleted.append(f"{kind} {name}")
        except errors.KubeError as exc:
            return CleanupResult(False, f"Could not delete the pod guard: {exc.message or exc}")
        done = "Deleted " + ", ".join(deleted) if deleted else "Nothing to delete"
        return CleanupResult(True, done if kept.message == NOTHING_TO_RETAIN else f"{kept.message}; {done}")


NOTHING_TO_RETAIN: Final = (
    "Nothing to delete: the guard's parameter goes with the TenantPlatform; the shared policies stay"
)
RETAINED_WAIT_SECONDS: Final = 10.0


def retained_objects() -> list[Obj]:
    """The retained guard's policies and bindings with our labels (no platform's: everyone's)."""
    objs = manifests.render_retained()
    for obj in objs:
        obj.setdefault("metadata", {}).setdefault("labels", {}).update(shared_labels())
    return objs


def keep_guarded(kube: Kube, kept: verdict.Kept, platform_name: str) -> tuple[dict[str, Obj], dict[str, str]]:
    """Keep the guard for namespaces a platform leaves behind (docs/pod-guard.md, "Removal"): the
    retained guard (fixed names, no parameter) is applied, each namespace of ``kept`` that exists,
    is not terminating and is not another platform's (its guard is its own) is marked with its
    enforcement and proxy repositories (``RETAINED_LABEL``, under a field manager of its own: the
    namespaces step's release keeps it), and a canary dry run in each shows the retained guard in
    effect. Returns the namespaces marked (as read before the mark) and, for those where it is not
    in effect yet, why not. An API error escapes."""
    for obj in retained_objects():
        kube.ensure(obj, live=kube.get(_API, obj["kind"], obj["metadata"]["name"]))
    marked: dict[str, Obj] = {}
    for name, (enforcement, repositories) in sorted(kept.items()):
        live = kube.get("v1", "Namespace", name)
        if live is None or (live.get("status") or {}).get("phase") == "Terminating":
            continue
        if labelled_platform(live) not in (None, platform_name):
            continue
        retained = manifests.retained_mark(name, enforcement, list(repositories))
        if not is_subset(retained, live):
            kube.apply(retained, field_manager=manifests.RETAINED_MANAGER)
        marked[name] = live
    waiting = {
        name: why
        for name in marked
        if (why := _retained_in_effect(kube, name, manifests.retained_names(kept[name][0]).pod_guard)) is not None
    }
    return marked, waiting


def retain(ctx: StepContext) -> CleanupResult:
    """Deletion of a platform: its guard goes (the parameter with the TenantPlatform; in a target
    cluster its own policies, deleted after this), but the namespaces it guarded stay
    (deletionPolicy Retain; adopted ones under Delete), and with them whoever holds ``admin``
    there (the installer's RoleBinding is part of their contents). So the guard stays for them
    (``keep_guarded``), and the cleanup is done only once the retained guard is in effect in each,
    so there is no moment without the guard; then, under the shared guard, their shared mark goes.
    An admin releases a namespace by removing the retained mark. In a dry run, or when the platform
    guarded nothing, nothing."""
    param = verdict.previous(ctx.platform)
    namespaces = [str(n) for n in param.get("namespaces") or []]
    if ctx.dry_run or not namespaces or param.get("enforcement") not in manifests.ENFORCEMENTS:
        return CleanupResult(True, NOTHING_TO_RETAIN)
    kube = ctx.kube
    if not kube.served(_API, _POLICY):
        return CleanupResult(True, NOTHING_TO_RETAIN)
    enforcement: manifests.Enforcement = "Deny" if param.get("enforcement") == "Deny" else "Warn"
    repositories = tuple(
        manifests.valid_proxy_repositories([str(r) for r in param.get("proxyImageRepositories") or []])
    )
    if ctx.platform.spec.deletion_policy == "Delete":
        # The namespaces cleanup deletes those we created (and claim): nothing stays to guard.
        namespaces = [n for n in namespaces if not _deleted_with_platform(kube.get("v1", "Namespace", n), ctx.name)]
        if not namespaces:
            return CleanupResult(True, NOTHING_TO_RETAIN)
    try:
        marked, waiting = keep_guarded(kube, dict.fromkeys(namespaces, (enforcement, repositories)), ctx.name)
    except errors.KubeError as exc:
        return CleanupResult(False, f"Could not keep the pod guard for the retained namespaces: {exc.message or exc}")
    if waiting:
        return CleanupResult(False, not_in_effect(waiting))
    # The retained guard is in effect: the shared guard's mark goes, so that the admin's release
    # (removing the retained mark) leaves the namespace as documented.
    try:
        for name, live in marked.items():
            if ctx.management is None and manifests.mark_of(live) not in (None, ("", "")):
                unmark(kube, name, ctx.name)
    except errors.KubeError as exc:
        return CleanupResult(False, f"Could not remove the shared pod guard's label: {exc.message or exc}")
    if not marked:
        return CleanupResult(True, NOTHING_TO_RETAIN)
    return CleanupResult(
        True,
        f"The pod guard stays at {enforcement} for the retained namespace(s) {', '.join(marked)} (label "
        f"{manifests.RETAINED_LABEL}; an admin removes it to release a namespace)",
    )


def _deleted_with_platform(namespace: Obj | None, platform_name: str) -> bool:
    """A namespace this platform's deletion (``deletionPolicy: Delete``) removes: created by the
    operator and claimed by the platform (concerns/namespaces deletes exactly those)."""
    if namespace is None:
        return True
    annotations = namespace.get("metadata", {}).get("annotations") or {}
    created = annotations.get(NAMESPACE_CREATED_ANNOTATION) == "true"
    return created and labelled_platform(namespace) == platform_name


def not_in_effect(waiting: Mapping[str, str]) -> str:
    return "The retained pod guard is not in effect yet in namespace(s) " + ", ".join(
        f"{name} ({why})" for name, why in waiting.items()
    )


def keep_dropped(ctx: StepContext, guard: PodGuardFacts, desired: Sequence[Obj]) -> tuple[list[Obj], list[str]]:
    """Before round 1 narrows the guard to the namespaces the platform owns now: the namespaces it
    no longer covers (``verdict.dropped``) keep a guard, the retained one, proven in effect first
    (``keep_guarded``). Where it is not (yet), the platform's own guard is not narrowed this pass
    (shared: their mark stays; spec.target: nothing is applied) and the error says why. Returns
    what to apply and the errors."""
    if ctx.dry_run or guard.round != 1 or not guard.served:
        return list(desired), []
    kept = verdict.dropped(guard)
    if not kept:
        return list(desired), []
    try:
        _, waiting = keep_guarded(ctx.kube, kept, ctx.name)
    except errors.KubeError as exc:
        waiting = dict.fromkeys(kept, exc.message or str(exc))
    if not waiting:
        return list(desired), []
    message = not_in_effect(waiting) + "; the guard stays on them as it was"
    if not guard.shared:
        return [], [message]
    unmarking = [
        o for o in desired if o["kind"] == "Namespace" and o["metadata"]["name"] in waiting and mark_removed(o)
    ]
    return [o for o in desired if not any(o is u for u in unmarking)], [message]


def mark_removed(intent: Obj) -> bool:
    return intent["metadata"]["labels"][manifests.GUARD_LABEL] is None


def _retained_in_effect(kube: Kube, namespace: str, policy: str) -> str | None:
    """None once a dry run of the retained canary is refused (Deny) or warned about (Warn) by the
    retained guard in ``namespace``; else why not, after ``RETAINED_WAIT_SECONDS`` (the API server
    loads policies and namespace labels asynchronously)."""
    deadline = time.monotonic() + RETAINED_WAIT_SECONDS
    why = ""
    while True:
        try:
            _, warnings = kube.create_with_warnings(manifests.retained_canary(namespace), dry_run=True)
        except errors.KubeError as exc:
            if any(manifests.RETAINED_CANARY_MESSAGE in r for r in verdict.denied_by_guard(exc.message, policy) or []):
                return None
            why = exc.message or str(exc)
        else:
            if any(manifests.RETAINED_CANARY_MESSAGE in w for w in verdict.guard_warnings(warnings, policy)):
                return None
            why = "the canary was admitted"
        if time.monotonic() >= deadline:
            return why
        time.sleep(0.2)


def forget_violations(platform_name: str) -> None:
    """Drop the would-be-denied gauge when no staged check runs for the platform."""
    with contextlib.suppress(KeyError):
        metrics.METRICS.pod_guard_violations.remove(platform_name)


STEP = PodGuardStep()
