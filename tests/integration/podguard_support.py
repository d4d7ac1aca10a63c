"""Shared by the pod guard integration tests (tests/integration/test_podguard_*.py, and
test_injected_pods.py): pod shapes, the guarded-namespace environment (the ``guard`` and
``running_pod`` module fixtures: a test module takes them with ``from podguard_support import guard
as guard``, one guarded namespace per module), and the helpers that run the step and read its
parameter back.

The battery creates pods by server-side dry run as the installer identity (a ServiceAccount bound
to the ClusterRole ``admin`` in the guarded namespace, authenticated with its own token), and
asserts the guard's own message for every denial.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from tests.support import platform_body

from tenant_platform.api import constants
from tenant_platform.api.models import TenantPlatform
from tenant_platform.concerns.podguard import manifests, verdict
from tenant_platform.concerns.podguard.step import STEP, shared_objects
from tenant_platform.config import Settings
from tenant_platform.framework.base import StepContext, StepResult
from tenant_platform.kube import errors
from tenant_platform.kube.client import Kube
from tenant_platform.testing.controlplane import ControlPlane
from tenant_platform.testing.steps import reconcile_step
from tenant_platform.testing.wait import wait_for

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
SETTINGS = Settings()
VAP = "admissionregistration.k8s.io/v1"
PROXY = "docker.io/istio/proxyv2:1.28.0"
MIRROR = "mirror.example.com:5000/istio/proxyv2"
NOT_ALLOWED_IMAGE = "is not from an allowed proxy repository"
APP = {"name": "app", "image": "registry.example.com/app:1"}
DEFAULT_REPOSITORIES = [
    "registry.istio.io/release/proxyv2",
    "docker.io/istio/proxyv2",
    "ghcr.io/kamiwaza-internal/containers/images/istio/proxyv2",
]


# ---- pod shapes -----------------------------------------------------------------------------------


def pod(name: str, namespace: str, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"containers": [{"name": "app", "image": "registry.example.com/app:1"}]}
    body.update(spec)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace}, "spec": body}


def istio_init(**overrides: Any) -> dict[str, Any]:
    """istio-init as istiod injects it (classic and native sidecar modes alike)."""
    container: dict[str, Any] = {
        "name": "istio-init",
        "image": PROXY,
        "args": [
            "istio-iptables",
            "-p",
            "15001",
            "-z",
            "15006",
            "-u",
            "1337",
            "-m",
            "REDIRECT",
            "-i",
            "*",
            "-x",
            "",
            "-b",
            "*",
            "-d",
            "15090,15021,15020",
            "--log_output_level=default:info",
        ],
        # The mesh's proxyMetadata, rendered as literal values.
        "env": [
            {"name": "ISTIO_META_DNS_CAPTURE", "value": "true"},
            {"name": "ISTIO_META_DNS_AUTO_ALLOCATE", "value": "true"},
        ],
        "imagePullPolicy": "IfNotPresent",
        "resources": {"limits": {"cpu": "2", "memory": "1Gi"}, "requests": {"cpu": "10m", "memory": "40Mi"}},
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "privileged": False,
            "capabilities": {"add": ["NET_ADMIN", "NET_RAW"], "drop": ["ALL"]},
            "readOnlyRootFilesystem": False,
            "runAsGroup": 0,
            "runAsNonRoot": False,
            "runAsUser": 0,
        },
    }
    container.update(overrides)
    return container


def istio_proxy(*, native: bool = False) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": "istio-proxy",
        "image": PROXY,
        "args": ["proxy", "sidecar", "--domain", "$(POD_NAMESPACE).svc.cluster.local", "--proxyLogLevel=warning"],
        "ports": [{"containerPort": 15090, "name": "http-envoy-prom", "protocol": "TCP"}],
        "env": [
            {"name": "PILOT_CERT_PROVIDER", "value": "istiod"},
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
            {"name": "INSTANCE_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "ISTIO_META_DNS_CAPTURE", "value": "true"},
        ],
        "readinessProbe": {
            "httpGet": {"path": "/healthz/ready", "port": 15021},
            "initialDelaySeconds": 0,
            "periodSeconds": 15,
            "failureThreshold": 4,
        },
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "privileged": False,
            "readOnlyRootFilesystem": True,
            "runAsGroup": 1337,
            "runAsNonRoot": True,
            "runAsUser": 1337,
        },
        "volumeMounts": [
            {"name": "workload-socket", "mountPath": "/var/run/secrets/workload-spiffe-uds"},
            {"name": "credential-socket", "mountPath": "/var/run/secrets/credential-uds"},
            {"name": "workload-certs", "mountPath": "/var/run/secrets/workload-spiffe-credentials"},
            {"name": "istiod-ca-cert", "mountPath": "/var/run/secrets/istio"},
            {"name": "istio-data", "mountPath": "/var/lib/istio/data"},
            {"name": "istio-envoy", "mountPath": "/etc/istio/proxy"},
            {"name": "istio-token", "mountPath": "/var/run/secrets/tokens"},
            {"name": "istio-podinfo", "mountPath": "/etc/istio/pod"},
        ],
    }
    if native:
        container["restartPolicy"] = "Always"
        container["startupProbe"] = {
            "httpGet": {"path": "/healthz/ready", "port": 15021},
            "periodSeconds": 1,
            "failureThreshold": 600,
        }
    return container


def istio_volumes() -> list[dict[str, Any]]:
    return [
        {"name": "workload-socket", "emptyDir": {}},
        {"name": "credential-socket", "emptyDir": {}},
        {"name": "workload-certs", "emptyDir": {}},
        {"name": "istio-envoy", "emptyDir": {"medium": "Memory"}},
        {"name": "istio-data", "emptyDir": {}},
        {
            "name": "istio-podinfo",
            "downwardAPI": {
                "items": [
                    {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
                    {"path": "annotations", "fieldRef": {"fieldPath": "metadata.annotations"}},
                ]
            },
        },
        {
            "name": "istio-token",
            "projected": {
                "sources": [
                    {"serviceAccountToken": {"audience": "istio-ca", "expirationSeconds": 43200, "path": "istio-token"}}
                ]
            },
        },
        {"name": "istiod-ca-cert", "configMap": {"name": "istio-ca-root-cert"}},
    ]


def classic(name: str, namespace: str, *, init: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    """A pod after classic sidecar injection (the ServiceAccount plugin adds the token volume)."""
    body = pod(
        name,
        namespace,
        initContainers=[init or istio_init()],
        containers=[{"name": "app", "image": "registry.example.com/app:1"}, istio_proxy()],
        volumes=istio_volumes(),
    )
    body["metadata"]["annotations"] = {"sidecar.istio.io/status": '{"initContainers":["istio-init"]}'}
    body["spec"].update(spec)
    return body


def sc(**security: Any) -> dict[str, Any]:
    """The app container with a securityContext."""
    return {"name": "app", "image": "registry.example.com/app:1", "securityContext": security}


# ---- environment ------------------------------------------------------------------------------------


@dataclass
class Guard:
    platform: TenantPlatform
    namespace: str
    installer_sa: str
    admin: Kube
    installer: Kube
    control_plane: ControlPlane

    @property
    def names(self) -> manifests.GuardNames:
        return manifests.guard_names("Deny")

    @property
    def as_installer(self) -> str:
        return f"--as=system:serviceaccount:{self.namespace}:{self.installer_sa}"


def make_namespace(
    admin: Kube,
    name: str,
    labels: dict[str, str] | None = None,
    *,
    adoptable_by: str | None = None,
    claimed_by: str | None = None,
) -> None:
    """A namespace an admin made (``adoptable_by``: opted in for that TenantPlatform to adopt;
    ``claimed_by``: carrying that platform's claim label, as the namespaces step leaves it)."""
    meta: dict[str, Any] = {"name": name, "labels": dict(labels or {})}
    if adoptable_by:
        meta["annotations"] = {"tenancy.dev/adoptable-by": adoptable_by}
    if claimed_by:
        meta["labels"][constants.LABEL_PLATFORM] = claimed_by
    admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": meta})
    # Pods need the namespace's default ServiceAccount (the ServiceAccount admission plugin).
    wait_for(
        lambda: admin.get("v1", "ServiceAccount", "default", name), f"ServiceAccount {name}/default", 60, interval=0.2
    )


def make_installer(admin: Kube, cp: ControlPlane, namespace: str, directory: Path) -> Kube:
    """A ServiceAccount bound to ClusterRole admin in ``namespace``; a client with its own token."""
    admin.create(
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "installer", "namespace": namespace}}
    )
    admin.create(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "installer-admin", "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "admin"},
            "subjects": [{"kind": "ServiceAccount", "name": "installer", "namespace": namespace}],
        }
    )
    token, _ = admin.request_token(namespace, "installer", expiration_seconds=3600)
    path = cp.kubeconfig_for_token(token, directory / f"{namespace}-installer.kubeconfig")
    installer = Kube.from_kubeconfig(str(path))
    allowed, _ = admin.can_i(
        user=f"system:serviceaccount:{namespace}:installer",
        groups=["system:serviceaccounts", f"system:serviceaccounts:{namespace}"],
        verb="create",
        resource="pods",
        namespace=namespace,
    )
    assert allowed, "the admin ClusterRole must grant pods create (is clusterrole-aggregation running?)"
    return installer


def apply_guard(admin: Kube, platform: TenantPlatform, enforcement: manifests.Enforcement) -> None:
    """The shared guard applied and ``platform`` (which must exist) made its parameter: its
    namespaces claimed for it and marked with the enforcement and its repositories, and
    ``status.podGuard``, as the step writes them."""
    for obj in shared_objects():
        admin.apply(obj)
    value = verdict.param(platform, enforcement, platform.spec.all_namespaces)
    mark = manifests.guard_mark("", manifests.mark_for(enforcement, value.proxy_image_repositories))["metadata"]
    for namespace in platform.spec.all_namespaces:
        labels = {constants.LABEL_PLATFORM: platform.name, **mark["labels"]}
        admin.merge_patch(
            "v1", "Namespace", namespace, {"metadata": {"labels": labels, "annotations": mark["annotations"]}}
        )
    admin.merge_patch(
        constants.API_VERSION,
        constants.KIND,
        platform.name,
        {"status": {"podGuard": verdict.param_fields(value)}},
        subresource="status",
    )


def create_platform(admin: Kube, body: dict[str, Any]) -> TenantPlatform:
    """``body`` created as a TenantPlatform (no operator runs: no finalizer), read back."""
    full = {"apiVersion": constants.API_VERSION, "kind": constants.KIND, **body}
    return TenantPlatform.from_body(admin.create(full))


def delete_platform(admin: Kube, name: str) -> None:
    admin.delete(constants.API_VERSION, constants.KIND, name)


def guard_denies(kube: Kube, namespace: str, policy: str) -> bool:
    """True once a hostPID dry run in ``namespace`` is denied by ``policy`` (the guard is live)."""
    try:
        kube.create(pod(f"probe-{uuid.uuid4().hex[:6]}", namespace, hostPID=True), dry_run=True)
    except errors.Forbidden as exc:
        return f"'{policy}'" in exc.message
    return False


def guard_warns(kube: Kube, namespace: str, policy: str) -> bool:
    """True once a hostPID pod created (for real, named ``w``) in ``namespace`` is admitted with a
    warning from ``policy`` (the guard is live, at Warn)."""
    _, warnings = kube.create_with_warnings(pod("w", namespace, hostPID=True))
    return any(policy in w for w in warnings)


DENY = manifests.guard_names("Deny")
WARN = manifests.guard_names("Warn")


@pytest.fixture(scope="module")
def guard(crd: Kube, control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Guard]:
    """A guarded namespace: the shared policies, a TenantPlatform as their parameter at Deny, and
    the installer identity."""
    suffix = uuid.uuid4().hex[:6]
    namespace = f"pg-battery-{suffix}"
    make_namespace(crd, namespace)
    platform = create_platform(
        crd,
        platform_body(
            f"pg-battery-{suffix}",
            namespace,
            domain="battery.example.com",
            podGuard={
                "enforcement": "Deny",
                "proxyImageRepositories": ["registry.istio.io/release/proxyv2", "docker.io/istio/proxyv2", MIRROR],
            },
        ),
    )
    installer = make_installer(crd, control_plane, namespace, tmp_path_factory.mktemp("pg"))
    apply_guard(crd, platform, "Deny")
    wait_for(lambda: guard_denies(installer, namespace, DENY.pod_guard), "the pod guard to deny", 60, interval=0.2)
    yield Guard(platform, namespace, "installer", crd, installer, control_plane)
    delete_platform(crd, platform.name)
    crd.delete("v1", "Namespace", namespace)


def pod_name(prefix: str, case: str) -> str:
    return f"{prefix}-" + re.sub(r"[^a-z0-9]+", "-", case.lower()).strip("-")[:50]


def denial(kube: Kube, body: dict[str, Any]) -> str:
    """The message of the API server's Forbidden answer to a dry-run create (fails if admitted)."""
    try:
        kube.create(body, dry_run=True)
    except errors.Forbidden as exc:
        return exc.message
    pytest.fail(f"admitted: {json.dumps(body['spec'])[:400]}")


@pytest.fixture(scope="module")
def running_pod(guard: Guard) -> str:
    """A real pod in the guarded namespace (Pending forever: no kubelet)."""
    name = "target"
    guard.installer.create(pod(name, guard.namespace))
    return name


# ---- the step, its parameter ----------------------------------------------------------------------------


class RecordingKube(Kube):
    """The real client, remembering the order of deletes (to check cleanup order)."""

    deleted: list[str]

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None, **kwargs: Any) -> bool:
        self.deleted.append(f"{kind}/{name}")
        return super().delete(api_version, kind, name, namespace, **kwargs)


def recording(admin: Kube) -> RecordingKube:
    kube = RecordingKube(admin.api)
    kube.deleted = []
    return kube


def context(kube: Kube, body: dict[str, Any], *, dry_run: bool = False) -> StepContext:
    return StepContext(platform=TenantPlatform.from_body(body), kube=kube, settings=SETTINGS, now=NOW, dry_run=dry_run)


def reconcile_until(
    kube: Kube, name: str, done: Callable[[StepResult], bool], what: str, *, dry_run: bool = False
) -> StepResult:
    def attempt() -> StepResult | None:
        body = kube.get(constants.API_VERSION, constants.KIND, name)
        assert body is not None
        result = reconcile_step(STEP, context(kube, body, dry_run=dry_run))
        return result if done(result) else None

    return wait_for(attempt, what, 60, interval=0.2)


def actions(kube: Kube, name: str) -> list[str]:
    binding = kube.get(VAP, "ValidatingAdmissionPolicyBinding", name)
    assert binding is not None
    return list(binding["spec"]["validationActions"])


def parameter(kube: Kube, name: str) -> dict[str, Any]:
    """The platform's ``status.podGuard`` on the API server (what the shared policies read)."""
    body = kube.get(constants.API_VERSION, constants.KIND, name)
    assert body is not None
    return dict((body.get("status") or {}).get("podGuard") or {})


def fresh(kube: Kube, name: str) -> dict[str, Any]:
    """The platform as the API server has it now."""
    body = kube.get(constants.API_VERSION, constants.KIND, name)
    assert body is not None
    return body
