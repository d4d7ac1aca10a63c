"""The pod guard's Pod Security baseline controls against the real API server: every attack on a
baseline control is denied with the guard's own message naming the offending containers, genuine
shapes are admitted, ephemeral containers are judged too (through the ``pods/ephemeralcontainers``
subresource of a real, Pending pod, as the cluster admin: the guard binds admins too, and the
namespace ``admin`` role does not grant that subresource), and the checklist's own kubectl check.

Pods are created by server-side dry run as the installer identity (podguard_support.py).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
import yaml
from podguard_support import (
    APP,
    Guard,
    denial,
    istio_init,
    pod,
    pod_name,
    sc,
)
from podguard_support import guard as guard  # a module fixture: one guarded namespace here
from podguard_support import running_pod as running_pod  # a module fixture

from tenant_platform.concerns.podguard import manifests
from tenant_platform.kube import errors
from tenant_platform.kube.client import Kube

pytestmark = pytest.mark.cluster

INIT = {"name": "setup", "image": "registry.example.com/setup:1"}


# ---- denied --------------------------------------------------------------------------------------------

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


def test_denial_names_every_offending_container(guard: Guard) -> None:
    body = pod(
        "many",
        guard.namespace,
        initContainers=[{**INIT, "securityContext": {"privileged": True}}],
        containers=[sc(privileged=True), {"name": "sidecar", "image": "x:1", "securityContext": {"privileged": True}}],
    )
    assert "privileged containers are not allowed: app, sidecar, setup (init)" in denial(guard.installer, body)


# ---- admitted ------------------------------------------------------------------------------------------


ADMITTED: list[tuple[str, Callable[[str, str], dict[str, Any]]]] = [
    ("plain", pod),
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


# ---- ephemeral containers (subresource, as cluster admin) --------------------------------------------


def add_ephemeral(kube: Kube, namespace: str, name: str, container: dict[str, Any], *, dry_run: bool) -> dict[str, Any]:
    live = kube.get("v1", "Pod", name, namespace)
    assert live is not None
    live["spec"].setdefault("ephemeralContainers", []).append(container)
    query = {"dryRun": "All"} if dry_run else {}
    return kube.request("PUT", kube.path("v1", "Pod", name, namespace, "ephemeralcontainers"), body=live, query=query)


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


# ---- admins are bound too ----------------------------------------------------------------------------


def test_cluster_admin_is_bound_too(guard: Guard) -> None:
    message = denial(guard.admin, pod("admin-attack", guard.namespace, hostPID=True, containers=[sc(privileged=True)]))
    assert f"ValidatingAdmissionPolicy '{guard.names.pod_guard}'" in message


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
