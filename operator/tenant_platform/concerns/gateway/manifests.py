"""PURE rendering of the platform's Istio Gateway (templates/gateway.yaml.j2).

HTTPS on 443 for the domain with ``credentialName`` = the edge certificate Secret, and HTTP on 80
redirecting to HTTPS, selecting the gateway workload by ``spec.gateway.selector`` (every label as
given). Rendered only for ``spec.gateway.management: Managed``.

Every host carries a namespace (``<namespace>/<domain>``, one per tenant namespace, primary
first): Istio reads a bare host as ``*/<domain>``, which would let a VirtualService in any
namespace bind the platform's domain on this Gateway.
"""

from __future__ import annotations

from typing import Any

from tenant_platform.api.models import TenantPlatform
from tenant_platform.core import templating
from tenant_platform.core.identities import GATEWAY_API_VERSION, GATEWAY_KIND

TEMPLATES = templating.templates_beside(__file__)

API_VERSION = GATEWAY_API_VERSION
KIND = GATEWAY_KIND


def gateway_hosts(platform: TenantPlatform) -> list[str]:
    """The Gateway's hosts: the domain, admitting VirtualServices from the tenant namespaces only."""
    return [f"{namespace}/{platform.spec.domain}" for namespace in platform.spec.all_namespaces]


def render_gateway(platform: TenantPlatform) -> dict[str, Any]:
    """The desired Gateway (without our labels or ownerReference: apply_children adds them)."""
    gw = platform.spec.gateway
    return templating.render_object(
        TEMPLATES,
        "gateway.yaml.j2",
        name=gw.name,
        namespace=gw.namespace,
        selector=dict(sorted(gw.selector.items())),
        hosts=gateway_hosts(platform),
        credential_name=platform.spec.edge_certificate.secret_name,
    )


def render(platform: TenantPlatform) -> list[dict[str, Any]]:
    """What the gateway step applies: the Gateway when Managed, nothing when External."""
    if platform.spec.gateway.management != "Managed":
        return []
    return [render_gateway(platform)]
