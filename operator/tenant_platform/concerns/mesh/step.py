"""MeshReady: Istio in sidecar mode is present and usable by the installer; the sidecar style.

Writes nothing. ``gather`` reads:
- the Deployments in ``spec.mesh.namespace`` (istiod: labelled ``app=istiod`` or named
  ``istiod*``; for ``injection.mode: Revision``, one labelled ``istio.io/rev=<revision>``);
- which of the Istio kinds the platform writes are served (Gateway, VirtualService,
  DestinationRule, EnvoyFilter, AuthorizationPolicy, PeerAuthentication);
- whether the installer ServiceAccount may create them in the tenant namespace
  (SubjectAccessReviews);
- the tenant namespace's labels (ambient mode is not supported: the platform needs sidecars);
- for ``sidecarStyle: Auto``, a server-side dry-run pod in the tenant namespace as injection
  returned it.

concerns/mesh/verdict.py ``evaluate`` (pure) decides the condition and the recorded ``sidecarStyle``
(``Unknown`` with reason SidecarStyleUnknown when nothing was injected: we never guess). An API
error escaping ``gather`` becomes the condition through ``action`` (reconcile/pipeline.py ``run_step``).
"""

from __future__ import annotations

from tenant_platform.api import constants
from tenant_platform.api.models import TenantPlatform
from tenant_platform.concerns.mesh import verdict
from tenant_platform.concerns.mesh.verdict import MeshFacts, StyleProbe
from tenant_platform.core.identities import service_account_user
from tenant_platform.core.verdict import Verdict
from tenant_platform.framework.base import CleanupResult, StepContext
from tenant_platform.framework.contract import Action, Given, Step
from tenant_platform.kube import errors
from tenant_platform.kube.client import Kube, Obj


def gather(ctx: StepContext) -> MeshFacts:
    """Everything the mesh check reads (a dry-run pod for ``sidecarStyle: Auto`` included)."""
    spec = ctx.platform.spec
    kube = ctx.kube
    deployments = kube.list("apps/v1", "Deployment", spec.mesh.namespace)
    served = _served_kinds(kube)
    user, groups = service_account_user(ctx.platform)
    cannot_create: list[str] = []
    for api_version, _kind, plural in verdict.INSTALLER_KINDS:
        group = api_version.split("/", 1)[0]
        allowed, _ = kube.can_i(
            user=user, groups=groups, verb="create", resource=plural, group=group, namespace=spec.namespace
        )
        if not allowed:
            cannot_create.append(f"{plural}.{group}")
    namespace = kube.get("v1", "Namespace", spec.namespace)
    labels = None if namespace is None else dict(namespace.get("metadata", {}).get("labels") or {})
    probe = None
    if spec.mesh.sidecar_style == "Auto" and namespace is not None:
        try:
            probe = StyleProbe(returned=kube.create(verdict.probe_pod(spec.namespace), dry_run=True))
        except (errors.Forbidden, errors.Invalid) as exc:
            probe = StyleProbe(rejected=exc.message or str(exc))
    return MeshFacts(
        deployments=tuple(deployments),
        served=served,
        cannot_create=tuple(cannot_create),
        namespace_labels=labels,
        probe=probe,
    )


def _served_kinds(kube: Kube) -> dict[str, frozenset[str]]:
    """The kinds each Istio apiVersion serves, from API discovery (subresources left out)."""
    served: dict[str, frozenset[str]] = {}
    for api_version, _kind, _plural in verdict.ISTIO_KINDS:
        if api_version in served:
            continue
        try:
            doc = kube.request("GET", f"/apis/{api_version}")
        except errors.NotFound:
            served[api_version] = frozenset()
            continue
        served[api_version] = frozenset(
            str(r.get("kind")) for r in doc.get("resources", []) if "/" not in str(r.get("name", ""))
        )
    return served


class MeshStep:
    name = verdict.COMPONENT
    condition_types: tuple[str, ...] = (constants.MESH_READY,)

    def render(self, platform: TenantPlatform) -> list[Obj]:
        return []

    def cleanup(self, ctx: StepContext) -> CleanupResult:
        return CleanupResult(True)

    def action(self, platform: TenantPlatform) -> Action:
        return Action("check the Istio mesh")

    def gather(self, ctx: StepContext) -> MeshFacts:
        return gather(ctx)

    def evaluate(self, given: Given, facts: MeshFacts) -> Verdict:
        return verdict.evaluate(given.platform, facts)

    def apply(self, ctx: StepContext, facts: MeshFacts, verdict: Verdict) -> Verdict:
        """Nothing to write: the mesh is only checked."""
        return verdict


STEP: Step[MeshFacts] = MeshStep()
