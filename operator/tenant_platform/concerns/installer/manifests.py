"""The installer identity: exactly the shape the prerequisites checklist gives.

A ServiceAccount; a RoleBinding to the built-in ``admin`` ClusterRole in the tenant namespace only;
a Role + RoleBinding for the Istio kinds the platform writes; a Role + RoleBinding for delegation
(the chart grants these to its own service accounts, and one can only grant what one holds).
``spec.installer.subjects`` are bound to the same roles. The optional kubeconfig Secret's intent
(``kubeconfig_secret``) carries the token's expiry in an annotation; the token itself is minted
by the step, never here.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from tenant_platform.api import constants
from tenant_platform.api.models import TenantPlatform

ANNOTATION_TOKEN_EXPIRES = f"{constants.GROUP}/token-expires-at"
# The server the kubeconfig names: a different choice re-mints (the token is never decoded back).
ANNOTATION_SERVER = f"{constants.GROUP}/kubeconfig-server"
ANNOTATION_TOKEN_ISSUED = f"{constants.GROUP}/token-issued-at"
"""When the token was minted: with the expiry, the lifetime the API server actually granted."""

ISTIO_VERBS = ["create", "delete", "get", "list", "patch", "update", "watch"]
ISTIO_RULES: list[dict[str, Any]] = [
    {
        "apiGroups": ["networking.istio.io"],
        "resources": ["destinationrules", "envoyfilters", "virtualservices"],
        "verbs": ISTIO_VERBS,
    },
    {
        "apiGroups": ["security.istio.io"],
        "resources": ["authorizationpolicies", "peerauthentications"],
        "verbs": ISTIO_VERBS,
    },
]
DELEGATION_RULES: list[dict[str, Any]] = [
    {"apiGroups": [""], "resources": ["endpoints"], "verbs": ["create", "delete", "patch", "update"]},
    {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["patch"]},
]

# The checklist's `kubectl auth can-i` checks: (verb, group, resource, namespaced, expected).
CAN_I_CHECKS: list[tuple[str, str, str, bool, bool]] = [
    ("create", "apps", "deployments", True, True),
    ("create", "networking.istio.io", "virtualservices", True, True),
    ("create", "rbac.authorization.k8s.io", "clusterroles", False, False),
    ("create", "apiextensions.k8s.io", "customresourcedefinitions", False, False),
    ("list", "", "nodes", False, False),
    # Beyond the checklist: an identity that can read every Secret or impersonate is cluster-admin
    # in all but name (no kubeconfig is minted for it).
    ("list", "", "secrets", False, False),
    ("impersonate", "", "users", False, False),
]


def _subjects(platform: TenantPlatform) -> list[dict[str, str]]:
    spec = platform.spec
    subjects = [{"kind": "ServiceAccount", "name": spec.installer.service_account_name, "namespace": spec.namespace}]
    for extra in spec.installer.subjects:
        if extra.kind == "ServiceAccount":
            subjects.append({"kind": "ServiceAccount", "name": extra.name, "namespace": extra.namespace})
        else:
            subjects.append({"kind": extra.kind, "name": extra.name, "apiGroup": "rbac.authorization.k8s.io"})
    return subjects


def _binding(name: str, ns: str, role_kind: str, role: str, subjects: list[dict[str, str]]) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": name, "namespace": ns},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
        "subjects": subjects,
    }


def _role(name: str, ns: str, rules: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": name, "namespace": ns},
        "rules": json.loads(json.dumps(rules)),
    }


def render_installer(platform: TenantPlatform) -> list[dict[str, Any]]:
    """ServiceAccount, Roles and RoleBindings, in apply order."""
    spec = platform.spec
    ns = spec.namespace
    sa = spec.installer.service_account_name
    subjects = _subjects(platform)
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": sa, "namespace": ns}},
        _role(f"{sa}-istio", ns, ISTIO_RULES),
        _role(f"{sa}-delegation", ns, DELEGATION_RULES),
        _binding(f"{sa}-admin", ns, "ClusterRole", "admin", subjects),
        _binding(f"{sa}-istio", ns, "Role", f"{sa}-istio", subjects),
        _binding(f"{sa}-delegation", ns, "Role", f"{sa}-delegation", subjects),
    ]


def render_kubeconfig(*, server: str, ca_pem: str | None, namespace: str, user: str, token: str) -> str:
    """A kubeconfig for the installer identity (YAML-compatible JSON, so no YAML dependency here)."""
    cluster: dict[str, Any] = {"server": server}
    if ca_pem:
        cluster["certificate-authority-data"] = base64.b64encode(ca_pem.encode()).decode()
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "platform", "cluster": cluster}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": "installer", "context": {"cluster": "platform", "user": user, "namespace": namespace}}],
        "current-context": "installer",
    }
    return json.dumps(doc, indent=2)


def kubeconfig_secret(
    platform: TenantPlatform, *, expires_at: str, kubeconfig_b64: str, server: str, issued_at: str = ""
) -> dict[str, Any]:
    """The kubeconfig Secret intent: ``kubeconfig_b64`` (base64) under key ``kubeconfig``, naming ``server``."""
    annotations = {ANNOTATION_TOKEN_EXPIRES: expires_at, ANNOTATION_SERVER: server}
    if issued_at:
        annotations[ANNOTATION_TOKEN_ISSUED] = issued_at
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": platform.kubeconfig_secret_name,
            "namespace": platform.spec.namespace,
            "annotations": annotations,
        },
        "type": "Opaque",
        "data": {"kubeconfig": kubeconfig_b64},
    }
