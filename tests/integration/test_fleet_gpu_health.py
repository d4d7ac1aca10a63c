"""GPUReady's health check (HAMi's webhook by a dry-run GPU pod, HAMi's workloads, GPU device
plugins) runs per target: against the target's API server, from the target's own read cache.

Real control planes: the session's management cluster and two tenant kube-apiservers over its
etcd. Tenant X has a MutatingWebhookConfiguration for GPU pods in the platform's namespace whose
Service has no endpoints (failurePolicy Fail), as when konnectivity cannot reach HAMi's webhook:
the platform targeting X reports WebhookUnreachable in its GPUReady; the platform targeting Y and
a local platform with the same namespace name are unaffected. Tenant X's own request metrics show
the dry run and the reads arrive there, and a no-op pass sends it no LIST of the cached facts.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from fleet_support import admin, put_secret, tenant_servers
from tests.support import condition

from tenant_platform import reconcile
from tenant_platform.api import constants, reasons
from tenant_platform.api.models import TenantPlatform
from tenant_platform.concerns.target.step import TargetConnection
from tenant_platform.config import Settings
from tenant_platform.kube.client import Kube
from tenant_platform.targetwatch import TargetSnapshots
from tenant_platform.testing.controlplane import ControlPlane
from tenant_platform.testing.tenants import TenantAPIServer
from tenant_platform.testing.wait import wait_for

SETTINGS = Settings(drift_interval=30)
SECRETS_NS = "fleetgpu-secrets"
WEBHOOK = "vgpu.fleet-test.hami.io"


@pytest.fixture(scope="module")
def tenants(seeded: ControlPlane, crd: Kube) -> Iterator[dict[str, TenantAPIServer]]:
    with tenant_servers(seeded, crd, ("gh-x", "gh-y"), secrets_namespace=SECRETS_NS) as started:
        yield started


def unreachable_webhook(kube: Kube, namespace: str) -> None:
    """HAMi's webhook as a tenant whose API server cannot reach it sees it: a Service without
    endpoints, failurePolicy Fail, for pods created in ``namespace``."""
    kube.create(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "hami-scheduler", "namespace": "kube-system"},
            "spec": {"ports": [{"port": 443, "targetPort": 9443}], "selector": {"app": "nothing-runs-here"}},
        }
    )
    kube.create(
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "hami-webhook"},
            "webhooks": [
                {
                    "name": WEBHOOK,
                    "admissionReviewVersions": ["v1"],
                    "sideEffects": "None",
                    "failurePolicy": "Fail",
                    "timeoutSeconds": 3,
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                    "rules": [
                        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}
                    ],
                    "clientConfig": {
                        "service": {"name": "hami-scheduler", "namespace": "kube-system", "path": "/webhook"}
                    },
                }
            ],
        }
    )


def requests(tenant: TenantAPIServer, resource: str, verb: str, dry_run: str = "") -> float:
    """apiserver_request_total for (resource, verb[, dry_run]) from the tenant API server itself."""
    kube = admin(tenant)
    text = kube.api.rest_client.pool_manager.request("GET", f"{tenant.server}/metrics").data.decode()
    total = 0.0
    for line in text.splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', line.split("}")[0]))
        wanted = labels.get("resource") == resource and labels.get("verb") == verb
        if wanted and labels.get("subresource") == "" and (not dry_run or labels.get("dry_run") == dry_run):
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_gpu_health_runs_against_each_target(
    crd: Kube, make_platform: Any, unique_name: str, tenants: dict[str, TenantAPIServer]
) -> None:
    x, y = tenants["gh-x"], tenants["gh-y"]
    namespace = unique_name  # the same namespace name in both tenants and in the management cluster
    unreachable_webhook(admin(x), namespace)
    put_secret(crd, SECRETS_NS, "gh-x-kubeconfig", {"value": x.kubeconfig_bytes()})
    put_secret(crd, SECRETS_NS, "gh-y-kubeconfig", {"value": y.kubeconfig_bytes()})
    px, py, local = f"{unique_name}-x", f"{unique_name}-y", f"{unique_name}-l"
    make_platform(px, namespace, target={"clusterAPI": {"namespace": SECRETS_NS, "cluster": "gh-x"}})
    make_platform(py, namespace, target={"clusterAPI": {"namespace": SECRETS_NS, "cluster": "gh-y"}})
    make_platform(local, namespace)

    woken: list[str] = []
    snapshots = TargetSnapshots(wake=woken.append, debounce=0.1, watch_timeout=30)
    observed: dict[str, Any] = {}

    def observe(platform: TenantPlatform, connection: TargetConnection) -> Any:
        assert connection.kube is not None
        got = snapshots.observe(platform.name, connection.key, connection.resource_version, connection.kube)
        observed[platform.name] = got
        return got

    def run(name: str, observe_target: Callable[..., Any] | None = observe) -> dict[str, Any]:
        body = crd.get(constants.API_VERSION, constants.KIND, name)
        assert body is not None
        outcome = reconcile.run(body, kube=crd, settings=SETTINGS, now=datetime.now(UTC), observe_target=observe_target)
        return outcome.status

    try:
        for name in (px, py):  # the first pass starts the target's watches and read cache
            run(name)
            got = observed[name]
            assert got.observed is not None and got.kube is not None
            assert got.observed.wait_synced(30) and got.kube.wait_synced(30)
        # The tenants run no controller manager: give the namespace its default ServiceAccount (the
        # dry-run pod's ServiceAccount admission needs it, before any webhook is called).
        for tenant in (x, y):
            sa = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default", "namespace": namespace}}
            wait_for(lambda tenant=tenant: admin(tenant).get("v1", "Namespace", namespace), "the namespace", 30)
            admin(tenant).create(sa)
            # A changed namespace is a changed input of the kept webhook verdict: checked again.
            admin(tenant).merge_patch("v1", "Namespace", namespace, {"metadata": {"labels": {"sa-ready": "yes"}}})
        dry_runs_before = requests(x, "pods", "POST", dry_run="All")
        status_x = run(px)
        status_y = run(py)
        status_local = run(local, None)

        # X: the webhook its API server cannot reach, named, in that platform's GPUReady only.
        cond = condition(status_x, constants.GPU_READY)
        assert (cond["status"], cond["reason"]) == ("False", reasons.GPU.WEBHOOK_UNREACHABLE), cond
        assert f'cannot call webhook "{WEBHOOK}"' in cond["message"]
        assert "hami-scheduler.kube-system.svc" in cond["message"]
        assert status_x["gpu"]["health"]["webhook"]["outcome"] == "unreachable"
        for other in (status_y, status_local):
            assert condition(other, constants.GPU_READY)["reason"] != reasons.GPU.WEBHOOK_UNREACHABLE, condition(
                other, constants.GPU_READY
            )
            assert other["gpu"]["health"]["webhook"]["outcome"] != "unreachable", other["gpu"]["health"]
        # The webhook configuration exists only in X, and X's API server counted the dry run.
        for elsewhere in (crd, admin(y)):
            assert (
                elsewhere.get("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration", "hami-webhook") is None
            )
        assert requests(x, "pods", "POST", dry_run="All") > dry_runs_before

        # A no-op pass: the health facts come from X's read cache (no LIST of DaemonSets,
        # Deployments or RuntimeClasses reaches X) and the webhook verdict is kept (no dry run).
        cache = observed[px].kube
        before = {r: requests(x, r, "LIST") for r in ("daemonsets", "deployments", "runtimeclasses")}
        hits = cache.hits
        again = run(px)
        assert condition(again, constants.GPU_READY)["reason"] == reasons.GPU.WEBHOOK_UNREACHABLE
        assert {r: requests(x, r, "LIST") for r in before} == before
        # (The mesh step's own dry-run pod is refused by the same webhook on each pass, so X's
        # dry-run count is not the measure here: the GPU verdict's time is.)
        assert again["gpu"]["health"]["webhook"]["checkedAt"] == status_x["gpu"]["health"]["webhook"]["checkedAt"]
        assert cache.hits > hits
        # Each target has its own cache, and a change in X wakes X's platform only.
        assert observed[py].kube is not cache
        woken.clear()
        admin(x).create(
            {
                "apiVersion": "apps/v1",
                "kind": "DaemonSet",
                "metadata": {"name": "hami-device-plugin", "namespace": "kube-system"},
                "spec": {
                    "selector": {"matchLabels": {"app": "hami-device-plugin"}},
                    "template": {
                        "metadata": {"labels": {"app": "hami-device-plugin"}},
                        "spec": {"containers": [{"name": "p", "image": "registry.k8s.io/pause:3.10.1"}]},
                    },
                },
            }
        )
        wait_for(lambda: px in woken, "the DaemonSet in X to wake its platform", 30)
        assert py not in woken and local not in woken
        seen = run(px)
        assert "hami-device-plugin" in str(seen["gpu"]["health"]), seen["gpu"]["health"]
        assert "hami-device-plugin" not in str(run(py)["gpu"]["health"])
        # The last platform of a target gone: its watches and cache stop.
        snapshots.release(px)
        snapshots.release(py)
        assert snapshots.watched() == {}
    finally:
        snapshots.stop_all()
