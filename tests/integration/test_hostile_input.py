"""Hostile HAMi annotations on the real API server, written by an identity that can do nothing
but create pods in its own namespace.

Anyone who may create a pod may annotate it ``hami.io/vgpu-node`` and
``hami.io/vgpu-devices-allocated``; the operator reads those of every pod in the cluster. One
such pod used to turn GPUReady into Unknown/InternalError for every platform and drop
``status.gpu`` and the GPU facts of the install values; eight with 200 KB annotations made every
status write fail (``etcdserver: request is too large``). Here the platform stays GPUReady,
``status.gpu`` stays, the pods are named in a bounded note, and status writes succeed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.support import condition, create_namespace

from tenant_platform import metrics, reconcile
from tenant_platform.api import constants
from tenant_platform.concerns.gpu import capacity
from tenant_platform.concerns.gpu.step import STEP
from tenant_platform.concerns.namespaces import step as namespaces
from tenant_platform.config import Settings
from tenant_platform.formats.hami import bounds
from tenant_platform.kube.client import Kube
from tenant_platform.observe import cluster
from tenant_platform.reconcile import registry
from tenant_platform.testing import seed
from tenant_platform.testing.controlplane import ControlPlane

PAUSE = "registry.k8s.io/pause:3.10.1"
MODEL = "NVIDIA L4"

# (pod name, allocation annotation): one row per kind of garbage.
HOSTILE = [
    ("unicode-digit", "GPU-x,NVIDIA,²,0:;"),
    ("negative", "GPU-x,NVIDIA,-1000,0:;"),
    ("huge", "GPU-x,NVIDIA,99999999999999999999,0:;"),
    ("garbage-200k", "GPU-x,NVIDIA," + "9" * 200_000 + ",0:;"),
    ("truncated-json", '[{"id":"GPU-x","count":'),
    ("wrong-separators", "GPU-x;NVIDIA;1000;0"),
]


class Attacker:
    """A ServiceAccount whose only permission is creating pods in its own namespace."""

    def __init__(self, admin: Kube, control_plane: ControlPlane, namespace: str, directory: Path) -> None:
        self.admin = admin
        self.namespace = namespace
        create_namespace(admin, namespace, wait_sa=True)
        admin.create(
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "attacker", "namespace": namespace}}
        )
        admin.create(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": {"name": "create-pods", "namespace": namespace},
                "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["create"]}],
            }
        )
        admin.create(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": {"name": "create-pods", "namespace": namespace},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "create-pods"},
                "subjects": [{"kind": "ServiceAccount", "name": "attacker", "namespace": namespace}],
            }
        )
        token, _ = admin.request_token(namespace, "attacker", expiration_seconds=3600)
        self.kube = Kube.from_kubeconfig(str(control_plane.kubeconfig_for_token(token, directory / "attacker")))
        user = f"system:serviceaccount:{namespace}:attacker"
        groups = ["system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"]
        for verb, where, expected in (
            ("create", namespace, True),
            ("list", namespace, False),
            ("create", "default", False),
        ):
            allowed, _ = admin.can_i(user=user, groups=groups, verb=verb, resource="pods", namespace=where)
            assert allowed is expected, (verb, where)

    def pod(self, name: str, node: str, allocated: str) -> None:
        self.kube.create(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": name,
                    "namespace": self.namespace,
                    "annotations": {
                        "hami.io/vgpu-node": node,
                        "hami.io/vgpu-devices-allocated": allocated,
                        "hami.io/bind-phase": "success",
                    },
                },
                "spec": {"nodeName": node, "containers": [{"name": "c", "image": PAUSE}]},
            }
        )


class Scene:
    """A GPU node, a platform (gpu step only, plus the install-values hand-off) and an attacker."""

    def __init__(self, admin: Kube, control_plane: ControlPlane, prefix: str, directory: Path) -> None:
        self.admin = admin
        self.prefix = prefix
        self.node = f"{prefix}-gpu"
        self.card = f"GPU-{prefix}-0"
        register = [{"id": self.card, "count": 10, "devmem": 24576, "devcore": 100, "type": MODEL, "health": True}]
        body = seed.node_manifest(self.node, annotations={"hami.io/node-nvidia-register": json.dumps(register)})
        admin.request("POST", "/api/v1/nodes", body=body, query={"fieldManager": "kubelet"})
        admin.merge_patch(
            "v1",
            "Node",
            self.node,
            {"status": {"capacity": {"nvidia.com/gpu": "10"}, "allocatable": {"nvidia.com/gpu": "10"}}},
            subresource="status",
        )
        self.tenant = f"{prefix}-ns"
        self.name = f"{prefix}-tp"
        create_namespace(admin, self.tenant, adoptable_by=self.name)  # an admin hands it over
        admin.create(
            {
                "apiVersion": constants.API_VERSION,
                "kind": constants.KIND,
                "metadata": {"name": self.name},
                "spec": {
                    "namespace": self.tenant,
                    "domain": f"{prefix}.example.com",
                    "gpu": {"hami": {"configMapNamespace": self.tenant}},
                },
            }
        )
        self.attacker = Attacker(admin, control_plane, f"{prefix}-evil", directory)

    def snapshot(self) -> cluster.ClusterSnapshot:
        """The cluster as the operator watches it, restricted to this test's node and namespaces."""
        nodes = [n for n in self.admin.list("v1", "Node") if n["metadata"]["name"] == self.node]
        pods = [
            p
            for p in self.admin.list("v1", "Pod", field_selector=cluster.LIVE_PODS)
            if p["metadata"]["namespace"] in (self.attacker.namespace, self.tenant)
        ]
        snap = cluster.ClusterSnapshot()
        snap.replace_all(nodes, pods)
        return snap

    def reconcile(self) -> reconcile.Outcome:
        body = self.admin.get(constants.API_VERSION, constants.KIND, self.name)
        assert body is not None
        return reconcile.run(
            body, kube=self.admin, settings=Settings(), now=datetime.now(UTC), observed=self.snapshot()
        )

    def live(self) -> dict[str, Any]:
        body = self.admin.get(constants.API_VERSION, constants.KIND, self.name)
        assert body is not None
        return body

    def install_values(self) -> dict[str, Any]:
        config_map = self.admin.get("v1", "ConfigMap", f"{self.name}-install-values", self.tenant)
        assert config_map is not None
        values = yaml.safe_load(config_map["data"]["values.yaml"])
        assert isinstance(values, dict)
        return values

    def teardown(self) -> None:
        self.admin.delete(constants.API_VERSION, constants.KIND, self.name)
        self.admin.delete("v1", "Node", self.node)
        for namespace in (self.tenant, self.attacker.namespace):
            self.admin.delete("v1", "Namespace", namespace)
        metrics.forget_platform(self.name)


@pytest.fixture
def scene(
    crd: Kube, control_plane: ControlPlane, unique_name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Scene]:
    # The namespaces step claims the tenant namespace (the write gate lets the values in only then).
    monkeypatch.setattr(registry, "STEPS", [namespaces.STEP, STEP])
    s = Scene(crd, control_plane, unique_name[:40].rstrip("-"), tmp_path)
    try:
        yield s
    finally:
        s.teardown()


def test_hostile_pods_in_another_namespace_leave_the_platform_gpu_ready(scene: Scene) -> None:
    scene.admin.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "good",
                "namespace": scene.tenant,
                "annotations": {
                    "hami.io/vgpu-node": scene.node,
                    "hami.io/vgpu-devices-allocated": f"{scene.card},NVIDIA,4096,25:;",
                },
            },
            "spec": {"nodeName": scene.node, "containers": [{"name": "c", "image": PAUSE}]},
        }
    )
    for name, value in HOSTILE:
        scene.attacker.pod(name, scene.node, value.replace("GPU-x", scene.card))

    outcome = scene.reconcile()

    assert outcome.status_written
    status = scene.live()["status"]
    ready = condition(status, constants.GPU_READY)
    assert (ready["status"], ready["reason"]) == ("True", "GPUNodesReady"), ready
    assert f"{len(HOSTILE)} HAMi pod(s) ignored" in ready["message"]
    assert len(ready["message"]) < 2048
    gpu_status = status["gpu"]
    assert gpu_status["summary"] == "1 cards / 20480 MiB free"  # the good pod still counts
    assert gpu_status["ignoredPods"] == len(HOSTILE)
    [node] = gpu_status["nodes"]
    assert node["ignoredPodCount"] == len(HOSTILE)
    assert len(node["ignoredPods"]) == capacity.MAX_IGNORED_LISTED
    assert all(note.startswith(f"{scene.attacker.namespace}/") for note in node["ignoredPods"])
    assert all(len(note) <= bounds.MAX_NOTE_CHARS for note in node["ignoredPods"])
    assert any("unicode-digit: container 0: memory '²'" in note for note in node["ignoredPods"])
    assert status["recorded"]["gpuNodes"] == [{"name": scene.node, "model": MODEL, "cards": 1}]
    assert scene.install_values()["gpuNodes"] == [{"name": scene.node, "model": MODEL, "cards": 1}]


def test_eight_pods_with_200_kb_annotations_do_not_stop_status_writes(scene: Scene) -> None:
    garbage = f"{scene.card},NVIDIA," + "7" * 200_000 + ",0:;"
    for i in range(8):
        scene.attacker.pod(f"big-{i}", scene.node, garbage)
    # Every kept value is bounded: the snapshot holds a short marker, not 200 KB per pod.
    snap = scene.snapshot()
    assert all(len(p.allocated) < 64 for p in snap.view().pods.values())

    outcome = scene.reconcile()

    assert outcome.status_written
    status = scene.live()["status"]
    assert len(json.dumps(status)) < 32 * 1024, len(json.dumps(status))
    ready = condition(status, constants.GPU_READY)
    assert (ready["status"], ready["reason"]) == ("True", "GPUNodesReady"), ready
    assert status["gpu"]["ignoredPods"] == 8
    assert "over the 65536 HAMi ever writes" in status["gpu"]["nodes"][0]["ignoredPods"][0]
    # And the next status write (a change elsewhere in status) still goes through.
    scene.admin.merge_patch(
        constants.API_VERSION, constants.KIND, scene.name, {"metadata": {"annotations": {"touch": "1"}}}
    )
    scene.attacker.pod("big-8", scene.node, garbage)
    assert scene.reconcile().status_written
    assert scene.live()["status"]["gpu"]["ignoredPods"] == 9
