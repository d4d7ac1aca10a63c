"""NamespacesReady: the primary and additional namespaces, labelled for injection and PSA.

Namespaces are never owned through ownerReferences (garbage collection would delete them with
the TenantPlatform, whatever deletionPolicy says). Instead:
- the label ``tenancy.dev/tenant-platform=<name>`` is the claim; a namespace claimed by another
  platform is reported as Conflict and left untouched;
- labels are applied with server-side apply, so applying an empty intent removes exactly the
  labels only we own, and a label someone else also set survives;
- ``tenancy.dev/created-by-operator`` marks namespaces we created; only those are ever deleted,
  and only with deletionPolicy Delete.
What a platform claimed is read from the cluster, not from status: the namespaces labelled
``tenancy.dev/tenant-platform=<name>`` (one LIST by label), plus those ``status.managed.namespaces``
remembers. So a namespace dropped from the spec is released (our labels removed, never deleted)
even when the process died between labelling it and the first status write.

Claims are never taken (status/namespaces.refusal): another platform's namespace, a protected
one (system, the operator's, the mesh's, the gateway's, ``Settings.protected_namespaces``), or an
existing one no admin opted in with ``tenancy.dev/adoptable-by: <platform>`` is left untouched.

One pass: ``gather`` reads every namespace the spec names (one GET each) and lists those carrying
our claim label (a failed read is kept as a fact), ``evaluate`` (concerns/namespaces/verdict.py,
pure) decides what to label or release (the verdict's ``desired``, in that order) and the
condition, ``apply`` writes in that order and hands what the platform owns to the write gate
(``ctx.claims``, framework/base.NamespaceClaims): no other step writes into a namespace it does
not own. A failed write is reported per namespace (APIError, the verdict judged again with the
failures), never aborting the others.
"""

from __future__ import annotations

from tenant_platform.api import constants
from tenant_platform.api.models import TenantPlatform
from tenant_platform.concerns.namespaces import manifests, verdict
from tenant_platform.concerns.namespaces.verdict import NamespaceFacts, NamespacesFacts
from tenant_platform.config import Settings
from tenant_platform.core import ownership
from tenant_platform.core.verdict import Verdict
from tenant_platform.framework.base import (
    CleanupResult,
    StepContext,
    api_error_condition,
    labelled_platform,
)
from tenant_platform.framework.contract import Action, Given, Step
from tenant_platform.kube import errors
from tenant_platform.kube.client import Kube, Obj

COMPONENT = "namespaces"


def namespace_facts(name: str, live: Obj | None) -> NamespaceFacts:
    """What the evaluation needs of one namespace as read (None: it does not exist)."""
    if live is None:
        return NamespaceFacts(name)
    annotations = live.get("metadata", {}).get("annotations") or {}
    return NamespaceFacts(
        name,
        live=live,
        claim=labelled_platform(live),
        terminating=live.get("status", {}).get("phase") == "Terminating",
        created_by_operator=annotations.get(manifests.ANNOTATION_CREATED) == "true",
        adoptable_by=tuple(ownership.adoptable_by(live)),
    )


def read(kube: Kube, name: str) -> NamespaceFacts:
    """One namespace; an API error becomes the fact ``error`` (the pass reports it, never aborts)."""
    try:
        live = kube.get("v1", "Namespace", name)
    except errors.KubeError as exc:
        return NamespaceFacts(name, error=exc.message or str(exc))
    return namespace_facts(name, live)


def labelled(kube: Kube, platform: TenantPlatform) -> dict[str, Obj]:
    """The namespaces carrying this platform's claim label, by name (one LIST)."""
    found = kube.list("v1", "Namespace", None, label_selector=f"{constants.LABEL_PLATFORM}={platform.name}")
    return {n["metadata"]["name"]: n for n in found if labelled_platform(n) == platform.name}


def gather(ctx: StepContext) -> NamespacesFacts:
    """The namespaces the spec names and, outside a dry run, the dropped ones we must release."""
    wanted = tuple(read(ctx.kube, name) for name in ctx.platform.spec.all_namespaces)
    if ctx.dry_run:
        return NamespacesFacts(wanted)
    try:
        ours = labelled(ctx.kube, ctx.platform)
    except errors.KubeError as exc:
        failed = NamespaceFacts("(namespaces labelled for this platform)", error=exc.message or str(exc))
        return NamespacesFacts(wanted, (failed,))
    dropped = tuple(
        namespace_facts(name, ours[name]) if name in ours else read(ctx.kube, name)
        for name in verdict.dropped_names(ctx.platform, ours)
    )
    return NamespacesFacts(wanted, dropped)


def protection(settings: Settings) -> verdict.Protection:
    return verdict.Protection(settings.operator_namespace, tuple(settings.protected_namespaces))


class NamespacesStep:
    name = COMPONENT
    condition_types: tuple[str, ...] = (constants.NAMESPACES_READY,)

    def render(self, platform: TenantPlatform) -> list[Obj]:
        return manifests.render_namespaces(platform)

    def action(self, platform: TenantPlatform) -> Action:
        return Action(f"reconcile {COMPONENT}", retry_soon=True)

    def gather(self, ctx: StepContext) -> NamespacesFacts:
        return gather(ctx)

    def evaluate(self, given: Given, facts: NamespacesFacts) -> Verdict:
        """The verdict if every write succeeds; ``desired``: the intents to label, then to release."""
        guard = protection(given.settings)
        writes = verdict.writes(given.platform, facts, dry_run=given.dry_run, protection=guard)
        decided = verdict.evaluate(given.platform, facts, dry_run=given.dry_run, protection=guard)
        return decided.but(desired=[*writes.label, *writes.release])

    def apply(self, ctx: StepContext, facts: NamespacesFacts, decided: Verdict) -> Verdict:
        """Label, then release, in order (each failure kept for the verdict, never raised); then
        tell the write gate (``ctx.claims``) what the platform owns as the writes left it."""
        released = {ns.name for ns in facts.dropped}
        failed: dict[str, str] = {}
        for intent in decided.desired:
            name = intent["metadata"]["name"]
            try:
                if name in released:  # the empty intent: applied, so our labels go
                    ctx.kube.apply(intent)
                else:
                    ctx.kube.ensure(intent, live=facts.live(name))
            except errors.KubeError as exc:
                failed[name] = exc.message or str(exc)
        guard = protection(ctx.settings)
        if failed:
            after = verdict.evaluate(ctx.platform, facts, dry_run=ctx.dry_run, failed=failed, protection=guard)
            decided = after.but(desired=decided.desired)
        if ctx.claims is not None:
            owns = verdict.claims(ctx.platform, facts, dry_run=ctx.dry_run, failed=failed, protection=guard)
            ctx.claims.claimed(owns.owned, owns.refused)
        return decided

    def cleanup(self, ctx: StepContext) -> CleanupResult:
        """Retain: remove our labels. Delete: delete the namespaces we created, release the rest."""
        platform = ctx.platform
        ours = labelled(ctx.kube, platform)
        names = sorted({*platform.spec.all_namespaces, *verdict.previously_managed(platform), *ours})
        waiting: list[str] = []
        for name in names:
            try:
                ns = namespace_facts(name, ctx.kube.get("v1", "Namespace", name))
                # Only a namespace carrying our claim label is released (or deleted): one that
                # never was ours (protected, not adopted) keeps every label it has.
                if ns.claim != platform.name:
                    continue
                if platform.spec.deletion_policy == "Delete" and ns.created_by_operator:
                    if not ns.terminating and ns.live is not None:
                        ctx.kube.delete("v1", "Namespace", name, uid=ns.live["metadata"].get("uid"))
                    continue
                ctx.kube.apply(manifests.release_intent(name))
            except errors.KubeError as exc:
                waiting.append(f"{name}: {api_error_condition(constants.NAMESPACES_READY, exc, 'clean up').message}")
        if waiting:
            return CleanupResult(False, "; ".join(waiting))
        return CleanupResult(True)


STEP: Step[NamespacesFacts] = NamespacesStep()
