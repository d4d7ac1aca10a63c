"""The gpu step against the real API server: node labels (SSA, shared value field managers),
HAMi capacity in status.gpu, conflicts, stale locks, dry run, and status written by a reconcile.

Each test works on its own nodes (name prefix) and namespace, and deletes them at the end. The
step reads a snapshot loaded from the API and restricted to the test's own objects, so other
tests' nodes in the shared control plane do not change the totals asserted here. The platforms a
test runs exist as TenantPlatforms in the API server (the step reads who else wants a label from
there), and the step sees only this test's platforms among them.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from tests.support import condition, platform, platform_body, sole_condition

from tenant_platform import metrics, reconcile
from tenant_platform.api import constants
from tenant_platform.api.models import TenantPlatform
from tenant_platform.concerns.gpu import capacity
from tenant_platform.concerns.gpu import step as gpu
from tenant_platform.concerns.gpu.fit import GpuRequest, node_fit
from tenant_platform.config import Settings
from tenant_platform.framework.base import StepContext, StepResult
from tenant_platform.kube.client import Kube
from tenant_platform.observe import cluster
from tenant_platform.reconcile import registry
from tenant_platform.testing import manifests
from tenant_platform.testing.controlplane import ControlPlane
from tenant_platform.testing.steps import NoHandoff, reconcile_step
from tenant_platform.testing.wait import wait_for

pytestmark = pytest.mark.cluster

CRD_FILE = Path(__file__).resolve().parents[2] / "crds" / "tenancy.dev_tenantplatforms.yaml"
A100 = "NVIDIA A100-SXM4-80GB"
PAUSE = "registry.k8s.io/pause:3.10.1"


# -- fixtures and helpers ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def kube(control_plane: ControlPlane) -> Kube:
    return Kube.from_kubeconfig(str(control_plane.kubeconfig_path))


@dataclass
class WorldContext(StepContext):
    """A step context whose cluster holds only this test's TenantPlatforms (other tests' platforms
    in the shared control plane would want labels on this test's nodes too)."""

    prefix: str = ""

    def platforms(self) -> list[dict[str, Any]]:
        return [b for b in super().platforms() if b["metadata"]["name"].startswith(self.prefix + "-")]


# Bodies of the platforms ``platform`` built, by name (the World declares them in the API server).
_BODIES: dict[str, dict[str, Any]] = {}


class World:
    """One test's nodes, namespace and platforms; everything is removed at teardown."""

    def __init__(self, kube: Kube, prefix: str, admin: Kube) -> None:
        self.kube = kube
        self.admin = admin  # declares the TenantPlatforms (its writes are not counted on ``kube``)
        self.prefix = prefix
        self.namespace = prefix
        self.nodes: list[str] = []
        self.platforms: set[str] = set()
        self._namespace_ready = False

    # ---- objects ----

    def node(
        self,
        suffix: str,
        *,
        labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None,
        gpus: int | None = None,
        allocatable: int | None = None,
        resource: str = "nvidia.com/gpu",
    ) -> str:
        """Create a Node, then patch its status with ``gpus`` of ``resource`` (as a kubelet would)."""
        name = f"{self.prefix}-{suffix}"
        body = manifests.node_manifest(name, labels=labels, annotations=annotations)
        self.kube.request("POST", "/api/v1/nodes", body=body, query={"fieldManager": "kubelet"})
        self.nodes.append(name)
        if gpus is not None:
            count = str(allocatable if allocatable is not None else gpus)
            self.kube.merge_patch(
                "v1",
                "Node",
                name,
                {"status": {"capacity": {resource: str(gpus)}, "allocatable": {resource: count}}},
                subresource="status",
            )
        return name

    def pod(
        self,
        name: str,
        node: str,
        allocated: str,
        *,
        init: int = 0,
        apps: int = 1,
        bind_phase: str = "allocating",
        phase: str | None = None,
    ) -> None:
        """A pod HAMi placed on ``node`` (bound at create; no scheduler or kubelet runs)."""
        self._ensure_namespace()
        spec: dict[str, Any] = {
            "nodeName": node,
            "containers": [{"name": f"c{i}", "image": PAUSE} for i in range(apps)],
        }
        if init:
            spec["initContainers"] = [{"name": f"i{i}", "image": PAUSE} for i in range(init)]
        stamp = str(int(time.time()))
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": self.namespace,
                "annotations": {
                    "hami.io/vgpu-node": node,
                    "hami.io/vgpu-time": stamp,
                    "hami.io/vgpu-devices-to-allocate": allocated,
                    "hami.io/vgpu-devices-allocated": allocated,
                    "hami.io/bind-phase": bind_phase,
                    "hami.io/bind-time": stamp,
                },
            },
            "spec": spec,
        }
        self.kube.create(body)
        if phase is not None:
            self.kube.merge_patch(
                "v1", "Pod", name, {"status": {"phase": phase}}, namespace=self.namespace, subresource="status"
            )

    def _ensure_namespace(self) -> None:
        if self._namespace_ready:
            return
        self.kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.namespace}})
        wait_for(lambda: self.kube.get("v1", "ServiceAccount", "default", self.namespace), "default ServiceAccount", 60)
        self._namespace_ready = True

    def labels(self, node: str) -> dict[str, str]:
        live = self.kube.get("v1", "Node", node)
        assert live is not None
        return dict(live["metadata"].get("labels") or {})

    def annotate(self, node: str, annotations: dict[str, str | None]) -> None:
        self.kube.merge_patch("v1", "Node", node, {"metadata": {"annotations": annotations}})

    def person_sets_label(self, node: str, key: str, value: str | None) -> None:
        """What `kubectl label` does: a merge patch under another field manager."""
        self.kube.request(
            "PATCH",
            f"/api/v1/nodes/{node}",
            body={"metadata": {"labels": {key: value}}},
            query={"fieldManager": "kubectl-label"},
            content_type="application/merge-patch+json",
        )

    # ---- the step ----

    def snapshot(self) -> cluster.ClusterSnapshot:
        """The cluster as the operator would watch it, restricted to this test's objects."""
        nodes = [n for n in self.kube.list("v1", "Node") if n["metadata"]["name"].startswith(self.prefix + "-")]
        pods = self.kube.list("v1", "Pod", self.namespace) if self._namespace_ready else []
        pods = [p for p in pods if p.get("status", {}).get("phase") not in ("Succeeded", "Failed")]
        snap = cluster.ClusterSnapshot()
        snap.replace_all(nodes, pods)
        return snap

    def context(
        self,
        platform: TenantPlatform,
        *,
        now: datetime | None = None,
        dry_run: bool = False,
        observed: Any = None,
    ) -> StepContext:
        return WorldContext(
            platform=platform,
            kube=self.kube,
            settings=Settings(),
            now=now or datetime.now(UTC),
            dry_run=dry_run,
            observed=self.snapshot() if observed is None else observed,
            prefix=self.prefix,
        )

    def declare(self, platform: TenantPlatform) -> None:
        """The platform as a TenantPlatform in the API server, with the spec it was built with."""
        self.admin.apply(_BODIES[platform.name], force=True, field_manager="test-gpu")
        self.platforms.add(platform.name)

    def run(self, platform: TenantPlatform, **kwargs: Any) -> StepResult:
        self.declare(platform)
        return reconcile_step(gpu.STEP, self.context(platform, **kwargs))

    def cleanup(self, platform: TenantPlatform) -> None:
        result = gpu.STEP.cleanup(self.context(platform))
        assert result.done, result.message
        self.admin.delete(constants.API_VERSION, constants.KIND, platform.name)

    def teardown(self) -> None:
        for name in self.platforms:
            self.admin.delete(constants.API_VERSION, constants.KIND, name)
            gpu.SCOPES.forget(name)
        for name in self.nodes:
            self.kube.delete("v1", "Node", name)
        if self._namespace_ready:
            self.kube.delete("v1", "Namespace", self.namespace)


@pytest.fixture
def world(kube: Kube, crd: Kube, unique_name: str) -> Iterator[World]:
    w = World(kube, unique_name[:40].rstrip("-"), crd)
    try:
        yield w
    finally:
        w.teardown()


def gpu_platform(name: str, **gpu_spec: Any) -> TenantPlatform:
    """A platform with this spec.gpu, in namespace <name>-ns; World.declare applies its body."""
    _BODIES[name] = platform_body(name, f"{name}-ns", gpu=gpu_spec)
    return platform(name, f"{name}-ns", uid=str(uuid.uuid4()), generation=1, gpu=gpu_spec)


def register(*cards: dict[str, Any]) -> str:
    return json.dumps(list(cards), separators=(",", ":"))


def a100(card_id: str, index: int = 0, *, healthy: bool = True) -> dict[str, Any]:
    entry: dict[str, Any] = {"id": card_id}
    if index:
        entry["index"] = index
    entry |= {"count": 10, "devmem": 81920, "devcore": 100, "type": A100}
    if index:
        entry["numa"] = 1
    entry["mode"] = "hami-core"
    if healthy:
        entry["health"] = True
    return entry


def owners(kube: Kube, node: str) -> dict[str, set[str]]:
    """Field manager -> label keys it owns on the node (from managedFields)."""
    live = kube.get("v1", "Node", node)
    assert live is not None
    out: dict[str, set[str]] = {}
    for entry in live["metadata"].get("managedFields") or []:
        labels = ((entry.get("fieldsV1") or {}).get("f:metadata") or {}).get("f:labels") or {}
        keys = {k[2:] for k in labels if k.startswith("f:")}
        if keys:
            out.setdefault(entry["manager"], set()).update(keys)
    return out


# -- capacity ---------------------------------------------------------------------------------------------


def test_status_gpu_is_exactly_what_the_cluster_holds(world: World) -> None:
    u = world.prefix
    a0, a1 = f"GPU-{u}-a0", f"GPU-{u}-a1"
    b0, b1 = f"GPU-{u}-b0", f"GPU-{u}-b1"
    c0 = f"GPU-{u}-c0"
    # v2.10 JSON, NFD label; v2.5 CSV with an unhealthy card; legacy 4pd.io prefix in v2.4 CSV;
    # GPU capacity but no register; a malformed register; a CPU node.
    node_a = world.node(
        "a",
        labels={"nvidia.com/gpu.present": "true"},
        annotations={"hami.io/node-nvidia-register": register(a100(a0), a100(a1, 1))},
        gpus=20,
    )
    node_b = world.node(
        "b",
        annotations={
            "hami.io/node-nvidia-register": f"{b0},10,49140,100,NVIDIA-NVIDIA L40S,0,true,0,hami-core:"
            f"{b1},10,49140,100,NVIDIA-NVIDIA L40S,0,false,1,hami-core:"
        },
        gpus=20,
        allocatable=10,
    )
    node_c = world.node(
        "c",
        annotations={"4pd.io/node-nvidia-register": f"{c0},10,32768,100,NVIDIA-Tesla V100-PCIE-32GB,0,true:"},
        gpus=10,
    )
    node_d = world.node("d", gpus=8)
    node_e = world.node("e", annotations={"hami.io/node-nvidia-register": "[{"}, gpus=10)
    node_f = world.node("f")
    # The lab case on a0: three pods at 30% cores. An init-container pod on a1 (v2.10 rule: max of
    # the init peak and the app sum). A finished pod (ignored). A pod on b's unhealthy card (not
    # in the totals). A MIG-suffixed UUID on c0.
    for i in range(3):
        world.pod(f"lab-{i}", node_a, f"{a0},NVIDIA,2048,30:;")
    world.pod("with-init", node_a, f"{a1},NVIDIA,8000,50:;{a1},NVIDIA,2000,30:;", init=1)
    world.pod("finished", node_a, f"{a0},NVIDIA,10000,10:;", bind_phase="success", phase="Succeeded")
    world.pod("on-b", node_b, f"{b0},NVIDIA,4096,25:;", bind_phase="success")
    world.pod("on-bad-card", node_b, f"{b1},NVIDIA,1000,10:;")
    world.pod("mig", node_c, f"{c0}[1g.5gb-0],NVIDIA,5000,0:;")

    p = gpu_platform(f"{u}-p", hami={"configMapNamespace": f"{u}-no-hami"})
    result = world.run(p)
    status = result.status["gpu"]
    unparseable = status["nodes"][4].get("unparseable", "")
    no_hami = "(spec.gpu.hami.configMapNamespace)."
    # When the dry run ran (its verdict is kept between checks): RFC 3339, whole seconds, UTC.
    checked = status["health"]["webhook"].get("checkedAt", "")
    assert datetime.strptime(checked, "%Y-%m-%dT%H:%M:%SZ"), checked
    health_section = {
        "detectedBy": {"capacity": 5, "label": 1, "register": 4},
        # The tenant namespace does not exist here: no dry run is judged.
        "webhook": {
            "namespace": f"{u}-p-ns",
            "outcome": "skipped",
            "detail": f"namespace {u}-p-ns does not exist yet",
            "checkedAt": checked,
        },
        "notes": [
            f"No HAMi scheduler Deployment found in namespace {u}-no-hami {no_hami}",
            f"No HAMi device-plugin DaemonSet found in namespace {u}-no-hami {no_hami}",
            f"The dry-run GPU pod in namespace {u}-p-ns was not judged by HAMi: namespace {u}-p-ns does not exist yet",
        ],
    }
    assert unparseable.startswith("invalid JSON")

    def empty(name: str, **extra: Any) -> dict[str, Any]:
        return {
            "name": name,
            "labelled": True,
            "registered": extra.pop("registered", True),
            "cards": 0,
            "models": {},
            "slots": {"total": 0, "used": 0},
            "memoryMiB": {"total": 0, "used": 0, "free": 0},
            "coresPercent": {"total": 0, "used": 0, "free": 0},
            "unhealthyCards": 0,
            "pods": 0,
            "lock": {"held": False},
            **extra,
        }

    assert status == {
        "nodes": [
            {
                "name": node_a,
                "labelled": True,
                "registered": True,
                "cards": 2,
                "models": {A100: 2},
                "slots": {"total": 20, "used": 4},
                "memoryMiB": {"total": 163840, "used": 14144, "free": 149696},
                "coresPercent": {"total": 200, "used": 140, "free": 60},
                "unhealthyCards": 0,
                "pods": 4,
                "lock": {"held": False},
                # a0: 75776 MiB and 10 % free; a1: 73920 MiB and 50 %: the largest of each.
                "fit": {"largestFreeMemoryMiB": 75776, "largestFreeCoresPercent": 50, "freeCards": 0},
                "detectedBy": ["capacity", "label", "register"],
            },
            {
                "name": node_b,
                "labelled": True,
                "registered": True,
                "cards": 2,
                "models": {"NVIDIA-NVIDIA L40S": 2},
                "slots": {"total": 10, "used": 1},
                "memoryMiB": {"total": 49140, "used": 4096, "free": 45044},
                "coresPercent": {"total": 100, "used": 25, "free": 75},
                "unhealthyCards": 1,
                "pods": 2,
                "lock": {"held": False},
                "fit": {"largestFreeMemoryMiB": 45044, "largestFreeCoresPercent": 75, "freeCards": 0},
                "detectedBy": ["capacity", "register"],
            },
            {
                "name": node_c,
                "labelled": True,
                "registered": True,
                "cards": 1,
                "models": {"NVIDIA-Tesla V100-PCIE-32GB": 1},
                "slots": {"total": 10, "used": 1},
                "memoryMiB": {"total": 32768, "used": 5000, "free": 27768},
                "coresPercent": {"total": 100, "used": 0, "free": 100},
                "unhealthyCards": 0,
                "pods": 1,
                "lock": {"held": False},
                "fit": {"largestFreeMemoryMiB": 27768, "largestFreeCoresPercent": 100, "freeCards": 0},
                "detectedBy": ["capacity", "register"],
            },
            empty(node_d, registered=False, detectedBy=["capacity"]),
            empty(node_e, unparseable=unparseable, detectedBy=["capacity", "register"]),
        ],
        "total": {
            "nodes": 5,
            "cards": 5,
            "models": {A100: 2, "NVIDIA-NVIDIA L40S": 2, "NVIDIA-Tesla V100-PCIE-32GB": 1},
            "slots": {"total": 40, "used": 6},
            "memoryMiB": {"total": 245748, "used": 23240, "free": 222508},
            "coresPercent": {"total": 400, "used": 165, "free": 235},
            "unhealthyCards": 1,
            "fit": {"largestFreeMemoryMiB": 75776, "largestFreeCoresPercent": 100, "freeCards": 0},
        },
        "summary": "5 cards / 222508 MiB free",
        "labels": {"wanted": {"gpu": "on"}, "labelledNodes": 5},
        "resourceNames": {
            "count": "nvidia.com/gpu",
            "memory": "nvidia.com/gpumem",
            "memoryPercentage": "nvidia.com/gpumem-percentage",
            "cores": "nvidia.com/gpucores",
            "priority": "nvidia.com/priority",
            "source": "defaults",
        },
        "health": health_section,
    }
    assert result.recorded["gpuNodes"] == [
        {"name": node_a, "model": A100, "cards": 2},
        {"name": node_b, "model": "NVIDIA-NVIDIA L40S", "cards": 2},
        {"name": node_c, "model": "NVIDIA-Tesla V100-PCIE-32GB", "cards": 1},
        {"name": node_d, "model": "", "cards": 0},
        {"name": node_e, "model": "", "cards": 0},
    ]
    state, reason, message = sole_condition(result, constants.GPU_READY)
    assert (state, reason) == ("False", "UnparseableAnnotation")
    assert f"{node_e} (invalid JSON" in message
    assert f"Labelled GPU node(s) {node_d} register no devices" in message
    assert f"{node_b} (1 of 2)" in message
    for name in (node_a, node_b, node_c, node_d, node_e):
        assert world.labels(name)["gpu"] == "on"
    assert "gpu" not in world.labels(node_f)

    # The lab case: a fourth 30% request does not fit on a0 (it does on a1).
    view = world.snapshot().view()
    lab = capacity.node_capacity(
        node_a,
        register=view.nodes[node_a].annotations["hami.io/node-nvidia-register"],
        pods=view.pods_by_node[node_a],
        now=datetime.now(UTC),
        lock_timeout=timedelta(minutes=5),
        owner=view.pod,
    )
    fit = node_fit(lab, GpuRequest(mem_mib=2048, cores=30))
    assert fit.reasons == {a0: "needs 30% cores, 10% free"}
    assert fit.cards == (a1,)  # a1 has 50% cores left

    # Per-node and per-model gauges (cluster-wide, bytes); a node that disappears loses its series.
    gpu = metrics.METRICS.gpu.current()
    assert gpu is not None
    assert gpu.nodes[node_a]["memory_free_bytes"] == 149696 * 1024 * 1024
    assert gpu.models[A100]["cards"] == 2
    world.kube.delete("v1", "Node", node_c)
    world.run(p)
    node_series = [
        sample.labels["node"]
        for family in metrics.METRICS.gpu.collect()
        if family.name == "tenant_platform_gpu_node_cards"
        for sample in family.samples
    ]
    assert sorted(node_series) == [node_a, node_b, node_d, node_e]
    metrics.forget_platform(p.name)


def test_healthy_cluster_reports_ready_and_writes_the_printer_column(
    world: World, control_plane: ControlPlane, monkeypatch: pytest.MonkeyPatch
) -> None:
    control_plane.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CRD_FILE))
    control_plane.kubectl("wait", "--for=condition=Established", "--timeout=60s", f"crd/{constants.CRD_NAME}")
    u = world.prefix
    card = f"GPU-{u}-0"
    node = world.node("gpu", annotations={"hami.io/node-nvidia-register": register(a100(card))}, gpus=10)
    world.pod("infer", node, f"{card},NVIDIA,20480,25:;", bind_phase="success")
    name = f"{u}-tp"
    world.kube.create(
        {
            "apiVersion": constants.API_VERSION,
            "kind": constants.KIND,
            "metadata": {"name": name},
            "spec": {"namespace": f"{u}-ns", "domain": "gpu.example.com", "gpu": {"hami": {"configMapNamespace": u}}},
        }
    )
    try:
        monkeypatch.setattr(registry, "STEPS", [gpu.STEP])
        monkeypatch.setattr(registry, "HANDOFF", NoHandoff())
        body = world.kube.get(constants.API_VERSION, constants.KIND, name)
        assert body is not None
        outcome = reconcile.run(
            body, kube=world.kube, settings=Settings(), now=datetime.now(UTC), observed=world.snapshot()
        )
        assert outcome.status_written
        live = world.kube.get(constants.API_VERSION, constants.KIND, name)
        assert live is not None
        assert live["status"]["gpu"]["summary"] == "1 cards / 61440 MiB free"
        assert live["status"]["recorded"]["gpuNodes"] == [{"name": node, "model": A100, "cards": 1}]
        ready = condition(live["status"], constants.GPU_READY)
        assert (ready["status"], ready["reason"]) == ("True", "GPUNodesReady")
        column = control_plane.kubectl("get", "tenantplatform", name, "-o", "custom-columns=GPUS:.status.gpu.summary")
        assert "1 cards / 61440 MiB free" in column.stdout
        printed = control_plane.kubectl("get", "tenantplatform", name)
        assert "1 cards / 61440 MiB free" in printed.stdout
        # Nothing changed: the next pass writes nothing (no status, no labels).
        again = world.kube.get(constants.API_VERSION, constants.KIND, name)
        assert again is not None
        writes = world.kube.counter.snapshot()[1]
        second = reconcile.run(
            again, kube=world.kube, settings=Settings(), now=datetime.now(UTC), observed=world.snapshot()
        )
        assert not second.status_written
        assert world.kube.counter.snapshot()[1] == writes
    finally:
        world.kube.delete(constants.API_VERSION, constants.KIND, name)
        metrics.forget_platform(name)


def test_names_from_hami_configmap(world: World) -> None:
    u = world.prefix
    namespace = f"{u}-hami"
    world.kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    try:
        world.kube.create(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "hami-scheduler-device", "namespace": namespace},
                "data": {
                    "device-config.yaml": "nvidia:\n  resourceCountName: example.com/vgpu\n"
                    "  resourceMemoryName: example.com/vgpu-mem\n  resourceCoreName: example.com/vgpu-cores\n"
                },
            }
        )
        node = world.node("renamed", gpus=4, resource="example.com/vgpu")
        p = gpu_platform(
            f"{u}-p", hami={"configMapNamespace": namespace}, nodeLabels={"labels": {"hami.io/vgpu": "on"}}
        )
        result = world.run(p)
        status = result.status["gpu"]
        assert status["resourceNames"]["count"] == "example.com/vgpu"
        assert status["resourceNames"]["source"] == f"ConfigMap {namespace}/hami-scheduler-device"
        assert [n["name"] for n in status["nodes"]] == [node]
        assert result.recorded["gpuResourceNames"]["cores"] == "example.com/vgpu-cores"
        assert world.labels(node)["hami.io/vgpu"] == "on"
        # Registered nothing yet (labelled, no register annotation): that is the message.
        assert sole_condition(result, constants.GPU_READY)[1] == "NoDevicesRegistered"
        world.cleanup(p)
    finally:
        world.kube.delete("v1", "Namespace", namespace)
        metrics.forget_platform(f"{u}-p")


# -- labels -------------------------------------------------------------------------------------------


def test_labels_appear_are_restored_and_only_ours_are_removed(world: World) -> None:
    u = world.prefix
    gpu_node = world.node("gpu", labels={"nvidia.com/gpu.present": "true"})
    world.person_sets_label(gpu_node, "team", "ml")
    cpu_node = world.node("cpu")
    p = gpu_platform(f"{u}-p", hami={"enabled": False})  # labels only: no device plugin runs here
    manager = "tenant-platform-operator/labels/gpu=on"  # shared by every platform wanting gpu=on

    result = world.run(p)
    assert sole_condition(result, constants.GPU_READY)[:2] == ("True", "GPUNodesReady")
    labels = world.labels(gpu_node)
    assert (labels["gpu"], labels["team"], labels["nvidia.com/gpu.present"]) == ("on", "ml", "true")
    assert owners(world.kube, gpu_node)[manager] == {"gpu"}
    assert "gpu" not in world.labels(cpu_node)
    assert result.status["gpu"]["labels"] == {"wanted": {"gpu": "on"}, "labelledNodes": 1}

    # A resync with nothing to do writes nothing.
    ctx = world.context(p)
    writes = world.kube.counter.snapshot()[1]
    reconcile_step(gpu.STEP, ctx)
    assert world.kube.counter.snapshot()[1] == writes

    # Removed by hand: restored. Changed by hand: repaired (a person is not another platform).
    world.person_sets_label(gpu_node, "gpu", None)
    assert "gpu" not in world.labels(gpu_node)
    world.run(p)
    assert world.labels(gpu_node)["gpu"] == "on"
    world.person_sets_label(gpu_node, "gpu", "off")
    world.run(p)
    assert world.labels(gpu_node)["gpu"] == "on"

    # The node stops qualifying: our label goes, foreign ones stay; it qualifies again: back.
    world.person_sets_label(gpu_node, "nvidia.com/gpu.present", None)
    result = world.run(p)
    assert "gpu" not in world.labels(gpu_node)
    assert world.labels(gpu_node)["team"] == "ml"
    assert sole_condition(result, constants.GPU_READY)[1] == "NoGPUNodes"
    world.person_sets_label(gpu_node, "nvidia.com/gpu.present", "true")
    world.run(p)
    assert world.labels(gpu_node)["gpu"] == "on"

    # Deletion: only our label goes.
    world.cleanup(p)
    labels = world.labels(gpu_node)
    assert "gpu" not in labels
    assert labels["nvidia.com/gpu.present"] == "true"
    assert labels["team"] == "ml"
    assert manager not in owners(world.kube, gpu_node)
    world.cleanup(p)  # idempotent


def test_label_a_person_or_another_platform_also_set_survives_our_cleanup(world: World) -> None:
    u = world.prefix
    preset = world.node("preset", labels={"nvidia.com/gpu.present": "true"})
    world.person_sets_label(preset, "gpu", "on")  # set by hand before the operator came
    shared = world.node("shared", labels={"feature.node.kubernetes.io/pci-10de.present": "true"})
    first, second = gpu_platform(f"{u}-one"), gpu_platform(f"{u}-two")
    world.run(first)
    world.run(second)
    # One field manager holds the label for both platforms (not one per platform).
    ours = {m: keys for m, keys in owners(world.kube, shared).items() if m.startswith("tenant-platform-operator")}
    assert ours == {"tenant-platform-operator/labels/gpu=on": {"gpu"}}

    world.cleanup(first)
    assert world.labels(shared)["gpu"] == "on"  # the second platform still wants it
    assert world.labels(preset)["gpu"] == "on"
    world.cleanup(second)
    assert "gpu" not in world.labels(shared)
    assert world.labels(preset)["gpu"] == "on"  # the person's label was there before us


def test_two_platforms_wanting_different_values_conflict_and_neither_overwrites(world: World) -> None:
    u = world.prefix
    node = world.node("gpu", labels={"nvidia.com/gpu.present": "true"})
    holder = gpu_platform(f"{u}-holder", hami={"enabled": False})
    rival = gpu_platform(f"{u}-rival", nodeLabels={"labels": {"gpu": "yes", "tier": "gold"}}, hami={"enabled": False})
    stale_view = world.snapshot()  # taken before the holder labels the node

    assert sole_condition(world.run(holder), constants.GPU_READY)[0] == "True"

    # The rival's snapshot does not know the holder yet: the API server's 409 tells it.
    world.declare(rival)
    raced = reconcile_step(gpu.STEP, world.context(rival, observed=stale_view))
    state, reason, message = sole_condition(raced, constants.GPU_READY)
    assert (state, reason) == ("False", "Conflict")
    assert f"Node {node}: label gpu is held by TenantPlatform {holder.name}" in message
    assert world.labels(node)["gpu"] == "on"
    assert world.labels(node)["tier"] == "gold"  # keys without a conflict are applied

    # With a fresh snapshot the conflict is known up front and costs no write.
    writes = world.kube.counter.snapshot()[1]
    state, reason, message = sole_condition(world.run(rival), constants.GPU_READY)
    assert (state, reason) == ("False", "Conflict")
    assert f"label gpu=on is held by TenantPlatform {holder.name}; this platform wants gpu=yes" in message
    assert world.kube.counter.snapshot()[1] == writes
    assert sole_condition(world.run(holder), constants.GPU_READY)[:2] == ("True", "GPUNodesReady")
    assert world.labels(node)["gpu"] == "on"

    # The holder goes away: the rival's value is applied on its next pass.
    world.cleanup(holder)
    assert sole_condition(world.run(rival), constants.GPU_READY)[0] == "True"
    assert world.labels(node)["gpu"] == "yes"
    world.cleanup(rival)
    assert {"gpu", "tier"}.isdisjoint(world.labels(node))


def test_dry_run_writes_nothing_and_says_what_it_would_do(world: World) -> None:
    u = world.prefix
    node = world.node("gpu", labels={"nvidia.com/gpu.present": "true"})
    p = gpu_platform(f"{u}-p")
    writes = world.kube.counter.snapshot()[1]
    result = world.run(p, dry_run=True)
    assert world.kube.counter.snapshot()[1] == writes
    state, reason, message = sole_condition(result, constants.GPU_READY)
    assert (state, reason) == ("False", "LabelsPending")
    assert f"{node}: set gpu=on" in message
    assert "gpu" not in world.labels(node)
    assert gpu.STEP.cleanup(world.context(p, dry_run=True)).done
    # Without a snapshot (the `check` command) the step lists the cluster once; still no writes.
    unobserved = StepContext(platform=p, kube=world.kube, settings=Settings(), now=datetime.now(UTC), dry_run=True)
    reconcile_step(gpu.STEP, unobserved)
    assert world.kube.counter.snapshot()[1] == writes
    assert "gpu" not in world.labels(node)


def test_disabled_releases_labels(world: World) -> None:
    u = world.prefix
    node = world.node("gpu", labels={"nvidia.com/gpu.present": "true"})
    p = gpu_platform(f"{u}-p")
    world.run(p)
    assert world.labels(node)["gpu"] == "on"
    off = gpu_platform(f"{u}-p", nodeLabels={"enabled": False}, hami={"enabled": False})
    result = world.run(off)
    assert sole_condition(result, constants.GPU_READY)[:2] == ("True", "Disabled")
    assert result.status == {"gpu": {"summary": "disabled"}}
    assert "gpu" not in world.labels(node)


def ours(kube: Kube, node: str) -> dict[str, set[str]]:
    """Our field managers on the node (value managers and earlier per-platform ones) -> keys."""
    return {m: keys for m, keys in owners(kube, node).items() if m.startswith("tenant-platform-operator/")}


def test_many_platforms_share_one_field_manager_per_label_value(world: World) -> None:
    """However many platforms want gpu=on, each node carries one manager of ours, and only the
    first platform writes; the label goes with the last platform that wants it."""
    u = world.prefix
    nodes = [world.node(f"g{i}", labels={"nvidia.com/gpu.present": "true"}) for i in range(2)]
    platforms = [gpu_platform(f"{u}-p{i}", hami={"enabled": False}) for i in range(12)]
    writes = world.kube.counter.snapshot()[1]
    world.run(platforms[0])
    assert world.kube.counter.snapshot()[1] - writes == 2  # one apply per node
    for p in platforms[1:]:
        before = world.kube.counter.snapshot()[1]
        assert sole_condition(world.run(p), constants.GPU_READY)[:2] == ("True", "GPUNodesReady")
        assert world.kube.counter.snapshot()[1] == before  # held already: nothing to write
    for node in nodes:
        assert ours(world.kube, node) == {"tenant-platform-operator/labels/gpu=on": {"gpu"}}
    for p in platforms[:-1]:
        world.cleanup(p)
        assert all(world.labels(n)["gpu"] == "on" for n in nodes)
    world.cleanup(platforms[-1])
    for node in nodes:
        assert "gpu" not in world.labels(node)
        assert ours(world.kube, node) == {}


def test_a_live_platform_not_seen_yet_keeps_the_label_at_anothers_deletion(world: World) -> None:
    """After an operator restart a platform's GPU nodes are not known until its first pass: it
    counts as wanting its labels everywhere, so another platform's deletion leaves them."""
    u = world.prefix
    node = world.node("gpu", labels={"nvidia.com/gpu.present": "true"})
    first, later = (
        gpu_platform(f"{u}-first", hami={"enabled": False}),
        gpu_platform(f"{u}-later", hami={"enabled": False}),
    )
    world.run(first)
    world.declare(later)  # exists, no pass yet
    world.cleanup(first)
    assert world.labels(node)["gpu"] == "on"
    world.cleanup(later)
    assert "gpu" not in world.labels(node)


def test_earlier_per_platform_managers_are_handed_over_and_released(world: World) -> None:
    """Nodes labelled by an earlier version carry one manager per platform. A platform's pass hands
    its label to the shared value manager (applied first, so the label is never absent) and lets
    go of its own manager and of those of platforms that no longer exist; a live platform's
    manager is left to that platform's own pass."""
    u = world.prefix
    node = world.node("gpu", labels={"nvidia.com/gpu.present": "true"})
    first, second = (
        gpu_platform(f"{u}-first", hami={"enabled": False}),
        gpu_platform(f"{u}-second", hami={"enabled": False}),
    )
    world.declare(second)
    for name in (first.name, second.name, f"{u}-gone"):
        world.kube.apply(
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node, "labels": {"gpu": "on"}}},
            field_manager=f"tenant-platform-operator/{name}",
        )
    assert set(ours(world.kube, node)) == {
        f"tenant-platform-operator/{n}" for n in (first.name, second.name, f"{u}-gone")
    }

    assert sole_condition(world.run(first), constants.GPU_READY)[:2] == ("True", "GPUNodesReady")
    assert ours(world.kube, node) == {
        "tenant-platform-operator/labels/gpu=on": {"gpu"},
        f"tenant-platform-operator/{second.name}": {"gpu"},
    }
    assert world.labels(node)["gpu"] == "on"
    world.run(second)
    assert ours(world.kube, node) == {"tenant-platform-operator/labels/gpu=on": {"gpu"}}
    world.cleanup(first)
    assert world.labels(node)["gpu"] == "on"
    world.cleanup(second)
    assert "gpu" not in world.labels(node)


def test_a_deleted_platforms_earlier_manager_is_handed_to_a_platform_that_wants_it(world: World) -> None:
    """The only holder is a deleted platform's per-platform manager; another platform wants the
    same label there: the label moves to the value manager without going away."""
    u = world.prefix
    node = world.node("gpu", labels={"nvidia.com/gpu.present": "true"})
    world.kube.apply(
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node, "labels": {"gpu": "on", "tier": "x"}}},
        field_manager=f"tenant-platform-operator/{u}-gone",
    )
    p = gpu_platform(f"{u}-p", hami={"enabled": False})
    world.run(p)
    assert ours(world.kube, node) == {"tenant-platform-operator/labels/gpu=on": {"gpu"}}
    labels = world.labels(node)
    assert labels["gpu"] == "on"
    assert "tier" not in labels  # nobody wants it: released with the deleted platform's manager


# -- locks --------------------------------------------------------------------------------------------


def test_node_locks_follow_hamis_release_rules(world: World) -> None:
    """HAMi's next bind takes over an expired lock and one whose pod is gone (pkg/util/nodelock
    LockNode); a lock it cannot parse fails every bind there until someone removes it. Only that
    one makes GPUReady False; the others are named with what HAMi will do, and nothing says to
    delete them (the lab write-up: clearing a lock by hand is a lab workaround)."""
    u = world.prefix
    now = datetime.now(UTC).replace(microsecond=0)

    def lock(age: timedelta, pod: str) -> str:
        return f"{(now - age).isoformat().replace('+00:00', 'Z')},{world.namespace},{pod}"

    def gpu_node(suffix: str) -> str:
        card = f"GPU-{u}-{suffix}"
        return world.node(suffix, annotations={"hami.io/node-nvidia-register": register(a100(card))}, gpus=10)

    expired, dangling, active = gpu_node("expired"), gpu_node("dangling"), gpu_node("active")
    world.pod("binding", active, f"GPU-{u}-active,NVIDIA,1000,10:;")  # the mock never finishes a bind
    world.annotate(expired, {"hami.io/mutex.lock": lock(timedelta(minutes=10), "binding")})
    world.annotate(dangling, {"hami.io/mutex.lock": lock(timedelta(minutes=1), "gone")})
    world.annotate(active, {"hami.io/mutex.lock": lock(timedelta(minutes=1), "binding")})

    p = gpu_platform(f"{u}-p")
    result = world.run(p, now=now)
    state, reason, message = sole_condition(result, constants.GPU_READY)
    assert (state, reason) == ("True", "GPUNodesReady"), message
    assert f"{expired} (expired:" in message
    assert f"{dangling} (dangling:" in message
    assert "takes it over at the next GPU pod's bind" in message
    assert "remove the" not in message and "cannot bind until it expires" not in message
    assert active not in message
    locks = {n["name"]: n["lock"] for n in result.status["gpu"]["nodes"]}
    assert locks[active] == {
        "held": True,
        "since": (now - timedelta(minutes=1)).isoformat().replace("+00:00", "Z"),
        "pod": f"{world.namespace}/binding",
        "state": "active",
        "stale": False,
    }
    assert locks[dangling]["state"] == "dangling"
    assert locks[expired]["reason"] == "older than 5m"
    # Nothing will announce the active lock's expiry: the step asks to come back then.
    assert result.requeue_after == pytest.approx(241.0)
    gpu = metrics.METRICS.gpu.current()
    assert gpu is not None
    # The gauge counts only locks that block binds: these three HAMi takes over by itself.
    assert gpu.blocking_locks == {expired: False, dangling: False, active: False}

    # A lock HAMi cannot parse: every bind there fails until it is removed.
    malformed = gpu_node("malformed")
    world.annotate(malformed, {"hami.io/mutex.lock": f"yesterday,{world.namespace},binding"})
    state, reason, message = sole_condition(world.run(p, now=now), constants.GPU_READY)
    assert (state, reason) == ("False", "MalformedNodeLock"), message
    assert f"{malformed} (lock time 'yesterday' is not RFC 3339)" in message
    assert f"remove the hami.io/mutex.lock annotation from node {malformed}" in message
    assert f"{expired} (expired:" in message  # still named, with what HAMi does
    gpu = metrics.METRICS.gpu.current()
    assert gpu is not None
    assert gpu.blocking_locks == {expired: False, dangling: False, active: False, malformed: True}

    # Four minutes later, the active lock expired too.
    later = world.run(p, now=now + timedelta(minutes=4, seconds=30))
    assert f"{active} (expired:" in sole_condition(later, constants.GPU_READY)[2]

    # HAMi releases the others (its binds, its device plugin) and a person removes the malformed
    # one: GPUReady recovers, and names no lock.
    for name in (expired, dangling, active, malformed):
        world.annotate(name, {"hami.io/mutex.lock": None})
    recovered = sole_condition(world.run(p, now=now), constants.GPU_READY)
    assert recovered[:2] == ("True", "GPUNodesReady")
    assert "Node lock(s)" not in recovered[2]
    world.cleanup(p)
    metrics.forget_platform(p.name)


def test_a_node_deleted_under_a_stale_snapshot_is_not_recreated(world: World) -> None:
    u = world.prefix
    node = world.node("gone", labels={"nvidia.com/gpu.present": "true"})
    p = gpu_platform(f"{u}-p", hami={"enabled": False})
    stale = world.snapshot()
    world.kube.delete("v1", "Node", node)
    wait_for(lambda: world.kube.get("v1", "Node", node) is None, "node deletion", 60)
    world.declare(p)
    result = reconcile_step(gpu.STEP, world.context(p, observed=stale))
    assert not result.failed
    assert world.kube.get("v1", "Node", node) is None  # an apply without the uid would have created it
    # Re-created under the same name: a new node (new uid), labelled on the next pass.
    world.node("gone", labels={"nvidia.com/gpu.present": "true"})
    stale_result = reconcile_step(gpu.STEP, world.context(p, observed=stale))
    assert not stale_result.failed
    assert "gpu" not in world.labels(node)
    world.run(p)
    assert world.labels(node)["gpu"] == "on"


# -- watches ------------------------------------------------------------------------------------------


def test_watches_keep_the_snapshot_current(world: World) -> None:
    from tenant_platform import gpuwatch  # noqa: PLC0415

    snapshot = cluster.ClusterSnapshot()
    watches = gpuwatch.start_watches(world.kube, snapshot, watch_timeout=5)
    try:
        assert snapshot.wait_synced(60)
        u = world.prefix
        card = f"GPU-{u}-0"
        node = world.node("w", annotations={"hami.io/node-nvidia-register": register(a100(card))}, gpus=10)
        wait_for(lambda: node in snapshot.view().nodes, "the node in the snapshot", 60)
        world.pod("p", node, f"{card},NVIDIA,1000,10:;")
        wait_for(lambda: snapshot.view().pod(world.namespace, "p") is not None, "the pod in the snapshot", 60)
        # Ended pods leave (the field selector turns the update into a DELETED event).
        world.kube.merge_patch(
            "v1", "Pod", "p", {"status": {"phase": "Succeeded"}}, namespace=world.namespace, subresource="status"
        )
        wait_for(lambda: snapshot.view().pod(world.namespace, "p") is None, "the ended pod to leave", 60)
        # Our label shows up with its field manager, a heartbeat-only change does not count.
        world.run(gpu_platform(f"{u}-p", hami={"enabled": False}))
        wait_for(lambda: "gpu" in snapshot.view().nodes[node].label_holders, "our label's manager", 60)
        world.kube.delete("v1", "Node", node)
        wait_for(lambda: node not in snapshot.view().nodes, "the deleted node to leave", 60)
        # Watches time out server-side after 5 s and resume from their resourceVersion.
        wait_for(lambda: all(r.watches >= 2 for r in watches.reflectors), "a resumed watch", 30)
        assert all(r.lists == 1 for r in watches.reflectors)
    finally:
        watches.stop()
