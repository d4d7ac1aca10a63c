"""PURE rendering of the platform's Istio Gateway (templates/gateway.yaml.j2).

HTTPS on 443 for the domain with ``credentialName`` = the edge certificate Secret, and HTTP on 80
redirecting to HTTPS, selecting the gateway workload by ``spec.gateway.selector`` (every label as
given). Rendered only for ``spec.gateway.management: Managed``.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import jinja2
import yaml

from tenant_platform.api.models import TenantPlatform

API_VERSION = "networking.istio.io/v1"
KIND = "Gateway"
TEMPLATES = Path(__file__).parent / "templates"


@functools.cache
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        undefined=jinja2.StrictUndefined,
        autoescape=False,  # YAML, not HTML; every value goes through tojson
        keep_trailing_newline=True,
    )


def _render_yaml(template: str, **values: Any) -> dict[str, Any]:
    text = _environment().get_template(template).render(**values)
    parsed = yaml.safe_load(text)
    if not isinstance(parsed, dict):
        raise ValueError(f"{template} did not render one object")
    return parsed


def render_gateway(platform: TenantPlatform) -> dict[str, Any]:
    """The desired Gateway (without our labels or ownerReference: apply_children adds them)."""
    gw = platform.spec.gateway
    return _render_yaml(
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
