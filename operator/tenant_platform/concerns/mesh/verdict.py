"""PURE decisions of the mesh step (MeshReady): is Istio in sidecar mode usable, and which style.

``evaluate`` turns what concerns/mesh/step.py read into the condition and the recorded
``sidecarStyle``. Problems are collected in this order and the first one names the reason:
istiod missing (or not at the requested revision), Istio kinds not served, the installer may not
create them, the tenant namespace enrolled in ambient mode, the sidecar style not known (the pod
guard denying the injected probe pod is named as such: the guard, not the style, is then what to
fix). The style
is recorded as given for ``Native``/``Classic``; for ``Auto`` it is read from the dry-run pod
admission returned (``probe_pod``): an ``istio-proxy`` init container with ``restartPolicy: Always``
is Native, an ``istio-proxy`` container is Classic, anything else Unknown (never guessed).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from tenant_platform.api import constants, reasons
from tenant_platform.api.models import TenantPlatform
from tenant_platform.api.status.mesh import SidecarStyle
from tenant_platform.api.status.recorded import Recorded
from tenant_platform.core import conditions
from tenant_platform.core.identities import guard_names, service_account_user
from tenant_platform.core.verdict import Verdict

Obj = dict[str, Any]

COMPONENT: Final = "mesh"
PROXY_CONTAINER: Final = "istio-proxy"
PROBE_IMAGE: Final = "registry.k8s.io/pause:3.10.1"
PROBE_NAME_PREFIX: Final = "tenant-platform-sidecar-probe-"
AMBIENT_LABEL: Final = "istio.io/dataplane-mode"
# Come back soon while the tenant namespace (needed for the Auto probe) does not exist yet.
NAMESPACE_REQUEUE_SECONDS: Final = 10.0

# (apiVersion, kind, plural) the platform writes; all must be served.
ISTIO_KINDS: Final[tuple[tuple[str, str, str], ...]] = (
    ("networking.istio.io/v1", "Gateway", "gateways"),
    ("networking.istio.io/v1", "VirtualService", "virtualservices"),
    ("networking.istio.io/v1", "DestinationRule", "destinationrules"),
    ("networking.istio.io/v1alpha3", "EnvoyFilter", "envoyfilters"),
    ("security.istio.io/v1", "AuthorizationPolicy", "authorizationpolicies"),
    ("security.istio.io/v1", "PeerAuthentication", "peerauthentications"),
)
# The kinds the installer itself creates in the tenant namespace (the Gateway is ours).
INSTALLER_KINDS: Final = tuple(k for k in ISTIO_KINDS if k[1] != "Gateway")

NATIVE: Final = "Native"
CLASSIC: Final = "Classic"
UNKNOWN: Final = "Unknown"

Problem = tuple[reasons.Mesh, str]


@dataclass(frozen=True)
class StyleProbe:
    """The ``sidecarStyle: Auto`` dry run: the pod as admission returned it, or why it was rejected."""

    returned: Obj | None = None
    rejected: str = ""


@dataclass(frozen=True)
class MeshFacts:
    """What the mesh step read (concerns/mesh/step.py ``gather``)."""

    deployments: tuple[Obj, ...] = ()
    """The Deployments in ``spec.mesh.namespace``."""
    served: Mapping[str, frozenset[str]] = field(default_factory=dict)
    """Kinds each Istio apiVersion serves (empty when the group version is not served)."""
    cannot_create: tuple[str, ...] = ()
    """``plural.group`` of the installer kinds the installer identity may not create."""
    namespace_labels: Mapping[str, str] | None = None
    """The tenant namespace's labels; None when it does not exist."""
    probe: StyleProbe | None = None
    """The dry-run pod's answer (only for ``sidecarStyle: Auto`` with the namespace present)."""


def probe_pod(namespace: str) -> Obj:
    """The dry-run pod: minimal and restricted-compliant, so admission has nothing to object to."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": PROBE_NAME_PREFIX,
            "namespace": namespace,
            "labels": {constants.LABEL_MANAGED_BY: constants.MANAGED_BY_VALUE, constants.LABEL_COMPONENT: COMPONENT},
        },
        "spec": {
            "automountServiceAccountToken": False,
            "securityContext": {"runAsNonRoot": True, "runAsUser": 65532, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [
                {
                    "name": "probe",
                    "image": PROBE_IMAGE,
                    "securityContext": {
                        "allowPrivilegeEscalation": False,
                        "capabilities": {"drop": ["ALL"]},
                        "readOnlyRootFilesystem": True,
                    },
                }
            ],
        },
    }


def sidecar_style_of(pod: Obj) -> SidecarStyle:
    """Native, Classic or Unknown from a pod as admission returned it."""
    spec = pod.get("spec") or {}
    for container in spec.get("initContainers") or []:
        if container.get("name") == PROXY_CONTAINER and container.get("restartPolicy") == "Always":
            return NATIVE
    for container in spec.get("containers") or []:
        if container.get("name") == PROXY_CONTAINER:
            return CLASSIC
    return UNKNOWN


def evaluate(platform: TenantPlatform, facts: MeshFacts) -> Verdict:
    """MeshReady and the recorded ``sidecarStyle``."""
    spec = platform.spec
    problems = [*_istiod(platform, facts), *_kinds(facts), *_installer(platform, facts), *_ambient(platform, facts)]
    style, style_problem, note = _style(platform, facts)
    if style_problem:
        problems.append(style_problem)
    recorded = Recorded(sidecar_style=style)
    type_ = constants.MESH_READY
    if problems:
        reason = problems[0][0]
        waiting = reason == reasons.Mesh.NAMESPACE_MISSING
        return Verdict(
            [conditions.false(type_, reason, "; ".join(text for _, text in problems) + ".")],
            recorded=recorded,
            progressing=waiting,
            requeue_after=NAMESPACE_REQUEUE_SECONDS if waiting else None,
        )
    message = (
        f"istiod runs in {spec.mesh.namespace}, the Istio kinds the platform writes are served, the installer "
        f"may create them in {spec.namespace}, and the sidecar style is {style}"
    )
    message += f" ({note})." if note else "."
    return Verdict([conditions.true(type_, reasons.Mesh.MESH_AVAILABLE, message)], recorded=recorded)


def _istiod(platform: TenantPlatform, facts: MeshFacts) -> list[Problem]:
    mesh = platform.spec.mesh
    istiod = [
        d
        for d in facts.deployments
        if (d["metadata"].get("labels") or {}).get("app") == "istiod" or d["metadata"]["name"].startswith("istiod")
    ]
    if not istiod:
        return [
            (
                reasons.Mesh.ISTIOD_NOT_FOUND,
                f"no istiod Deployment (labelled app=istiod or named istiod*) in namespace {mesh.namespace}; "
                "install Istio in sidecar mode or set spec.mesh.namespace",
            )
        ]
    if mesh.injection.mode == "Revision" and mesh.injection.revision:
        revisions = {(d["metadata"].get("labels") or {}).get("istio.io/rev", "default") for d in istiod}
        if mesh.injection.revision not in revisions:
            return [
                (
                    reasons.Mesh.REVISION_NOT_FOUND,
                    f"no istiod in {mesh.namespace} has revision {mesh.injection.revision} (found: "
                    f"{', '.join(sorted(revisions))}); fix spec.mesh.injection.revision",
                )
            ]
    return []


def _kinds(facts: MeshFacts) -> list[Problem]:
    missing = [
        f"{kind} ({api_version})"
        for api_version, kind, _plural in ISTIO_KINDS
        if kind not in facts.served.get(api_version, frozenset())
    ]
    if not missing:
        return []
    return [
        (
            reasons.Mesh.ISTIO_KINDS_NOT_SERVED,
            f"the API server does not serve {', '.join(missing)}; install or upgrade Istio's CRDs",
        )
    ]


def _installer(platform: TenantPlatform, facts: MeshFacts) -> list[Problem]:
    if not facts.cannot_create:
        return []
    user, _ = service_account_user(platform)
    return [
        (
            reasons.Mesh.INSTALLER_CANNOT_CREATE_ISTIO_KINDS,
            f"{user} may not create {', '.join(facts.cannot_create)} in namespace {platform.spec.namespace} "
            "(see InstallerReady)",
        )
    ]


def _ambient(platform: TenantPlatform, facts: MeshFacts) -> list[Problem]:
    if (facts.namespace_labels or {}).get(AMBIENT_LABEL) != "ambient":
        return []
    return [
        (
            reasons.Mesh.AMBIENT_NOT_SUPPORTED,
            f"namespace {platform.spec.namespace} is labelled {AMBIENT_LABEL}=ambient; the platform needs sidecar "
            "mode, remove that label",
        )
    ]


def _style(platform: TenantPlatform, facts: MeshFacts) -> tuple[SidecarStyle, Problem | None, str]:
    """(style, problem or None, note)."""
    spec = platform.spec
    if spec.mesh.sidecar_style != "Auto":
        return spec.mesh.sidecar_style, None, "as set in spec.mesh.sidecarStyle"
    if facts.namespace_labels is None or facts.probe is None:
        return (
            UNKNOWN,
            (
                reasons.Mesh.NAMESPACE_MISSING,
                f"sidecarStyle Auto is detected with a dry-run pod in namespace {spec.namespace}, which does "
                "not exist yet",
            ),
            "",
        )
    denial = _guard_denial(platform, facts.probe.rejected)
    if denial:
        return (
            UNKNOWN,
            (
                reasons.Mesh.INJECTED_POD_DENIED,
                f"the pod guard denied the dry-run pod as the sidecar injector returned it in namespace "
                f"{spec.namespace}, so every injected workload there would be denied too: {denial} (see "
                "PodGuardReady; usually the injector's proxy image repository is missing from "
                "spec.podGuard.proxyImageRepositories)",
            ),
            "",
        )
    if facts.probe.returned is None:
        return (
            UNKNOWN,
            (
                reasons.Mesh.SIDECAR_STYLE_UNKNOWN,
                f"the dry-run pod used to detect the sidecar style was rejected ({facts.probe.rejected}); set "
                "spec.mesh.sidecarStyle to Native or Classic",
            ),
            "",
        )
    style = sidecar_style_of(facts.probe.returned)
    if style == UNKNOWN:
        return (
            UNKNOWN,
            (
                reasons.Mesh.SIDECAR_STYLE_UNKNOWN,
                f"a dry-run pod in namespace {spec.namespace} came back without an {PROXY_CONTAINER} container: "
                "no sidecar injector acted on it (no injection webhook, or the namespace is not labelled for "
                "injection), so the style cannot be detected; set spec.mesh.sidecarStyle to Native or Classic "
                "explicitly",
            ),
            "",
        )
    return style, None, "detected with a dry-run pod"


def _guard_denial(platform: TenantPlatform, rejected: str) -> str:
    """The guard's own reasons when ``rejected`` is the platform's pod guard denying the probe pod."""
    if not rejected:
        return ""
    policies = (
        guard_names("Deny").pod_guard,
        guard_names("Deny", platform.name).pod_guard,
    )
    if not any(f"ValidatingAdmissionPolicy '{policy}'" in rejected for policy in policies):
        return ""
    return rejected.rpartition("denied request: ")[2] or rejected
