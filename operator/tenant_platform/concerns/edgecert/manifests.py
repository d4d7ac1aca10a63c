"""PURE rendering for the edge certificate: the trust ConfigMap, the self-signed Secret and the
cert-manager Certificate.

The trust ConfigMap lives in the tenant namespace under ``platform.trust_config_map_name``; its
one key, ``ca-certificates.crt``, holds public certificates only (concerns/edgecert/certs.py decides which).
``render_trust_config_map(platform, None)`` is the skeleton ``tenant-platform render`` shows: the
bundle is only known at runtime, so it carries a clearly marked placeholder.

``render_certificate(platform, component=...)`` is the cert-manager ``Certificate`` of
``issuer: CertManager``: named like the Secret, in the gateway namespace, for the domain alone
(no wildcard: an ACME HTTP-01 issuer could not validate one), with the issuer reference, the
lifetime and renewal point the self-signed issuer uses, and our three labels on the Secret
cert-manager writes (``secretTemplate``), so that cleanup finds it as it finds a self-signed one.
"""

from __future__ import annotations

import base64
import datetime as dt
from typing import Any

from tenant_platform.api import constants
from tenant_platform.api.models import TenantPlatform
from tenant_platform.api.tls import CERT_KEY, KEY_KEY, TLS_TYPE, TRUST_KEY

CERTIFICATE_API_VERSION = "cert-manager.io/v1"
CERTIFICATE_KIND = "Certificate"
CERTIFICATE = (CERTIFICATE_API_VERSION, CERTIFICATE_KIND)

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


def render_certificate(
    platform: TenantPlatform, *, component: str, dns_names: list[str], duration: dt.timedelta
) -> dict[str, Any]:
    """The cert-manager Certificate for ``issuer: CertManager`` (the caller checked issuerRef is set)."""
    edge = platform.spec.edge_certificate
    ref = edge.issuer_ref
    assert ref is not None, "issuer CertManager requires issuerRef (CRD rule)"
    return {
        "apiVersion": CERTIFICATE_API_VERSION,
        "kind": CERTIFICATE_KIND,
        "metadata": {"name": edge.secret_name, "namespace": platform.spec.gateway.namespace},
        "spec": {
            "secretName": edge.secret_name,
            "dnsNames": list(dns_names),
            "issuerRef": {"name": ref.name, "kind": ref.kind, "group": ref.group},
            "duration": go_duration(duration.total_seconds()),
            "renewBefore": edge.renew_before,
            "privateKey": {"algorithm": "ECDSA", "size": 256, "rotationPolicy": "Always"},
            "usages": ["digital signature", "server auth"],
            "secretTemplate": {
                "labels": {
                    constants.LABEL_MANAGED_BY: constants.MANAGED_BY_VALUE,
                    constants.LABEL_PLATFORM: platform.name,
                    constants.LABEL_COMPONENT: component,
                }
            },
        },
    }


def go_duration(seconds: float) -> str:
    """A Go duration string (``2160h``, ``90m``, ``45s``) for whole seconds."""
    whole = int(seconds)
    for unit, size in (("h", 3600), ("m", 60)):
        if whole % size == 0:
            return f"{whole // size}{unit}"
    return f"{whole}s"


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()
