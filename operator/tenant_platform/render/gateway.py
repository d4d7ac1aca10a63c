"""PURE rendering of the platform's Istio Gateway (templates/gateway.yaml.j2).

HTTPS on 443 for the domain with ``credentialName`` = the edge certificate Secret, and HTTP on 80
redirecting to HTTPS, selecting the gateway workload by ``spec.gateway.selector`` (every label as
given). Rendered only for ``spec.gateway.management: Managed``.
"""

from __future__ import annotations

from typing import Any

from tenant_platform.api.models import TenantPlatform
from tenant_platform.render import templating

API_VERSION = "networking.istio.io/v1"
KIND = "Gateway"


def render_gateway(platform: TenantPlatform) -> dict[str, Any]:
    """The desired Gateway (without our labels or ownerReference: apply_children adds them)."""
    gw = platform.spec.gateway
    return templating.render_object(
        "gateway.yaml.j2",
        name=gw.name,
        namespace=gw.namespace,
        selector=dict(sorted(gw.selector.items())),
        domain=platform.spec.domain,
        credential_name=platform.spec.edge_certificate.secret_name,
    )


def render(platform: TenantPlatform) -> list[dict[str, Any]]:
    """What the gateway step applies: the Gateway when Managed, nothing when External."""
    if platform.spec.gateway.management != "Managed":
        return []
    return [render_gateway(platform)]
