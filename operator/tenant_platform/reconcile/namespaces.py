"""NamespacesReady: the primary and additional namespaces, labelled for injection and PSA.

Namespaces are never owned through ownerReferences (garbage collection would delete them with
the TenantPlatform, whatever deletionPolicy says). Instead:
- the label ``tenancy.dev/tenant-platform=<name>`` is the claim; a namespace claimed by another
  platform is reported as Conflict and left untouched;
- labels are applied with server-side apply, so applying an empty intent removes exactly the
  labels only we own, and a label someone else also set survives;
- ``tenancy.dev/created-by-operator`` marks namespaces we created; only those are ever deleted,
  and only with deletionPolicy Delete.
``status.managed.namespaces`` remembers which namespaces we labelled, so a namespace dropped from
the spec is released (our labels removed), never deleted.

One pass: ``gather`` reads every namespace the spec names and every dropped one (one GET each; a
failed read is kept as a fact), status/namespaces.py decides (pure) what to label or release and
the condition, ``apply`` writes in that order and reports. A failed write is reported per
namespace (APIError), never aborting the others.
"""

from __future__ import annotations

from tenant_platform.api import constants
from tenant_platform.api.models import TenantPlatform
from tenant_platform.kube import errors
from tenant_platform.kube.client import Kube, Obj
from tenant_platform.reconcile.base import (
    CleanupResult,
    StepContext,
    StepResult,
    api_error_condition,
    labelled_platform,
)
from tenant_platform.render import namespaces as render_ns
from tenant_platform.status import namespaces as ns_status
from tenant_platform.status.namespaces import NamespaceFacts, NamespacesFacts

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
        created_by_operator=annotations.get(render_ns.ANNOTATION_CREATED) == "true",
    )


def read(kube: Kube, name: str) -> NamespaceFacts:
    """One namespace; an API error becomes the fact ``error`` (the pass reports it, never aborts)."""
    try:
        live = kube.get("v1", "Namespace", name)
    except errors.KubeError as exc:
        return NamespaceFacts(name, error=exc.message or str(exc))
    return namespace_facts(name, live)


def gather(ctx: StepContext) -> NamespacesFacts:
    """The namespaces the spec names and, outside a dry run, the dropped ones we must release."""
    wanted = tuple(read(ctx.kube, name) for name in ctx.platform.spec.all_namespaces)
    if ctx.dry_run:
        return NamespacesFacts(wanted)
    return NamespacesFacts(wanted, tuple(read(ctx.kube, name) for name in ns_status.dropped_names(ctx.platform)))


class NamespacesStep:
    name = COMPONENT
    condition_types: tuple[str, ...] = (constants.NAMESPACES_READY,)

    def render(self, platform: TenantPlatform) -> list[Obj]:
        return render_ns.render_namespaces(platform)

    def reconcile(self, ctx: StepContext) -> StepResult:
        facts = gather(ctx)
        return self.apply(ctx, facts, ns_status.writes(ctx.platform, facts, dry_run=ctx.dry_run))

    def apply(self, ctx: StepContext, facts: NamespacesFacts, writes: ns_status.Writes) -> StepResult:
        """Label, then release, in order; each failure is kept for the verdict, never raised."""
        failed: dict[str, str] = {}
        for intent in writes.label:
            name = intent["metadata"]["name"]
            try:
                ctx.kube.ensure(intent, live=facts.live(name))
            except errors.KubeError as exc:
                failed[name] = exc.message or str(exc)
        for intent in writes.release:
            try:
                ctx.kube.apply(intent)
            except errors.KubeError as exc:
                failed[intent["metadata"]["name"]] = exc.message or str(exc)
        verdict = ns_status.evaluate(ctx.platform, facts, dry_run=ctx.dry_run, failed=failed)
        return StepResult(
            conditions=verdict.conditions,
            status=verdict.sections,
            progressing=verdict.progressing,
            failed=facts.read_failed or bool(failed),
            requeue_after=verdict.requeue_after,
        )

    def cleanup(self, ctx: StepContext) -> CleanupResult:
        """Retain: remove our labels. Delete: delete the namespaces we created, release the rest."""
        platform = ctx.platform
        names = sorted(set(platform.spec.all_namespaces) | set(ns_status.previously_managed(platform)))
        waiting: list[str] = []
        for name in names:
            try:
                ns = namespace_facts(name, ctx.kube.get("v1", "Namespace", name))
                if not ns_status.releasable(platform, ns):
                    continue
                if platform.spec.deletion_policy == "Delete" and ns.created_by_operator:
                    if not ns.terminating and ns.live is not None:
                        ctx.kube.delete("v1", "Namespace", name, uid=ns.live["metadata"].get("uid"))
                    continue
                ctx.kube.apply(render_ns.release_intent(name))
            except errors.KubeError as exc:
                waiting.append(f"{name}: {api_error_condition(constants.NAMESPACES_READY, exc, 'clean up').message}")
        if waiting:
            return CleanupResult(False, "; ".join(waiting))
        return CleanupResult(True)


STEP = NamespacesStep()
