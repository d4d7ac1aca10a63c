"""The GPU snapshot (observe.cluster) and the debounced refresher (gpuwatch): no cluster."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from tenant_platform import gpuwatch
from tenant_platform.observe import cluster, objects, reflector

REGISTER = '[{"id":"GPU-a","count":10,"devmem":1000,"devcore":100,"type":"T4","health":true}]'


def node(name: str = "gpu-1", **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "nvidia.com/gpu.present": "true",
                "nvidia.com/gpu.product": "Tesla-T4",
                "nvidia.com/cuda.driver.major": "550",
                "feature.node.kubernetes.io/cpu-cpuid.AVX": "true",
                "feature.node.kubernetes.io/pci-10de.present": "true",
                "team": "ml",
            },
            "annotations": {
                "hami.io/node-nvidia-register": REGISTER,
                "hami.io/mutex.lock": "2025-06-01T08:15:30Z,ml,p",
                "node.alpha.kubernetes.io/ttl": "0",
            },
            "managedFields": [
                {
                    "manager": "tenant-platform-operator/alpha",
                    "operation": "Apply",
                    "fieldsV1": {"f:metadata": {"f:labels": {"f:gpu": {}}}},
                },
                {
                    "manager": "tenant-platform-operator/beta",
                    "operation": "Apply",
                    "fieldsV1": {"f:metadata": {}},
                },
                {
                    "manager": "kubectl-label",
                    "operation": "Update",
                    "fieldsV1": {"f:metadata": {"f:labels": {"f:team": {}}}},
                },
            ],
        },
        "status": {
            "capacity": {"cpu": "8", "nvidia.com/gpu": "10", "hugepages-2Mi": "0"},
            "allocatable": {"cpu": "8", "nvidia.com/gpu": "10"},
            "conditions": [{"type": "Ready", "lastHeartbeatTime": "2025-06-01T08:00:00Z"}],
        },
    }
    body["metadata"].update(extra)
    return body


def pod(name: str = "p", node_name: str = "gpu-1", phase: str = "Pending", **annotations: str) -> dict[str, Any]:
    return {
        "metadata": {
            "namespace": "ml",
            "name": name,
            "annotations": {
                "hami.io/vgpu-node": node_name,
                "hami.io/vgpu-devices-allocated": "GPU-a,NVIDIA,100,10:;",
                "hami.io/bind-phase": "allocating",
                "other": "x",
                **annotations,
            },
        },
        "spec": {"initContainers": [{"name": "init"}], "containers": [{"name": "a"}, {"name": "b"}]},
        "status": {
            "phase": phase,
            "initContainerStatuses": [{"name": "init", "state": {"terminated": {"exitCode": 0}}}],
        },
    }


def test_node_info_keeps_only_what_we_read() -> None:
    info = cluster.node_info(node())
    assert info is not None
    assert dict(info.labels) == {
        "feature.node.kubernetes.io/pci-10de.present": "true",
        "kubernetes.io/hostname": "gpu-1",
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": "Tesla-T4",
        "team": "ml",
    }
    assert dict(info.annotations) == {
        "hami.io/mutex.lock": "2025-06-01T08:15:30Z,ml,p",
        "hami.io/node-nvidia-register": REGISTER,
    }
    assert dict(info.capacity) == {"nvidia.com/gpu": "10"}
    assert dict(info.allocatable) == {"nvidia.com/gpu": "10"}
    assert dict(info.label_managers) == {"alpha": frozenset({"gpu"})}


def test_every_node_is_kept_with_runtime_handlers_and_taints() -> None:
    """A CPU-only node is kept too (a label selector may make it a GPU node), with bounded extras."""
    body = {
        "metadata": {"name": "cpu", "labels": {"pool": "a", "feature.node.kubernetes.io/cpu-x": "true"}},
        "spec": {
            "taints": [
                {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
                {"key": "soft", "effect": "PreferNoSchedule"},
                {"key": "x" * 500, "effect": "NoExecute"},
                *({"key": f"t{i}", "effect": "NoSchedule"} for i in range(50)),
                "not a taint",
            ]
        },
        "status": {
            "capacity": {"cpu": "4"},
            "runtimeHandlers": [{"name": "runc"}, {"name": "nvidia"}, {"name": "h" * 500}, {"nope": 1}, "odd"]
            + [{"name": f"r{i}"} for i in range(50)],
        },
    }
    info = cluster.node_info(body)
    assert dict(info.labels) == {"pool": "a"}
    assert info.runtime_handlers[0] == "nvidia"
    assert len(info.runtime_handlers) == objects.MAX_RUNTIME_HANDLERS
    assert all(len(h) <= 63 for h in info.runtime_handlers)
    assert len(info.taints) == objects.MAX_TAINTS
    assert all(effect in ("NoSchedule", "NoExecute") and len(key) <= 120 for key, _, effect in info.taints)
    assert ("dedicated", "gpu", "NoSchedule") in info.taints


def test_pod_info() -> None:
    info = cluster.pod_info(pod())
    assert info == cluster.PodInfo(
        namespace="ml",
        name="p",
        node="gpu-1",
        phase="Pending",
        bind_phase="allocating",
        allocated="GPU-a,NVIDIA,100,10:;",
        init_containers=1,
        app_containers=2,
        init_exit_codes=(0,),
    )
    assert cluster.pod_info(pod(phase="Succeeded")) is None
    assert cluster.pod_info({"metadata": {"name": "plain", "namespace": "x"}}) is None
    legacy = pod()
    annotations = legacy["metadata"]["annotations"]
    legacy["metadata"]["annotations"] = {k.replace("hami.io/", "4pd.io/"): v for k, v in annotations.items()}
    assert cluster.pod_info(legacy) == info


def test_changes_count_only_relevant_updates() -> None:
    snap = cluster.ClusterSnapshot()
    assert snap.ingest_node(node())
    start = snap.changes
    heartbeat = node()
    heartbeat["status"]["conditions"][0]["lastHeartbeatTime"] = "2025-06-01T08:01:00Z"
    heartbeat["metadata"]["resourceVersion"] = "99"
    assert not snap.ingest_node(heartbeat)
    assert snap.changes == start
    relabelled = node()
    relabelled["metadata"]["labels"]["gpu"] = "on"
    assert snap.ingest_node(relabelled)
    assert snap.changes == start + 1
    assert snap.ingest_node({"metadata": {"name": "cpu"}})  # every node is kept
    assert not snap.ingest_node({"metadata": {"name": "cpu", "resourceVersion": "2"}})
    assert snap.changes == start + 2


def test_pods_follow_their_node_and_leave_when_done() -> None:
    snap = cluster.ClusterSnapshot()
    snap.ingest_pod(pod("a"))
    snap.ingest_pod(pod("b", node_name="gpu-2"))
    view = snap.view()
    assert [p.name for p in view.pods_by_node["gpu-1"]] == ["a"]
    assert view.pod("ml", "b") is not None
    moved = pod("a", node_name="gpu-2")
    assert snap.ingest_pod(moved)
    view = snap.view()
    assert "gpu-1" not in view.pods_by_node
    assert sorted(p.name for p in view.pods_by_node["gpu-2"]) == ["a", "b"]
    assert snap.ingest_pod(pod("a", node_name="gpu-2", phase="Failed"))
    assert snap.handle_pod_event("DELETED", pod("b", node_name="gpu-2"))
    assert not snap.handle_pod_event("DELETED", pod("b", node_name="gpu-2"))
    assert snap.view().pods == {}
    assert snap.view().pods_by_node == {}


def test_view_is_a_stable_copy() -> None:
    snap = cluster.ClusterSnapshot()
    snap.ingest_node(node("gpu-1"))
    view = snap.view()
    snap.ingest_node(node("gpu-2"))
    snap.handle_node_event("DELETED", node("gpu-1"))
    assert list(view.nodes) == ["gpu-1"]
    assert list(snap.view().nodes) == ["gpu-2"]


def test_replace_all_marks_synced() -> None:
    snap = cluster.ClusterSnapshot()
    snap.ingest_node(node("stale"))
    assert not snap.synced
    snap.replace_all([node("gpu-1"), {"metadata": {"name": "cpu"}}], [pod("a"), pod("z", phase="Succeeded")])
    view = snap.view()
    assert view.synced
    assert sorted(view.nodes) == ["cpu", "gpu-1"]
    assert list(view.pods) == [("ml", "a")]
    assert len(snap) == 3


def test_wait_for_change() -> None:
    snap = cluster.ClusterSnapshot()
    since = snap.changes
    assert snap.wait_for_change(since, timeout=0) == since
    worker = threading.Thread(target=snap.ingest_node, args=(node(),))
    worker.start()
    assert snap.wait_for_change(since, timeout=30) > since
    worker.join()


def test_refresher_coalesces_a_burst_into_one_refresh() -> None:
    snap = cluster.ClusterSnapshot()
    stopped = threading.Event()
    calls: list[int] = []

    def burst_then_wait(flag: Any, seconds: float) -> bool:
        # Changes arriving during the debounce window: 20 pod updates in a row.
        for i in range(20):
            snap.ingest_pod(pod(f"burst-{i}"))
        return False

    def refresh(changes: cluster.Changes) -> None:
        calls.append(snap.changes)
        stopped.set()

    before = snap.changes
    thread = threading.Thread(
        target=gpuwatch.gpu_refresher,
        kwargs={
            "stopped": stopped,
            "refresh": refresh,
            "debounce": 5.0,
            "snapshot": snap,
            "since": before,
            "sleep": burst_then_wait,
        },
    )
    thread.start()
    snap.ingest_node(node())  # the change that wakes the refresher
    thread.join(timeout=60)
    assert not thread.is_alive()
    assert len(calls) == 1
    assert calls[0] == before + 21  # the refresh saw the whole burst


def test_refresher_survives_a_failing_refresh_and_stops() -> None:
    snap = cluster.ClusterSnapshot()
    stopped = threading.Event()
    attempts: list[int] = []

    def refresh(changes: cluster.Changes) -> None:
        attempts.append(1)
        if len(attempts) == 2:
            stopped.set()
            return
        raise RuntimeError("API down")

    def no_wait(flag: Any, seconds: float) -> bool:
        return False

    since = snap.changes
    thread = threading.Thread(
        target=gpuwatch.gpu_refresher,
        kwargs={
            "stopped": stopped,
            "refresh": refresh,
            "debounce": 0,
            "snapshot": snap,
            "since": since,
            "sleep": no_wait,
        },
    )
    thread.start()
    snap.ingest_node(node("a"))
    while not attempts and thread.is_alive():
        snap.wait_for_change(snap.changes, timeout=0.05)
    snap.ingest_node(node("b"))
    thread.join(timeout=60)
    assert not thread.is_alive()
    assert len(attempts) == 2


def test_synced_needs_a_listing_of_both_kinds() -> None:
    snap = cluster.ClusterSnapshot()
    snap.replace_nodes([node()])
    assert not snap.synced
    assert not snap.wait_synced(0)
    snap.replace_pods([pod()])
    assert snap.synced
    assert snap.wait_synced(0)
    # A relisting replaces that kind only: what was deleted meanwhile disappears.
    snap.replace_pods([])
    view = snap.view()
    assert view.pods == {}
    assert list(view.nodes) == ["gpu-1"]


def test_reflector_accepts_only_nodes_and_pods() -> None:
    with pytest.raises(ValueError, match="kind must be one of"):
        reflector.Reflector(None, cluster.ClusterSnapshot(), "secrets")  # type: ignore[arg-type]


class ScriptedKube:
    """Plays a list and a scripted sequence of watches for Reflector's control flow only (the
    real list-and-watch is exercised against the API server in tests/integration/test_gpu.py)."""

    def __init__(self, watches: list[Any], stopped: threading.Event) -> None:
        self.watches = watches
        self.stopped = stopped
        self.listed_pages = 0

    def path(self, api_version: str, kind: str) -> str:
        return f"/api/{api_version}/{kind.lower()}s"

    def request(self, method: str, path: str, *, query: dict[str, str]) -> dict[str, Any]:
        self.listed_pages += 1
        if "continue" not in query:
            return {"metadata": {"resourceVersion": "10", "continue": "next"}, "items": [pod("a")]}
        return {"metadata": {"resourceVersion": "10"}, "items": [pod("b")]}

    def watch(self, api_version: str, kind: str, **kwargs: Any) -> Any:
        if not self.watches:
            self.stopped.set()
            return iter(())
        step = self.watches.pop(0)
        if isinstance(step, Exception):
            raise step
        return iter(step)


def test_reflector_relists_after_410_and_resumes_otherwise() -> None:
    from tenant_platform.kube import errors  # noqa: PLC0415

    snap = cluster.ClusterSnapshot()
    stopped = threading.Event()
    deleted_b = {
        "type": "DELETED",
        "object": {**pod("b"), "metadata": {**pod("b")["metadata"], "resourceVersion": "11"}},
    }
    bookmark = {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "12"}}}
    kube = ScriptedKube(
        [
            errors.KubeError(410, "Expired", "too old resource version: 1 (10)"),
            [deleted_b, bookmark],
            errors.Transient(0, "ConnectionError", "reset"),
            [],
        ],
        stopped,
    )
    watcher = reflector.Reflector(kube, snap, "pods")  # type: ignore[arg-type]
    watcher.run(stopped, resource_version="1")
    # 410: listed (two pages); the next watch deleted b; a transient error resumed the watch
    # without listing again.
    assert watcher.lists == 1
    assert kube.listed_pages == 2
    assert watcher.errors == 2
    assert watcher.events == 1
    assert list(snap.view().pods) == [("ml", "a")]
    assert snap.view().synced is False  # pods only: nodes were never listed
