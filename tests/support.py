"""Small helpers shared by the integration and e2e tests.

``wait_for`` is tenant_platform.testing.wait's, the one polling helper (the benchmarks and the
demo use it too).
"""

from __future__ import annotations

from tenant_platform.kube.client import Kube
from tenant_platform.testing.wait import wait_for

__all__ = ["create_namespace", "wait_for"]


def create_namespace(kube: Kube, name: str, *, wait_sa: bool = False, adoptable_by: str | None = None) -> None:
    """Create a namespace (if missing); with ``wait_sa``, wait for its default ServiceAccount,
    which pods need to be admitted. ``adoptable_by``: opt it in, as an admin does, for that
    TenantPlatform to adopt (annotation ``tenancy.dev/adoptable-by``)."""
    if kube.get("v1", "Namespace", name) is None:
        meta: dict[str, object] = {"name": name}
        if adoptable_by:
            meta["annotations"] = {"tenancy.dev/adoptable-by": adoptable_by}
        kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": meta})
    if wait_sa:
        wait_for(lambda: kube.get("v1", "ServiceAccount", "default", name), f"ServiceAccount {name}/default")


def shared_label_holders(kube: Kube) -> dict[str, dict[str, set[str]]]:
    """Node -> our node-label value managers (``tenant-platform-operator/labels/...``) -> the keys
    each owns there (from managedFields)."""
    prefix = "tenant-platform-operator/labels/"
    out: dict[str, dict[str, set[str]]] = {}
    for node in kube.list("v1", "Node"):
        for entry in node["metadata"].get("managedFields") or []:
            manager = str(entry.get("manager") or "")
            labels = ((entry.get("fieldsV1") or {}).get("f:metadata") or {}).get("f:labels") or {}
            keys = {k[2:] for k in labels if k.startswith("f:")}
            if manager.startswith(prefix) and keys:
                out.setdefault(node["metadata"]["name"], {}).setdefault(manager, set()).update(keys)
    return out


def live_label_wanters(kube: Kube, *, besides: str = "") -> list[str]:
    """TenantPlatforms in the API server, not being deleted, that want node labels (the default)."""
    found = []
    for body in kube.list("tenancy.dev/v1alpha1", "TenantPlatform"):
        meta, spec = body["metadata"], body.get("spec") or {}
        labels = ((spec.get("gpu") or {}).get("nodeLabels") or {}).get("enabled", True)
        if meta["name"] != besides and not meta.get("deletionTimestamp") and labels:
            found.append(meta["name"])
    return found
