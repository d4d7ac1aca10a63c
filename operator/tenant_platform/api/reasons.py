"""Every condition reason, in one catalogue per condition type.

A step picks its reason from its own condition type's class (never by searching a message text);
``Common`` holds the reasons any concern may report (API trouble, conflicts, the step crashing),
``Summary`` those of Ready, Reconciling and Stalled. ``Reason`` is the union of these classes:
core/conditions.py accepts nothing else (mypy rejects a bare string; a reason outside
``allowed(type)`` raises at runtime). ``Event`` holds the reasons of the Kubernetes events the
operator posts, which are not condition reasons.

Every reason here is explained in docs/status.md (tests/unit/test_status_docs.py checks both ways).
Reasons are CamelCase (metav1.Condition); the values are part of the API: never rename one.
"""

from __future__ import annotations

from enum import StrEnum
from functools import cache
from typing import Final, TypeAlias, cast

from tenant_platform.api import constants


class Common(StrEnum):
    """Reasons every concern may report."""

    NOT_YET_REPORTED = "NotYetReported"
    FORBIDDEN = "Forbidden"
    API_ERROR = "APIError"
    CONFLICT = "Conflict"
    INTERNAL_ERROR = "InternalError"
    DISABLED = "Disabled"
    NAMESPACE_NOT_OWNED = "NamespaceNotOwned"
    """A write into a namespace this platform does not own was refused (framework/base.py NamespaceClaims)."""


class Summary(StrEnum):
    """Ready, Reconciling and Stalled."""

    ALL_READY = "AllConcernsReady"
    NOT_YET_REPORTED = "NotYetReported"
    CONCERNS_NOT_READY = "ConcernsNotReady"
    RECONCILED = "Reconciled"
    PROGRESSING = "Progressing"
    INVALID_SPEC = "InvalidSpec"
    PAUSED = "Paused"
    DELETION_BLOCKED = "DeletionBlocked"
    PROGRESS_DEADLINE_EXCEEDED = "ProgressDeadlineExceeded"
    """Reconciling=False: a concern stayed not ready past spec.progressDeadlineSeconds (Stalled=True)."""
    WITHIN_PROGRESS_DEADLINE = "WithinProgressDeadline"
    """Stalled=False: a concern is not ready, for less than spec.progressDeadlineSeconds so far."""


# -- one class per concern condition type (filled by each step's owner) ----------------------------


class Namespaces(StrEnum):
    """NamespacesReady (Conflict and APIError come from ``Common``)."""

    RECONCILED = "Reconciled"
    TERMINATING = "Terminating"
    WOULD_CREATE = "WouldCreate"
    PROTECTED = "ProtectedNamespace"
    NOT_ADOPTABLE = "NotAdoptable"


class Installer(StrEnum):
    """InstallerReady (Forbidden and APIError come from ``Common``)."""

    RECONCILED = "Reconciled"
    WOULD_CREATE = "WouldCreate"
    EXCESS_PERMISSIONS = "ExcessPermissions"
    PERMISSIONS_MISSING = "PermissionsMissing"


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
    INJECTED_POD_WOULD_BE_DENIED = "InjectedPodWouldBeDenied"
    UNSUPPORTED_KUBERNETES_VERSION = "UnsupportedKubernetesVersion"
    TAKEOVER_BLOCKED = "TakeoverBlocked"
    HAND_MADE_GUARD_REDUNDANT = "HandMadeGuardRedundant"
    HAND_MADE_GUARD_COVERS_MORE = "HandMadeGuardCoversMore"
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
    INJECTED_POD_DENIED = "InjectedPodDenied"
    NAMESPACE_MISSING = "NamespaceMissing"


class Gateway(StrEnum):
    """GatewayReady (docs/networking.md)."""

    PROGRAMMED = "Programmed"
    VERIFIED = "Verified"
    GATEWAY_KIND_NOT_SERVED = "GatewayKindNotServed"
    GATEWAY_SERVICE_NOT_FOUND = "GatewayServiceNotFound"
    WOULD_APPLY = "WouldApply"
    GATEWAY_NOT_FOUND = "GatewayNotFound"
    SELECTOR_MISMATCH = "SelectorMismatch"
    NO_HTTPS_SERVER = "NoHTTPSServer"
    HOSTS_MISS_DOMAIN = "HostsMissDomain"
    DOMAIN_OPEN_TO_ALL_NAMESPACES = "DomainOpenToAllNamespaces"
    NO_CREDENTIAL = "NoCredential"
    CREDENTIAL_MISMATCH = "CredentialMismatch"
    DOMAIN_HELD_BY_ANOTHER_PLATFORM = "DomainHeldByAnotherPlatform"


class EdgeCertificate(StrEnum):
    """EdgeCertificateReady (docs/networking.md). The analysis reasons, in the order one is chosen
    when several checks fail (concerns/edgecert/certs.py), then the step's own."""

    VALID = "Valid"
    SECRET_NOT_FOUND = "SecretNotFound"
    WRONG_SECRET_TYPE = "WrongSecretType"
    MALFORMED = "Malformed"
    KEY_MISMATCH = "KeyMismatch"
    CHAIN_INVALID = "ChainInvalid"
    DOMAIN_NOT_COVERED = "DomainNotCovered"
    NOT_YET_VALID = "NotYetValid"
    EXPIRED = "Expired"
    EXPIRING_SOON = "ExpiringSoon"
    WOULD_ISSUE = "WouldIssue"
    NAMESPACE_MISSING = "NamespaceMissing"
    CERTIFICATE_PENDING = "CertificatePending"
    """issuer CertManager: the Certificate is not Ready yet (cert-manager's reasons in the message)."""
    CERTIFICATE_FAILED = "CertificateFailed"
    """issuer CertManager: cert-manager failed to issue (its Issuing condition is False, Failed)."""
    CERT_MANAGER_NOT_INSTALLED = "CertManagerNotInstalled"
    """issuer CertManager: cert-manager.io/v1 Certificate is not served (no cert-manager CRDs)."""


class DNS(StrEnum):
    """DNSReady (docs/networking.md); also Common.CONFLICT and Common.DISABLED."""

    CONFIGURED = "Configured"
    REWRITE_FOUND = "RewriteFound"
    CONFLICTING_REWRITE = "ConflictingRewrite"
    RELOAD_PENDING = "ReloadPending"
    RELOAD_PLUGIN_MISSING = "ReloadPluginMissing"
    RESTART_REQUIRED = "RestartRequired"
    MANAGED_BY_DISTRIBUTION = "ManagedByDistribution"
    COREDNS_NOT_FOUND = "CoreDNSNotFound"
    COREFILE_UNSUPPORTED = "CorefileUnsupported"
    WOULD_CONFIGURE = "WouldConfigure"
    RESOLVES = "Resolves"
    RESOLVES_ELSEWHERE = "ResolvesElsewhere"
    DOES_NOT_RESOLVE = "DoesNotResolve"
    NOT_VERIFIABLE = "NotVerifiable"
    RESERVED_DOMAIN = "ReservedDomain"
    DOMAIN_HELD_BY_ANOTHER_PLATFORM = "DomainHeldByAnotherPlatform"


class Storage(StrEnum):
    """StorageReady."""

    STORAGE_CLASS_FOUND = "StorageClassFound"
    STORAGE_CLASS_NOT_FOUND = "StorageClassNotFound"
    NO_DEFAULT_STORAGE_CLASS = "NoDefaultStorageClass"
    AMBIGUOUS_DEFAULT_STORAGE_CLASS = "AmbiguousDefaultStorageClass"
    VERIFIED = "Verified"
    VERIFICATION_PENDING = "VerificationPending"
    VERIFICATION_FAILED = "VerificationFailed"
    VERIFICATION_TIMED_OUT = "VerificationTimedOut"


class PullSecrets(StrEnum):
    """PullSecretsReady."""

    NONE_REQUIRED = "NoneRequired"
    PULL_SECRETS_FOUND = "PullSecretsFound"
    PULL_SECRET_NOT_FOUND = "PullSecretNotFound"
    WRONG_SECRET_TYPE = "WrongSecretType"
    UNPARSEABLE = "Unparseable"
    NO_REGISTRIES = "NoRegistries"


class ObjectStore(StrEnum):
    """ObjectStoreReady."""

    BUILTIN = "Builtin"
    S3_CREDENTIALS_FOUND = "S3CredentialsFound"
    S3_SETTINGS_MISSING = "S3SettingsMissing"
    INVALID_ENDPOINT = "InvalidEndpoint"
    CREDENTIALS_SECRET_NOT_FOUND = "CredentialsSecretNotFound"
    CREDENTIALS_KEYS_MISSING = "CredentialsKeysMissing"


class GPU(StrEnum):
    """GPUReady (concerns/gpu/verdict.py; docs/gpu.md explains each and what to do)."""

    READY = "GPUNodesReady"
    NO_GPU_NODES = "NoGPUNodes"
    LABELS_PENDING = "LabelsPending"
    UNPARSEABLE = "UnparseableAnnotation"
    NO_DEVICES = "NoDevicesRegistered"
    NO_ALLOCATABLE = "NoAllocatableGPUs"
    UNHEALTHY = "UnhealthyCards"
    MALFORMED_LOCK = "MalformedNodeLock"
    SNAPSHOT_NOT_SYNCED = "SnapshotNotSynced"
    SNAPSHOT_STALE = "SnapshotStale"
    TAINTED = "GPUNodesTainted"
    DEVICE_PLUGIN_CONFLICT = "DevicePluginConflict"
    HAMI_SCHEDULER_NOT_READY = "HAMiSchedulerNotReady"
    HAMI_DEVICE_PLUGIN_NOT_READY = "HAMiDevicePluginNotReady"
    WEBHOOK_UNREACHABLE = "WebhookUnreachable"
    WEBHOOK_NOT_IN_PATH = "WebhookNotInPath"


class GPUShare(StrEnum):
    """GPUShareReady (concerns/gpushare/verdict.py; docs/gpu.md, "A GPU share per tenant")."""

    ENFORCED = "ShareEnforced"
    NO_SHARE = "NoShare"
    QUOTA_PENDING = "QuotaPending"
    ABOVE_SHARE = "UsageAboveShare"
    EXHAUSTED = "ShareExhausted"


class Target(StrEnum):
    """TargetReachable: only with ``spec.target`` (concerns/target/step.py; docs/fleet.md)."""

    REACHABLE = "Reachable"
    SECRET_NOT_FOUND = "SecretNotFound"
    KEY_MISSING = "KeyMissing"
    INVALID_KUBECONFIG = "InvalidKubeconfig"
    UNREACHABLE = "Unreachable"
    UNAUTHORIZED = "Unauthorized"
    VERSION_TOO_OLD = "VersionTooOld"


Reason: TypeAlias = (
    Common
    | Summary
    | Namespaces
    | Installer
    | PodGuard
    | Mesh
    | Gateway
    | EdgeCertificate
    | DNS
    | Storage
    | PullSecrets
    | ObjectStore
    | GPU
    | GPUShare
    | Target
)
"""A condition reason: a member of one of the classes above."""


class Event(StrEnum):
    """Reasons of the events posted on the TenantPlatform besides condition transitions (those carry
    the condition's reason)."""

    TOKEN_MINTED = "TokenMinted"
    CERTIFICATE_ISSUED = "CertificateIssued"
    POD_GUARD_ENFORCING = "PodGuardEnforcing"
    GATEWAY_APPLIED = "GatewayApplied"
    GATEWAY_HOSTS_OPEN = "GatewayHostsOpen"
    COREFILE_UPDATED = "CorefileUpdated"
    COREDNS_CUSTOM_UPDATED = "CorednsCustomUpdated"
    INSTALL_VALUES_NOT_WRITTEN = "InstallValuesNotWritten"


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
    constants.GPU_SHARE_READY: GPUShare,
    constants.TARGET_REACHABLE: Target,
}


@cache
def allowed(type_: str) -> frozenset[str]:
    """Every reason a condition of ``type_`` may carry: its own class plus ``Common``; ``Summary`` for
    Ready; for Reconciling and Stalled also any concern's reason (the one that blocks)."""
    if type_ == constants.READY:
        return frozenset(r.value for r in Summary)
    if type_ in constants.SUMMARY_TYPES:
        # Reconciling and Stalled name the concern that holds the platform back by its own reason
        # (StorageClassNotFound, ...): kstatus and Argo CD show that reason to the user.
        every: tuple[type[StrEnum], ...] = (Summary, Common, *CATALOGUE.values())
        return frozenset(r.value for cls in every for r in cls)
    own = CATALOGUE.get(type_)
    return frozenset(r.value for r in Common) | frozenset(r.value for r in (own or ()))


def member(value: str) -> Reason:
    """The catalogue member with this value (``Summary`` and ``Common`` first), for a reason read
    back from a concern condition; ``Common.INTERNAL_ERROR`` for a value the catalogue lacks."""
    classes: tuple[type[StrEnum], ...] = (Summary, Common, *CATALOGUE.values())
    for cls in classes:
        for reason in cls:
            if reason.value == value:
                return cast(Reason, reason)
    return Common.INTERNAL_ERROR
