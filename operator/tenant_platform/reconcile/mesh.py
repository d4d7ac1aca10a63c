"""MeshReady: Istio in sidecar mode is present and usable by the installer; the sidecar style.

Verifies (writes nothing):
- istiod runs in ``spec.mesh.namespace``: a Deployment labelled ``app=istiod`` or named
  ``istiod*`` (for ``injection.mode: Revision``, one labelled ``istio.io/rev=<revision>``);
- the Istio kinds the platform writes are served (Gateway, VirtualService, DestinationRule,
  EnvoyFilter, AuthorizationPolicy, PeerAuthentication);
- the installer ServiceAccount may create them in the tenant namespace (SubjectAccessReviews);
- the tenant namespace is not enrolled in ambient mode (the platform needs sidecars).

Records ``sidecarStyle``. ``Native``/``Classic`` given in the spec are recorded as given. ``Auto``
creates a server-side dry-run pod in the tenant namespace and reads what injection returned: an
``istio-proxy`` init container with ``restartPolicy: Always`` is Native, an ``istio-proxy``
container is Classic. When nothing was injected (no injector webhook) the style is recorded as
``Unknown`` and MeshReady is False with reason SidecarStyleUnknown: we never guess.
"""

from __future__ import annotations

from typing import Any

from tenant_platform.api import constants
from tenant_platform.api.models import TenantPlatform
from tenant_platform.kube import errors
from tenant_platform.kube.client import Obj
from tenant_platform.reconcile.base import CleanupResult, StepContext, StepResult, api_error_condition
from tenant_platform.render import installer as render_installer
from tenant_platform.status import conditions

COMPONENT = "mesh"
PROXY_CONTAINER = "istio-proxy"
PROBE_IMAGE = "registry.k8s.io/pause:3.10.1"
PROBE_NAME_PREFIX = "tenant-platform-sidecar-probe-"

# (apiVersion, kind, plural) the platform writes; all must be served.
ISTIO_KINDS: tuple[tuple[str, str, str], ...] = (
    ("networking.istio.io/v1", "Gateway", "gateways"),
    ("networking.istio.io/v1", "VirtualService", "virtualservices"),
    ("networking.istio.io/v1", "DestinationRule", "destinationrules"),
    ("networking.istio.io/v1alpha3", "EnvoyFilter", "envoyfilters"),
    ("security.istio.io/v1", "AuthorizationPolicy", "authorizationpolicies"),
    ("security.istio.io/v1", "PeerAuthentication", "peerauthentications"),
)
# The kinds the installer itself creates in the tenant namespace (the Gateway is ours).
INSTALLER_KINDS = tuple(k for k in ISTIO_KINDS if k[1] != "Gateway")

REASON_READY = "MeshAvailable"
REASON_ISTIOD_NOT_FOUND = "IstiodNotFound"
REASON_REVISION_NOT_FOUND = "RevisionNotFound"
REASON_KINDS_NOT_SERVED = "IstioKindsNotServed"
REASON_INSTALLER_CANNOT_CREATE = "InstallerCannotCreateIstioKinds"
REASON_AMBIENT = "AmbientNotSupported"
REASON_STYLE_UNKNOWN = "SidecarStyleUnknown"
REASON_NAMESPACE_MISSING = "NamespaceMissing"

NATIVE = "Native"
CLASSIC = "Classic"
UNKNOWN = "Unknown"


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


def sidecar_style_of(pod: Obj) -> str:
    """Native, Classic or Unknown from a pod as admission returned it."""
    spec = pod.get("spec") or {}
    for container in spec.get("initContainers") or []:
        if container.get("name") == PROXY_CONTAINER and container.get("restartPolicy") == "Always":
            return NATIVE
    for container in spec.get("containers") or []:
        if container.get("name") == PROXY_CONTAINER:
            return CLASSIC
    return UNKNOWN


class MeshStep:
    name = COMPONENT
    condition_types: tuple[str, ...] = (constants.MESH_READY,)

    def render(self, platform: TenantPlatform) -> list[Obj]:
        return []

    def cleanup(self, ctx: StepContext) -> CleanupResult:
        return CleanupResult(True)

    def reconcile(self, ctx: StepContext) -> StepResult:
        type_ = constants.MESH_READY
        spec = ctx.platform.spec
        problems: list[tuple[str, str]] = []
        notes: list[str] = []
        try:
            problems += self._istiod(ctx)
            problems += self._kinds(ctx)
            problems += self._installer(ctx)
            namespace = ctx.kube.get("v1", "Namespace", spec.namespace)
            if namespace is not None:
                labels = namespace.get("metadata", {}).get("labels") or {}
                if labels.get("istio.io/dataplane-mode") == "ambient":
                    problems.append(
                        (
                            REASON_AMBIENT,
                            f"namespace {spec.namespace} is labelled istio.io/dataplane-mode=ambient; the platform "
                            "needs sidecar mode, remove that label",
                        )
                    )
            style, style_problem, style_note = self._style(ctx, namespace)
        except errors.KubeError as exc:
            return StepResult(conditions=[api_error_condition(type_, exc, "check the Istio mesh")], failed=True)
        if style_problem:
            problems.append(style_problem)
        if style_note:
            notes.append(style_note)
        recorded: dict[str, Any] = {"sidecarStyle": style}
        if problems:
            cond = conditions.false(type_, problems[0][0], "; ".join(text for _, text in problems) + ".")
            waiting = problems[0][0] == REASON_NAMESPACE_MISSING
            return StepResult(
                conditions=[cond], recorded=recorded, progressing=waiting, requeue_after=10.0 if waiting else None
            )
        message = (
            f"istiod runs in {spec.mesh.namespace}, the Istio kinds the platform writes are served, the installer "
            f"may create them in {spec.namespace}, and the sidecar style is {style}"
        )
        message += " (" + "; ".join(notes) + ")." if notes else "."
        return StepResult(conditions=[conditions.true(type_, REASON_READY, message)], recorded=recorded)

    # -- checks -----------------------------------------------------------------------------------

    def _istiod(self, ctx: StepContext) -> list[tuple[str, str]]:
        mesh = ctx.platform.spec.mesh
        deployments = ctx.kube.list("apps/v1", "Deployment", mesh.namespace)
        istiod = [
            d
            for d in deployments
            if (d["metadata"].get("labels") or {}).get("app") == "istiod" or d["metadata"]["name"].startswith("istiod")
        ]
        if not istiod:
            return [
                (
                    REASON_ISTIOD_NOT_FOUND,
                    f"no istiod Deployment (labelled app=istiod or named istiod*) in namespace {mesh.namespace}; "
                    "install Istio in sidecar mode or set spec.mesh.namespace",
                )
            ]
        if mesh.injection.mode == "Revision" and mesh.injection.revision:
            revisions = {(d["metadata"].get("labels") or {}).get("istio.io/rev", "default") for d in istiod}
            if mesh.injection.revision not in revisions:
                return [
                    (
                        REASON_REVISION_NOT_FOUND,
                        f"no istiod in {mesh.namespace} has revision {mesh.injection.revision} (found: "
                        f"{', '.join(sorted(revisions))}); fix spec.mesh.injection.revision",
                    )
                ]
        return []

    def _kinds(self, ctx: StepContext) -> list[tuple[str, str]]:
        missing: list[str] = []
        served_by: dict[str, set[str]] = {}
        for api_version, kind, _plural in ISTIO_KINDS:
            if api_version not in served_by:
                try:
                    doc = ctx.kube.request("GET", f"/apis/{api_version}")
                    served_by[api_version] = {
                        str(r.get("kind")) for r in doc.get("resources", []) if "/" not in str(r.get("name", ""))
                    }
                except errors.NotFound:
                    served_by[api_version] = set()
            if kind not in served_by[api_version]:
                missing.append(f"{kind} ({api_version})")
        if missing:
            return [
                (
                    REASON_KINDS_NOT_SERVED,
                    f"the API server does not serve {', '.join(missing)}; install or upgrade Istio's CRDs",
                )
            ]
        return []

    def _installer(self, ctx: StepContext) -> list[tuple[str, str]]:
        user, groups = render_installer.service_account_user(ctx.platform)
        namespace = ctx.platform.spec.namespace
        denied: list[str] = []
        for api_version, _kind, plural in INSTALLER_KINDS:
            group = api_version.split("/", 1)[0]
            allowed, _ = ctx.kube.can_i(
                user=user, groups=groups, verb="create", resource=plural, group=group, namespace=namespace
            )
            if not allowed:
                denied.append(f"{plural}.{group}")
        if denied:
            return [
                (
                    REASON_INSTALLER_CANNOT_CREATE,
                    f"{user} may not create {', '.join(denied)} in namespace {namespace} (see InstallerReady)",
                )
            ]
        return []

    def _style(self, ctx: StepContext, namespace: Obj | None) -> tuple[str, tuple[str, str] | None, str]:
        """(style, problem or None, note)."""
        spec = ctx.platform.spec
        if spec.mesh.sidecar_style != "Auto":
            return spec.mesh.sidecar_style, None, "as set in spec.mesh.sidecarStyle"
        if namespace is None:
            return (
                UNKNOWN,
                (
                    REASON_NAMESPACE_MISSING,
                    f"sidecarStyle Auto is detected with a dry-run pod in namespace {spec.namespace}, which does "
                    "not exist yet",
                ),
                "",
            )
        try:
            returned = ctx.kube.create(probe_pod(spec.namespace), dry_run=True)
        except (errors.Forbidden, errors.Invalid) as exc:
            return (
                UNKNOWN,
                (
                    REASON_STYLE_UNKNOWN,
                    f"the dry-run pod used to detect the sidecar style was rejected ({exc.message or exc}); set "
                    "spec.mesh.sidecarStyle to Native or Classic",
                ),
                "",
            )
        style = sidecar_style_of(returned)
        if style == UNKNOWN:
            return (
                UNKNOWN,
                (
                    REASON_STYLE_UNKNOWN,
                    f"a dry-run pod in namespace {spec.namespace} came back without an {PROXY_CONTAINER} container: "
                    "no sidecar injector acted on it (no injection webhook, or the namespace is not labelled for "
                    "injection), so the style cannot be detected; set spec.mesh.sidecarStyle to Native or Classic "
                    "explicitly",
                ),
                "",
            )
        return style, None, "detected with a dry-run pod"


STEP = MeshStep()
