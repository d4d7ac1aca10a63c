"""The pod guard against pods the real Istio injector produced (tests/fixtures/injected/, generated
by ``istioctl kube-inject`` with the injector's own ConfigMaps: see testing/injectedpods.py).

On the real API server, in a namespace guarded with the default settings at Deny, as the
installer identity (its own token): every injected pod is admitted; the same pod with one forged
field is denied with the guard's own message; without Kamiwaza's mirror in the proxy repositories
its pods are denied. Staged promotion dry-runs a pod injected the way the live injector's values
say, and stays at Warn naming the image when the guard would deny it. When istioctl is already
built, the fixtures are regenerated and compared with what is committed.
"""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from podguard_support import (
    apply_guard,
    context,
    create_platform,
    delete_platform,
    guard_denies,
    make_installer,
    make_namespace,
    parameter,
    reconcile_until,
)

from tenant_platform.api import constants
from tenant_platform.api.models import DEFAULT_PROXY_REPOSITORIES, TenantPlatform
from tenant_platform.concerns.podguard import manifests, step
from tenant_platform.kube import errors
from tenant_platform.kube.client import Kube
from tenant_platform.testing import injectedpods, tools
from tenant_platform.testing.controlplane import ControlPlane
from tenant_platform.testing.wait import wait_for

pytestmark = pytest.mark.cluster

PODS = injectedpods.pods()
MIRROR = "ghcr.io/kamiwaza-internal/containers/images/istio/proxyv2"
INIT_PREFIX = "the init container istio-init may add NET_ADMIN and NET_RAW only in the exact shape Istio injects:"


def as_submitted(pod: dict[str, Any], namespace: str, name: str) -> dict[str, Any]:
    """The injected pod for a create in ``namespace`` (what kube-inject leaves server-side dropped)."""
    body = copy.deepcopy(pod)
    body.pop("status", None)
    meta = body["metadata"]
    meta.pop("creationTimestamp", None)
    meta["namespace"], meta["name"] = namespace, name
    return body


def init_container(pod: dict[str, Any], name: str) -> dict[str, Any]:
    return next(c for c in pod["spec"].get("initContainers") or [] if c["name"] == name)


def test_the_fixtures_cover_every_hub_and_case() -> None:
    expected = {f"{hub}-{case.name}" for hub in injectedpods.HUBS for case in injectedpods.CASES}
    assert set(PODS) == expected
    for name, pod in PODS.items():
        names = [c["name"] for c in pod["spec"].get("initContainers") or []]
        if name.endswith("-cni"):
            assert "istio-init" not in names and "istio-validation" in names, names
        else:
            assert names[0] == "istio-init", names
            image = init_container(pod, "istio-init")["image"]
            hub = injectedpods.HUBS[name.split("-")[0]]
            assert image == f"{hub}/proxyv2:{injectedpods.TAG}"
        if name.endswith("-native"):
            proxy = init_container(pod, "istio-proxy")
            assert proxy.get("restartPolicy") == "Always"
        else:
            assert "istio-proxy" in [c["name"] for c in pod["spec"]["containers"]]


# ---- the guarded namespace ---------------------------------------------------------------------


class Env:
    def __init__(self, platform: TenantPlatform, namespace: str, installer: Kube, admin: Kube) -> None:
        self.platform, self.namespace, self.installer, self.admin = platform, namespace, installer, admin

    @property
    def policy(self) -> str:
        return manifests.guard_names("Deny").pod_guard


def guarded(admin: Kube, cp: ControlPlane, directory: Path, *, repositories: list[str] | None) -> Env:
    suffix = uuid.uuid4().hex[:6]
    namespace = f"injected-{suffix}"
    pod_guard: dict[str, Any] = {"enforcement": "Deny"}
    if repositories is not None:
        pod_guard["proxyImageRepositories"] = repositories
    make_namespace(admin, namespace)
    platform = create_platform(
        admin,
        {
            "metadata": {"name": namespace},
            "spec": {"namespace": namespace, "domain": "injected.example.com", "podGuard": pod_guard},
        },
    )
    installer = make_installer(admin, cp, namespace, directory)
    apply_guard(admin, platform, "Deny")
    wait_for(
        lambda: guard_denies(installer, namespace, manifests.guard_names("Deny").pod_guard),
        "the pod guard to deny",
        60,
        interval=0.2,
    )
    return Env(platform, namespace, installer, admin)


def teardown(env: Env) -> None:
    delete_platform(env.admin, env.platform.name)
    env.admin.delete("v1", "Namespace", env.namespace)


@pytest.fixture(scope="module")
def defaults(crd: Kube, control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    """Guarded at Deny with the default proxy repositories (the CRD's and the model's)."""
    env = guarded(crd, control_plane, tmp_path_factory.mktemp("inj"), repositories=None)
    assert env.platform.spec.pod_guard.proxy_image_repositories == DEFAULT_PROXY_REPOSITORIES
    yield env
    teardown(env)


def denial(env: Env, body: dict[str, Any]) -> str:
    try:
        env.installer.create(body, dry_run=True)
    except errors.Forbidden as exc:
        return exc.message
    raise AssertionError(f"{body['metadata']['name']} was admitted")


@pytest.mark.parametrize("case", sorted(PODS))
def test_injected_pod_is_admitted(defaults: Env, case: str) -> None:
    created = defaults.installer.create(as_submitted(PODS[case], defaults.namespace, f"ok-{case}"), dry_run=True)
    # The ServiceAccount plugin added its token volume and mounted it into istio-init too.
    assert any(v["name"].startswith("kube-api-access-") for v in created["spec"]["volumes"])


def forge_init(**changes: Any) -> Callable[[dict[str, Any]], None]:
    def forge(pod: dict[str, Any]) -> None:
        init_container(pod, "istio-init").update(changes)

    return forge


def add_capability(container: str, capability: str) -> Callable[[dict[str, Any]], None]:
    def forge(pod: dict[str, Any]) -> None:
        sc = init_container(pod, container).setdefault("securityContext", {})
        sc.setdefault("capabilities", {}).setdefault("add", []).append(capability)

    return forge


def set_security(container: str, **changes: Any) -> Callable[[dict[str, Any]], None]:
    def forge(pod: dict[str, Any]) -> None:
        init_container(pod, container).setdefault("securityContext", {}).update(changes)

    return forge


def host_path(pod: dict[str, Any]) -> None:
    pod["spec"].setdefault("volumes", []).append({"name": "host", "hostPath": {"path": "/"}})
    init_container(pod, "istio-init").setdefault("volumeMounts", []).append({"name": "host", "mountPath": "/host"})


def image(repository: str) -> Callable[[dict[str, Any]], None]:
    def forge(pod: dict[str, Any]) -> None:
        init = init_container(pod, "istio-init")
        init["image"] = f"{repository}:{init['image'].rpartition(':')[2]}"

    return forge


def args0(pod: dict[str, Any]) -> None:
    init_container(pod, "istio-init")["args"][0] = "sh"


def loader_env(pod: dict[str, Any]) -> None:
    init_container(pod, "istio-init").setdefault("env", []).append({"name": "LD_PRELOAD", "value": "/tmp/x.so"})


# (id, which fixtures, forge, a fragment of the guard's message)
FORGERIES: list[tuple[str, str, Callable[[dict[str, Any]], None], str]] = [
    ("istio-init adds SYS_ADMIN", "classic", add_capability("istio-init", "SYS_ADMIN"), "SYS_ADMIN"),
    ("istio-init from a look-alike repository", "classic", image("docker.io/istio/proxyv2-evil"), INIT_PREFIX),
    ("istio-init from another registry", "classic", image("evil.example.com/istio/proxyv2"), INIT_PREFIX),
    ("istio-init runs a command", "classic", forge_init(command=["/bin/sh", "-c", "id"]), INIT_PREFIX),
    ("istio-init first argument", "classic", args0, INIT_PREFIX),
    ("istio-init LD_PRELOAD", "classic", loader_env, INIT_PREFIX),
    ("istio-init as a restartable sidecar", "classic", forge_init(restartPolicy="Always"), INIT_PREFIX),
    (
        "istio-init privileged",
        "classic",
        set_security("istio-init", privileged=True, allowPrivilegeEscalation=True),
        "privileged",
    ),
    ("istio-init may escalate", "classic", set_security("istio-init", allowPrivilegeEscalation=True), INIT_PREFIX),
    ("istio-init mounts the host", "classic", host_path, "volumes host are not the service-account token volume"),
    ("native istio-init adds SYS_ADMIN", "native", add_capability("istio-init", "SYS_ADMIN"), "SYS_ADMIN"),
    ("native istio-proxy adds NET_ADMIN", "native", add_capability("istio-proxy", "NET_ADMIN"), "NET_ADMIN"),
    ("native istio-init from another registry", "native", image("evil.example.com/proxyv2"), INIT_PREFIX),
    (
        "traffic istio-init privileged",
        "traffic",
        set_security("istio-init", privileged=True, allowPrivilegeEscalation=True),
        "privileged",
    ),
    ("cni istio-validation adds NET_ADMIN", "cni", add_capability("istio-validation", "NET_ADMIN"), "NET_ADMIN"),
    (
        "cni istio-validation unconfined",
        "cni",
        set_security("istio-validation", seccompProfile={"type": "Unconfined"}),
        "Unconfined",
    ),
]


@pytest.mark.parametrize("hub", sorted(injectedpods.HUBS))
@pytest.mark.parametrize("forgery", FORGERIES, ids=[f[0] for f in FORGERIES])
def test_forged_injected_pod_is_denied(
    defaults: Env, hub: str, forgery: tuple[str, str, Callable[[dict[str, Any]], None], str]
) -> None:
    _, case, forge, fragment = forgery
    body = as_submitted(PODS[f"{hub}-{case}"], defaults.namespace, f"forged-{hub}-{case}")
    forge(body)
    message = denial(defaults, body)
    assert f"'{defaults.policy}'" in message
    assert fragment in message, message


@pytest.fixture(scope="module")
def without_mirror(crd: Kube, control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    """The defaults before Kamiwaza's mirror was added."""
    env = guarded(
        crd,
        control_plane,
        tmp_path_factory.mktemp("inj"),
        repositories=["registry.istio.io/release/proxyv2", "docker.io/istio/proxyv2"],
    )
    yield env
    teardown(env)


@pytest.mark.parametrize("case", ["kamiwaza-classic", "kamiwaza-native", "kamiwaza-traffic"])
def test_without_the_mirror_kamiwaza_pods_are_denied(without_mirror: Env, case: str) -> None:
    message = denial(without_mirror, as_submitted(PODS[case], without_mirror.namespace, f"m-{case}"))
    assert INIT_PREFIX in message


def test_without_the_mirror_kamiwaza_cni_pods_are_admitted(without_mirror: Env) -> None:
    """CNI mode has no istio-init, so the proxy repositories do not matter."""
    without_mirror.installer.create(as_submitted(PODS["kamiwaza-cni"], without_mirror.namespace, "m-cni"), dry_run=True)


# ---- staged promotion with the injector canary ------------------------------------------------------


def values(name: str) -> str:
    return (injectedpods.committed()[f"values/{name}.json"]).strip()


def test_the_canary_is_injected_like_the_fixtures() -> None:
    """What the canary renders from the injector's values is what kube-inject wrote (istio-init)."""
    for hub in injectedpods.HUBS:
        for cni, case, name in ((False, "classic", "istio-init"), (True, "cni", "istio-validation")):
            injector = manifests.injector_from_values(json.loads(values(f"{hub}{'-cni' if cni else ''}")))
            canary = init_container(manifests.injected_canary("ns", injector), name)
            real = init_container(PODS[f"{hub}-{case}"], name)
            assert canary["image"] == real["image"]
            assert canary["args"] == real["args"]
            real_sc = {k: v for k, v in real["securityContext"].items() if k in canary["securityContext"]}
            assert canary["securityContext"] == real_sc


def test_staged_stays_at_warn_while_the_live_injector_would_be_denied(
    crd: Kube, make_platform: Callable[..., dict[str, Any]], unique_name: str
) -> None:
    mesh_ns = f"{unique_name}-istio"
    make_namespace(crd, unique_name, claimed_by=unique_name)
    make_namespace(crd, mesh_ns)
    crd.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "istio-sidecar-injector", "namespace": mesh_ns},
            "data": {"values": values("kamiwaza"), "config": "policy: enabled\n"},
        }
    )
    make_platform(
        unique_name,
        unique_name,
        mesh={"namespace": mesh_ns},
        podGuard={"enforcement": "Staged", "proxyImageRepositories": ["docker.io/istio/proxyv2"]},
    )
    result = reconcile_until(
        crd,
        unique_name,
        lambda r: r.conditions[0].reason == "InjectedPodWouldBeDenied",
        "the injector canary to be denied",
    )
    message = result.conditions[0].message
    image = f"{MIRROR}:{injectedpods.TAG}"
    assert f"injector in {mesh_ns}/istio-sidecar-injector injects (istio-init image {image}, CNI off)" in message
    assert f"add {MIRROR} to spec.podGuard.proxyImageRepositories" in message
    assert parameter(crd, unique_name)["enforcement"] == "Warn"
    assert result.progressing

    crd.merge_patch(
        constants.API_VERSION,
        constants.KIND,
        unique_name,
        {"spec": {"podGuard": {"proxyImageRepositories": ["docker.io/istio/proxyv2", MIRROR]}}},
    )
    result = reconcile_until(crd, unique_name, lambda r: r.conditions[0].status == "True", "promotion")
    assert result.conditions[0].reason == "Enforcing"
    assert parameter(crd, unique_name)["enforcement"] == "Deny"
    # The real kamiwaza pod is admitted at Deny there.
    crd.create(as_submitted(PODS["kamiwaza-native"], unique_name, "real"), dry_run=True)
    body = crd.get(constants.API_VERSION, constants.KIND, unique_name) or {}
    assert step.STEP.cleanup(context(crd, body)).done
    for ns in (unique_name, mesh_ns):
        crd.delete("v1", "Namespace", ns)


def test_staged_with_a_cni_injector_promotes(
    crd: Kube, make_platform: Callable[..., dict[str, Any]], unique_name: str
) -> None:
    """CNI on: no istio-init, so even a repository list without the hub promotes."""
    mesh_ns = f"{unique_name}-istio"
    make_namespace(crd, unique_name, claimed_by=unique_name)
    make_namespace(crd, mesh_ns)
    crd.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "istio-sidecar-injector", "namespace": mesh_ns},
            "data": {"values": values("kamiwaza-cni")},
        }
    )
    make_platform(
        unique_name,
        unique_name,
        mesh={"namespace": mesh_ns},
        podGuard={"enforcement": "Staged", "proxyImageRepositories": ["docker.io/istio/proxyv2"]},
    )
    result = reconcile_until(crd, unique_name, lambda r: r.conditions[0].status == "True", "promotion")
    assert result.conditions[0].reason == "Enforcing"
    body = crd.get(constants.API_VERSION, constants.KIND, unique_name) or {}
    assert step.STEP.cleanup(context(crd, body)).done
    for ns in (unique_name, mesh_ns):
        crd.delete("v1", "Namespace", ns)


# ---- regeneration ---------------------------------------------------------------------------------


def test_the_fixtures_are_what_istioctl_generates(control_plane: ControlPlane) -> None:
    """Runs only when istioctl is already built (`hack/build-tools.sh istioctl`): its cold build
    takes minutes, so the suite never starts one."""
    istioctl = tools.cached_tool_path("istioctl")
    if istioctl is None:
        pytest.skip("istioctl is not built; `hack/build-tools.sh istioctl` builds it (then this test runs)")
    generated = injectedpods.generate(istioctl, control_plane.kubeconfig_path)
    assert generated == injectedpods.committed(), "regenerate with hack/gen-injected-pods.sh and review the diff"
