"""Every condition reason, in one catalogue per condition type.

A step picks its reason from its own condition type's class (never by searching a message text);
``Common`` holds the reasons any concern may report (API trouble, conflicts, dry runs). Every
reason here is explained in docs/status.md (tests/unit/test_status_docs.py checks both ways).
Reasons are CamelCase (metav1.Condition); the values are part of the API: never rename one.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final

from tenant_platform.api import constants


class Common(StrEnum):
    """Reasons every concern may report."""

    NOT_YET_REPORTED = constants.REASON_NOT_YET_REPORTED
    FORBIDDEN = constants.REASON_FORBIDDEN
    API_ERROR = constants.REASON_API_ERROR
    CONFLICT = constants.REASON_CONFLICT
    INTERNAL_ERROR = "InternalError"
    DISABLED = constants.REASON_DISABLED


class Summary(StrEnum):
    """Ready, Reconciling and Stalled."""

    ALL_READY = constants.REASON_ALL_READY
    CONCERNS_NOT_READY = constants.REASON_CONCERNS_NOT_READY
    RECONCILED = constants.REASON_RECONCILED
    PROGRESSING = constants.REASON_PROGRESSING
    INVALID_SPEC = constants.REASON_INVALID_SPEC
    PAUSED = constants.REASON_PAUSED
    DELETION_BLOCKED = constants.REASON_DELETION_BLOCKED


# -- one class per concern condition type (filled by each step's owner) ----------------------------


class Namespaces(StrEnum):
    """NamespacesReady."""


class Installer(StrEnum):
    """InstallerReady."""


class PodGuard(StrEnum):
    """PodGuardReady."""

    ENFORCING = "Enforcing"
    WARN_ONLY = "WarnOnly"
    ENFORCEMENT_PENDING = "EnforcementPending"
    VIOLATING_PODS_FOUND = "ViolatingPodsFound"
    PODS_NOT_CHECKED = "PodsNotChecked"
    WAITING_FOR_POLICY = "WaitingForPolicy"
    TYPE_CHECKING_WARNINGS = "TypeCheckingWarnings"
    INVALID_PROXY_IMAGE_REPOSITORY = "InvalidProxyImageRepository"
    UNSUPPORTED_KUBERNETES_VERSION = "UnsupportedKubernetesVersion"
    # Dry run (`check`): the operator does it itself when it runs.
    WOULD_APPLY = "WouldApply"
    WOULD_ENFORCE = "WouldEnforce"


class Mesh(StrEnum):
    """MeshReady."""

    MESH_AVAILABLE = "MeshAvailable"
    ISTIOD_NOT_FOUND = "IstiodNotFound"
    REVISION_NOT_FOUND = "RevisionNotFound"
    ISTIO_KINDS_NOT_SERVED = "IstioKindsNotServed"
    INSTALLER_CANNOT_CREATE_ISTIO_KINDS = "InstallerCannotCreateIstioKinds"
    AMBIENT_NOT_SUPPORTED = "AmbientNotSupported"
    SIDECAR_STYLE_UNKNOWN = "SidecarStyleUnknown"
    NAMESPACE_MISSING = "NamespaceMissing"


class Gateway(StrEnum):
    """GatewayReady."""


class EdgeCertificate(StrEnum):
    """EdgeCertificateReady."""


class DNS(StrEnum):
    """DNSReady."""


class Storage(StrEnum):
    """StorageReady."""


class PullSecrets(StrEnum):
    """PullSecretsReady."""


class ObjectStore(StrEnum):
    """ObjectStoreReady."""


class GPU(StrEnum):
    """GPUReady."""


CATALOGUE: Final[dict[str, type[StrEnum]]] = {
    constants.NAMESPACES_READY: Namespaces,
    constants.INSTALLER_READY: Installer,
    constants.POD_GUARD_READY: PodGuard,
    constants.MESH_READY: Mesh,
    constants.GATEWAY_READY: Gateway,
    constants.EDGE_CERTIFICATE_READY: EdgeCertificate,
    constants.DNS_READY: DNS,
    constants.STORAGE_READY: Storage,
    constants.PULL_SECRETS_READY: PullSecrets,
    constants.OBJECT_STORE_READY: ObjectStore,
    constants.GPU_READY: GPU,
}


def allowed(type_: str) -> frozenset[str]:
    """Every reason a condition of ``type_`` may carry: its own catalogue plus ``Common``."""
    if type_ in constants.SUMMARY_TYPES:
        return frozenset(r.value for r in Summary)
    own = CATALOGUE.get(type_)
    return frozenset(r.value for r in Common) | frozenset(r.value for r in (own or ()))
