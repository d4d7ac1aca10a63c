"""Names shared by every layer: API coordinates, labels, condition types and reasons.

Reasons are CamelCase, condition types are PascalCase states. Every type and reason set here is
explained in docs/status.md; add it there when you add it here.
"""

from __future__ import annotations

from typing import Final

GROUP: Final = "tenancy.dev"
VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION}"
KIND: Final = "TenantPlatform"
PLURAL: Final = "tenantplatforms"
SHORT_NAME: Final = "tp"
CRD_NAME: Final = f"{PLURAL}.{GROUP}"

# Server-side apply field manager for every write the operator makes.
FIELD_MANAGER: Final = "tenant-platform-operator"

# Labels every child carries. Children never copy the CR's own labels.
LABEL_MANAGED_BY: Final = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE: Final = "tenant-platform-operator"
LABEL_PLATFORM: Final = f"{GROUP}/tenant-platform"
# Which concern (step) owns a child, so prune lists only its own kinds.
LABEL_COMPONENT: Final = f"{GROUP}/component"

# Annotations.
ANNOTATION_PAUSED: Final = f"{GROUP}/paused"
# Set by an admin on an object prepared by hand (a namespace, the checklist's Gateway): the
# platform named may take it over (docs/migration.md).
ANNOTATION_ADOPTABLE: Final = f"{GROUP}/adoptable-by"
# Hash of the intent last applied to a child; a matching hash plus a matching live object means
# the apply would be a no-op, so no write is sent (no-op resyncs perform zero writes).
ANNOTATION_APPLIED_HASH: Final = f"{GROUP}/applied-hash"
# On shared objects we cannot own (namespaces we adopted, nodes): the label keys we set.
ANNOTATION_OWNED_LABELS_PREFIX: Final = f"{GROUP}/owned-labels."

FINALIZER: Final = f"{GROUP}/finalizer"
KOPF_ANNOTATION_PREFIX: Final = f"{GROUP}"

# Condition types.
READY: Final = "Ready"
RECONCILING: Final = "Reconciling"
STALLED: Final = "Stalled"
NAMESPACES_READY: Final = "NamespacesReady"
INSTALLER_READY: Final = "InstallerReady"
POD_GUARD_READY: Final = "PodGuardReady"
MESH_READY: Final = "MeshReady"
GATEWAY_READY: Final = "GatewayReady"
EDGE_CERTIFICATE_READY: Final = "EdgeCertificateReady"
DNS_READY: Final = "DNSReady"
STORAGE_READY: Final = "StorageReady"
PULL_SECRETS_READY: Final = "PullSecretsReady"
OBJECT_STORE_READY: Final = "ObjectStoreReady"
GPU_READY: Final = "GPUReady"
GPU_SHARE_READY: Final = "GPUShareReady"
# Only with spec.target (docs/fleet.md): whether the target cluster was reached this pass.
TARGET_REACHABLE: Final = "TargetReachable"

# Every concern condition, in the order status shows them. Ready summarises these.
CONCERN_TYPES: Final[tuple[str, ...]] = (
    NAMESPACES_READY,
    INSTALLER_READY,
    POD_GUARD_READY,
    MESH_READY,
    GATEWAY_READY,
    EDGE_CERTIFICATE_READY,
    DNS_READY,
    STORAGE_READY,
    PULL_SECRETS_READY,
    OBJECT_STORE_READY,
    GPU_SHARE_READY,
    GPU_READY,
)
SUMMARY_TYPES: Final[tuple[str, ...]] = (READY, RECONCILING, STALLED)

# Condition reasons live in api/reasons.py, one class per condition type.

# spec.target (docs/fleet.md): the kubeconfig Secret conventions of Cluster API and Kamaji.
CLUSTER_API_KUBECONFIG_SUFFIX: Final = "-kubeconfig"
CLUSTER_API_KUBECONFIG_KEY: Final = "value"
KAMAJI_KUBECONFIG_SUFFIX: Final = "-admin-kubeconfig"
KAMAJI_KUBECONFIG_KEY: Final = "admin.conf"
# The oldest target cluster the operator prepares (ValidatingAdmissionPolicy v1 is GA in 1.30).
MIN_TARGET_VERSION: Final = (1, 30)
