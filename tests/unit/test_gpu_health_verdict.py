"""concerns/gpu/health.py and concerns/gpu/facts.py: GPU discovery beyond what a node advertises, and HAMi's
health (pure)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from tests.support import platform
from tests.unit.test_gpu_verdict import Node

from tenant_platform.concerns.gpu import health
from tenant_platform.concerns.gpu.facts import GpuFacts
from tenant_platform.formats.hami.bounds import MAX_NOTE_CHARS
from tenant_platform.formats.hami.register import Card

LABELS = {"pool": "gpu", "tier": "a100"}


@pytest.mark.parametrize(
    ("operator", "values", "matches"),
    [
        ("In", ("a100", "h100"), True),
        ("In", ("h100",), False),
        ("NotIn", ("h100",), True),
        ("NotIn", ("a100",), False),
        ("Exists", (), True),
        ("DoesNotExist", (), False),
        ("Bogus", (), False),
    ],
)
def test_requirements(operator: str, values: tuple[str, ...], matches: bool) -> None:
    assert health.Requirement("tier", operator, values).matches(LABELS) is matches


def test_an_empty_selector_selects_nothing() -> None:
    assert not health.Selector(health.NODE_SELECTOR).matches(LABELS)
    assert health.Selector(health.NODE_SELECTOR, {"pool": "gpu"}).matches(LABELS)
    assert not health.Selector(health.NODE_SELECTOR, {"pool": "gpu"}, (health.Requirement("x", "Exists"),)).matches(
        LABELS
    )


def test_spec_selector_from_the_model() -> None:
    tp = platform(
        "p", gpu={"nodeSelector": {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["a100"]}]}}
    )
    selector = health.spec_selector(tp.spec.gpu.node_selector)
    assert selector is not None and selector.matches(LABELS)
    assert health.spec_selector(None) is None


def test_only_nvidia_runtime_classes_with_a_node_selector_mark_nodes() -> None:
    classes = [
        {"metadata": {"name": "nvidia"}, "handler": "nvidia", "scheduling": {"nodeSelector": {"pool": "gpu"}}},
        {"metadata": {"name": "nvidia-cdi"}, "handler": "nvidia-cdi"},  # runs anywhere: marks nothing
        {"metadata": {"name": "kata"}, "handler": "kata", "scheduling": {"nodeSelector": {"pool": "gpu"}}},
        {"metadata": {"name": "odd"}, "handler": "nvidia", "scheduling": {"nodeSelector": "not a map"}},
    ]
    selectors, names = health.runtime_class_selectors(classes)
    assert names == ["nvidia", "nvidia-cdi", "odd"]
    assert [dict(s.match_labels) for s in selectors] == [{"pool": "gpu"}]


def test_detection_sources_on_facts() -> None:
    nodes = {
        "handler": Node("handler", runtime_handlers=("runc", "nvidia-cdi")),
        "selected": Node("selected", labels={"tier": "a100"}),
        "classed": Node("classed", labels={"pool": "gpu"}),
        "both": Node("both", labels={"nvidia.com/gpu.present": "true", "pool": "gpu"}),
        "cpu": Node("cpu", labels={"pool": "cpu"}, runtime_handlers=("runc",)),
    }
    facts = GpuFacts(
        nodes=nodes,
        pods_by_node={},
        pod=lambda namespace, name: None,
        selectors=(
            health.Selector(health.NODE_SELECTOR, {"tier": "a100"}),
            health.Selector(health.RUNTIME_CLASS, {"pool": "gpu"}),
        ),
    )
    assert facts.detections == {
        "handler": ("runtimeHandler",),
        "selected": ("nodeSelector",),
        "classed": ("runtimeClass",),
        "both": ("label", "runtimeClass"),
    }
    assert facts.gpu_nodes == ["both", "classed", "handler", "selected"]


PLUGINS = "/var/lib/kubelet/device-plugins"


def volume(path: str) -> dict[str, Any]:
    return {"name": "dp", "hostPath": {"path": path}}


def ds(name: str, image: str, volumes: list[dict[str, Any]], **meta: Any) -> dict[str, Any]:
    return {
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": "kube-system", **meta},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {"spec": {"containers": [{"image": image}], "volumes": volumes}},
        },
        "status": {"desiredNumberScheduled": 3, "numberReady": 2},
    }


def test_workloads_from_real_shapes() -> None:
    hami = health.workload(
        ds(
            "hami-device-plugin",
            "projecthami/hami:v2.6.0",
            [volume("/var/lib/kubelet/device-plugins")],
            labels={"app.kubernetes.io/component": "hami-device-plugin"},
        )
    )
    assert (hami.role, hami.gpu_plugin, hami.desired, hami.ready, hami.is_ready) == (
        "device-plugin",
        True,
        3,
        2,
        False,
    )
    assert dict(hami.selector) == {"app": "hami-device-plugin"}
    nvidia = health.workload(
        ds(
            "nvidia-device-plugin-daemonset",
            "nvcr.io/nvidia/k8s-device-plugin:v0.17.0",
            [volume("/var/lib/kubelet/device-plugins/")],
        )
    )
    assert (nvidia.role, nvidia.gpu_plugin) == ("", True)
    rdma = health.workload(
        ds("rdma-shared-dp", "mellanox/k8s-rdma-shared-dev-plugin", [volume("/var/lib/kubelet/device-plugins")])
    )
    assert not rdma.gpu_plugin  # another kind of device plugin
    logs = health.workload(
        ds("nvidia-dcgm-exporter", "nvcr.io/nvidia/dcgm-exporter", [volume("/var/lib/kubelet/pod-resources")])
    )
    assert not logs.gpu_plugin
    scheduler = health.workload(
        {
            "kind": "Deployment",
            "metadata": {"name": "hami-scheduler", "namespace": "kube-system"},
            "spec": {},
            "status": {"readyReplicas": 1},
        }
    )
    assert (scheduler.role, scheduler.desired, scheduler.ready, scheduler.is_ready) == ("scheduler", 1, 1, True)


@pytest.mark.parametrize(
    ("name", "image", "labels"),
    [
        # HAMi's chart (mockDevicePlugin.enabled): <fullname>-mock-device-plugin
        (
            "hami-mock-device-plugin",
            "projecthami/mock-device-plugin:1.0.1",
            {"app.kubernetes.io/component": "hami-mock-device-plugin"},
        ),
        # Project-HAMi/mock-device-plugin's k8s-mock-plugin.yaml
        ("hami-mock-device-plugin-daemonset", "projecthami/mock-device-plugin:latest", {}),
        ("fake-gpus", "registry.local/hami/mock-device-plugin:dev", {}),
    ],
)
def test_hamis_mock_device_plugin_advertises_no_count_resource(name: str, image: str, labels: dict[str, str]) -> None:
    """The mock advertises memory and cores only: never one of two plugins for the count resource."""
    mock = health.workload(ds(name, image, [volume(PLUGINS)], labels=labels))
    assert (mock.role, mock.gpu_plugin) == ("mock-device-plugin", False)


HAMI_PLUGIN = health.Workload("DaemonSet", "kube-system", "hami-device-plugin", 1, 1, "device-plugin", gpu_plugin=True)
NVIDIA_PLUGIN = health.Workload("DaemonSet", "gpu-operator", "nvidia-device-plugin-daemonset", 1, 1, gpu_plugin=True)
MOCK_PLUGIN = health.Workload("DaemonSet", "kube-system", "hami-mock-device-plugin", 1, 1, "mock-device-plugin")
ONE_PER_CARD = {"lab": "nvidia.com/gpu advertises 1 (one per card) where HAMi's device plugin advertises 10"}


@pytest.mark.parametrize(
    ("workloads", "plugin_nodes", "conflict"),
    [
        pytest.param((HAMI_PLUGIN, MOCK_PLUGIN), {}, None, id="the mock lab: a count gate set by hand"),
        pytest.param((), {}, None, id="no device plugin read"),
        pytest.param(
            (HAMI_PLUGIN, NVIDIA_PLUGIN),
            {},
            "nvidia.com/gpu advertises 1 (one per card) where HAMi's device plugin advertises 10; GPU device "
            "plugin besides HAMi's: gpu-operator/nvidia-device-plugin-daemonset",
            id="NVIDIA's plugin exists: it registered the resource last",
        ),
        pytest.param(
            (HAMI_PLUGIN, NVIDIA_PLUGIN),
            {"lab": ("gpu-operator/nvidia-device-plugin-daemonset", "kube-system/hami-device-plugin")},
            "device-plugin pods of gpu-operator/nvidia-device-plugin-daemonset and kube-system/hami-device-plugin",
            id="pods of both on the node",
        ),
    ],
)
def test_conflicts_only_when_two_plugins_really_advertise(
    workloads: tuple[health.Workload, ...], plugin_nodes: dict[str, tuple[str, ...]], conflict: str | None
) -> None:
    facts = health.HealthFacts(namespace="kube-system", workloads=workloads, plugin_nodes=plugin_nodes, read=True)
    assert health.conflicts(facts, ONE_PER_CARD, ["lab"]).get("lab") == conflict


@pytest.mark.parametrize(
    "body",
    [
        {},
        {
            "kind": "DaemonSet",
            "metadata": None,
            "spec": {"template": {"spec": {"volumes": ["x", None, {"hostPath": 3}]}}},
        },
        {
            "kind": "Deployment",
            "spec": {"replicas": "2", "selector": {"matchLabels": ["a"]}},
            "status": {"readyReplicas": True},
        },
        {"kind": "DaemonSet", "metadata": {"name": "n" * 10_000}, "status": {"numberReady": -4}},
    ],
)
def test_odd_workloads_never_raise_and_stay_bounded(body: dict[str, Any]) -> None:
    found = health.workload(body)
    assert len(found.name) <= 63 and found.desired >= 0 and found.ready >= 0


UNREACHABLE = (
    'Internal error occurred: failed calling webhook "vgpu.hami.io": failed to call webhook: Post '
    '"https://hami-scheduler.kube-system.svc:443/webhook?timeout=10s": dial tcp: lookup '
    "hami-scheduler.kube-system.svc: no such host"
)


@pytest.mark.parametrize(
    ("answer", "outcome", "webhook", "service"),
    [
        (({"spec": {"schedulerName": "hami-scheduler"}}, "", 0), "mutated", "", ""),
        (({"spec": {"schedulerName": "default-scheduler"}}, "", 0), "unmutated", "", ""),
        ((None, UNREACHABLE, 500), "unreachable", "vgpu.hami.io", "https://hami-scheduler.kube-system.svc:443"),
        ((None, 'admission webhook "vgpu.hami.io" denied the request: no', 400), "denied", "vgpu.hami.io", ""),
        ((None, 'namespaces "x" not found', 404), "skipped", "", ""),
        ((None, "forbidden: the guard says no", 403), "failed", "", ""),
    ],
)
def test_probe_result(answer: tuple[Any, str, int], outcome: str, webhook: str, service: str) -> None:
    pod, error, status = answer
    probe = health.probe_result("ns", pod=pod, error=error, status=status)
    assert (probe.outcome, probe.webhook, probe.service) == (outcome, webhook, service)
    assert len(probe.detail) <= MAX_NOTE_CHARS


def test_probe_result_bounds_hostile_error_text() -> None:
    error = f'failed calling webhook "{"w" * 300}": Post "https://{"h" * 5000}/x": {"e" * 100_000}'
    probe = health.probe_result("ns", pod=None, error=error, status=500)
    assert len(json.dumps(probe.status().dump())) < 1000


def test_probe_pod_asks_for_one_gpu_of_the_configured_name() -> None:
    pod = health.probe_pod("tenant", "example.com/vgpu")
    assert pod["spec"]["containers"][0]["resources"] == {"limits": {"example.com/vgpu": "1"}}
    assert pod["metadata"]["annotations"] == {"sidecar.istio.io/inject": "false"}


def card(count: int) -> Card:
    return Card("GPU-a", 0, count, 100, 100, "T4", 0, True, "")


@pytest.mark.parametrize(
    ("cards", "capacity", "conflict"),
    [
        ((card(10), card(10)), 2, True),  # NVIDIA's plugin: one per card
        ((card(10), card(10)), 20, False),  # HAMi's: the split count
        ((card(1), card(1)), 2, False),  # no split: undecidable
        ((), 0, False),
    ],
)
def test_split_count_conflict(cards: tuple[Card, ...], capacity: int, conflict: bool) -> None:
    assert (health.split_count_conflict(cards, capacity) is not None) is conflict


def test_taints_that_need_tolerations() -> None:
    taints = (
        ("nvidia.com/gpu", "", "NoSchedule"),  # ExtendedResourceToleration tolerates it
        ("nvidia.com/gpu", "", "NoExecute"),
        ("node.kubernetes.io/not-ready", "", "NoSchedule"),  # the node's state, not a choice
        ("dedicated", "ml", "NoSchedule"),
    )
    assert health.blocking_taints(taints, "nvidia.com/gpu") == ["nvidia.com/gpu:NoExecute", "dedicated=ml:NoSchedule"]


def test_notes_are_bounded() -> None:
    facts = health.HealthFacts(namespace="n" * 63, read=True, read_errors=tuple("x" * 5000 for _ in range(20)))
    tainted = {f"node-{i}": ["k" * 300] for i in range(100)}
    notes = health.notes(facts, tainted=tainted, gpu_nodes=100, hami_enabled=True)
    assert len(notes) <= health.MAX_NOTES
    assert all(len(n) <= MAX_NOTE_CHARS for n in notes)
