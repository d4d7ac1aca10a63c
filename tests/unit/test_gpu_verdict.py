"""The GPUReady verdict (concerns/gpu/verdict.py): pure and table-driven, one row per reason.

``gpu_condition`` decides from findings; ``evaluate`` from gathered facts (snapshot-like nodes
and pods) and the spec, and also builds status.gpu and the recorded GPU facts.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import pytest
from tests.hami_support import HamiNode, Pod, no_owner
from tests.support import platform

from tenant_platform.api import reasons
from tenant_platform.concerns.gpu import capacity, health, verdict
from tenant_platform.concerns.gpu.capacity import CardState
from tenant_platform.concerns.gpu.labels import LabelOutcome
from tenant_platform.concerns.gpu.verdict import GpuFacts
from tenant_platform.formats.hami.locks import NodeLock
from tenant_platform.formats.hami.register import Card

NOW = datetime(2025, 6, 1, 8, 20, 0, tzinfo=UTC)
FIVE_MIN = timedelta(minutes=5)
V210 = (
    '[{"id":"GPU-aaa","count":10,"devmem":81920,"devcore":100,"type":"NVIDIA A100-SXM4-80GB","mode":"hami-core",'
    '"health":true},{"id":"GPU-bbb","index":1,"count":10,"devmem":81920,"devcore":100,"type":"NVIDIA A100-SXM4-80GB",'
    '"numa":1,"mode":"hami-core"}]'
)
ONE_CARD = json.dumps(
    [{"id": "GPU-lab", "count": 10, "devmem": 24576, "devcore": 100, "type": "NVIDIA L4", "health": True}]
)


def lab_node(*pods: Pod) -> capacity.NodeCapacity:
    return capacity.node_capacity("lab", register=ONE_CARD, pods=pods, now=NOW, lock_timeout=FIVE_MIN, owner=no_owner)


# -- GPUReady --------------------------------------------------------------------------------------


def findings(**overrides: object) -> verdict.Findings:
    base: dict[str, object] = {"labels_enabled": True, "hami_enabled": True, "gpu_nodes": 1}
    base.update(overrides)
    return verdict.Findings(**base)  # type: ignore[arg-type]


HEALTHY = lab_node()
UNREGISTERED = capacity.NodeCapacity("silent", registered=False)
UNPARSEABLE = capacity.node_capacity("weird", register="[", pods=[], now=NOW, lock_timeout=FIVE_MIN, owner=no_owner)
UNHEALTHY = capacity.node_capacity("sick", register=V210, pods=[], now=NOW, lock_timeout=FIVE_MIN, owner=no_owner)
STALE = capacity.node_capacity(
    "locked",
    register=ONE_CARD,
    pods=[],
    now=NOW,
    lock_timeout=FIVE_MIN,
    owner=no_owner,
    lock="2025-06-01T08:19:00Z,ml,gone",
)
MALFORMED = capacity.node_capacity(
    "jammed",
    register=ONE_CARD,
    pods=[],
    now=NOW,
    lock_timeout=FIVE_MIN,
    owner=no_owner,
    lock="yesterday,ml,gone",
)


@pytest.mark.parametrize(
    ("overrides", "status", "reason", "fragments"),
    [
        pytest.param(
            {"labels_enabled": False, "hami_enabled": False, "gpu_nodes": 3}, "True", "Disabled", [], id="disabled"
        ),
        pytest.param({"gpu_nodes": 0}, "True", "NoGPUNodes", ["optional"], id="no gpu nodes"),
        pytest.param(
            {"nodes": [HEALTHY], "labelled": frozenset({"lab"}), "allocatable": {"lab": 10}},
            "True",
            "GPUNodesReady",
            ["1 GPU node(s), 1 labelled", "1 cards / 24576 MiB free"],
            id="ready",
        ),
        pytest.param(
            {"hami_enabled": False, "labelled": frozenset({"a"})},
            "True",
            "GPUNodesReady",
            ["1 labelled"],
            id="labels only",
        ),
        pytest.param(
            {"conflicts": ["Node a: label gpu=on is held by TenantPlatform x; this platform wants gpu=yes."]},
            "False",
            "Conflict",
            ["held by TenantPlatform x", "Neither platform overwrites"],
            id="conflict",
        ),
        pytest.param(
            {"pending": ["a: set gpu=on"]}, "False", "LabelsPending", ["a: set gpu=on", "dry run"], id="dry run"
        ),
        pytest.param(
            {"nodes": [UNPARSEABLE], "allocatable": {"weird": 10}},
            "False",
            "UnparseableAnnotation",
            ["weird (invalid JSON"],
            id="unparseable",
        ),
        pytest.param(
            {"nodes": [UNREGISTERED], "labelled": frozenset({"silent"})},
            "False",
            "NoDevicesRegistered",
            ["silent register no devices"],
            id="labelled node registers nothing",
        ),
        pytest.param(
            {"nodes": [UNREGISTERED], "labelled": frozenset()},
            "True",
            "GPUNodesReady",
            [],
            id="unlabelled node registering nothing is fine",
        ),
        pytest.param(
            {"nodes": [HEALTHY], "allocatable": {"lab": 0}},
            "False",
            "NoAllocatableGPUs",
            ["lab", "no allocatable nvidia.com/gpu"],
            id="no allocatable gpus",
        ),
        pytest.param(
            {"nodes": [UNHEALTHY], "allocatable": {"sick": 10}},
            "False",
            "UnhealthyCards",
            ["sick (1 of 2)"],
            id="unhealthy card",
        ),
        pytest.param(
            {"nodes": [STALE], "allocatable": {"locked": 10}},
            "True",
            "GPUNodesReady",
            [
                "left behind that HAMi releases by itself, nothing to remove: locked (dangling",
                "by ml/gone",
                "HAMi takes it over at the next GPU pod's bind if the pod is gone, or once it expires at "
                "2025-06-01T08:24:00Z",
            ],
            id="a left-behind lock is named with what HAMi does, and is no problem",
        ),
        pytest.param(
            {"nodes": [MALFORMED], "allocatable": {"jammed": 10}},
            "False",
            "MalformedNodeLock",
            [
                "jammed (lock time 'yesterday' is not RFC 3339)",
                "binding a GPU pod there fails until the lock is removed",
                "remove the hami.io/mutex.lock annotation from node jammed.",
            ],
            id="a malformed lock names the node and says to remove it",
        ),
        pytest.param(
            {"nodes": [UNHEALTHY, STALE], "allocatable": {"sick": 10, "locked": 10}, "conflicts": ["C."]},
            "False",
            "Conflict",
            ["C.", "sick (1 of 2)", "locked (dangling"],
            id="every problem is named, the first wins the reason",
        ),
    ],
)
def test_gpu_condition(overrides: dict[str, object], status: str, reason: str, fragments: list[str]) -> None:
    condition = verdict.gpu_condition(findings(**overrides))
    assert (condition.type, condition.status, condition.reason) == ("GPUReady", status, reason)
    for fragment in fragments:
        assert fragment in condition.message


def test_many_nodes_are_abbreviated() -> None:
    nodes = [capacity.NodeCapacity(f"n{i}", registered=False) for i in range(8)]
    condition = verdict.gpu_condition(findings(nodes=nodes, labelled=frozenset(n.name for n in nodes)))
    assert "n0, n1, n2, n3, n4 and 3 more" in condition.message


# -- evaluate: facts + spec -> Verdict -------------------------------------------------------------


Node = HamiNode


def gpu_node(
    name: str = "lab",
    *,
    register: str | None = ONE_CARD,
    lock: str | None = None,
    allocatable: str = "10",
    labels: Mapping[str, str] | None = None,
) -> Node:
    annotations = {}
    if register is not None:
        annotations["hami.io/node-nvidia-register"] = register
    if lock is not None:
        annotations["hami.io/mutex.lock"] = lock
    return Node(
        name,
        labels={"gpu": "on"} if labels is None else labels,
        annotations=annotations,
        capacity={"nvidia.com/gpu": allocatable},
        allocatable={"nvidia.com/gpu": allocatable},
    )


demo = partial(platform, "p", namespace="p-ns", uid="u", gpu={})


def facts(
    *nodes: Node,
    pods: tuple[Pod, ...] = (),
    synced: bool = True,
    stale_since: datetime | None = None,
    selectors: tuple[health.Selector, ...] = (),
    hami: health.HealthFacts | None = None,
) -> GpuFacts:
    by_key = {(p.namespace, p.name): p for p in pods}
    return GpuFacts(
        nodes={n.name: n for n in nodes},
        pods_by_node={},
        pod=lambda namespace, name: by_key.get((namespace, name)),
        synced=synced,
        stale_since=stale_since,
        stale_why="watching pods failed: boom" if stale_since else "",
        selectors=selectors,
        health=hami or health.HealthFacts(),
    )


OFF = {"nodeLabels": {"enabled": False}, "hami": {"enabled": False}}
CPU_ONLY = Node("cpu", labels={"kubernetes.io/os": "linux"})
CONFLICT = "Node lab: label gpu=off is held by TenantPlatform other; this platform wants gpu=on."
HAMI_NS = "kube-system"
SCHEDULER = health.Workload("Deployment", HAMI_NS, "hami-scheduler", 1, 1, "scheduler")
PLUGIN = health.Workload("DaemonSet", HAMI_NS, "hami-device-plugin", 1, 1, "device-plugin", gpu_plugin=True)
NVIDIA_PLUGIN = health.Workload("DaemonSet", "gpu-operator", "nvidia-device-plugin-daemonset", 1, 1, gpu_plugin=True)
MOCK_PLUGIN = health.Workload("DaemonSet", HAMI_NS, "hami-mock-device-plugin", 1, 1, "mock-device-plugin")
UNREACHABLE = (
    'Internal error occurred: failed calling webhook "vgpu.hami.io": failed to call webhook: Post '
    '"https://hami-scheduler.kube-system.svc:443/webhook?timeout=10s": no endpoints available for service '
    '"hami-scheduler"'
)


def hami(**overrides: Any) -> dict[str, health.HealthFacts]:
    """The ``hami`` fact of a row: HAMi's workloads read and ready, unless overridden."""
    base: dict[str, Any] = {"namespace": HAMI_NS, "workloads": (SCHEDULER, PLUGIN), "read": True}
    return {"hami": health.HealthFacts(**(base | overrides))}


def tainted(*taints: tuple[str, str, str]) -> Node:
    return dataclasses.replace(gpu_node(), taints=taints)


# (name, nodes, spec tweaks, labelling outcome, expected status, reason, message fragment)
EVALUATE_ROWS = [
    ("disabled", (gpu_node(),), OFF, LabelOutcome(), "True", reasons.Common.DISABLED, "both turned off"),
    ("no gpu nodes", (CPU_ONLY,), {}, LabelOutcome(), "True", reasons.GPU.NO_GPU_NODES, "GPUs are optional"),
    (
        "ready",
        (gpu_node(), CPU_ONLY),
        {},
        LabelOutcome(),
        "True",
        reasons.GPU.READY,
        "1 GPU node(s), 1 labelled; HAMi reports 1 cards / 24576 MiB free.",
    ),
    ("conflict", (gpu_node(),), {}, LabelOutcome(conflicts=[CONFLICT]), "False", reasons.Common.CONFLICT, CONFLICT),
    (
        "labels pending (dry run)",
        (gpu_node(labels={}),),
        {},
        LabelOutcome(pending=["lab: set gpu=on"]),
        "False",
        reasons.GPU.LABELS_PENDING,
        "Would change GPU node labels: lab: set gpu=on (dry run).",
    ),
    (
        "unparseable register",
        (gpu_node(register="["),),
        {},
        LabelOutcome(),
        "False",
        reasons.GPU.UNPARSEABLE,
        "on node(s) lab (invalid JSON",
    ),
    (
        "labelled node registers nothing",
        (gpu_node(register=None),),
        {},
        LabelOutcome(),
        "False",
        reasons.GPU.NO_DEVICES,
        "Labelled GPU node(s) lab register no devices with HAMi",
    ),
    (
        "no allocatable gpus",
        (gpu_node(allocatable="0", labels={"gpu": "on", "nvidia.com/gpu.present": "true"}),),
        {},
        LabelOutcome(),
        "False",
        reasons.GPU.NO_ALLOCATABLE,
        "advertise no allocatable nvidia.com/gpu",
    ),
    (
        "unhealthy cards",
        (gpu_node(register=V210),),
        {},
        LabelOutcome(),
        "False",
        reasons.GPU.UNHEALTHY,
        "Unhealthy GPU cards on node(s) lab (1 of 2)",
    ),
    (
        "a dangling lock: HAMi's next bind takes it over",
        (gpu_node(lock="2025-06-01T08:19:00Z,ml,gone"),),
        {},
        LabelOutcome(),
        "True",
        reasons.GPU.READY,
        "lab (dangling: held since 2025-06-01T08:19:00Z, by ml/gone, its pod no longer exists; HAMi takes it over",
    ),
    (
        "an expired lock: HAMi's next bind takes it over",
        (gpu_node(lock="2025-06-01T08:10:00Z,ml,binding"),),
        {},
        LabelOutcome(),
        "True",
        reasons.GPU.READY,
        "lab (expired: held since 2025-06-01T08:10:00Z, by ml/binding, older than 5m; HAMi takes it over at the "
        "next GPU pod's bind)",
    ),
    (
        "a malformed lock blocks every bind on the node",
        (gpu_node(lock="2025-06-01T08:19:00Z,ml"),),
        {},
        LabelOutcome(),
        "False",
        reasons.GPU.MALFORMED_LOCK,
        "lab (lock value has 2 comma-separated parts; expected 1 or 3): binding a GPU pod there fails until",
    ),
    (
        "snapshot not synced, nothing reported before",
        (gpu_node(),),
        {},
        LabelOutcome(),
        "Unknown",
        reasons.GPU.SNAPSHOT_NOT_SYNCED,
        "has not completed its first listing of nodes and pods since 2025-06-01T08:19:50Z",
        {"synced": False, "stale_since": NOW - timedelta(seconds=10)},
    ),
    (
        "snapshot stale for too long",
        (gpu_node(),),
        {},
        LabelOutcome(),
        "Unknown",
        reasons.GPU.SNAPSHOT_STALE,
        "not been current since 2025-06-01T08:15:00Z (watching pods failed: boom); what follows may be out of "
        "date: 1 GPU node(s)",
        {"stale_since": NOW - timedelta(minutes=5)},
    ),
    (
        "snapshot stale briefly (a relist) is normal",
        (gpu_node(),),
        {},
        LabelOutcome(),
        "True",
        reasons.GPU.READY,
        "1 GPU node(s)",
        {"stale_since": NOW - timedelta(seconds=30)},
    ),
    (
        "every GPU node tainted (a note, still True)",
        (tainted(("dedicated", "ml", "NoSchedule")),),
        {},
        LabelOutcome(),
        "True",
        reasons.GPU.TAINTED,
        "Taints on every GPU node: lab (dedicated=ml:NoSchedule); the platform's GPU pods need matching tolerations.",
    ),
    (
        "the GPU resource's own NoSchedule taint is tolerated (ExtendedResourceToleration)",
        (tainted(("nvidia.com/gpu", "", "NoSchedule")),),
        {},
        LabelOutcome(),
        "True",
        reasons.GPU.READY,
        "1 GPU node(s), 1 labelled",
    ),
    (
        "HAMi's webhook unreachable",
        (gpu_node(),),
        {},
        LabelOutcome(),
        "False",
        reasons.GPU.WEBHOOK_UNREACHABLE,
        'cannot call webhook "vgpu.hami.io" (service https://hami-scheduler.kube-system.svc:443)',
        hami(webhook=health.probe_result("p-ns", pod=None, error=UNREACHABLE, status=500)),
    ),
    (
        "HAMi's scheduler not ready",
        (gpu_node(),),
        {},
        LabelOutcome(),
        "False",
        reasons.GPU.HAMI_SCHEDULER_NOT_READY,
        "HAMi's scheduler is not ready: Deployment kube-system/hami-scheduler (0/1 ready).",
        hami(workloads=(dataclasses.replace(SCHEDULER, ready=0), PLUGIN)),
    ),
    (
        "HAMi's device plugin not ready",
        (gpu_node(),),
        {},
        LabelOutcome(),
        "False",
        reasons.GPU.HAMI_DEVICE_PLUGIN_NOT_READY,
        "HAMi's device plugin is not ready: DaemonSet kube-system/hami-device-plugin (1/3 ready).",
        hami(workloads=(SCHEDULER, dataclasses.replace(PLUGIN, desired=3))),
    ),
    (
        "two device plugins: NVIDIA's registered the resource last (one per card)",
        (gpu_node(allocatable="1"),),
        {},
        LabelOutcome(),
        "False",
        reasons.GPU.DEVICE_PLUGIN_CONFLICT,
        "lab (nvidia.com/gpu advertises 1 (one per card) where HAMi's device plugin advertises 10; GPU device "
        "plugin besides HAMi's: gpu-operator/nvidia-device-plugin-daemonset)",
        hami(workloads=(SCHEDULER, PLUGIN, NVIDIA_PLUGIN)),
    ),
    (
        "the mock-device lab: one card, a count gate of 1, no other device plugin",
        (gpu_node(allocatable="1"),),
        {},
        LabelOutcome(),
        "True",
        reasons.GPU.READY,
        "1 GPU node(s), 1 labelled",
        hami(workloads=(SCHEDULER, PLUGIN, MOCK_PLUGIN)),
    ),
    (
        "HAMi's webhook not in the path: the dry-run pod unmutated while HAMi's scheduler is deployed",
        (gpu_node(),),
        {},
        LabelOutcome(),
        "False",
        reasons.GPU.WEBHOOK_NOT_IN_PATH,
        "came back unmutated (schedulerName default-scheduler) although HAMi's scheduler is deployed "
        "(Deployment kube-system/hami-scheduler)",
        hami(webhook=health.probe_result("p-ns", pod={"spec": {"schedulerName": "default-scheduler"}})),
    ),
    (
        "an unmutated dry-run pod without HAMi's scheduler is a note",
        (gpu_node(),),
        {},
        LabelOutcome(),
        "True",
        reasons.GPU.READY,
        "No webhook gave the dry-run GPU pod in namespace p-ns another scheduler",
        hami(
            workloads=(PLUGIN,),
            webhook=health.probe_result("p-ns", pod={"spec": {"schedulerName": "default-scheduler"}}),
        ),
    ),
    (
        "two device plugins: pods of two DaemonSets on the node",
        (gpu_node(),),
        {},
        LabelOutcome(),
        "False",
        reasons.GPU.DEVICE_PLUGIN_CONFLICT,
        "lab (device-plugin pods of gpu-operator/nvidia-device-plugin-daemonset and kube-system/hami-device-plugin)",
        hami(plugin_nodes={"lab": ("gpu-operator/nvidia-device-plugin-daemonset", "kube-system/hami-device-plugin")}),
    ),
]


@pytest.mark.parametrize("row", [pytest.param(row, id=str(row[0])) for row in EVALUATE_ROWS])
def test_evaluate(row: tuple[Any, ...]) -> None:
    _, nodes, tweaks, labels, status, reason, fragment, *rest = row
    decided = verdict.evaluate(demo(gpu=tweaks), facts(*nodes, **(rest[0] if rest else {})), labels=labels, now=NOW)
    condition = decided.verdict.condition
    assert (condition.type, condition.status, condition.reason) == ("GPUReady", status, reason)
    assert fragment in condition.message


def test_every_gpu_reason_has_a_row() -> None:
    covered = {row[5] for row in EVALUATE_ROWS}
    assert set(reasons.GPU) <= covered
    assert {reasons.Common.DISABLED, reasons.Common.CONFLICT} <= covered


def test_disabled_status_is_the_summary_only() -> None:
    decided = verdict.evaluate(demo(gpu=OFF), facts(gpu_node()), labels=LabelOutcome(), now=NOW)
    assert decided.verdict.sections == {"gpu": {"summary": "disabled"}}
    assert decided.verdict.recorded.dump() == {"gpuNodes": [{"name": "lab", "model": "", "cards": 0}]}
    assert decided.capacities == ()


def test_labels_only_status_and_recorded() -> None:
    node = gpu_node(labels={"gpu": "on", "nvidia.com/gpu.product": "Tesla-T4", "nvidia.com/gpu.count": "2"})
    decided = verdict.evaluate(demo(gpu={"hami": {"enabled": False}}), facts(node), labels=LabelOutcome(), now=NOW)
    assert decided.verdict.sections == {
        "gpu": {
            "nodes": [{"name": "lab", "labelled": True, "detectedBy": ["capacity", "register"]}],
            "total": {"nodes": 1},
            "summary": "1 GPU nodes",
            "labels": {"wanted": {"gpu": "on"}, "labelledNodes": 1},
            "health": {"detectedBy": {"capacity": 1, "register": 1}},
        }
    }
    assert decided.verdict.recorded.dump() == {"gpuNodes": [{"name": "lab", "model": "Tesla-T4", "cards": 2}]}


def test_hami_status_and_recorded() -> None:
    pods = (Pod(name="a", allocated="GPU-lab,NVIDIA,4096,50:;"),)
    gathered = GpuFacts(
        nodes={"lab": gpu_node(labels={})},
        pods_by_node={"lab": pods},
        pod=lambda namespace, name: None,
        names_source="ConfigMap kube-system/hami-scheduler-device",
    )
    applied = LabelOutcome(applied={"lab": {"gpu": "on"}})
    decided = verdict.evaluate(demo(), gathered, labels=applied, now=NOW)
    names = {
        "count": "nvidia.com/gpu",
        "memory": "nvidia.com/gpumem",
        "memoryPercentage": "nvidia.com/gpumem-percentage",
        "cores": "nvidia.com/gpucores",
        "priority": "nvidia.com/priority",
    }
    amounts = {
        "slots": {"total": 10, "used": 1},
        "memoryMiB": {"total": 24576, "used": 4096, "free": 20480},
        "coresPercent": {"total": 100, "used": 50, "free": 50},
    }
    # One card, shared by one pod: 20480 MiB and 50 % free on it, no card completely free.
    fit = {"largestFreeMemoryMiB": 20480, "largestFreeCoresPercent": 50, "freeCards": 0}
    assert decided.verdict.sections == {
        "gpu": {
            "nodes": [
                {
                    "name": "lab",
                    "labelled": True,  # applied this pass
                    "registered": True,
                    "cards": 1,
                    "models": {"NVIDIA L4": 1},
                    **amounts,
                    "unhealthyCards": 0,
                    "pods": 1,
                    "lock": {"held": False},
                    "fit": fit,
                    "detectedBy": ["capacity", "register"],
                }
            ],
            "total": {"nodes": 1, "cards": 1, "models": {"NVIDIA L4": 1}, **amounts, "unhealthyCards": 0, "fit": fit},
            "summary": "1 cards / 20480 MiB free",
            "labels": {"wanted": {"gpu": "on"}, "labelledNodes": 1},
            "resourceNames": {**names, "source": "ConfigMap kube-system/hami-scheduler-device"},
            "health": {"detectedBy": {"capacity": 1, "register": 1}},
        }
    }
    assert decided.verdict.recorded.dump() == {
        "gpuNodes": [{"name": "lab", "model": "NVIDIA L4", "cards": 1}],
        "gpuResourceNames": names,
    }
    assert decided.verdict.requeue_after is None
    assert not decided.verdict.progressing


def test_requeue_when_an_active_lock_expires() -> None:
    owner = Pod(namespace="ml", name="binding")
    decided = verdict.evaluate(
        demo(),
        facts(gpu_node(lock="2025-06-01T08:19:00Z,ml,binding"), pods=(owner,)),
        labels=LabelOutcome(),
        now=NOW,
    )
    assert decided.verdict.condition.reason == reasons.GPU.READY
    assert decided.verdict.requeue_after == 241.0  # expires in 240 s


def test_before_the_first_listing_an_unseen_lock_owner_is_still_binding() -> None:
    decided = verdict.evaluate(
        demo(),
        facts(gpu_node(lock="2025-06-01T08:19:00Z,ml,unseen"), synced=False),
        labels=LabelOutcome(),
        now=NOW,
    )
    assert decided.verdict.condition.reason == reasons.GPU.SNAPSHOT_NOT_SYNCED
    assert decided.verdict.sections["gpu"]["nodes"][0]["lock"]["state"] == "active"
    assert decided.verdict.progressing
    assert decided.verdict.requeue_after == verdict.UNSYNCED_REQUEUE


def test_before_the_first_listing_the_previous_report_is_kept_for_a_while() -> None:
    """An operator restart does not flap GPUReady or empty status.gpu and the install values."""
    old_gpu = {"summary": "14 cards / 1000 MiB free", "total": {"nodes": 2}}
    old_recorded = {"domain": "p.example.com", "gpuNodes": [{"name": "a", "model": "L4", "cards": 7}]}
    old_condition = {"type": "GPUReady", "status": "True", "reason": "GPUNodesReady", "message": "2 GPU node(s)."}
    status = {"gpu": old_gpu, "recorded": old_recorded, "conditions": [old_condition]}
    young = facts(synced=False, stale_since=NOW - timedelta(seconds=20))
    decided = verdict.evaluate(platform("p", "p-ns", uid="u", status=status), young, labels=LabelOutcome(), now=NOW)
    condition = decided.verdict.condition
    assert (condition.status, condition.reason, condition.message) == ("True", reasons.GPU.READY, "2 GPU node(s).")
    assert decided.verdict.sections == {"gpu": old_gpu}
    assert decided.verdict.recorded.dump() == {"gpuNodes": old_recorded["gpuNodes"]}
    assert decided.verdict.requeue_after == verdict.UNSYNCED_REQUEUE
    old = facts(synced=False, stale_since=NOW - timedelta(seconds=verdict.STALE_AFTER + 1))
    decided = verdict.evaluate(platform("p", "p-ns", uid="u", status=status), old, labels=LabelOutcome(), now=NOW)
    assert decided.verdict.condition.reason == reasons.GPU.SNAPSHOT_NOT_SYNCED
    assert decided.verdict.sections == {"gpu": old_gpu}


def test_status_listing_keeps_problem_nodes_when_capped() -> None:
    card = Card("GPU-a", 0, 10, 100, 100, "T4", 0, True, "")
    sick = Card("GPU-a", 0, 10, 100, 100, "T4", 0, False, "")
    nodes = [capacity.NodeCapacity(f"n{i}", registered=True, cards=(CardState(card),)) for i in range(6)]
    nodes[4] = capacity.NodeCapacity("n4", registered=True, cards=(CardState(sick),))
    nodes[5] = capacity.NodeCapacity(
        "n5", registered=True, cards=(CardState(card),), lock=NodeLock(NOW, "ml", "p", "dangling")
    )
    labelled = frozenset(n.name for n in nodes)
    assert [n.name for n in verdict.listed(nodes, labelled, 3)] == ["n0", "n4", "n5"]
    assert [e.model_copy(update={"fit": None}) for e in verdict.listed(nodes, labelled, 10)] == [
        n.to_status(labelled=True) for n in nodes
    ]
