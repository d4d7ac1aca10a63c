"""The pod guard's one exception against the real API server: the init container istio-init may add
NET_ADMIN and NET_RAW only in the exact shape Istio injects (an allowed proxy image, the
injector's arguments and security context, no mounts but the service-account token volume
Kubernetes injects, read-only). Every look-alike is denied with the guard's own message; the
shapes Istio really injects (classic and native sidecars, explicit token volumes, mirrors,
digests) are admitted.

Pods are created by server-side dry run as the installer identity (podguard_support.py).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from podguard_support import (
    APP,
    MIRROR,
    NOT_ALLOWED_IMAGE,
    PROXY,
    Guard,
    classic,
    denial,
    istio_init,
    istio_proxy,
    istio_volumes,
    pod,
    pod_name,
)
from podguard_support import guard as guard  # a module fixture: one guarded namespace here

pytestmark = pytest.mark.cluster

TOKEN_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
DIGEST = "sha256:" + "ab" * 32


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


def drop_key(base: dict[str, Any], *path: str) -> dict[str, Any]:
    out = copy.deepcopy(base)
    target = out
    for part in path[:-1]:
        target = target[part]
    del target[path[-1]]
    return out


# ---- denied --------------------------------------------------------------------------------------------


EXCEPTION = "the init container istio-init may add NET_ADMIN and NET_RAW only in the exact shape Istio injects: "
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


@pytest.mark.parametrize(("case", "build", "expected"), ISTIO_INIT_DENIED, ids=[c[0] for c in ISTIO_INIT_DENIED])
def test_istio_init_exception_clause_denied(
    guard: Guard, case: str, build: Callable[[str, str], dict[str, Any]], expected: str
) -> None:
    message = denial(guard.installer, build(pod_name("attack", case), guard.namespace))
    assert f"ValidatingAdmissionPolicy '{guard.names.pod_guard}'" in message
    assert expected in message, message


# ---- admitted ------------------------------------------------------------------------------------------


ADMITTED: list[tuple[str, Callable[[str, str], dict[str, Any]]]] = [
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
