"""What the fleet tests share: tenant API servers started beside the session's control plane,
kubeconfig Secrets in the management cluster, and one pass of a platform read back."""

from __future__ import annotations

import base64
import contextlib
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from tenant_platform import reconcile
from tenant_platform.api import constants
from tenant_platform.config import Settings
from tenant_platform.kube.client import Kube
from tenant_platform.testing import seed
from tenant_platform.testing.controlplane import ControlPlane
from tenant_platform.testing.kubelet import StorageKubelet
from tenant_platform.testing.tenants import TenantAPIServer

SETTINGS = Settings(drift_interval=30)


@contextlib.contextmanager
def tenant_servers(
    seeded: ControlPlane, crd: Kube, names: tuple[str, ...], *, secrets_namespace: str, controller_manager: bool = False
) -> Iterator[dict[str, TenantAPIServer]]:
    """Seeded tenant API servers sharing the session's etcd, and the namespace their kubeconfig
    Secrets go to in the management cluster; stopped on exit."""
    started: dict[str, TenantAPIServer] = {}
    kubelets: list[StorageKubelet] = []
    try:
        for name in names:
            started[name] = TenantAPIServer(seeded, name, controller_manager=controller_manager).start()
            seed.seed_cluster(started[name].kubeconfig_path)
            kubelets.append(StorageKubelet.for_kubeconfig(str(started[name].kubeconfig_path)).start())
        if crd.get("v1", "Namespace", secrets_namespace) is None:
            crd.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": secrets_namespace}})
        yield started
    finally:
        for kubelet in kubelets:
            kubelet.stop()
        for tenant in started.values():
            tenant.stop()


def admin(tenant: TenantAPIServer) -> Kube:
    return Kube.from_kubeconfig(str(tenant.kubeconfig_path))


def put_secret(kube: Kube, namespace: str, name: str, data: dict[str, bytes]) -> None:
    """Create or replace an Opaque Secret (a kubeconfig Secret, as Cluster API or Kamaji write it)."""
    body = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace},
        "type": "Opaque",
        "data": {k: base64.b64encode(v).decode() for k, v in data.items()},
    }
    if kube.get("v1", "Secret", name, namespace) is None:
        kube.create(body)
    else:
        kube.replace(body)


def passes(kube: Kube, name: str, settings: Settings = SETTINGS) -> dict[str, Any]:
    """Run one pass of the platform ``name`` and return its status as the API server stores it."""
    body = kube.get(constants.API_VERSION, constants.KIND, name)
    assert body is not None
    reconcile.run(body, kube=kube, settings=settings, now=datetime.now(UTC))
    fresh = kube.get(constants.API_VERSION, constants.KIND, name)
    assert fresh is not None
    return dict(fresh["status"])
