"""Namespace intents: our labels (sidecar injection, Pod Security warn/audit, never enforce), and
the empty intent that releases a namespace."""

from __future__ import annotations

from tenant_platform.api import constants
from tenant_platform.api.models import TenantPlatform
from tenant_platform.core.identities import NAMESPACE_CREATED_ANNOTATION

PSA_PREFIX = "pod-security.kubernetes.io/"
INJECTION_LABEL = "istio-injection"
REVISION_LABEL = "istio.io/rev"
# Set on namespaces the operator created (not adopted): only those may ever be deleted by it.
ANNOTATION_CREATED = NAMESPACE_CREATED_ANNOTATION
# Set by an admin on an existing namespace to let the named TenantPlatform adopt it.
ANNOTATION_ADOPTABLE = constants.ANNOTATION_ADOPTABLE


def namespace_labels(platform: TenantPlatform) -> dict[str, str]:
    """The labels every platform namespace carries (ours; applied with server-side apply)."""
    spec = platform.spec
    labels = {
        constants.LABEL_MANAGED_BY: constants.MANAGED_BY_VALUE,
        constants.LABEL_PLATFORM: platform.name,
        f"{PSA_PREFIX}warn": spec.pod_security.warn,
        f"{PSA_PREFIX}warn-version": "latest",
        f"{PSA_PREFIX}audit": spec.pod_security.audit,
        f"{PSA_PREFIX}audit-version": "latest",
    }
    if spec.mesh.injection.mode == "Revision":
        labels[REVISION_LABEL] = spec.mesh.injection.revision
    else:
        labels[INJECTION_LABEL] = "enabled"
    return dict(sorted(labels.items()))


def render_namespace(platform: TenantPlatform, name: str, *, created: bool) -> dict[str, object]:
    """The namespace intent. ``created`` marks one the operator made (deletable under Delete)."""
    meta: dict[str, object] = {"name": name, "labels": namespace_labels(platform)}
    if created:
        meta["annotations"] = {ANNOTATION_CREATED: "true"}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}


def render_namespaces(platform: TenantPlatform) -> list[dict[str, object]]:
    """The namespace intents `tenant-platform render` prints: labels only, never ANNOTATION_CREATED.

    Without a cluster, render cannot know which namespaces exist; the annotation would claim an
    existing namespace (and its data) as the operator's to delete under deletionPolicy Delete if
    someone applied the output by hand. The operator adds it itself, only to a namespace it creates.
    """
    return [render_namespace(platform, ns, created=False) for ns in platform.spec.all_namespaces]


def release_intent(name: str) -> dict[str, object]:
    """An SSA intent that owns nothing: applying it removes every label only we set."""
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
