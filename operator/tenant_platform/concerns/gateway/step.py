"""GatewayReady: the Istio Gateway that serves the platform's domain, written or verified.

The step contract (framework/contract.py): ``gather`` reads the facts (is the Gateway kind served,
the live Gateway and who owns it, the gateway Service), concerns/gateway/verdict.py ``evaluate``
(pure) decides the Gateway to apply, the condition, the event and what to record, and ``apply``
applies it and judges, with the same pure ``evaluate``, the Gateway the API server returned.

``Managed``: the Gateway (concerns/gateway/manifests.py) is applied with server-side apply, owned by the
TenantPlatform (a cluster-scoped owner may own a namespaced child in any namespace; not in a
target cluster), and restored when someone edits it. After the apply the step judges again
what the API server returned (no second read), so a field another manager added is still caught. A Gateway
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
becomes the step's condition through ``action``, as reconcile/pipeline.py ``run_step`` words it
for every step; the coordinates, from the spec alone, are recorded even then (``Gathered``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

from tenant_platform.api import constants
from tenant_platform.api.models import TenantPlatform
from tenant_platform.api.status.recorded import Recorded
from tenant_platform.concerns.gateway import manifests
from tenant_platform.concerns.gateway.verdict import (
    TYPE,
    GatewayFacts,
    evaluate,
    not_applied,
    prunes,
    recorded_gateway,
    serves_domain,
)
from tenant_platform.core import domainclaims
from tenant_platform.core.gatewayservice import service_of
from tenant_platform.core.verdict import Verdict
from tenant_platform.framework.base import (
    CleanupResult,
    StepContext,
    api_error_condition,
    apply_children,
    delete_outside_namespaces,
    owner_of,
)
from tenant_platform.framework.contract import Action, Given, Step
from tenant_platform.kube import errors
from tenant_platform.kube.client import Obj

log = logging.getLogger("tenant_platform.reconcile")

COMPONENT = "gateway"
GATEWAY = (manifests.API_VERSION, manifests.KIND)


def gather(ctx: StepContext) -> GatewayFacts:
    """Reads only: whether the Gateway kind is served, then the Gateway, who holds the domain and
    the gateway Service."""
    gw = ctx.platform.spec.gateway
    if not ctx.kube.served(*GATEWAY):
        return GatewayFacts(kind_served=False)
    live = ctx.kube.get(*GATEWAY, gw.name, gw.namespace)
    # Who holds the domain (core/domainclaims.py): the claim of every platform preparing this
    # cluster (with spec.target they live in the management cluster, not in ``ctx.kube``), and the
    # Gateways of ours that serve it. Both lists come from the read cache (TenantPlatforms;
    # children by our label).
    claims = domainclaims.claims_of(ctx.platforms())
    serving = tuple(
        (owner_of(g), f"{g['metadata'].get('namespace', '')}/{g['metadata'].get('name', '')}")
        for g in ctx.kube.list(*GATEWAY, label_selector=constants.LABEL_PLATFORM)
        if owner_of(g) and serves_domain(g, ctx.platform.spec.domain)
    )
    service_ref = service_of(gw.service_host)
    service = ctx.kube.get("v1", "Service", *service_ref) if service_ref else None
    return GatewayFacts(
        kind_served=True,
        live=live,
        live_owner=owner_of(live) if live is not None else "",
        service_ref=service_ref,
        service=service,
        claims=claims,
        serving=serving,
    )


@dataclass(frozen=True)
class Gathered:
    """What ``gather`` read, or the API error that stopped it. The Gateway coordinates come from
    the spec alone and are recorded even then (as before the step contract, when they were
    recorded before any API call), so an API error does not drop them from status.recorded; the
    condition is the one the pipeline gives any step's API error (``action``)."""

    facts: GatewayFacts | None
    error: errors.KubeError | None = None


class GatewayStep:
    name = COMPONENT
    condition_types: tuple[str, ...] = (constants.GATEWAY_READY,)

    def render(self, platform: TenantPlatform) -> list[Obj]:
        return manifests.render(platform)

    def cleanup(self, ctx: StepContext) -> CleanupResult:
        """Delete our Gateways outside the platform's namespaces (every namespace: a renamed or
        moved one too). Locally garbage collection would remove them through the ownerReference
        once the platform is gone; in a target cluster nothing owns them (docs/fleet.md)."""
        deleted = delete_outside_namespaces(ctx, COMPONENT, *GATEWAY)
        return CleanupResult(True, "Deleted " + ", ".join(deleted) if deleted else "")

    def action(self, platform: TenantPlatform) -> Action:
        return Action(f"reconcile Gateway {platform.spec.gateway.namespace}/{platform.spec.gateway.name}")

    def gather(self, ctx: StepContext) -> Gathered:
        """``gather``, or the API error that stopped it (see ``Gathered``)."""
        try:
            return Gathered(gather(ctx))
        except errors.KubeError as exc:
            log.warning("step %s failed for %s: %s", self.name, ctx.name, exc)
            return Gathered(None, exc)

    def evaluate(self, given: Given, facts: Gathered) -> Verdict:
        if facts.error is not None:
            # The coordinates come from the spec alone: an API error keeps them in status.recorded.
            return Verdict(
                conditions=[api_error_condition(TYPE, facts.error, self.action(given.platform).doing)],
                recorded=Recorded(gateway=recorded_gateway(given.platform)),
                failed=True,
            )
        assert facts.facts is not None
        return evaluate(given.platform, facts.facts, dry_run=given.dry_run)

    def apply(self, ctx: StepContext, facts: Gathered, verdict: Verdict) -> Verdict:
        """Apply the Gateway the verdict wants (pruning ours the spec no longer names), then judge
        what the API server returned (pure: ``check.evaluate`` on the applied Gateway)."""
        if not verdict.desired or facts.facts is None:
            return verdict
        outcome = apply_children(
            ctx,
            COMPONENT,
            verdict.desired,
            prune_kinds=[GATEWAY],
            prune_namespaces=prunes(ctx.platform, verdict),
        )
        if not outcome.ok:
            return verdict.but(conditions=[not_applied(outcome.errors)], failed=True)
        live = outcome.applied[0]
        applied = replace(facts.facts, live=live, live_owner=owner_of(live), applied=True, wrote=outcome.written > 0)
        return evaluate(ctx.platform, applied, dry_run=ctx.dry_run)


STEP: Step[Gathered] = GatewayStep()
