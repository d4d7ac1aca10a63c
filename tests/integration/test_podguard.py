"""The pod guard against the real API server: the attack battery, the checklist's kubectl checks,
staged enforcement, spec-change-only updates, type checking and cleanup.

The battery creates pods by server-side dry run as the installer identity (a ServiceAccount bound
to the ClusterRole ``admin`` in the guarded namespace, authenticated with its own token), and
asserts the guard's own message for every denial. Ephemeral containers go through the
``pods/ephemeralcontainers`` subresource of a real (Pending) pod, as the cluster admin: the guard
binds admins too, and the namespace ``admin`` role does not grant that subresource.
"""

from __future__ import annotations

import copy
import json
import re
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar, cast

import pytest
import yaml

from tenant_platform import devmode, reconcile
from tenant_platform.api import constants
from tenant_platform.api.models import TenantPlatform
from tenant_platform.concerns.podguard import manifests, verdict
from tenant_platform.concerns.podguard.step import STEP, shared_objects
from tenant_platform.config import Settings
from tenant_platform.framework.base import StepContext, StepResult
from tenant_platform.kube import errors
from tenant_platform.kube.client import Kube
from tenant_platform.reconcile import registry
from tenant_platform.testing.controlplane import ControlPlane
from tenant_platform.testing.steps import reconcile_step
from tenant_platform.testing.wait import wait_for

pytestmark = pytest.mark.cluster

T = TypeVar("T")
NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
SETTINGS = Settings()
VAP = "admissionregistration.k8s.io/v1"
TOKEN_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
PROXY = "docker.io/istio/proxyv2:1.28.0"
DIGEST = "sha256:" + "ab" * 32
MIRROR = "mirror.example.com:5000/istio/proxyv2"


def eventually(what: str, probe: Callable[[], T | None], timeout: float = 60) -> T:
    """Poll ``probe`` until it returns something truthy (``wait_for`` with this file's argument order)."""
    return cast(T, wait_for(probe, what, timeout, interval=0.2))


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


def token_volume(name: str = "kube-api-access-x7k2p") -> dict[str, Any]:
    """The service-account token volume exactly as the ServiceAccount admission plugin writes it."""
    return {
        "name": name,
        "projected": {
            "defaultMode": 420,
            "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {
                    "downwardAPI": {
                        "items": [
                            {"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}
                        ]
                    }
                },
            ],
        },
    }


def token_mount(name: str = "kube-api-access-x7k2p", **overrides: Any) -> dict[str, Any]:
    mount: dict[str, Any] = {"name": name, "mountPath": TOKEN_PATH, "readOnly": True}
    mount.update(overrides)
    return mount


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


def native(name: str, namespace: str) -> dict[str, Any]:
    """A pod after native-sidecar injection: istio-proxy is an init container that keeps running."""
    body = classic(name, namespace)
    body["spec"]["initContainers"] = [istio_init(), istio_proxy(native=True)]
    body["spec"]["containers"] = [{"name": "app", "image": "registry.example.com/app:1"}]
    return body


def explicit_token(
    name: str, namespace: str, *, init: dict[str, Any], volume: dict[str, Any] | None = None
) -> dict[str, Any]:
    """istio-init with the token volume written out (automount off), e.g. a re-submitted pod."""
    body = classic(name, namespace, init=init, automountServiceAccountToken=False)
    body["spec"]["volumes"].append(volume or token_volume())
    return body


def init_with(**overrides: Any) -> Callable[[str, str], dict[str, Any]]:
    """A builder of the classic pod whose istio-init has ``overrides``."""
    return lambda n, ns: classic(n, ns, init=istio_init(**overrides))


def sc(**security: Any) -> dict[str, Any]:
    """The app container with a securityContext."""
    return {"name": "app", "image": "registry.example.com/app:1", "securityContext": security}


def changed(base: dict[str, Any], **updates: Any) -> dict[str, Any]:
    out = copy.deepcopy(base)
    out.update(updates)
    return out


def drop_key(base: dict[str, Any], *path: str) -> dict[str, Any]:
    out = copy.deepcopy(base)
    target = out
    for part in path[:-1]:
        target = target[part]
    del target[path[-1]]
    return out


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
    eventually(f"ServiceAccount {name}/default", lambda: admin.get("v1", "ServiceAccount", "default", name))


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
    namespaces claimed for it and ``status.podGuard`` as the step writes it."""
    for obj in shared_objects():
        admin.apply(obj)
    for namespace in platform.spec.all_namespaces:
        admin.merge_patch(
            "v1", "Namespace", namespace, {"metadata": {"labels": {constants.LABEL_PLATFORM: platform.name}}}
        )
    value = verdict.param(platform, enforcement, platform.spec.all_namespaces)
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
        {
            "metadata": {"name": f"pg-battery-{suffix}"},
            "spec": {
                "namespace": namespace,
                "domain": "battery.example.com",
                "podGuard": {
                    "enforcement": "Deny",
                    "proxyImageRepositories": ["registry.istio.io/release/proxyv2", "docker.io/istio/proxyv2", MIRROR],
                },
            },
        },
    )
    installer = make_installer(crd, control_plane, namespace, tmp_path_factory.mktemp("pg"))
    apply_guard(crd, platform, "Deny")
    eventually("the pod guard to deny", lambda: guard_denies(installer, namespace, DENY.pod_guard))
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


# ---- the battery: denied --------------------------------------------------------------------------

APP = {"name": "app", "image": "registry.example.com/app:1"}
INIT = {"name": "setup", "image": "registry.example.com/setup:1"}

BASELINE_DENIED: list[tuple[str, Callable[[str, str], dict[str, Any]], str]] = [
    ("hostNetwork", lambda n, ns: pod(n, ns, hostNetwork=True), "host namespaces are not allowed: hostNetwork"),
    ("hostPID", lambda n, ns: pod(n, ns, hostPID=True), "host namespaces are not allowed: hostPID"),
    ("hostIPC", lambda n, ns: pod(n, ns, hostIPC=True), "host namespaces are not allowed: hostIPC"),
    (
        "privileged",
        lambda n, ns: pod(n, ns, containers=[sc(privileged=True)]),
        "privileged containers are not allowed: app",
    ),
    (
        "privileged-init",
        lambda n, ns: pod(n, ns, initContainers=[{**INIT, "securityContext": {"privileged": True}}]),
        "privileged containers are not allowed: setup (init)",
    ),
    (
        "hostPath",
        lambda n, ns: pod(n, ns, volumes=[{"name": "host", "hostPath": {"path": "/"}}]),
        "hostPath volumes are not allowed: host",
    ),
    (
        "capability-sys-admin",
        lambda n, ns: pod(n, ns, containers=[sc(capabilities={"add": ["SYS_ADMIN"]})]),
        "capabilities beyond the baseline set are not allowed: app adds SYS_ADMIN",
    ),
    (
        "capability-net-admin-regular",
        lambda n, ns: pod(n, ns, containers=[sc(capabilities={"add": ["NET_BIND_SERVICE", "NET_ADMIN"]})]),
        "app adds NET_ADMIN",
    ),
    (
        "capability-lowercase",
        lambda n, ns: pod(n, ns, containers=[sc(capabilities={"add": ["chown"]})]),
        "app adds chown",
    ),
    (
        "capability-all",
        lambda n, ns: pod(n, ns, containers=[sc(capabilities={"add": ["ALL"]})]),
        "app adds ALL",
    ),
    (
        "capability-init",
        lambda n, ns: pod(n, ns, initContainers=[{**INIT, "securityContext": {"capabilities": {"add": ["NET_RAW"]}}}]),
        "setup (init) adds NET_RAW",
    ),
    (
        "hostPort",
        lambda n, ns: pod(n, ns, containers=[{**APP, "ports": [{"containerPort": 80, "hostPort": 8080}]}]),
        "host ports are not allowed: app",
    ),
    (
        "hostPort-init",
        lambda n, ns: pod(n, ns, initContainers=[{**INIT, "ports": [{"containerPort": 80, "hostPort": 80}]}]),
        "host ports are not allowed: setup (init)",
    ),
    (
        "liveness-httpGet-host",
        lambda n, ns: pod(
            n, ns, containers=[{**APP, "livenessProbe": {"httpGet": {"port": 80, "host": "169.254.169.254"}}}]
        ),
        "probes and lifecycle hooks must not set httpGet.host or tcpSocket.host: app",
    ),
    (
        "readiness-tcpSocket-host",
        lambda n, ns: pod(
            n, ns, containers=[{**APP, "readinessProbe": {"tcpSocket": {"port": 10250, "host": "10.0.0.1"}}}]
        ),
        "probes and lifecycle hooks must not set httpGet.host or tcpSocket.host: app",
    ),
    (
        "startup-httpGet-host",
        lambda n, ns: pod(n, ns, containers=[{**APP, "startupProbe": {"httpGet": {"port": 80, "host": "localhost"}}}]),
        "must not set httpGet.host or tcpSocket.host: app",
    ),
    (
        "postStart-httpGet-host",
        lambda n, ns: pod(
            n, ns, containers=[{**APP, "lifecycle": {"postStart": {"httpGet": {"port": 80, "host": "x"}}}}]
        ),
        "must not set httpGet.host or tcpSocket.host: app",
    ),
    (
        "preStop-tcpSocket-host",
        lambda n, ns: pod(
            n, ns, containers=[{**APP, "lifecycle": {"preStop": {"tcpSocket": {"port": 80, "host": "x"}}}}]
        ),
        "must not set httpGet.host or tcpSocket.host: app",
    ),
    (
        "probe-host-native-sidecar",
        lambda n, ns: pod(
            n,
            ns,
            initContainers=[
                {**INIT, "restartPolicy": "Always", "readinessProbe": {"httpGet": {"port": 80, "host": "x"}}}
            ],
        ),
        "must not set httpGet.host or tcpSocket.host: setup (init)",
    ),
    (
        "seccomp-pod",
        lambda n, ns: pod(n, ns, securityContext={"seccompProfile": {"type": "Unconfined"}}),
        "seccomp profile Unconfined is not allowed: pod",
    ),
    (
        "seccomp-container",
        lambda n, ns: pod(n, ns, containers=[sc(seccompProfile={"type": "Unconfined"})]),
        "seccomp profile Unconfined is not allowed: app",
    ),
    (
        "apparmor-pod",
        lambda n, ns: pod(n, ns, securityContext={"appArmorProfile": {"type": "Unconfined"}}),
        "AppArmor profile Unconfined is not allowed: pod",
    ),
    (
        "apparmor-container",
        lambda n, ns: pod(n, ns, containers=[sc(appArmorProfile={"type": "Unconfined"})]),
        "AppArmor profile Unconfined is not allowed: app",
    ),
    (
        "apparmor-annotation",
        lambda n, ns: {
            **pod(n, ns),
            "metadata": {
                "name": n,
                "namespace": ns,
                "annotations": {"container.apparmor.security.beta.kubernetes.io/app": "unconfined"},
            },
        },
        "annotation container.apparmor.security.beta.kubernetes.io/app",
    ),
    (
        "selinux-type",
        lambda n, ns: pod(n, ns, securityContext={"seLinuxOptions": {"type": "spc_t"}}),
        "SELinux options are not allowed: pod",
    ),
    (
        "selinux-user",
        lambda n, ns: pod(n, ns, containers=[sc(seLinuxOptions={"user": "system_u"})]),
        "SELinux options are not allowed: app",
    ),
    (
        "selinux-role",
        lambda n, ns: pod(
            n, ns, initContainers=[{**INIT, "securityContext": {"seLinuxOptions": {"role": "sysadm_r"}}}]
        ),
        "SELinux options are not allowed: setup (init)",
    ),
    (
        "procMount",
        lambda n, ns: pod(n, ns, hostUsers=False, containers=[sc(procMount="Unmasked")]),
        "procMount other than Default is not allowed: app",
    ),
    (
        "sysctl",
        lambda n, ns: pod(n, ns, securityContext={"sysctls": [{"name": "kernel.msgmax", "value": "65536"}]}),
        "sysctls outside the safe set are not allowed: kernel.msgmax",
    ),
    (
        "hostProcess-pod",
        lambda n, ns: pod(n, ns, hostNetwork=True, securityContext={"windowsOptions": {"hostProcess": True}}),
        "Windows hostProcess is not allowed: pod",
    ),
    (
        "hostProcess-container",
        lambda n, ns: pod(n, ns, hostNetwork=True, containers=[sc(windowsOptions={"hostProcess": True})]),
        "Windows hostProcess is not allowed: app",
    ),
]

EXCEPTION = "the init container istio-init may add NET_ADMIN and NET_RAW only in the exact shape Istio injects: "
NOT_ALLOWED_IMAGE = "is not from an allowed proxy repository"
NOT_TOKEN = "are not the service-account token volume Kubernetes injects"


def with_source(index: int, source: dict[str, Any]) -> dict[str, Any]:
    volume = token_volume()
    volume["projected"]["sources"][index] = source
    return volume


ISTIO_INIT_DENIED: list[tuple[str, Callable[[str, str], dict[str, Any]], str]] = [
    *[
        (
            f"image-{label}",
            init_with(image=image),
            f"image {image} {NOT_ALLOWED_IMAGE}",
        )
        for label, image in [
            ("lookalike-suffix", "docker.io/istio/proxyv2-evil:1.28.0"),
            ("lookalike-tag-separator", "docker.io/istio/proxyv2-1.28.0"),
            ("lookalike-digest-separator", f"docker.io/istio/proxyv2.{DIGEST.replace(':', '-')}"),
            ("lookalike-glued", "docker.io/istio/proxyv2evil:1.28.0"),
            ("lookalike-subpath", "docker.io/istio/proxyv2/evil:1.28.0"),
            ("lookalike-host-prefix", "evil.example.com/docker.io/istio/proxyv2:1.28.0"),
            ("lookalike-dotted", "registry.istio.io/release/proxyv2.evil:1.28.0"),
            ("lookalike-digest", f"docker.io/istio/proxyv2-evil@{DIGEST}"),
            ("lookalike-mirror", "mirror.example.com:5000/istio/proxyv2-x:1.28.0"),
            ("lookalike-mirror-port", "mirror.example.com:5001/istio/proxyv2:1.28.0"),
            ("other-repo", "docker.io/istio/proxyv3:1.28.0"),
            ("untagged", "docker.io/istio/proxyv2"),
            ("uppercase", "DOCKER.IO/istio/proxyv2:1.28.0"),
            ("unconfigured-alias", "index.docker.io/istio/proxyv2:1.28.0"),
        ]
    ],
    (
        "command-set",
        lambda n, ns: classic(n, ns, init=istio_init(command=["/bin/sh", "-c"])),
        EXCEPTION + "command is set",
    ),
    (
        "command-set-to-the-entrypoint",
        lambda n, ns: classic(n, ns, init=istio_init(command=["pilot-agent"])),
        "command is set",
    ),
    (
        "wrong-first-arg",
        lambda n, ns: classic(n, ns, init=istio_init(args=["sh", "-c", "id"])),
        "the first argument is not istio-iptables",
    ),
    (
        "first-arg-later",
        lambda n, ns: classic(n, ns, init=istio_init(args=["--debug", "istio-iptables"])),
        "the first argument is not istio-iptables",
    ),
    (
        "no-args",
        lambda n, ns: classic(n, ns, init=drop_key(istio_init(), "args")),
        "the first argument is not istio-iptables",
    ),
    (
        "ld-preload",
        lambda n, ns: classic(n, ns, init=istio_init(env=[{"name": "LD_PRELOAD", "value": "/tmp/x.so"}])),
        "env LD_PRELOAD may steer which code is loaded",
    ),
    (
        "ld-library-path",
        lambda n, ns: classic(n, ns, init=istio_init(env=[{"name": "LD_LIBRARY_PATH", "value": "/tmp"}])),
        "env LD_LIBRARY_PATH may steer which code is loaded",
    ),
    *[
        (
            f"loader-env-{name}",
            init_with(env=[{"name": name, "value": "/tmp"}]),
            f"env {name} may steer which code is loaded",
        )
        for name in ("PATH", "GCONV_PATH", "XTABLES_LIBDIR", "IPTABLES_LIB_DIR", "IP6TABLES_LIB_DIR")
    ],
    (
        "env-valueFrom",
        lambda n, ns: classic(
            n,
            ns,
            init=istio_init(
                env=[{"name": "ISTIO_META_X", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}}]
            ),
        ),
        "env ISTIO_META_X use valueFrom",
    ),
    (
        "env-valueFrom-fieldRef",
        lambda n, ns: classic(
            n,
            ns,
            init=istio_init(env=[{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]),
        ),
        "env POD_NAME use valueFrom",
    ),
    (
        "envFrom",
        lambda n, ns: classic(n, ns, init=istio_init(envFrom=[{"configMapRef": {"name": "tenant-env"}}])),
        "envFrom is set",
    ),
    (
        "volumeDevices",
        lambda n, ns: classic(
            n,
            ns,
            init=istio_init(volumeDevices=[{"name": "disk", "devicePath": "/dev/xvdz"}]),
            volumes=[*istio_volumes(), {"name": "disk", "persistentVolumeClaim": {"claimName": "disk"}}],
        ),
        "volumeDevices are set",
    ),
    (
        "restartPolicy",
        lambda n, ns: classic(n, ns, init=istio_init(restartPolicy="Always")),
        "restartPolicy is set",
    ),
    (
        "allowPrivilegeEscalation-missing",
        lambda n, ns: classic(n, ns, init=drop_key(istio_init(), "securityContext", "allowPrivilegeEscalation")),
        "securityContext.allowPrivilegeEscalation is not false",
    ),
    (
        "allowPrivilegeEscalation-true",
        lambda n, ns: classic(
            n,
            ns,
            init=istio_init(securityContext={**istio_init()["securityContext"], "allowPrivilegeEscalation": True}),
        ),
        "securityContext.allowPrivilegeEscalation is not false",
    ),
    (
        "drop-missing",
        lambda n, ns: classic(
            n,
            ns,
            init=istio_init(
                securityContext={**istio_init()["securityContext"], "capabilities": {"add": ["NET_ADMIN", "NET_RAW"]}}
            ),
        ),
        "securityContext.capabilities.drop does not contain ALL",
    ),
    (
        "drop-partial",
        lambda n, ns: classic(
            n,
            ns,
            init=istio_init(
                securityContext={
                    **istio_init()["securityContext"],
                    "capabilities": {"add": ["NET_ADMIN"], "drop": ["SYS_ADMIN"]},
                }
            ),
        ),
        "securityContext.capabilities.drop does not contain ALL",
    ),
    (
        "capability-beyond-the-two",
        lambda n, ns: classic(
            n,
            ns,
            init=istio_init(
                securityContext={
                    **istio_init()["securityContext"],
                    "capabilities": {"add": ["NET_ADMIN", "NET_RAW", "SYS_ADMIN"], "drop": ["ALL"]},
                }
            ),
        ),
        "capabilities beyond the baseline set are not allowed: istio-init (init) adds SYS_ADMIN",
    ),
    (
        "capability-sys-ptrace",
        lambda n, ns: classic(
            n,
            ns,
            init=istio_init(
                securityContext={
                    **istio_init()["securityContext"],
                    "capabilities": {"add": ["NET_ADMIN", "SYS_PTRACE"], "drop": ["ALL"]},
                }
            ),
        ),
        "istio-init (init) adds SYS_PTRACE",
    ),
    (
        "exception-from-regular-container",
        lambda n, ns: pod(n, ns, containers=[APP, {**istio_init(), "args": ["istio-iptables"]}]),
        "capabilities beyond the baseline set are not allowed: istio-init adds NET_ADMIN, NET_RAW",
    ),
    (
        "exception-from-other-init-name",
        lambda n, ns: classic(n, ns, init=istio_init(name="istio-init2")),
        "istio-init2 (init) adds NET_ADMIN, NET_RAW",
    ),
    # Volumes and mounts.
    (
        "extra-mount",
        lambda n, ns: classic(n, ns, init=istio_init(volumeMounts=[{"name": "istio-data", "mountPath": "/tmp/data"}])),
        "volume mounts istio-data are not at /var/run/secrets/kubernetes.io/serviceaccount",
    ),
    (
        "extra-mount-beside-token",
        lambda n, ns: explicit_token(
            n,
            ns,
            init=istio_init(volumeMounts=[token_mount(), {"name": "istio-envoy", "mountPath": "/usr/lib/xtables"}]),
        ),
        "volume mounts istio-envoy are not at /var/run/secrets/kubernetes.io/serviceaccount",
    ),
    (
        "token-volume-elsewhere",
        lambda n, ns: explicit_token(n, ns, init=istio_init(volumeMounts=[token_mount(mountPath="/usr/lib/xtables")])),
        "volume mounts kube-api-access-x7k2p are not at /var/run/secrets/kubernetes.io/serviceaccount",
    ),
    (
        "token-path-trailing-slash",
        lambda n, ns: explicit_token(n, ns, init=istio_init(volumeMounts=[token_mount(mountPath=TOKEN_PATH + "/")])),
        "are not at /var/run/secrets/kubernetes.io/serviceaccount",
    ),
    (
        "other-volume-at-token-path",
        lambda n, ns: explicit_token(
            n, ns, init=istio_init(volumeMounts=[{"name": "istio-data", "mountPath": TOKEN_PATH, "readOnly": True}])
        ),
        f"volumes istio-data {NOT_TOKEN}",
    ),
    (
        "token-name-but-emptyDir",
        lambda n, ns: explicit_token(
            n,
            ns,
            init=istio_init(volumeMounts=[token_mount()]),
            volume={"name": "kube-api-access-x7k2p", "emptyDir": {}},
        ),
        f"volumes kube-api-access-x7k2p {NOT_TOKEN}",
    ),
    (
        "token-name-but-configMap",
        lambda n, ns: explicit_token(
            n,
            ns,
            init=istio_init(volumeMounts=[token_mount()]),
            volume={"name": "kube-api-access-x7k2p", "configMap": {"name": "xtables-plugins"}},
        ),
        f"volumes kube-api-access-x7k2p {NOT_TOKEN}",
    ),
    (
        "token-audience",
        lambda n, ns: explicit_token(
            n,
            ns,
            init=istio_init(volumeMounts=[token_mount()]),
            volume=with_source(
                0, {"serviceAccountToken": {"audience": "vault", "expirationSeconds": 3607, "path": "token"}}
            ),
        ),
        NOT_TOKEN,
    ),
    (
        "token-path",
        lambda n, ns: explicit_token(
            n,
            ns,
            init=istio_init(volumeMounts=[token_mount()]),
            volume=with_source(0, {"serviceAccountToken": {"path": "libxt_evil.so"}}),
        ),
        NOT_TOKEN,
    ),
    (
        "ca-configmap-renamed",
        lambda n, ns: explicit_token(
            n,
            ns,
            init=istio_init(volumeMounts=[token_mount()]),
            volume=with_source(
                1, {"configMap": {"name": "tenant-libs", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}
            ),
        ),
        NOT_TOKEN,
    ),
    (
        "ca-configmap-extra-item",
        lambda n, ns: explicit_token(
            n,
            ns,
            init=istio_init(volumeMounts=[token_mount()]),
            volume=with_source(
                1,
                {
                    "configMap": {
                        "name": "kube-root-ca.crt",
                        "items": [{"key": "ca.crt", "path": "ca.crt"}, {"key": "ca.crt", "path": "libxt_x.so"}],
                    }
                },
            ),
        ),
        NOT_TOKEN,
    ),
    (
        "ca-configmap-all-keys",
        lambda n, ns: explicit_token(
            n,
            ns,
            init=istio_init(volumeMounts=[token_mount()]),
            volume=with_source(1, {"configMap": {"name": "kube-root-ca.crt"}}),
        ),
        NOT_TOKEN,
    ),
    (
        "ca-item-path",
        lambda n, ns: explicit_token(
            n,
            ns,
            init=istio_init(volumeMounts=[token_mount()]),
            volume=with_source(
                1, {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "x.so"}]}}
            ),
        ),
        NOT_TOKEN,
    ),
    (
        "downward-fieldpath",
        lambda n, ns: explicit_token(
            n,
            ns,
            init=istio_init(volumeMounts=[token_mount()]),
            volume=with_source(
                2, {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"fieldPath": "metadata.name"}}]}}
            ),
        ),
        NOT_TOKEN,
    ),
    (
        "downward-path",
        lambda n, ns: explicit_token(
            n,
            ns,
            init=istio_init(volumeMounts=[token_mount()]),
            volume=with_source(
                2,
                {"downwardAPI": {"items": [{"path": "xtables.conf", "fieldRef": {"fieldPath": "metadata.namespace"}}]}},
            ),
        ),
        NOT_TOKEN,
    ),
    (
        "secret-instead-of-configmap",
        lambda n, ns: explicit_token(
            n,
            ns,
            init=istio_init(volumeMounts=[token_mount()]),
            volume=with_source(
                1, {"secret": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}
            ),
        ),
        NOT_TOKEN,
    ),
    (
        "fourth-source",
        lambda n, ns: explicit_token(
            n,
            ns,
            init=istio_init(volumeMounts=[token_mount()]),
            volume={
                "name": "kube-api-access-x7k2p",
                "projected": {
                    "sources": [
                        *token_volume()["projected"]["sources"],
                        {"secret": {"name": "tenant-libs"}},
                    ]
                },
            },
        ),
        NOT_TOKEN,
    ),
    (
        "token-only",
        lambda n, ns: explicit_token(
            n,
            ns,
            init=istio_init(volumeMounts=[token_mount()]),
            volume={
                "name": "kube-api-access-x7k2p",
                "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]},
            },
        ),
        NOT_TOKEN,
    ),
    (
        "subPath",
        lambda n, ns: explicit_token(n, ns, init=istio_init(volumeMounts=[token_mount(subPath="token")])),
        "volume mounts kube-api-access-x7k2p use subPath",
    ),
    (
        "subPathExpr",
        lambda n, ns: explicit_token(n, ns, init=istio_init(volumeMounts=[token_mount(subPathExpr="$(POD_NAME)")])),
        "volume mounts kube-api-access-x7k2p use subPath",
    ),
    (
        "read-write-token-mount",
        lambda n, ns: explicit_token(n, ns, init=istio_init(volumeMounts=[token_mount(readOnly=False)])),
        "volume mounts kube-api-access-x7k2p are not read-only",
    ),
    (
        "read-only-unset",
        lambda n, ns: explicit_token(n, ns, init=istio_init(volumeMounts=[drop_key(token_mount(), "readOnly")])),
        "are not read-only",
    ),
]


# Fields the API server drops instead of storing while their feature gate is off: procMount on
# Kubernetes 1.30 (ProcMountType, alpha there). On such a server the attack is harmless as long as
# the pod it would store no longer carries the field; on newer servers the guard must deny it.
DROPPED_WHILE_GATED: dict[str, Callable[[dict[str, Any]], list[Any]]] = {
    "procMount": lambda spec: [
        c["securityContext"]["procMount"]
        for c in spec.get("containers", []) + spec.get("initContainers", [])
        if c.get("securityContext", {}).get("procMount") not in (None, "Default")
    ],
}


@pytest.mark.parametrize(("case", "build", "expected"), BASELINE_DENIED, ids=[c[0] for c in BASELINE_DENIED])
def test_baseline_control_denied(
    guard: Guard, case: str, build: Callable[[str, str], dict[str, Any]], expected: str
) -> None:
    body = build(pod_name("attack", case), guard.namespace)
    if case in DROPPED_WHILE_GATED:
        try:
            stored = guard.installer.create(body, dry_run=True)
        except errors.Forbidden:
            pass
        else:  # the field never reaches storage (feature gate off), so there is nothing to deny
            assert DROPPED_WHILE_GATED[case](stored["spec"]) == [], stored["spec"]
            return
    message = denial(guard.installer, body)
    assert f"ValidatingAdmissionPolicy '{guard.names.pod_guard}'" in message
    assert expected in message, message


@pytest.mark.parametrize(("case", "build", "expected"), ISTIO_INIT_DENIED, ids=[c[0] for c in ISTIO_INIT_DENIED])
def test_istio_init_exception_clause_denied(
    guard: Guard, case: str, build: Callable[[str, str], dict[str, Any]], expected: str
) -> None:
    message = denial(guard.installer, build(pod_name("attack", case), guard.namespace))
    assert f"ValidatingAdmissionPolicy '{guard.names.pod_guard}'" in message
    assert expected in message, message


def test_denial_names_every_offending_container(guard: Guard) -> None:
    body = pod(
        "many",
        guard.namespace,
        initContainers=[{**INIT, "securityContext": {"privileged": True}}],
        containers=[sc(privileged=True), {"name": "sidecar", "image": "x:1", "securityContext": {"privileged": True}}],
    )
    assert "privileged containers are not allowed: app, sidecar, setup (init)" in denial(guard.installer, body)


# ---- the battery: admitted --------------------------------------------------------------------------


ADMITTED: list[tuple[str, Callable[[str, str], dict[str, Any]]]] = [
    ("plain", pod),
    ("classic-injection", classic),
    ("native-sidecar-injection", native),
    (
        "classic-injection-explicit-token-volume",
        lambda n, ns: explicit_token(n, ns, init=istio_init(volumeMounts=[token_mount()])),
    ),
    ("istio-init-without-mounts", lambda n, ns: classic(n, ns, automountServiceAccountToken=False)),
    (
        "istio-init-registry-istio-io",
        lambda n, ns: classic(n, ns, init=istio_init(image="registry.istio.io/release/proxyv2:1.28.0")),
    ),
    ("istio-init-digest", lambda n, ns: classic(n, ns, init=istio_init(image=f"docker.io/istio/proxyv2@{DIGEST}"))),
    ("istio-init-tag-and-digest", lambda n, ns: classic(n, ns, init=istio_init(image=f"{PROXY}@{DIGEST}"))),
    ("istio-init-mirror", lambda n, ns: classic(n, ns, init=istio_init(image=f"{MIRROR}:1.28.0-distroless"))),
    (
        "istio-init-net-admin-only",
        lambda n, ns: classic(
            n,
            ns,
            init=istio_init(
                securityContext={
                    **istio_init()["securityContext"],
                    "capabilities": {"add": ["NET_ADMIN"], "drop": ["ALL"]},
                }
            ),
        ),
    ),
    (
        "istio-init-plus-baseline-capability",
        lambda n, ns: classic(
            n,
            ns,
            init=istio_init(
                securityContext={
                    **istio_init()["securityContext"],
                    "capabilities": {"add": ["NET_ADMIN", "NET_RAW", "SETUID"], "drop": ["ALL"]},
                }
            ),
        ),
    ),
    ("istio-init-no-env", lambda n, ns: classic(n, ns, init=drop_key(istio_init(), "env"))),
    (
        "shaky-istio-init-without-extra-capabilities",  # any shape is fine when it asks for nothing extra
        lambda n, ns: classic(
            n, ns, init=istio_init(command=["sh"], securityContext={"allowPrivilegeEscalation": False})
        ),
    ),
    (
        "baseline-capabilities",
        lambda n, ns: pod(n, ns, containers=[sc(capabilities={"add": list(manifests.BASELINE_CAPABILITIES)})]),
    ),
    (
        "runtime-default-seccomp",
        lambda n, ns: pod(
            n,
            ns,
            securityContext={"seccompProfile": {"type": "RuntimeDefault"}},
            containers=[sc(seccompProfile={"type": "RuntimeDefault"})],
        ),
    ),
    (
        "localhost-seccomp",
        lambda n, ns: pod(
            n, ns, containers=[sc(seccompProfile={"type": "Localhost", "localhostProfile": "profiles/app.json"})]
        ),
    ),
    (
        "apparmor-runtime-default",
        lambda n, ns: pod(n, ns, securityContext={"appArmorProfile": {"type": "RuntimeDefault"}}),
    ),
    (
        "apparmor-annotations",
        lambda n, ns: {
            **pod(n, ns, containers=[APP, {"name": "b", "image": "b:1"}]),
            "metadata": {
                "name": n,
                "namespace": ns,
                "annotations": {
                    "container.apparmor.security.beta.kubernetes.io/app": "runtime/default",
                    "container.apparmor.security.beta.kubernetes.io/b": "localhost/k8s-b",
                },
            },
        },
    ),
    (
        "selinux-container-types",
        lambda n, ns: pod(
            n,
            ns,
            securityContext={"seLinuxOptions": {"type": "container_t", "level": "s0:c123,c456"}},
            containers=[sc(seLinuxOptions={"type": "container_init_t"})],
        ),
    ),
    (
        "safe-sysctls",
        lambda n, ns: pod(
            n,
            ns,
            securityContext={
                "sysctls": [
                    {"name": "kernel.shm_rmid_forced", "value": "1"},
                    {"name": "net.ipv4.ip_local_port_range", "value": "1024 65000"},
                    {"name": "net.ipv4.ip_unprivileged_port_start", "value": "80"},
                    {"name": "net.ipv4.tcp_syncookies", "value": "1"},
                    {"name": "net.ipv4.ping_group_range", "value": "0 2147483647"},
                    {"name": "net.ipv4.ip_local_reserved_ports", "value": "30000-30100"},
                    {"name": "net.ipv4.tcp_keepalive_time", "value": "600"},
                    {"name": "net.ipv4.tcp_fin_timeout", "value": "30"},
                    {"name": "net.ipv4.tcp_keepalive_intvl", "value": "30"},
                    {"name": "net.ipv4.tcp_keepalive_probes", "value": "5"},
                ]
            },
        ),
    ),
    (
        "probes-without-host",
        lambda n, ns: pod(
            n,
            ns,
            containers=[
                {
                    **APP,
                    "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080}},
                    "readinessProbe": {"tcpSocket": {"port": 8080}},
                    "startupProbe": {"grpc": {"port": 9090}},
                    "lifecycle": {"preStop": {"sleep": {"seconds": 5}}, "postStart": {"httpGet": {"port": 8080}}},
                }
            ],
        ),
    ),
    (
        "container-port-without-host-port",
        lambda n, ns: pod(n, ns, containers=[{**APP, "ports": [{"containerPort": 80}]}]),
    ),
    ("procMount-default", lambda n, ns: pod(n, ns, containers=[sc(procMount="Default")])),
    (
        "explicit-false-host-fields",
        lambda n, ns: pod(n, ns, hostNetwork=False, hostPID=False, hostIPC=False, containers=[sc(privileged=False)]),
    ),
    (
        "restricted-pod",
        lambda n, ns: pod(
            n,
            ns,
            securityContext={"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
            containers=[sc(allowPrivilegeEscalation=False, capabilities={"drop": ["ALL"]})],
        ),
    ),
]


@pytest.mark.parametrize(("case", "build"), ADMITTED, ids=[c[0] for c in ADMITTED])
def test_genuine_shape_admitted(guard: Guard, case: str, build: Callable[[str, str], dict[str, Any]]) -> None:
    created, warnings = guard.installer.create_with_warnings(build(pod_name("ok", case), guard.namespace))
    assert created["metadata"]["namespace"] == guard.namespace
    assert not [w for w in warnings if "ValidatingAdmissionPolicy" in w], warnings


def test_token_volume_injected_by_the_service_account_plugin_is_accepted(guard: Guard) -> None:
    """The classic pod relies on admission to add the token volume and istio-init's mount."""
    created = guard.installer.create(classic("ok-injected-token", guard.namespace), dry_run=True)
    init = created["spec"]["initContainers"][0]
    (mount,) = init["volumeMounts"]
    assert mount["mountPath"] == TOKEN_PATH
    assert mount["readOnly"] is True
    volume = next(v for v in created["spec"]["volumes"] if v["name"] == mount["name"])
    assert len(volume["projected"]["sources"]) == 3


# ---- ephemeral containers (subresource, as cluster admin) --------------------------------------------


def add_ephemeral(kube: Kube, namespace: str, name: str, container: dict[str, Any], *, dry_run: bool) -> dict[str, Any]:
    live = kube.get("v1", "Pod", name, namespace)
    assert live is not None
    live["spec"].setdefault("ephemeralContainers", []).append(container)
    query = {"dryRun": "All"} if dry_run else {}
    return kube.request("PUT", kube.path("v1", "Pod", name, namespace, "ephemeralcontainers"), body=live, query=query)


@pytest.fixture(scope="module")
def running_pod(guard: Guard) -> str:
    """A real pod in the guarded namespace (Pending forever: no kubelet)."""
    name = "target"
    guard.installer.create(pod(name, guard.namespace))
    return name


@pytest.mark.parametrize(
    ("case", "container", "expected"),
    [
        (
            "privileged",
            {"name": "debug", "image": "busybox:1", "securityContext": {"privileged": True}},
            "privileged containers are not allowed: debug (ephemeral)",
        ),
        (
            "sys-admin",
            {"name": "debug", "image": "busybox:1", "securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}},
            "debug (ephemeral) adds SYS_ADMIN",
        ),
        (
            "istio-init-exception",
            {**istio_init(), "resources": {}},
            "capabilities beyond the baseline set are not allowed: istio-init (ephemeral) adds NET_ADMIN, NET_RAW",
        ),
        (
            "istio-init-exception-targeting-app",
            {**istio_init(), "resources": {}, "targetContainerName": "app"},
            "istio-init (ephemeral) adds NET_ADMIN, NET_RAW",
        ),
        (
            "seccomp",
            {"name": "debug", "image": "busybox:1", "securityContext": {"seccompProfile": {"type": "Unconfined"}}},
            "seccomp profile Unconfined is not allowed: debug (ephemeral)",
        ),
    ],
)
def test_ephemeral_container_denied(
    guard: Guard, running_pod: str, case: str, container: dict[str, Any], expected: str
) -> None:
    with pytest.raises(errors.Forbidden) as caught:
        add_ephemeral(guard.admin, guard.namespace, running_pod, container, dry_run=True)
    assert f"ValidatingAdmissionPolicy '{guard.names.pod_guard}'" in caught.value.message
    assert expected in caught.value.message, caught.value.message


def test_plain_ephemeral_container_admitted(guard: Guard, running_pod: str) -> None:
    debug = {"name": f"debug-{uuid.uuid4().hex[:4]}", "image": "busybox:1", "targetContainerName": "app"}
    updated = add_ephemeral(guard.admin, guard.namespace, running_pod, debug, dry_run=False)
    assert debug["name"] in [c["name"] for c in updated["spec"]["ephemeralContainers"]]


# ---- scope: admins bound, other namespaces untouched ------------------------------------------------


def test_cluster_admin_is_bound_too(guard: Guard) -> None:
    message = denial(guard.admin, pod("admin-attack", guard.namespace, hostPID=True, containers=[sc(privileged=True)]))
    assert f"ValidatingAdmissionPolicy '{guard.names.pod_guard}'" in message


def test_other_namespaces_are_not_guarded(guard: Guard) -> None:
    other = f"pg-unguarded-{uuid.uuid4().hex[:6]}"
    make_namespace(guard.admin, other)
    try:
        guard.admin.create(pod("free", other, hostPID=True, containers=[sc(privileged=True)]), dry_run=True)
    finally:
        guard.admin.delete("v1", "Namespace", other)


def test_a_tenant_admin_cannot_edit_the_parameter(guard: Guard) -> None:
    """The parameter is the cluster-scoped TenantPlatform's status: the ``admin`` the installer holds
    in its namespace does not reach it (RBAC), and the real write is refused."""
    user = f"system:serviceaccount:{guard.namespace}:{guard.installer_sa}"
    groups = ["system:serviceaccounts", f"system:serviceaccounts:{guard.namespace}", "system:authenticated"]
    for verb, sub in (("patch", "status"), ("update", "status"), ("patch", ""), ("update", ""), ("delete", "")):
        allowed, _ = guard.admin.can_i(
            user=user,
            groups=groups,
            verb=verb,
            resource="tenantplatforms",
            group=constants.GROUP,
            subresource=sub,
        )
        assert not allowed, (verb, sub)
    with pytest.raises(errors.Forbidden):
        guard.installer.merge_patch(
            constants.API_VERSION,
            constants.KIND,
            guard.platform.name,
            {"status": {"podGuard": {"namespaces": [], "enforcement": "Warn"}}},
            subresource="status",
        )
    denial(guard.installer, pod("still-denied", guard.namespace, hostPID=True))


def test_a_platform_neither_guards_nor_unguards_another_platforms_namespace(
    crd: Kube, make_platform: Callable[..., dict[str, Any]], unique_name: str
) -> None:
    """A full pass writes into a platform's parameter only the namespaces it owns; and whatever a
    platform's status says (a forged one), another platform's guard still judges its namespaces."""
    first, second = f"{unique_name}-a", f"{unique_name}-b"
    make_platform(first, first, podGuard={"enforcement": "Deny"})
    make_platform(second, second, additionalNamespaces=[first], podGuard={"enforcement": "Warn"})
    for name in (first, second):
        reconcile.run(fresh(crd, name), kube=crd, settings=SETTINGS, now=NOW)
    assert parameter(crd, first)["namespaces"] == [first]
    assert parameter(crd, second)["namespaces"] == [second]  # not the first one's namespace
    eventually("the first guard to deny", lambda: guard_denies(crd, first, DENY.pod_guard))

    # A forged parameter for the second platform, at Warn over the first one's namespace: the
    # first platform's Deny still applies there (evaluated per parameter, any denial wins).
    crd.merge_patch(
        constants.API_VERSION,
        constants.KIND,
        second,
        {"status": {"podGuard": {"namespaces": [first, second], "enforcement": "Warn"}}},
        subresource="status",
    )
    eventually(
        "the forged parameter to be read",
        lambda: any(WARN.pod_guard in w for w in crd.create_with_warnings(pod("w", second, hostPID=True))[1]),
    )
    assert guard_denies(crd, first, DENY.pod_guard)
    # A forged parameter naming kube-system at Deny: kube-system carries no claim label, so the
    # guard never even evaluates requests there.
    crd.merge_patch(
        constants.API_VERSION,
        constants.KIND,
        second,
        {"status": {"podGuard": {"namespaces": ["kube-system", second], "enforcement": "Deny"}}},
        subresource="status",
    )
    eventually("the forged Deny to be read", lambda: guard_denies(crd, second, DENY.pod_guard))
    crd.create(pod("kube-system-untouched", "kube-system", hostPID=True), dry_run=True)
    # The next pass puts the second platform's parameter back to what it owns.
    reconcile.run(fresh(crd, second), kube=crd, settings=SETTINGS, now=NOW)
    assert parameter(crd, second)["namespaces"] == [second]
    for name in (second, first):
        reconcile.cleanup(fresh(crd, name), kube=crd, settings=SETTINGS, now=NOW)


# ---- the checklist's own checks with kubectl ---------------------------------------------------------


def test_checklist_privileged_hostpid_pod_is_forbidden_naming_the_pod_guard(guard: Guard) -> None:
    manifest = yaml.safe_dump(
        pod("checklist-privileged", guard.namespace, hostPID=True, containers=[sc(privileged=True)])
    )
    result = guard.control_plane.kubectl(
        guard.as_installer, "create", "--dry-run=server", "-f", "-", input=manifest, check=False
    )
    assert result.returncode != 0
    assert "Error from server (Forbidden)" in result.stderr, result.stderr
    assert guard.names.pod_guard in result.stderr


def exec_path(namespace: str, pod_name: str, container: str | None, sub: str = "exec") -> str:
    query = "command=sh&stdin=true" if sub == "exec" else "stdin=true"
    if container is not None:
        query = f"container={container}&{query}"
    return f"/api/v1/namespaces/{namespace}/pods/{pod_name}/{sub}?{query}"


@pytest.mark.parametrize("sub", ["exec", "attach"])
def test_checklist_exec_into_istio_init_is_forbidden_naming_the_exec_guard(guard: Guard, sub: str) -> None:
    result = guard.control_plane.kubectl(
        guard.as_installer,
        "create",
        "--raw",
        exec_path(guard.namespace, "x", "istio-init", sub),
        "-f",
        "/dev/null",
        check=False,
    )
    assert result.returncode != 0
    assert "Error from server (Forbidden)" in result.stderr, result.stderr
    assert guard.names.exec_guard in result.stderr
    assert f"{sub} into container istio-init of pod x is not allowed" in result.stderr


@pytest.mark.parametrize("container", ["app", "istio-proxy", None])
def test_exec_into_other_containers_is_not_refused_by_the_guard(guard: Guard, container: str | None) -> None:
    result = guard.control_plane.kubectl(
        guard.as_installer,
        "create",
        "--raw",
        exec_path(guard.namespace, "x", container),
        "-f",
        "/dev/null",
        check=False,
    )
    assert result.returncode != 0
    assert "Error from server (NotFound)" in result.stderr, result.stderr
    assert guard.names.exec_guard not in result.stderr


def test_exec_guard_applies_to_existing_pods(guard: Guard, running_pod: str) -> None:
    with pytest.raises(errors.Forbidden) as caught:
        guard.installer.request("POST", exec_path(guard.namespace, running_pod, "istio-init"))
    assert guard.names.exec_guard in caught.value.message


# ---- the step: Deny, zero-write resync, cleanup order ------------------------------------------------


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

    return eventually(what, attempt)


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
    body = kube.get(constants.API_VERSION, constants.KIND, name)
    assert body is not None
    return body


DEFAULT_REPOSITORIES = [
    "registry.istio.io/release/proxyv2",
    "docker.io/istio/proxyv2",
    "ghcr.io/kamiwaza-internal/containers/images/istio/proxyv2",
]


def test_step_deny_mode_zero_write_resync_and_cleanup(
    crd: Kube, make_platform: Callable[..., dict[str, Any]], unique_name: str
) -> None:
    make_namespace(crd, unique_name, claimed_by=unique_name)
    body = make_platform(unique_name, unique_name, podGuard={"enforcement": "Deny"})
    kube = recording(crd)
    ctx = context(kube, body)
    result = reconcile_step(STEP, ctx)
    (cond,) = result.conditions
    assert cond.type == "PodGuardReady"
    assert (cond.status, cond.reason) == ("True", "Enforcing"), cond
    assert DENY.pod_guard in cond.message and "with this TenantPlatform as their parameter" in cond.message
    param = {"enforcement": "Deny", "namespaces": [unique_name], "proxyImageRepositories": DEFAULT_REPOSITORIES}
    assert result.status["podGuard"] == {**param, "requested": "Deny"}
    # The parameter is on the API server already (written by the step, before any check), and
    # the end-of-pass status write is told so.
    assert parameter(crd, unique_name) == param
    assert ctx.status_written == {"podGuard": param}
    for name in manifests.SHARED_NAMES:
        for kind in ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"):
            live = kube.get(VAP, kind, name)
            assert live is not None
            labels = live["metadata"]["labels"]
            assert labels[constants.LABEL_COMPONENT] == "podguard"
            assert constants.LABEL_PLATFORM not in labels  # everyone's, not this platform's
            assert not live["metadata"].get("ownerReferences")  # never collected with a platform
    for name in (DENY.pod_guard, DENY.exec_guard):
        assert actions(kube, name) == ["Deny", "Audit"]
    for name in (WARN.pod_guard, WARN.exec_guard):
        assert actions(kube, name) == ["Warn", "Audit"]
    eventually("the guard to deny", lambda: guard_denies(crd, unique_name, DENY.pod_guard))

    # A no-op resync writes nothing (the parameter is found on the API server).
    body = fresh(crd, unique_name)
    _, writes = kube.counter.snapshot()
    again = reconcile_step(STEP, context(kube, body))
    assert again.conditions[0].status == "True"
    assert kube.counter.snapshot()[1] == writes

    # check (dry run) reports in place and writes nothing.
    checked = reconcile_step(STEP, context(kube, body, dry_run=True))
    assert checked.conditions[0].status == "True", checked.conditions
    assert kube.counter.snapshot()[1] == writes

    # Drift is repaired: the shared binding, and the parameter.
    kube.merge_patch(
        VAP, "ValidatingAdmissionPolicyBinding", DENY.pod_guard, {"spec": {"validationActions": ["Audit"]}}
    )
    drifted = reconcile_step(STEP, context(kube, body, dry_run=True))
    assert (drifted.conditions[0].status, drifted.conditions[0].reason) == ("False", "WouldApply")
    reconcile_step(STEP, context(kube, body))
    assert actions(kube, DENY.pod_guard) == ["Deny", "Audit"]
    crd.merge_patch(
        constants.API_VERSION,
        constants.KIND,
        unique_name,
        {"status": {"podGuard": {"namespaces": [], "enforcement": "Warn"}}},
        subresource="status",
    )
    drifted = reconcile_step(STEP, context(kube, fresh(crd, unique_name), dry_run=True))
    assert drifted.conditions[0].reason == "WouldApply"
    assert "status.podGuard" in drifted.conditions[0].message
    reconcile_step(STEP, context(kube, fresh(crd, unique_name)))
    assert parameter(crd, unique_name) == param

    # Cleanup deletes nothing: the shared objects stay; the parameter goes with the platform.
    cleaned = STEP.cleanup(context(kube, body))
    assert cleaned.done, cleaned.message
    assert kube.deleted == []
    for name in manifests.SHARED_NAMES:
        assert kube.get(VAP, "ValidatingAdmissionPolicy", name) is not None
    crd.delete(constants.API_VERSION, constants.KIND, unique_name)
    eventually("the guard to be gone with the platform", lambda: not guard_denies(crd, unique_name, DENY.pod_guard))
    crd.delete("v1", "Namespace", unique_name)


def test_per_platform_guards_of_earlier_versions_are_named_not_deleted(
    crd: Kube, make_platform: Callable[..., dict[str, Any]], unique_name: str
) -> None:
    """What an earlier version left (per-platform names, our labels with the platform's name) is
    named in PodGuardReady with the admin's one-liner; the step deletes nothing."""
    make_namespace(crd, unique_name, claimed_by=unique_name)
    body = make_platform(unique_name, unique_name, podGuard={"enforcement": "Deny"})
    old = f"tenant-platform-{unique_name}-pod-guard"
    labels = {
        constants.LABEL_MANAGED_BY: constants.MANAGED_BY_VALUE,
        constants.LABEL_PLATFORM: unique_name,
        constants.LABEL_COMPONENT: "podguard",
    }
    literal = manifests.GuardParam((unique_name,), "Deny", ("docker.io/istio/proxyv2",))
    policy = manifests.render_pod_guard_policy("Deny", literal, unique_name)
    policy["metadata"] = {"name": old, "labels": labels}
    binding = manifests.render_binding(old, "Deny", shared=False)
    binding["metadata"]["labels"] = labels
    for obj in (policy, binding):
        crd.apply(obj)
    kube = recording(crd)
    result = reconcile_step(STEP, context(kube, body))
    (cond,) = result.conditions
    assert (cond.status, cond.reason) == ("True", "Enforcing"), cond
    assert f"ValidatingAdmissionPolicy {old}" in cond.message
    assert f"-l tenancy.dev/component=podguard,tenancy.dev/tenant-platform={unique_name}" in cond.message
    assert kube.deleted == []
    for kind in ("ValidatingAdmissionPolicyBinding", "ValidatingAdmissionPolicy"):
        assert crd.get(VAP, kind, old) is not None
        crd.delete(VAP, kind, old)
    crd.delete("v1", "Namespace", unique_name)


def test_step_warn_mode(crd: Kube, make_platform: Callable[..., dict[str, Any]], unique_name: str) -> None:
    make_namespace(crd, unique_name, claimed_by=unique_name)
    body = make_platform(unique_name, unique_name, podGuard={"enforcement": "Warn"})
    result = reconcile_step(STEP, context(crd, body))
    assert (result.conditions[0].status, result.conditions[0].reason) == ("True", "WarnOnly")
    assert result.status["podGuard"]["enforcement"] == "Warn"
    assert parameter(crd, unique_name)["enforcement"] == "Warn"

    def warned() -> list[str] | None:
        _, warnings = crd.create_with_warnings(pod("warned", unique_name, hostIPC=True))
        return [w for w in warnings if WARN.pod_guard in w] or None

    (warning,) = eventually("the guard to warn", warned)
    assert "host namespaces are not allowed: hostIPC" in warning
    assert STEP.cleanup(context(crd, body)).done
    crd.delete("v1", "Namespace", unique_name)


# ---- staged enforcement --------------------------------------------------------------------------------


def test_staged_waits_for_violators_then_denies(
    crd: Kube, make_platform: Callable[..., dict[str, Any]], unique_name: str
) -> None:
    extra = f"{unique_name}-x"
    for ns in (unique_name, extra):
        make_namespace(crd, ns, adoptable_by=unique_name, claimed_by=unique_name)
    body = make_platform(unique_name, unique_name, additionalNamespaces=[extra], podGuard={"enforcement": "Warn"})
    reconcile_step(STEP, context(crd, body))
    assert parameter(crd, unique_name)["enforcement"] == "Warn"
    eventually(
        "the guard to warn",
        lambda: any(WARN.pod_guard in w for w in crd.create_with_warnings(pod("w", extra, hostPID=True))[1]),
    )
    # Existing pods: one violating (admitted with a warning while the guard only warns), two fine.
    crd.create(pod("bad", extra, volumes=[{"name": "host", "hostPath": {"path": "/var/run"}}]))
    crd.create(classic("meshed", unique_name))
    crd.create(pod("fine", extra))

    crd.merge_patch(
        constants.API_VERSION, constants.KIND, unique_name, {"spec": {"podGuard": {"enforcement": "Staged"}}}
    )
    result = reconcile_until(
        crd, unique_name, lambda r: r.conditions[0].reason == "ViolatingPodsFound", "the staged check to find bad"
    )
    cond = result.conditions[0]
    assert cond.status == "False"
    assert f"{extra}/bad: hostPath volumes are not allowed: host" in cond.message
    assert result.progressing
    assert result.status["podGuard"] == {
        "enforcement": "Warn",
        "requested": "Staged",
        "namespaces": [unique_name, extra],
        "proxyImageRepositories": DEFAULT_REPOSITORIES,
        "podsThatWouldBeDenied": 1,
        "examples": [f"{extra}/bad: hostPath volumes are not allowed: host"],
    }
    assert parameter(crd, unique_name)["enforcement"] == "Warn"
    # Still waiting on the next pass (verdicts cached; the parameter never promoted).
    again = reconcile_step(STEP, context(crd, crd.get(constants.API_VERSION, constants.KIND, unique_name) or {}))
    assert again.conditions[0].reason == "ViolatingPodsFound"
    assert parameter(crd, unique_name)["enforcement"] == "Warn"

    # The whole reconcile writes the same into the TenantPlatform's status.
    if any(step.name == STEP.name for step in registry.STEPS):
        fresh = crd.get(constants.API_VERSION, constants.KIND, unique_name)
        assert fresh is not None
        reconcile.run(fresh, kube=crd, settings=SETTINGS, now=NOW)
        status = (crd.get(constants.API_VERSION, constants.KIND, unique_name) or {})["status"]
        assert status["podGuard"]["podsThatWouldBeDenied"] == 1
        assert status["podGuard"]["examples"] == [f"{extra}/bad: hostPath volumes are not allowed: host"]
        guard_cond = next(c for c in status["conditions"] if c["type"] == "PodGuardReady")
        assert guard_cond["reason"] == "ViolatingPodsFound"
        assert f"{extra}/bad" in guard_cond["message"]
        assert status["podGuard"]["enforcement"] == "Warn"

    crd.delete("v1", "Pod", "bad", extra)
    eventually("pod bad to be gone", lambda: crd.get("v1", "Pod", "bad", extra) is None)
    result = reconcile_until(crd, unique_name, lambda r: r.conditions[0].status == "True", "promotion")
    assert result.conditions[0].reason == "Enforcing"
    assert "Staged enforcement found no pod that would be denied" in result.conditions[0].message
    assert result.status["podGuard"] == {
        "enforcement": "Deny",
        "requested": "Staged",
        "namespaces": [unique_name, extra],
        "proxyImageRepositories": DEFAULT_REPOSITORIES,
        "podsThatWouldBeDenied": 0,
        "examples": [],
    }
    assert parameter(crd, unique_name)["enforcement"] == "Deny"  # written by the step itself
    eventually("the guard to deny", lambda: guard_denies(crd, extra, DENY.pod_guard))

    # Promoted: stays at Deny, no more dry runs, keeps recording.
    body = crd.get(constants.API_VERSION, constants.KIND, unique_name) or {}
    body["status"] = {"podGuard": result.status["podGuard"]}
    _, writes_before = crd.counter.snapshot()
    dry_runs_before = crd.counter.by_verb.get("POST (dry-run)", 0)
    later = reconcile_step(STEP, context(crd, body))
    assert later.conditions[0].status == "True"
    assert later.status["podGuard"]["podsThatWouldBeDenied"] == 0
    assert crd.counter.snapshot()[1] == writes_before
    assert crd.counter.by_verb.get("POST (dry-run)", 0) == dry_runs_before
    assert STEP.cleanup(context(crd, body)).done
    for ns in (unique_name, extra):
        crd.delete("v1", "Namespace", ns)


def test_staged_in_a_namespace_enforcing_pod_security(
    crd: Kube, make_platform: Callable[..., dict[str, Any]], unique_name: str
) -> None:
    """The hostPID canary is rejected by Pod Security there; the restricted canary proves the guard live."""
    make_namespace(
        crd, unique_name, labels={"pod-security.kubernetes.io/enforce": "restricted"}, claimed_by=unique_name
    )
    crd.create(
        pod(
            "restricted",
            unique_name,
            securityContext={"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
            containers=[sc(allowPrivilegeEscalation=False, capabilities={"drop": ["ALL"]})],
        )
    )
    body = make_platform(unique_name, unique_name, podGuard={"enforcement": "Staged"})
    result = reconcile_until(crd, unique_name, lambda r: r.conditions[0].status == "True", "promotion")
    assert result.status["podGuard"]["enforcement"] == "Deny"
    assert STEP.cleanup(context(crd, body)).done
    crd.delete("v1", "Namespace", unique_name)


# ---- updates: only spec changes are checked -----------------------------------------------------------


def test_updates_are_checked_only_when_the_spec_changes(
    crd: Kube, make_platform: Callable[..., dict[str, Any]], unique_name: str
) -> None:
    make_namespace(crd, unique_name, claimed_by=unique_name)
    body = make_platform(unique_name, unique_name, podGuard={"enforcement": "Warn"})
    reconcile_step(STEP, context(crd, body))
    eventually(
        "the guard to warn",
        lambda: any(WARN.pod_guard in w for w in crd.create_with_warnings(pod("w", unique_name, hostPID=True))[1]),
    )
    crd.create(pod("old", unique_name, volumes=[{"name": "host", "hostPath": {"path": "/var/log"}}]))
    crd.merge_patch(constants.API_VERSION, constants.KIND, unique_name, {"spec": {"podGuard": {"enforcement": "Deny"}}})
    reconcile_step(STEP, context(crd, crd.get(constants.API_VERSION, constants.KIND, unique_name) or {}))
    eventually("the guard to deny", lambda: guard_denies(crd, unique_name, DENY.pod_guard))

    # Metadata-only updates of a pod admitted before the guard still work.
    crd.merge_patch("v1", "Pod", "old", {"metadata": {"labels": {"tier": "legacy"}}}, namespace=unique_name)
    # A spec change is checked.
    with pytest.raises(errors.Forbidden) as caught:
        crd.json_patch(
            "v1",
            "Pod",
            "old",
            [{"op": "replace", "path": "/spec/containers/0/image", "value": "registry.example.com/app:2"}],
            namespace=unique_name,
        )
    assert "hostPath volumes are not allowed: host" in caught.value.message
    # An image change that makes istio-init a look-alike is checked too.
    crd.create(classic("meshed", unique_name))
    live = crd.get("v1", "Pod", "meshed", unique_name)
    assert live is not None
    live["spec"]["initContainers"][0]["image"] = "docker.io/istio/proxyv2-evil:1.28.0"
    with pytest.raises(errors.Forbidden) as caught:
        crd.replace(live)
    assert NOT_ALLOWED_IMAGE in caught.value.message
    assert STEP.cleanup(context(crd, body)).done
    crd.delete("v1", "Namespace", unique_name)


# ---- type checking -------------------------------------------------------------------------------------

STATUS_CONTROLLER = "validatingadmissionpolicy-status-controller"


@pytest.fixture(scope="module")
def type_checking_cluster(control_plane: ControlPlane) -> Iterator[Kube]:
    """A control plane whose kube-controller-manager runs the policy status (type-checking) controller.

    The session's control plane is used when it runs that controller; otherwise a second one is
    started for this module (its --controllers list is appended to).
    """
    from tenant_platform.testing import controlplane as cp_module  # noqa: PLC0415

    if STATUS_CONTROLLER in cp_module.CONTROLLERS:
        yield Kube.from_kubeconfig(str(control_plane.kubeconfig_path))
        return
    own = ControlPlane(
        bin_dir=control_plane.bin_dir, extra_controller_manager_args=[f"--controllers={STATUS_CONTROLLER}"]
    )
    own.start()
    try:
        yield Kube.from_kubeconfig(str(own.kubeconfig_path))
    finally:
        own.stop()


def type_check(kube: Kube, policy: dict[str, Any]) -> list[dict[str, Any]]:
    """Create ``policy`` and return the API server's type-checking warnings for it."""
    created = kube.create(policy)
    name = created["metadata"]["name"]
    try:

        def observed() -> dict[str, Any] | None:
            live = kube.get(VAP, "ValidatingAdmissionPolicy", name)
            return live if (live or {}).get("status", {}).get("observedGeneration") == 1 else None

        checked = eventually(f"type checking of {name}", observed)
        return list(((checked.get("status") or {}).get("typeChecking") or {}).get("expressionWarnings") or [])
    finally:
        kube.delete(VAP, "ValidatingAdmissionPolicy", name)


def inlined(policy: dict[str, Any]) -> dict[str, Any]:
    """The pod guard with every variable inlined into validations, so the checker sees it all.

    NB: the API server type-checks validations, messageExpressions and matchConditions against
    the Pod schema, but not the variables themselves (a variable with a typo just becomes dyn).
    """
    found = {v["name"]: v["expression"] for v in policy["spec"]["variables"]}

    def expand(expression: str) -> str:
        return re.sub(r"variables\.([A-Za-z0-9_]+)", lambda m: f"({expand(found[m.group(1)])})", expression)

    validations = [{"expression": f"[{expand(e)}].size() == 1", "message": n} for n, e in found.items()]
    validations += [
        {"expression": expand(v["expression"]), "messageExpression": expand(v["messageExpression"])}
        for v in policy["spec"]["validations"]
    ]
    out = copy.deepcopy(policy)
    out["metadata"]["name"] += "-inlined"
    out["spec"].pop("variables")
    out["spec"]["validations"] = validations
    return out


LITERAL = manifests.GuardParam(("tc",), "Deny", ("docker.io/istio/proxyv2",))


def test_policies_type_check_without_warnings(type_checking_cluster: Kube) -> None:
    devmode.install_crd(type_checking_cluster)  # the parameter's schema
    for policy in manifests.render()[:4] + manifests.render(LITERAL, "typecheck")[:4]:
        policy["metadata"]["name"] += f"-{uuid.uuid4().hex[:6]}"
        assert type_check(type_checking_cluster, policy) == [], policy["metadata"]["name"]
        if "-pod-guard-" in policy["metadata"]["name"]:
            assert type_check(type_checking_cluster, inlined(policy)) == [], policy["metadata"]["name"]


def test_the_type_check_harness_catches_a_typo(type_checking_cluster: Kube) -> None:
    devmode.install_crd(type_checking_cluster)
    pod_policy = manifests.render(LITERAL, f"typo-{uuid.uuid4().hex[:6]}")[0]
    for var in pod_policy["spec"]["variables"]:
        var["expression"] = var["expression"].replace(".?subPathExpr", ".?subPathExp")
    warnings = type_check(type_checking_cluster, inlined(pod_policy))
    assert any("undefined field 'subPathExp'" in w["warning"] for w in warnings), warnings


# ---- clusters without the v1 API -----------------------------------------------------------------------


def test_cluster_without_v1_validating_admission_policy(control_plane: ControlPlane) -> None:
    """Emulates a cluster before 1.30: the v1 kinds are not served (and the plugin is off)."""
    resources = "admissionregistration.k8s.io/v1/validatingadmissionpolicies"
    with ControlPlane(
        bin_dir=control_plane.bin_dir,
        controller_manager=False,
        extra_apiserver_args=[
            "--disable-admission-plugins=ValidatingAdmissionPolicy",
            f"--runtime-config={resources}=false,{resources[: -len('policies')]}policybindings=false",
        ],
    ) as old:
        kube = Kube.from_kubeconfig(str(old.kubeconfig_path))
        body = {
            "metadata": {"name": "old-cluster", "uid": "u-1"},
            "spec": {"namespace": "kamiwaza", "domain": "x.example.com"},
        }
        result = reconcile_step(STEP, context(kube, body))
        (cond,) = result.conditions
        assert (cond.status, cond.reason) == ("False", "UnsupportedKubernetesVersion")
        assert "Kyverno or Gatekeeper" in cond.message
        assert "docs/pod-guard.md" in cond.message
        assert result.status["podGuard"] == {"enforcement": "None", "requested": "Staged"}
        assert kube.counter.snapshot()[1] == 0
        assert STEP.cleanup(context(kube, body)).done


def test_the_session_servers_version_decides_support(admin_kube: Kube) -> None:
    """On the real server the session runs (--k8s / TENANT_PLATFORM_K8S): before 1.30 (a real 1.29
    from hack/k8s-1.29) the step reports UnsupportedKubernetesVersion naming the version and writes
    nothing; from 1.30 on the v1 kinds are served and the step does not say so."""
    major, minor, git_version = admin_kube.server_version()
    body = {
        "metadata": {"name": f"version-{uuid.uuid4().hex[:6]}", "uid": "u-1"},
        "spec": {"namespace": f"version-{uuid.uuid4().hex[:6]}", "domain": "v.example.com"},
    }
    result = reconcile_step(STEP, context(admin_kube, body, dry_run=True))
    (cond,) = result.conditions
    if (major, minor) < (1, 30):
        assert (cond.status, cond.reason) == ("False", "UnsupportedKubernetesVersion"), cond
        assert f"Kubernetes {git_version} does not serve" in cond.message, cond.message
        assert admin_kube.counter.snapshot()[1] == 0
        assert "Kyverno or Gatekeeper" in cond.message
    else:
        assert cond.reason != "UnsupportedKubernetesVersion", cond
        assert admin_kube.served("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy")
