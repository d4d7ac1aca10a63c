"""What the API server enforces when a TenantPlatform is written, for specs that never reach it (pure).

The operator parses a *stored* object: the API server has already applied the CRD's schema and
its CEL rules, and an object stored before a rule existed is reported through a condition (a
reserved domain, a protected namespace), not refused. `tenant-platform render` and
`tenant-platform check -f` read a file no API server has seen, so they parse it in *admission
mode* (``TenantPlatform.from_body(body, admission=True)``): strict types, unknown fields
refused (kubectl's default field validation), the schema constraints pydantic does not carry
(CONSTRAINTS below) and a mirror of every CEL rule (the functions below, each naming the CRD
message it mirrors).

tests/unit/test_admission.py fails when a CRD constraint or rule has no mirror here or in the
pydantic model; tests/integration/test_render_rejects.py applies one table of bad specs to the
real API server (server-side dry run) and to `render`, and both must refuse every row.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from tenant_platform.api import domains

CONTEXT_KEY = "admission"
"""The pydantic validation-context key that switches admission mode on."""

DNS1123_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
DNS1123_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
PROXY_REPOSITORY = r"^[a-z0-9]([-a-z0-9._:]*[a-z0-9])?(/[a-z0-9]([-a-z0-9._]*[a-z0-9])?)+$"

# (model class name, field alias) -> the CRD's constraints that the pydantic Field does not carry,
# in the CRD's own vocabulary. tests/unit/test_admission.py compares this table plus the Field
# metadata with the CRD, property by property.
CONSTRAINTS: dict[tuple[str, str], dict[str, Any]] = {
    ("TenantPlatformSpec", "namespace"): {"minLength": 1},
    ("TenantPlatformSpec", "domain"): {"minLength": 1},
    ("TenantPlatformSpec", "additionalNamespaces"): {
        "maxItems": 32,
        "x-kubernetes-list-type": "set",
        "items": {"maxLength": 63, "pattern": DNS1123_LABEL},
    },
    ("TenantPlatformSpec", "imagePullSecrets"): {
        "maxItems": 32,
        "x-kubernetes-list-type": "set",
        "items": {"maxLength": 253, "pattern": DNS1123_SUBDOMAIN},
    },
    ("Installer", "serviceAccountName"): {"maxLength": 253},
    ("Installer", "subjects"): {"maxItems": 32},
    ("Subject", "name"): {"minLength": 1, "maxLength": 253},
    ("PodGuard", "proxyImageRepositories"): {
        "minItems": 1,
        "maxItems": 16,
        "x-kubernetes-list-type": "set",
        "items": {"minLength": 1, "maxLength": 255, "pattern": PROXY_REPOSITORY},
    },
    ("Gateway", "name"): {"maxLength": 253},
    ("Gateway", "namespace"): {"maxLength": 63},
    ("Gateway", "selector"): {"minProperties": 1},
    ("Gateway", "serviceHost"): {"maxLength": 253},
    ("EdgeCertificate", "secretName"): {"maxLength": 253},
    ("S3", "endpoint"): {"minLength": 1, "pattern": "^https?://"},
    ("S3", "bucket"): {"minLength": 3, "maxLength": 63},
    ("S3CredentialsSecret", "name"): {"minLength": 1},
    ("NodeLabels", "labels"): {"maxProperties": 16, "additionalProperties": {"maxLength": 63}},
    ("Hami", "configMapNamespace"): {"minLength": 1},
    ("NodeSelector", "matchLabels"): {"maxProperties": 16, "additionalProperties": {"maxLength": 63}},
    ("NodeSelector", "matchExpressions"): {"maxItems": 16},
    ("SelectorRequirement", "key"): {"minLength": 1},
    ("SelectorRequirement", "values"): {"maxItems": 64, "items": {"maxLength": 63}},
}


def check(value: Any, constraints: Mapping[str, Any]) -> list[str]:
    """What ``value`` breaks of ``constraints`` (OpenAPI v3 keywords as the CRD spells them)."""
    problems: list[str] = []
    if isinstance(value, str):
        if "minLength" in constraints and len(value) < constraints["minLength"]:
            problems.append(f"should be at least {constraints['minLength']} chars long")
        if "maxLength" in constraints and len(value) > constraints["maxLength"]:
            problems.append(f"may not be more than {constraints['maxLength']} bytes")
        if "pattern" in constraints and not re.search(constraints["pattern"], value):
            problems.append(f"should match '{constraints['pattern']}'")
    elif isinstance(value, (list, tuple)):
        if "minItems" in constraints and len(value) < constraints["minItems"]:
            problems.append(f"should have at least {constraints['minItems']} items")
        if "maxItems" in constraints and len(value) > constraints["maxItems"]:
            problems.append(f"must have at most {constraints['maxItems']} items")
        if constraints.get("x-kubernetes-list-type") == "set":
            seen: set[Any] = set()
            for item in value:
                if item in seen:
                    problems.append(f"duplicate value {item!r}")
                seen.add(item)
        for index, item in enumerate(value):
            problems += [f"[{index}]: {p}" for p in check(item, constraints.get("items") or {})]
    elif isinstance(value, Mapping):
        if "minProperties" in constraints and len(value) < constraints["minProperties"]:
            problems.append(f"should have at least {constraints['minProperties']} properties")
        if "maxProperties" in constraints and len(value) > constraints["maxProperties"]:
            problems.append(f"must have at most {constraints['maxProperties']} properties")
        for key, item in value.items():
            problems += [f"[{key}]: {p}" for p in check(item, constraints.get("additionalProperties") or {})]
    return problems


# ---- the CEL rules (x-kubernetes-validations), one function per rule, named by its CRD message ----

SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
GPU_LABEL_PREFIXES = (
    "nvidia.com/",
    "feature.node.kubernetes.io/",
    "tenancy.dev/",
    "kubernetes.io/",
    "node.kubernetes.io/",
    "node-role.kubernetes.io/",
)

MSG_NAMESPACE_IMMUTABLE = "spec.namespace is immutable; create a new TenantPlatform instead"
MSG_NAMESPACE_SYSTEM = "spec.namespace must not be a system namespace"
MSG_ADDITIONAL_SYSTEM = "additionalNamespaces must not name a system namespace"
MSG_ADDITIONAL_REPEATS = "additionalNamespaces must not repeat spec.namespace"
MSG_NAMESPACE_IS_MESH = "spec.namespace must not be the mesh namespace"
MSG_ADDITIONAL_MESH = "additionalNamespaces must not include the mesh namespace"
MSG_S3_REQUIRED = "objectStore.s3 is required when objectStore.mode is S3"
MSG_REVISION_REQUIRED = "mesh.injection.revision is required when mesh.injection.mode is Revision"
MSG_DOMAIN_SINGLE_LABEL = (
    "spec.domain must have at least two labels; a single label is resolved through the pods' search domains "
    "(in-cluster names)"
)
MSG_DOMAIN_INTERNAL = (
    "spec.domain must not be a cluster-internal name (cluster.local, *.svc, *.arpa, localhost, kubernetes.default)"
)
MSG_DOMAIN_METADATA = (
    "spec.domain must not be a cloud instance-metadata name (metadata.google.internal, instance-data.ec2.internal, "
    "169.254.169.254, ...)"
)
MSG_DOMAIN_IP = "spec.domain must be a domain, not an IP address"
MSG_SUBJECT_NAMESPACE = "namespace is required for kind ServiceAccount and not allowed otherwise"
MSG_SUBJECT_SYSTEM = (
    "system: users and groups (system:authenticated, system:masters, ...) are never bound to the installer's roles"
)
MSG_NODE_SELECTOR_EMPTY = "a nodeSelector needs matchLabels or matchExpressions (an empty one would select every node)"
MSG_SELECTOR_VALUES = "In and NotIn need values; Exists and DoesNotExist take none"
MSG_TARGET_ONE_OF = "spec.target needs exactly one of kubeconfigSecret, clusterAPI, kamaji"
"""Checked by the model itself (api/models.Target), in admission mode and out."""
MSG_TARGET_IMMUTABLE = "spec.target is immutable; create a new TenantPlatform instead"
MSG_TARGET_ADDED_OR_REMOVED = "spec.target cannot be added or removed; create a new TenantPlatform instead"
MSG_GPU_LABEL_PREFIX = (
    "GPU node labels must not use the nvidia.com/, feature.node.kubernetes.io/, kubernetes.io/ or tenancy.dev/ prefixes"
)

MSG_GPU_SHARE_CORES = "gpu.share.coresPercent must be at most 100 per card (100 * cards)"
MSG_ISSUER_REF = "edgeCertificate.issuerRef is required when issuer is CertManager and not allowed otherwise"

MIRRORED = frozenset(
    {
        MSG_GPU_SHARE_CORES,
        MSG_ISSUER_REF,
        MSG_NAMESPACE_SYSTEM,
        MSG_ADDITIONAL_SYSTEM,
        MSG_ADDITIONAL_REPEATS,
        MSG_NAMESPACE_IS_MESH,
        MSG_ADDITIONAL_MESH,
        MSG_S3_REQUIRED,
        MSG_REVISION_REQUIRED,
        MSG_DOMAIN_SINGLE_LABEL,
        MSG_DOMAIN_INTERNAL,
        MSG_DOMAIN_METADATA,
        MSG_DOMAIN_IP,
        MSG_SUBJECT_NAMESPACE,
        MSG_SUBJECT_SYSTEM,
        MSG_GPU_LABEL_PREFIX,
        MSG_NODE_SELECTOR_EMPTY,
        MSG_SELECTOR_VALUES,
        MSG_TARGET_ONE_OF,
    }
)
"""Every CEL rule's message that admission mode checks."""
TRANSITION_ONLY = frozenset({MSG_NAMESPACE_IMMUTABLE, MSG_TARGET_IMMUTABLE, MSG_TARGET_ADDED_OR_REMOVED})
"""Rules on ``oldSelf``: a file has no stored version to compare with, so only the API server checks them."""


def is_system_namespace(name: str) -> bool:
    return name in SYSTEM_NAMESPACES or name.startswith("kube-")


def namespace_rules(name: str) -> list[str]:
    return [MSG_NAMESPACE_SYSTEM] if is_system_namespace(name) else []


def additional_namespace_rules(names: Sequence[str]) -> list[str]:
    return [MSG_ADDITIONAL_SYSTEM] if any(is_system_namespace(n) for n in names) else []


def domain_rules(domain: str) -> list[str]:
    """The CEL rules of spec.domain, expression for expression."""
    found: list[str] = []
    if "." not in domain:
        found.append(MSG_DOMAIN_SINGLE_LABEL)
    if (
        any(domain == s or domain.endswith("." + s) for s in domains.CLUSTER_INTERNAL_SUFFIXES)
        or domain == "kubernetes.default"
        or domain.startswith("kubernetes.default.")
    ):
        found.append(MSG_DOMAIN_INTERNAL)
    if (
        any(domain == s or domain.endswith("." + s) for s in domains.METADATA_NAMES)
        or domain.startswith("instance-data.")
        or domain.startswith("metadata.google.")
        or re.search(r"^169[.-]254[.-]", domain)
    ):
        found.append(MSG_DOMAIN_METADATA)
    if re.search(r"^[0-9.]+$", domain):
        found.append(MSG_DOMAIN_IP)
    return found


def subject_rules(kind: str, name: str, namespace: str) -> list[str]:
    found: list[str] = []
    if (namespace != "") != (kind == "ServiceAccount"):
        found.append(MSG_SUBJECT_NAMESPACE)
    if name.startswith("system:"):
        found.append(MSG_SUBJECT_SYSTEM)
    return found


def node_selector_rules(match_labels: Mapping[str, str], match_expressions: Sequence[Any]) -> list[str]:
    return [MSG_NODE_SELECTOR_EMPTY] if not match_labels and not match_expressions else []


def selector_requirement_rules(operator: str, values: Sequence[str]) -> list[str]:
    wants_values = operator in ("In", "NotIn")
    return [MSG_SELECTOR_VALUES] if wants_values != bool(values) else []


def gpu_label_rules(labels: Mapping[str, str]) -> list[str]:
    return [MSG_GPU_LABEL_PREFIX] if any(k.startswith(GPU_LABEL_PREFIXES) for k in labels) else []


def gpu_share_rules(cards: int, cores_percent: int | None) -> list[str]:
    return [MSG_GPU_SHARE_CORES] if cores_percent is not None and cores_percent > 100 * cards else []


def edge_certificate_rules(issuer: str, *, has_issuer_ref: bool) -> list[str]:
    return [MSG_ISSUER_REF] if (issuer == "CertManager") != has_issuer_ref else []


def spec_rules(
    *,
    namespace: str,
    additional: Sequence[str],
    mesh_namespace: str,
    object_store_mode: str,
    has_s3: bool,
    injection_mode: str,
    revision: str,
) -> list[str]:
    """The CEL rules on spec itself (across fields)."""
    found: list[str] = []
    if namespace in additional:
        found.append(MSG_ADDITIONAL_REPEATS)
    if mesh_namespace == namespace:
        found.append(MSG_NAMESPACE_IS_MESH)
    if mesh_namespace in additional:
        found.append(MSG_ADDITIONAL_MESH)
    if object_store_mode == "S3" and not has_s3:
        found.append(MSG_S3_REQUIRED)
    if injection_mode == "Revision" and revision == "":
        found.append(MSG_REVISION_REQUIRED)
    return found


def metadata_name_rules(name: Any) -> list[str]:
    """metadata.name: the CRD's schema (a DNS-1123 label, at most 63 characters)."""
    if not isinstance(name, str) or not name:
        return ["metadata.name is required"]
    return [f"metadata.name: {p}" for p in check(name, {"maxLength": 63, "pattern": DNS1123_LABEL})]
