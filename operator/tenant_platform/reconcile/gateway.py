"""GatewayReady: the Istio Gateway that serves the platform's domain, written or verified.

``Managed``: the Gateway (render/gateway.py) is applied with server-side apply, owned by the
TenantPlatform (a cluster-scoped owner may own a namespaced child in any namespace), and restored
when someone edits it. A Gateway of that name that does not carry our labels, or carries another
platform's, is reported as Conflict and never overwritten. Gateways of ours that the spec no longer
names (a rename or namespace move) are pruned.

``External``: nothing is written; the existing Gateway is verified (status/gateway.py) and every
missing piece is named. Switching from Managed to External leaves the Gateway we wrote in place.

Both modes record the gateway coordinates (``status.recorded.gateway``) and check that the
gateway Service named by ``spec.gateway.serviceHost`` exists and exposes port 443.
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
    apply_children,
    owner_of,
)
from tenant_platform.render import gateway as render_gateway
from tenant_platform.status import conditions
from tenant_platform.status import gateway as check

COMPONENT = "gateway"
GATEWAY = (render_gateway.API_VERSION, render_gateway.KIND)

REASON_MANAGED = "Programmed"
REASON_VERIFIED = "Verified"
REASON_KIND_NOT_SERVED = "GatewayKindNotServed"
REASON_SERVICE_NOT_FOUND = "GatewayServiceNotFound"
REASON_WOULD_APPLY = "WouldApply"


def recorded_gateway(platform: TenantPlatform) -> dict[str, Any]:
    gw = platform.spec.gateway
    return {
        "name": gw.name,
        "namespace": gw.namespace,
        "selector": dict(gw.selector),
        "serviceAccountName": gw.service_account_name,
        "serviceHost": gw.service_host,
        "meshNamespace": platform.spec.mesh.namespace,
        "management": gw.management,
    }


def service_of(host: str) -> tuple[str, str] | None:
    """(name, namespace) of a ``<service>.<namespace>.svc[.<cluster domain>]`` host, else None."""
    parts = host.rstrip(".").split(".")
    if len(parts) >= 3 and parts[2] == "svc":
        return parts[0], parts[1]
    return None


class GatewayStep:
    name = COMPONENT
    condition_types: tuple[str, ...] = (constants.GATEWAY_READY,)

    def render(self, platform: TenantPlatform) -> list[Obj]:
        return render_gateway.render(platform)

    def cleanup(self, ctx: StepContext) -> CleanupResult:
        # The Gateway is owned through its ownerReference: garbage collection removes it.
        return CleanupResult(True)

    def reconcile(self, ctx: StepContext) -> StepResult:
        type_ = constants.GATEWAY_READY
        platform = ctx.platform
        recorded = {"gateway": recorded_gateway(platform)}
        try:
            return self._reconcile(ctx, recorded)
        except errors.KubeError as exc:
            return StepResult(
                conditions=[api_error_condition(type_, exc, f"reconcile Gateway {self._where(platform)}")],
                recorded=recorded,
                failed=True,
            )

    @staticmethod
    def _where(platform: TenantPlatform) -> str:
        return f"{platform.spec.gateway.namespace}/{platform.spec.gateway.name}"

    def _reconcile(self, ctx: StepContext, recorded: dict[str, Any]) -> StepResult:
        type_ = constants.GATEWAY_READY
        platform = ctx.platform
        gw = platform.spec.gateway
        where = self._where(platform)
        if not ctx.kube.served(*GATEWAY):
            return StepResult(
                conditions=[
                    conditions.false(
                        type_,
                        REASON_KIND_NOT_SERVED,
                        f"The API server does not serve {GATEWAY[1]} ({GATEWAY[0]}); install Istio's CRDs.",
                    )
                ],
                recorded=recorded,
            )
        live = ctx.kube.get(*GATEWAY, gw.name, gw.namespace)
        notes: list[str] = []
        if gw.management == "Managed":
            owner = owner_of(live) if live is not None else None
            if live is not None and owner != platform.name:
                who = f"TenantPlatform {owner}" if owner else "someone else (it lacks our labels)"
                return StepResult(
                    conditions=[
                        conditions.false(
                            type_,
                            constants.REASON_CONFLICT,
                            f"Gateway {where} already exists and belongs to {who}; it was left untouched. Delete "
                            "or rename it, choose another spec.gateway.name, or set spec.gateway.management to "
                            "External to use it as is.",
                        )
                    ],
                    recorded=recorded,
                )
            desired = render_gateway.render(platform)
            if ctx.dry_run:
                if live is None:
                    return StepResult(
                        conditions=[
                            conditions.false(type_, REASON_WOULD_APPLY, f"The operator would create Gateway {where}.")
                        ],
                        recorded=recorded,
                    )
            else:
                outcome = apply_children(
                    ctx,
                    COMPONENT,
                    desired,
                    prune_kinds=[GATEWAY],
                    prune_namespaces=self._prune_namespaces(platform),
                )
                if not outcome.ok:
                    return StepResult(
                        conditions=[
                            conditions.false(
                                type_, constants.REASON_API_ERROR, "Could not apply: " + "; ".join(outcome.errors) + "."
                            )
                        ],
                        recorded=recorded,
                        failed=True,
                    )
                live = outcome.applied[0]
                if outcome.written:
                    ctx.events.append(("Normal", "GatewayApplied", f"Applied Gateway {where}."))
        report = check.verify_gateway(
            live,
            name=gw.name,
            namespace=gw.namespace,
            domain=platform.spec.domain,
            selector=gw.selector,
            tenant_namespace=platform.spec.namespace,
            credential_name=platform.spec.edge_certificate.secret_name,
        )
        if not report.ok:
            return StepResult(
                conditions=[conditions.false(type_, report.reason, report.message + ".")], recorded=recorded
            )
        notes += report.notes
        service_problem = self._service(ctx)
        if service_problem:
            return StepResult(
                conditions=[conditions.false(type_, REASON_SERVICE_NOT_FOUND, service_problem)], recorded=recorded
            )
        if gw.management == "Managed":
            message = (
                f"Gateway {where} serves {platform.spec.domain} on HTTPS 443 with credential "
                f"{platform.spec.edge_certificate.secret_name} and redirects HTTP 80"
            )
            if ctx.dry_run:
                message += " (dry run: any drift would be repaired on a real reconcile)"
            reason = REASON_MANAGED
        else:
            message = (
                f"External Gateway {where} selects the gateway workload and serves {platform.spec.domain} on "
                "HTTPS 443 with a credential"
            )
            reason = REASON_VERIFIED
        message += "; note: " + "; ".join(notes) + "." if notes else "."
        return StepResult(conditions=[conditions.true(type_, reason, message)], recorded=recorded)

    @staticmethod
    def _prune_namespaces(platform: TenantPlatform) -> list[str | None]:
        namespaces: list[str | None] = [platform.spec.gateway.namespace]
        previous = ((platform.status.get("recorded") or {}).get("gateway") or {}).get("namespace")
        if previous and previous not in namespaces:
            namespaces.append(str(previous))
        return namespaces

    @staticmethod
    def _service(ctx: StepContext) -> str:
        """A sentence when the gateway Service is missing or lacks port 443, else ""."""
        host = ctx.platform.spec.gateway.service_host
        parsed = service_of(host)
        if parsed is None:
            return ""
        name, namespace = parsed
        service = ctx.kube.get("v1", "Service", name, namespace)
        if service is None:
            return (
                f"The gateway Service {namespace}/{name} (spec.gateway.serviceHost {host}) does not exist; install "
                "the ingress gateway or fix spec.gateway.serviceHost."
            )
        ports = [p.get("port") for p in (service.get("spec") or {}).get("ports") or []]
        if 443 not in ports:
            return (
                f"The gateway Service {namespace}/{name} exposes no port 443 (ports: {ports}); HTTPS cannot reach it."
            )
        return ""


STEP = GatewayStep()
