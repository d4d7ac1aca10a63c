"""The local control plane is a real cluster: versions, KCM controllers, tokens, seed, teardown."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import kubernetes.client
import pytest
from kubernetes.client import ApiException

from tenant_platform.formats.hami import names
from tenant_platform.testing import manifests, processes, seed
from tenant_platform.testing.binaries import pinned_versions
from tenant_platform.testing.controlplane import ControlPlane, ControlPlaneError, KubectlError
from tenant_platform.testing.wait import wait_for

pytestmark = pytest.mark.cluster

T = TypeVar("T")


def present(probe: Callable[[], T]) -> Callable[[], T | None]:
    """``probe`` with a 404 read as "not there yet" (None), for the shared wait_for."""

    def call() -> T | None:
        try:
            return probe()
        except ApiException as error:
            if error.status != 404:
                raise
            return None

    return call


def alive(pid: int) -> bool:
    """True when ``pid`` exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_versions(control_plane: ControlPlane, kube_api: kubernetes.client.ApiClient) -> None:
    expected = pinned_versions()
    assert kubernetes.client.VersionApi(kube_api).get_code().git_version == expected.kubernetes
    etcd = subprocess.run(
        [str(control_plane.bin_dir / "etcd"), "--version"], capture_output=True, text=True, check=True
    )
    assert f"etcd Version: {expected.etcd.removeprefix('v')}" in etcd.stdout
    timings = control_plane.timings
    assert 0 < timings.start_seconds < 120
    assert timings.start_seconds >= timings.etcd_seconds + timings.apiserver_seconds


def test_kubectl_helper(control_plane: ControlPlane, unique_name: str) -> None:
    versions = json.loads(control_plane.kubectl("version", "--output=json").stdout)
    assert versions["clientVersion"]["gitVersion"] == pinned_versions().kubernetes
    assert versions["serverVersion"]["gitVersion"] == pinned_versions().kubernetes

    control_plane.kubectl("create", "namespace", unique_name)
    phase = control_plane.kubectl("get", "namespace", unique_name, "--output=jsonpath={.status.phase}")
    assert phase.stdout == "Active"
    with pytest.raises(KubectlError, match="NotFound"):
        control_plane.kubectl("get", "namespace", f"{unique_name}-missing")
    assert control_plane.kubectl("get", "namespace", "nope", check=False).returncode != 0


def test_namespace_deletion_terminates(kube_api: kubernetes.client.ApiClient, unique_name: str) -> None:
    core = kubernetes.client.CoreV1Api(kube_api)
    core.create_namespace(kubernetes.client.V1Namespace(metadata=kubernetes.client.V1ObjectMeta(name=unique_name)))
    core.create_namespaced_config_map(
        unique_name,
        kubernetes.client.V1ConfigMap(metadata=kubernetes.client.V1ObjectMeta(name="content"), data={"k": "v"}),
    )
    core.delete_namespace(unique_name)

    def gone() -> bool | None:
        try:
            core.read_namespace(unique_name)
        except ApiException as error:
            if error.status == 404:
                return True
            raise
        return None

    # Without the namespace controller (KCM) it would stay Terminating forever.
    wait_for(present(gone), f"namespace {unique_name} to be deleted", 60)


def test_new_namespace_gets_default_service_account_and_root_ca(
    control_plane: ControlPlane, kube_api: kubernetes.client.ApiClient, unique_name: str
) -> None:
    core = kubernetes.client.CoreV1Api(kube_api)
    core.create_namespace(kubernetes.client.V1Namespace(metadata=kubernetes.client.V1ObjectMeta(name=unique_name)))
    wait_for(
        present(lambda: core.read_namespaced_service_account("default", unique_name)), "ServiceAccount default", 60
    )
    root_ca = wait_for(
        present(lambda: core.read_namespaced_config_map("kube-root-ca.crt", unique_name)),
        "ConfigMap kube-root-ca.crt",
        60,
    )
    assert root_ca.data["ca.crt"] == control_plane.ca_path.read_text()


def test_token_request_authenticates_as_the_service_account(
    control_plane: ControlPlane, kube_api: kubernetes.client.ApiClient, unique_name: str, tmp_path: Path
) -> None:
    core = kubernetes.client.CoreV1Api(kube_api)
    core.create_namespace(kubernetes.client.V1Namespace(metadata=kubernetes.client.V1ObjectMeta(name=unique_name)))
    core.create_namespaced_service_account(
        unique_name, kubernetes.client.V1ServiceAccount(metadata=kubernetes.client.V1ObjectMeta(name="robot"))
    )
    token = core.create_namespaced_service_account_token(
        "robot",
        unique_name,
        kubernetes.client.AuthenticationV1TokenRequest(
            spec=kubernetes.client.V1TokenRequestSpec(audiences=[], expiration_seconds=3600)
        ),
    ).status.token

    kubeconfig = control_plane.kubeconfig_for_token(token, tmp_path / "robot.kubeconfig")
    robot = seed.api_client_from_kubeconfig(kubeconfig)
    try:
        review = kubernetes.client.AuthenticationV1Api(robot).create_self_subject_review(
            kubernetes.client.V1SelfSubjectReview()
        )
        assert review.status.user_info.username == f"system:serviceaccount:{unique_name}:robot"
        assert "system:serviceaccounts" in review.status.user_info.groups
        # RBAC is on: a fresh ServiceAccount may not list namespaces.
        with pytest.raises(ApiException) as denied:
            kubernetes.client.CoreV1Api(robot).list_namespace()
        assert denied.value.status == 403
    finally:
        robot.close()


def test_metrics_text_counts_requests(control_plane: ControlPlane) -> None:
    assert "apiserver_request_total{" in control_plane.metrics_text()


def test_seed_creates_istio_crds_and_gpu_nodes(
    seeded: ControlPlane, kube_api: kubernetes.client.ApiClient, unique_name: str
) -> None:
    seed.seed_cluster(kube_api)  # a second run is a no-op
    crds = {
        crd.metadata.name: crd
        for crd in kubernetes.client.ApiextensionsV1Api(kube_api).list_custom_resource_definition().items
    }
    expected_versions = {
        "gateways.networking.istio.io": ["v1", "v1beta1", "v1alpha3"],
        "virtualservices.networking.istio.io": ["v1", "v1beta1", "v1alpha3"],
        "destinationrules.networking.istio.io": ["v1", "v1beta1", "v1alpha3"],
        "envoyfilters.networking.istio.io": ["v1alpha3"],
        "authorizationpolicies.security.istio.io": ["v1", "v1beta1"],
        "peerauthentications.security.istio.io": ["v1", "v1beta1"],
    }
    for name, versions in expected_versions.items():
        crd = crds[name]
        assert [v.name for v in crd.spec.versions if v.served] == versions
        assert crd.status.stored_versions == [versions[0]]
        assert {c.type: c.status for c in crd.status.conditions}["Established"] == "True"

    # Served for real: write through one version, read through another.
    custom = kubernetes.client.CustomObjectsApi(kube_api)
    core = kubernetes.client.CoreV1Api(kube_api)
    core.create_namespace(kubernetes.client.V1Namespace(metadata=kubernetes.client.V1ObjectMeta(name=unique_name)))
    body = {
        "apiVersion": "networking.istio.io/v1alpha3",
        "kind": "VirtualService",
        "metadata": {"name": "vs"},
        "spec": {"hosts": ["a.example.com"], "http": [{"route": [{"destination": {"host": "a"}}]}]},
    }
    custom.create_namespaced_custom_object("networking.istio.io", "v1alpha3", unique_name, "virtualservices", body)
    read = custom.get_namespaced_custom_object("networking.istio.io", "v1", unique_name, "virtualservices", "vs")
    assert read["spec"]["hosts"] == ["a.example.com"]

    nodes = {node.metadata.name: node for node in core.list_node().items}
    assert set(nodes) >= {"gpu-node-1", "gpu-node-2", "gpu-node-3", "cpu-node-1"}
    for spec in seed.DEFAULT_GPU_NODES:
        node = nodes[spec.name]
        cards = json.loads(node.metadata.annotations[names.ANNOTATION_REGISTER])
        assert len(cards) == spec.cards
        assert {card["type"] for card in cards} == {spec.model}
        assert {card["devmem"] for card in cards} == {spec.mem_mib}
        assert all(card["health"] is True for card in cards)
        assert "index" not in cards[0] and [card.get("index") for card in cards[1:]] == list(range(1, spec.cards))
        assert node.metadata.annotations[names.PREFIX + names.HANDSHAKE].startswith("Requesting_")
        assert node.status.capacity["nvidia.com/gpu"] == str(spec.cards * 10)
        assert node.status.allocatable["nvidia.com/gpu"] == str(spec.cards * 10)
        assert (node.metadata.labels.get("nvidia.com/gpu.present") == "true") is spec.gpu_present_label
        assert {c.type: c.status for c in node.status.conditions}["Ready"] == "True"
        assert not node.spec.taints
    assert "nvidia.com/gpu" not in nodes["cpu-node-1"].status.capacity

    apps = kubernetes.client.AppsV1Api(kube_api)
    assert apps.read_namespaced_deployment("istiod", "istio-system").metadata.labels == {
        "app": "istiod",
        "istio": "pilot",
    }
    assert apps.read_namespaced_deployment("coredns", "kube-system").spec.selector.match_labels == {
        "k8s-app": "kube-dns"
    }
    ports = core.read_namespaced_service("istio-ingressgateway", "istio-system").spec.ports
    assert sorted(port.port for port in ports) == [80, 443]
    corefile = core.read_namespaced_config_map("coredns", "kube-system").data["Corefile"]
    assert "kubernetes cluster.local in-addr.arpa ip6.arpa" in corefile
    storage = kubernetes.client.StorageV1Api(kube_api).read_storage_class("local-path")
    assert storage.metadata.annotations["storageclass.kubernetes.io/is-default-class"] == "true"
    assert storage.volume_binding_mode == "WaitForFirstConsumer"
    with pytest.raises(ApiException) as missing:
        core.read_namespace("kamiwaza")
    assert missing.value.status == 404


def test_gpu_pod_manifest_is_accepted(
    seeded: ControlPlane, kube_api: kubernetes.client.ApiClient, unique_name: str
) -> None:
    core = kubernetes.client.CoreV1Api(kube_api)
    core.create_namespace(kubernetes.client.V1Namespace(metadata=kubernetes.client.V1ObjectMeta(name=unique_name)))
    card = manifests.hami_device_uuid("gpu-node-2", 1)
    pod = manifests.gpu_pod_manifest(
        "trainer", namespace=unique_name, node_name="gpu-node-2", devices=[(card, 20000, 30)]
    )
    created = seed.request(kube_api, "POST", seed.object_path(pod, name=False), body=pod)
    assert created["spec"]["nodeName"] == "gpu-node-2"
    assert created["metadata"]["annotations"]["hami.io/vgpu-devices-allocated"] == f"{card},NVIDIA,20000,30:;"


def test_start_failure_reports_the_log_tail(control_plane: ControlPlane) -> None:
    broken = ControlPlane(bin_dir=control_plane.bin_dir, extra_apiserver_args=["--no-such-flag"])
    with pytest.raises(ControlPlaneError, match=r"kube-apiserver exited(.|\n)*unknown flag: --no-such-flag"):
        broken.start()
    assert broken.pids == {}
    assert not broken.work_dir.exists()


def test_stop_leaves_no_processes(control_plane: ControlPlane) -> None:
    with ControlPlane(bin_dir=control_plane.bin_dir) as second:
        pids = second.pids
        work_dir = second.work_dir
        assert set(pids) == {"etcd", "kube-apiserver", "kube-controller-manager"}
        assert second.server != control_plane.server
        assert all(alive(pid) for pid in pids.values())
    assert not any(alive(pid) for pid in pids.values())
    for pid in pids.values():  # each child led its own process group; the groups are empty
        with pytest.raises(ProcessLookupError):
            os.killpg(pid, 0)
    assert not work_dir.exists()
    second.stop()  # idempotent
    assert all(alive(pid) for pid in control_plane.pids.values())  # the session's plane is untouched


def test_children_die_with_a_killed_python_process(control_plane: ControlPlane, tmp_path: Path) -> None:
    script = (
        "import json, time\n"
        "from tenant_platform.testing.controlplane import ControlPlane\n"
        "cp = ControlPlane().start()\n"
        "print(json.dumps({'pids': cp.pids, 'work_dir': str(cp.work_dir)}), flush=True)\n"
        "time.sleep(600)\n"
    )
    operator_dir = Path(__file__).resolve().parents[2] / "operator"
    env = {**os.environ, "PYTHONPATH": str(operator_dir), "TENANT_PLATFORM_BIN_DIR": str(control_plane.bin_dir)}
    pids: dict[str, int] = {}
    started: dict[str, Any] = {}
    with subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=env, cwd=tmp_path
    ) as parent:
        try:
            assert parent.stdout is not None
            started = json.loads(parent.stdout.readline())
            pids = dict(started["pids"])
            assert all(alive(pid) for pid in pids.values())
        finally:
            parent.kill()  # SIGKILL: no atexit, no stop(); only PR_SET_PDEATHSIG is left
    try:
        wait_for(lambda: not any(alive(pid) for pid in pids.values()), "the control plane processes to exit", 10)
        # Only the work dir is left; the next start sweeps it, since its owner is gone.
        work_dir = Path(started["work_dir"])
        assert work_dir.is_dir()
        processes.sweep_stale_work_dirs()
        assert not work_dir.exists()
    finally:
        for pid in pids.values():  # never leave orphans behind, even when the assertion fails
            if alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)
        if started:
            shutil.rmtree(started["work_dir"], ignore_errors=True)


@pytest.mark.cluster
def test_components_stop_and_start_with_their_data() -> None:
    """The fault tests' tools: the API server stopped is unreachable and comes back on the same
    address; etcd killed with SIGKILL and restarted keeps what was written."""
    with ControlPlane(controller_manager=False) as cp:
        cp.kubectl("create", "configmap", "survivor", "--from-literal=k=v")
        cp.stop_component("kube-apiserver")
        assert "kube-apiserver" not in cp.pids
        assert cp.kubectl("get", "configmap", "survivor", check=False, timeout=30).returncode != 0
        took = cp.start_component("kube-apiserver")
        assert took > 0 and "kube-apiserver" in cp.pids
        cp.restart_component("etcd", kill=True)
        data = wait_for(
            lambda: cp.kubectl("get", "configmap", "survivor", "-o", "jsonpath={.data.k}", check=False).stdout,
            "the ConfigMap read back after the etcd restart",
            60,
        )
        assert data == "v"
        with pytest.raises(ControlPlaneError, match="is running"):
            cp.start_component("etcd")
