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
