"""GPUShareReady: the tenant's GPU share (``spec.gpu.share``) as a ResourceQuota in each of the
platform's namespaces, and what the quota controller reports of it (docs/gpu.md).

``gather`` reads our ResourceQuota in each namespace of the spec, one GET each (reads only);
``evaluate`` (concerns/gpushare/verdict.py, pure) decides the quotas, the condition and
``status.gpuShare``, with HAMi's resource names as the GPU step recorded them this pass
(``status.recorded.gpuResourceNames``), else HAMi's defaults; ``apply`` applies the quotas with
our labels through ``apply_children`` (drift repaired: a changed ``spec.hard`` is applied again;
pruned in every namespace when the share goes, or when a namespace leaves the platform) and sets
the used-ratio gauge. The quota controller, not we, writes their status; the pass comes back
within seconds while it has not (QuotaPending).
"""

from __future__ import annotations

from tenant_platform import metrics
from tenant_platform.api import constants
from tenant_platform.api.models import TenantPlatform
from tenant_platform.api.reasons import Common
from tenant_platform.concerns.gpushare import manifests
from tenant_platform.concerns.gpushare.verdict import SECTION, GpuShareFacts, QuotaFacts, evaluate
from tenant_platform.core import conditions
from tenant_platform.core.verdict import Verdict
from tenant_platform.framework.base import CleanupResult, StepContext, apply_children, delete_outside_namespaces, key
from tenant_platform.framework.contract import Action, Given, Step
from tenant_platform.kube import errors
from tenant_platform.kube.client import Obj

COMPONENT = manifests.COMPONENT
QUOTA = ("v1", "ResourceQuota")


def gather(ctx: StepContext) -> GpuShareFacts:
    """Our quota in each namespace of the spec (one GET each; a namespace not there yet reads as none)."""
    quotas = tuple(
        QuotaFacts(ns, ctx.kube.get(*QUOTA, manifests.QUOTA_NAME, ns)) for ns in ctx.platform.spec.all_namespaces
    )
    return GpuShareFacts(quotas)


def ratios(verdict: Verdict) -> dict[str, float]:
    """The used ratio per resource, from the section the verdict publishes (empty without a share)."""
    resources = (verdict.sections.get(SECTION) or {}).get("resources") or []
    return {str(r["resource"]): float(r["usedRatio"]) for r in resources}


class GpuShareStep:
    name = COMPONENT
    condition_types: tuple[str, ...] = (constants.GPU_SHARE_READY,)

    def action(self, platform: TenantPlatform) -> Action:
        return Action("apply the GPU share quotas")

    def gather(self, ctx: StepContext) -> GpuShareFacts:
        return gather(ctx)

    def evaluate(self, given: Given, facts: GpuShareFacts) -> Verdict:
        names = manifests.names_from(given.recorded.gpu_resource_names)
        return evaluate(given.platform, facts, names)

    def apply(self, ctx: StepContext, facts: GpuShareFacts, verdict: Verdict) -> Verdict:
        """Apply the quotas (nothing read again), prune ours that are no longer wanted anywhere."""
        live = {key(q): facts.live(q["metadata"]["namespace"]) for q in verdict.desired}
        outcome = apply_children(ctx, COMPONENT, verdict.desired, prune_kinds=[QUOTA], live=live)
        if not ctx.dry_run:
            metrics.record_gpu_share(ctx.name, ratios(verdict))
        if outcome.ok:
            return verdict
        reason = Common.FORBIDDEN if outcome.forbidden else Common.API_ERROR
        message = "Could not apply the GPU share: " + "; ".join(outcome.errors)
        failed = conditions.false(constants.GPU_SHARE_READY, reason, message)
        return verdict.but(conditions=[failed], failed=True)

    def cleanup(self, ctx: StepContext) -> CleanupResult:
        """The quotas in the platform's namespaces follow its deletionPolicy with the rest of their
        contents (Retain keeps the tenant bounded); ours left in a namespace that is no longer the
        platform's go, and so does the gauge."""
        metrics.forget_gpu_share(ctx.name)
        try:
            deleted = delete_outside_namespaces(ctx, COMPONENT, *QUOTA)
        except errors.KubeError as exc:
            return CleanupResult(False, f"Could not delete the GPU share quotas: {exc.message or exc}")
        return CleanupResult(True, "Deleted " + ", ".join(deleted) if deleted else "")

    def render(self, platform: TenantPlatform) -> list[Obj]:
        return manifests.render(platform)


STEP: Step[GpuShareFacts] = GpuShareStep()
