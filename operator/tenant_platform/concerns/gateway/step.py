"""GatewayReady: the Istio Gateway that serves the platform's domain, written or verified.

One shape: ``gather`` reads the facts (is the Gateway kind served, the live Gateway and who owns
it, the gateway Service), ``status.gateway.evaluate`` (pure) decides the Gateway to apply, the
condition and what to record, and ``reconcile`` applies and reports.

``Managed``: the Gateway (concerns/gateway/manifests.py) is applied with server-side apply, owned by the
TenantPlatform (a cluster-scoped owner may own a namespaced child in any namespace; not in a
target cluster), and restored when someone edits it. After the apply the step evaluates again
with what the API server returned, so a field another manager added is still caught. A Gateway
of that name that does not carry our labels, or carries another platform's, is reported as
Conflict and never overwritten.
Gateways of ours that the spec no longer names (a rename or namespace move) are pruned. Cleanup
deletes ours outside the platform's namespaces by our labels, locally and in a target cluster
(where no ownerReference exists for garbage collection to follow).

``External``: nothing is written; the existing Gateway is verified and every missing piece is
named. Switching from Managed to External leaves the Gateway we wrote in place.

In both modes a domain another platform holds (its Gateway of ours already serves it, or it was
created first with that spec.domain: core/domainclaims.py, the rule DNSReady applies) is refused
with DomainHeldByAnotherPlatform before anything is written.

Both modes record the gateway coordinates (``status.recorded.gateway``) and check that the
gateway Service named by ``spec.gateway.serviceHost`` exists and exposes port 443. An API error
becomes the step's condition through ``action`` (reconcile._run_step).
"""

from __future__ import annotations

from dataclasses import replace

from tenant_platform.api import constants
from tenant_platform.api.models import TenantPlatform
from tenant_platform.concerns.gateway import manifests as render_gateway
from tenant_platform.concerns.gateway import verdict as check
from tenant_platform.core import domainclaims as dnsguard
from tenant_platform.core.gatewayservice import service_of
from tenant_platform.framework.base import (
    CleanupResult,
    StepContext,
    StepResult,
    apply_children,
    delete_outside_namespaces,
    owner_of,
)
from tenant_platform.kube.client import Obj

COMPONENT = "gateway"
GATEWAY = (render_gateway.API_VERSION, render_gateway.KIND)


def gather(ctx: StepContext) -> check.GatewayFacts:
    """Reads only: whether the Gateway kind is served, then the Gateway, who holds the domain and
    the gateway Service."""
    gw = ctx.platform.spec.gateway
    if not ctx.kube.served(*GATEWAY):
        return check.GatewayFacts(kind_served=False)
    live = ctx.kube.get(*GATEWAY, gw.name, gw.namespace)
    # Who holds the domain (core/domainclaims.py): the claim of every platform preparing this
    # cluster (with spec.target they live in the management cluster, not in ``ctx.kube``), and the
    # Gateways of ours that serve it. Both lists come from the read cache (TenantPlatforms;
    # children by our label).
    claims = dnsguard.claims_of(ctx.platforms())
    serving = tuple(
        (owner_of(g), f"{g['metadata'].get('namespace', '')}/{g['metadata'].get('name', '')}")
        for g in ctx.kube.list(*GATEWAY, label_selector=constants.LABEL_PLATFORM)
        if owner_of(g) and check.serves_domain(g, ctx.platform.spec.domain)
    )
    service_ref = service_of(gw.service_host)
    service = ctx.kube.get("v1", "Service", *service_ref) if service_ref else None
    return check.GatewayFacts(
        kind_served=True,
        live=live,
        live_owner=owner_of(live) if live is not None else "",
        service_ref=service_ref,
        service=service,
        claims=claims,
        serving=serving,
    )


class GatewayStep:
    name = COMPONENT
    condition_types: tuple[str, ...] = (constants.GATEWAY_READY,)

    def render(self, platform: TenantPlatform) -> list[Obj]:
        return render_gateway.render(platform)

    def cleanup(self, ctx: StepContext) -> CleanupResult:
        """Delete our Gateways outside the platform's namespaces (every namespace: a renamed or
        moved one too). Locally garbage collection would remove them through the ownerReference
        once the platform is gone; in a target cluster nothing owns them (docs/fleet.md)."""
        deleted = delete_outside_namespaces(ctx, COMPONENT, *GATEWAY)
        return CleanupResult(True, "Deleted " + ", ".join(deleted) if deleted else "")

    def action(self, platform: TenantPlatform) -> str:
        return f"reconcile Gateway {platform.spec.gateway.namespace}/{platform.spec.gateway.name}"

    def reconcile(self, ctx: StepContext) -> StepResult:
        platform = ctx.platform
        # The coordinates come from the spec alone: recorded before any API call, so an API error
        # (which escapes to reconcile._run_step) does not drop them from status.recorded.
        ctx.record({"gateway": check.recorded_gateway(platform).dump()})
        facts = gather(ctx)
        verdict = check.evaluate(platform, facts, dry_run=ctx.dry_run)
        if verdict.desired:
            outcome = apply_children(
                ctx, COMPONENT, verdict.desired, prune_kinds=[GATEWAY], prune_namespaces=verdict.prune_namespaces
            )
            if not outcome.ok:
                return StepResult(
                    conditions=[check.not_applied(outcome.errors)], recorded=verdict.recorded, failed=True
                )
            live = outcome.applied[0]
            facts = replace(facts, live=live, live_owner=owner_of(live), applied=True, wrote=outcome.written > 0)
            verdict = check.evaluate(platform, facts, dry_run=ctx.dry_run)
        ctx.events.extend(verdict.events)
        return StepResult(conditions=verdict.conditions, recorded=verdict.recorded)


STEP = GatewayStep()
