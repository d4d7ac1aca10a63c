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
"""

from __future__ import annotations

from typing import Any

from tenant_platform.api import constants
from tenant_platform.api.models import TenantPlatform
from tenant_platform.kube import errors
from tenant_platform.kube.client import Obj
from tenant_platform.reconcile.base import (
    CleanupResult,
    StepContext,
    StepResult,
    api_error_condition,
    labelled_platform,
)
from tenant_platform.render import namespaces as render_ns
from tenant_platform.status import conditions

COMPONENT = "namespaces"


def release_intent(name: str) -> Obj:
    """An SSA intent that owns nothing: applying it removes every label only we set."""
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


class NamespacesStep:
    name = COMPONENT
    condition_types: tuple[str, ...] = (constants.NAMESPACES_READY,)

    def render(self, platform: TenantPlatform) -> list[Obj]:
        return render_ns.render_namespaces(platform)

    def reconcile(self, ctx: StepContext) -> StepResult:
        platform = ctx.platform
        kube = ctx.kube
        wanted = platform.spec.all_namespaces
        conflicts: list[str] = []
        terminating: list[str] = []
        would_create: list[str] = []
        problems: list[str] = []
        managed: list[str] = []
        for name in wanted:
            try:
                live = kube.get("v1", "Namespace", name)
            except errors.KubeError as exc:
                problems.append(f"{name}: {exc.message or exc}")
                continue
            owner = labelled_platform(live) if live else None
            if owner and owner != platform.name:
                conflicts.append(f"{name} (claimed by TenantPlatform {owner})")
                continue
            if live and live.get("status", {}).get("phase") == "Terminating":
                terminating.append(name)
                managed.append(name)
                continue
            created = (
                live is None
                or (live.get("metadata", {}).get("annotations") or {}).get(render_ns.ANNOTATION_CREATED) == "true"
            )
            if ctx.dry_run:
                if live is None:
                    would_create.append(name)
                continue
            desired = render_ns.render_namespace(platform, name, created=created)
            try:
                kube.ensure(desired, live=live)
                managed.append(name)
            except errors.KubeError as exc:
                problems.append(f"{name}: {exc.message or exc}")

        # Release namespaces we labelled before but are no longer in the spec.
        previous = (platform.status.get("managed") or {}).get("namespaces") or []
        for name in previous:
            if name in wanted or ctx.dry_run:
                continue
            try:
                self._release(ctx, name)
            except errors.KubeError as exc:
                problems.append(f"releasing {name}: {exc.message or exc}")
                managed.append(name)

        status: dict[str, Any] = {"managed": {"namespaces": sorted(set(managed))}} if not ctx.dry_run else {}
        type_ = constants.NAMESPACES_READY
        if conflicts:
            cond = conditions.false(
                type_,
                constants.REASON_CONFLICT,
                "Namespace already claimed by another TenantPlatform, left untouched: "
                + ", ".join(conflicts)
                + ". Choose another spec.namespace/additionalNamespaces or delete the other platform.",
            )
        elif problems:
            cond = conditions.false(type_, constants.REASON_API_ERROR, "Could not label: " + "; ".join(problems) + ".")
        elif terminating:
            cond = conditions.false(
                type_,
                "Terminating",
                "Namespace is terminating; it will be recreated once gone: " + ", ".join(terminating) + ".",
            )
        elif would_create:
            cond = conditions.false(
                type_, "WouldCreate", "The operator would create namespaces: " + ", ".join(would_create) + "."
            )
        else:
            cond = conditions.true(
                type_,
                constants.REASON_RECONCILED,
                f"Namespaces {', '.join(wanted)} exist with injection and Pod Security warn/audit labels.",
            )
        return StepResult(
            conditions=[cond],
            status=status,
            progressing=bool(terminating),
            failed=bool(problems),
            requeue_after=5.0 if terminating else None,
        )

    def _release(self, ctx: StepContext, name: str) -> None:
        live = ctx.kube.get("v1", "Namespace", name)
        if live is None or labelled_platform(live) not in (None, ctx.platform.name):
            return
        ctx.kube.apply(release_intent(name))

    def cleanup(self, ctx: StepContext) -> CleanupResult:
        """Retain: remove our labels. Delete: delete the namespaces we created, release the rest."""
        platform = ctx.platform
        names = sorted(
            set(platform.spec.all_namespaces) | set((platform.status.get("managed") or {}).get("namespaces") or [])
        )
        waiting: list[str] = []
        for name in names:
            try:
                live = ctx.kube.get("v1", "Namespace", name)
                if live is None or labelled_platform(live) not in (None, platform.name):
                    continue
                ours = (live.get("metadata", {}).get("annotations") or {}).get(render_ns.ANNOTATION_CREATED) == "true"
                if platform.spec.deletion_policy == "Delete" and ours:
                    if live.get("status", {}).get("phase") != "Terminating":
                        ctx.kube.delete("v1", "Namespace", name, uid=live["metadata"].get("uid"))
                    continue
                self._release(ctx, name)
            except errors.KubeError as exc:
                waiting.append(f"{name}: {api_error_condition(constants.NAMESPACES_READY, exc, 'clean up').message}")
        if waiting:
            return CleanupResult(False, "; ".join(waiting))
        return CleanupResult(True)


STEP = NamespacesStep()
