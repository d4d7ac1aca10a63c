"""PURE rendering for the edge certificate: the trust ConfigMap and the self-signed Secret.

The trust ConfigMap lives in the tenant namespace under ``platform.trust_config_map_name``; its
one key, ``ca-certificates.crt``, holds public certificates only (concerns/edgecert/certs.py decides which).
``render_trust_config_map(platform, None)`` is the skeleton ``tenant-platform render`` shows: the
bundle is only known at runtime, so it carries a clearly marked placeholder.
"""

from __future__ import annotations

import base64
from typing import Any

from tenant_platform.api import constants
from tenant_platform.api.models import TenantPlatform
from tenant_platform.api.tls import CERT_KEY, KEY_KEY, TLS_TYPE, TRUST_KEY

PLACEHOLDER = (
    "# PLACEHOLDER: filled at runtime with the public certificate(s) clients must trust: the self-signed\n"
    "# edge certificate itself, or its private CA. Published only when the edge certificate is not\n"
    "# publicly trusted. Never contains a private key.\n"
)


def render_trust_config_map(platform: TenantPlatform, bundle: str | None) -> dict[str, Any]:
    """The trust ConfigMap with ``bundle`` (PEM certificates), or the placeholder when None."""
    obj: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": platform.trust_config_map_name, "namespace": platform.spec.namespace},
        "data": {TRUST_KEY: PLACEHOLDER if bundle is None else bundle},
    }
    if bundle is None:
        obj["metadata"]["annotations"] = {
            f"{constants.GROUP}/render-note": "Skeleton: the operator publishes the real bundle at runtime."
        }
    return obj


def render_tls_secret(platform: TenantPlatform, *, cert_pem: bytes, key_pem: bytes) -> dict[str, Any]:
    """The ``kubernetes.io/tls`` Secret holding a certificate we issued (SelfSigned)."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": platform.spec.edge_certificate.secret_name, "namespace": platform.spec.gateway.namespace},
        "type": TLS_TYPE,
        "data": {CERT_KEY: _b64(cert_pem), KEY_KEY: _b64(key_pem)},
    }


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()
