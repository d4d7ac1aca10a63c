"""Partial (GPU-only) passes without a cluster: which nodes a snapshot change touched, which
platforms depend on them, what a partial pass keeps of the old status, and the wakeup kinds.
tests/integration/test_partial_pass.py runs them against the real API server."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from tests.support import condition, platform, platform_body

from tenant_platform.api import constants, reasons
from tenant_platform.api.models import TenantPlatform
from tenant_platform.api.status.recorded import Recorded
from tenant_platform.concerns.gpu.health import Selector
from tenant_platform.concerns.gpu.step import GpuScope, GpuScopes
from tenant_platform.config import Settings
from tenant_platform.core import conditions
from tenant_platform.formats.hami.names import DEFAULT_NAMES
from tenant_platform.framework.base import StepResult
from tenant_platform.observe import cluster
from tenant_platform.reconcile import pipeline
from tenant_platform.state import OperatorState

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def node(name: str, *, gpu: bool = True, labels: dict[str, str] | None = None, managers: tuple[str, ...] = ()) -> Any:
    capacity = {"cpu": "8", **({"nvidia.com/gpu": "10"} if gpu else {})}
    return {
        "metadata": {
            "name": name,
            "uid": f"uid-{name}",
            "labels": labels or {},
            "managedFields": [
                {
                    "manager": f"tenant-platform-operator/{m}",
                    "operation": "Apply",
                    "fieldsV1": {"f:metadata": {"f:labels": {"f:gpu": {}}}},
                }
                for m in managers
            ],
        },
        "status": {"capacity": capacity, "allocatable": capacity},
    }


def pod(name: str, on: str, mem: int = 100) -> dict[str, Any]:
    return {
        "metadata": {
            "namespace": "ml",
            "name": name,
            "annotations": {"hami.io/vgpu-node": on, "hami.io/vgpu-devices-allocated": f"GPU-a,NVIDIA,{mem},10:;"},
        },
        "spec": {"containers": [{"name": "a"}]},
        "status": {"phase": "Pending"},
    }


# -- which nodes a change touched -------------------------------------------------------------------


def test_changed_nodes_names_the_nodes_and_a_pods_node() -> None:
    snap = cluster.ClusterSnapshot()
    snap.replace_all([node("a"), node("b")], [])
    since = snap.changes
    assert snap.changed_nodes(since) == frozenset()
    snap.ingest_node(node("a", labels={"x": "1"}))
    snap.ingest_pod(pod("p", on="b"))
    assert snap.changed_nodes(since) == {"a", "b"}
    moved = snap.changes
    snap.ingest_pod(pod("p", on="c"))  # placed elsewhere: both nodes
    assert snap.changed_nodes(moved) == {"b", "c"}
    gone = snap.changes
    snap.forget_pod("ml", "p")
    snap.forget_node("a")
    assert snap.changed_nodes(gone) == {"a", "c"}
    assert snap.changed_nodes(since, moved) == {"a", "b"}  # up to a given change


def test_changed_nodes_is_any_after_a_listing_or_beyond_the_log() -> None:
    snap = cluster.ClusterSnapshot()
    since = snap.changes
    snap.replace_all([node("a")], [])
    assert snap.changed_nodes(since) is None  # a listing may have changed anything
    since = snap.changes
    for i in range(cluster.CHANGE_LOG + 1):
        snap.ingest_pod(pod("p", on="a", mem=i + 1))
    assert snap.changed_nodes(since) is None  # older than the log reaches


def test_a_change_of_label_ownership_alone_concerns_only_the_platforms_it_moved() -> None:
    snap = cluster.ClusterSnapshot()
    snap.replace_all([node("a", labels={"gpu": "on"}, managers=("alpha",))], [])
    since = snap.changes
    # beta applies the same label value: only ownership moved (the label was already there).
    snap.ingest_node(node("a", labels={"gpu": "on"}, managers=("alpha", "beta")))
    assert snap.changed_nodes(since) == {"a"}
    assert snap.changed_nodes(since, platform="beta") == {"a"}
    assert snap.changed_nodes(since, platform="alpha") == frozenset()
    moved = snap.changes
    snap.ingest_node(node("a", labels={"gpu": "off"}, managers=("alpha", "beta")))  # a value: everyone
    assert snap.changed_nodes(moved, platform="alpha") == {"a"}


def test_an_unchanged_object_is_no_change() -> None:
    snap = cluster.ClusterSnapshot()
    snap.replace_all([node("a")], [])
    since = snap.changes
    snap.ingest_node(node("a"))
    assert snap.changes == since
    assert snap.changed_nodes(since) == frozenset()


# -- which platforms depend on them --------------------------------------------------------------------


def scope(enabled: bool = True, selectors: tuple[Selector, ...] = ()) -> GpuScope:
    return GpuScope(enabled=enabled, gpu_nodes=frozenset({"gpu-1"}), names=DEFAULT_NAMES, selectors=selectors)


TEAM_ML = Selector(source="nodeSelector", match_labels={"team": "ml"})


@pytest.mark.parametrize(
    ("case", "scope_", "changed", "expected"),
    [
        ("GPU part turned off: never", scope(enabled=False), None, False),
        ("any node (a listing)", scope(), None, True),
        ("one of its GPU nodes (or a pod on it)", scope(), frozenset({"gpu-1"}), True),
        ("a CPU node", scope(), frozenset({"cpu-1"}), False),
        ("a node that became a GPU node", scope(), frozenset({"gpu-new"}), True),
        ("a node its selector now selects", scope(selectors=(TEAM_ML,)), frozenset({"cpu-ml"}), True),
        ("the same node without a selector", scope(), frozenset({"cpu-ml"}), False),
        ("a CPU node carrying its labels", scope(), frozenset({"cpu-labelled"}), True),
        ("a node deleted that was no GPU node", scope(), frozenset({"gone"}), False),
    ],
)
def test_depends_on(case: str, scope_: GpuScope, changed: frozenset[str] | None, expected: bool) -> None:
    snap = cluster.ClusterSnapshot()
    snap.replace_all(
        [
            node("gpu-1"),
            node("gpu-new"),
            node("cpu-1", gpu=False),
            node("cpu-ml", gpu=False, labels={"team": "ml"}),
            node("cpu-labelled", gpu=False, managers=("alpha",)),
        ],
        [],
    )
    assert scope_.depends_on("alpha", changed, snap.node) is expected, case


def test_scopes_share_equal_node_sets_and_know_nothing_of_a_new_platform() -> None:
    scopes = GpuScopes()
    scopes.remember("a", GpuScope(True, frozenset({"n1", "n2"}), DEFAULT_NAMES, ()))
    scopes.remember("b", GpuScope(True, frozenset({"n2", "n1"}), DEFAULT_NAMES, ()))
    assert scopes._scopes["a"].gpu_nodes is scopes._scopes["b"].gpu_nodes
    assert scopes.depends_on("never-ran", frozenset({"x"}), lambda _: None)  # no pass yet: everything
    assert not scopes.depends_on("a", frozenset({"x"}), lambda _: None)
    scopes.forget("a")
    assert scopes.depends_on("a", frozenset({"x"}), lambda _: None)


# -- what a partial pass keeps --------------------------------------------------------------------------


def healthy(type_: str) -> conditions.Condition:
    reason = {constants.GPU_READY: reasons.GPU.READY}.get(type_, reasons.Common.DISABLED)
    return conditions.true(type_, reason, f"{type_} fine.")


def full_status() -> dict[str, Any]:
    """A platform after a full pass: every concern True, Ready, sections of several steps."""
    tp = platform("p", uid="u", generation=3)
    results = {t: StepResult(conditions=[healthy(t)]) for t in constants.CONCERN_TYPES}
    results["a"] = StepResult(conditions=[], status={"podGuard": {"mode": "Enforce"}, "checks": {"a": {"ok": True}}})
    results["gpu"] = StepResult(conditions=[], status={"gpu": {"total": {"cards": 8}, "notes": ["old"]}})
    recorded = Recorded(domain="p.example.com", gpuNodes=[{"name": "n1", "model": "T4", "cards": 8}])
    return pipeline.compute_status(tp, {}, results, recorded, now=T0)


def test_a_partial_pass_keeps_the_other_concerns_and_sections_and_summarises_all() -> None:
    old = full_status()
    body = platform_body("p", uid="u", generation=3, status=old)
    carried = pipeline.carried_conditions(old, 3, {"gpu"})
    assert carried is not None
    assert {c.type for c in carried} == set(constants.CONCERN_TYPES) - {constants.GPU_READY}
    platform = TenantPlatform.from_body(body)
    gpu_false = conditions.false(constants.GPU_READY, reasons.GPU.NO_ALLOCATABLE, "No GPUs.")
    results = {"gpu": StepResult(conditions=[gpu_false], status={"gpu": {"total": {"cards": 0}}})}
    new = pipeline.compute_status(
        platform, old, results, Recorded.parse(old["recorded"]), now=T0 + timedelta(1), carried=carried
    )
    by_type = {c["type"]: c for c in new["conditions"]}
    assert by_type[constants.READY]["status"] == "False"
    assert constants.GPU_READY in by_type[constants.READY]["message"]
    for type_ in set(constants.CONCERN_TYPES) - {constants.GPU_READY}:  # kept as they were
        assert by_type[type_] == conditions.get(old["conditions"], type_)
    assert new["gpu"] == {"total": {"cards": 0}}  # the section of the step that ran: replaced whole
    assert new["podGuard"] == old["podGuard"] and new["checks"] == old["checks"]
    assert new["recorded"] == old["recorded"]
    assert new["observedGeneration"] == 3


@pytest.mark.parametrize(
    ("case", "change"),
    [
        ("another generation", lambda s: s.update(observedGeneration=2)),
        ("in progress", lambda s: _set(s, constants.RECONCILING, "True", reasons.Summary.PROGRESSING)),
        ("a reason the catalogue lacks", lambda s: _set(s, constants.STORAGE_READY, "True", "FromTheFuture")),
        ("a concern missing", lambda s: s.update(conditions=[c for c in s["conditions"] if c["type"] != "DNSReady"])),
    ],
)
def test_only_a_full_pass_is_faithful(case: str, change: Any) -> None:
    status = full_status()
    change(status)
    assert pipeline.carried_conditions(status, 3, {"gpu"}) is None, case


def _set(status: dict[str, Any], type_: str, value: str, reason: str) -> None:
    condition(status, type_).update(status=value, reason=str(reason))


# -- wakeup kinds ------------------------------------------------------------------------------------------


def test_a_gpu_wakeup_stays_gpu_only_unless_a_full_pass_is_asked_for() -> None:
    state = OperatorState(Settings())
    for name in ("a", "b", "c"):
        state.wakeup(name)
    snap = cluster.ClusterSnapshot()
    snap.replace_all([node("a")], [])
    anything = cluster.Changes(snap, 0, snap.changes)
    state.wake_gpu(anything)  # no pass yet: every platform depends on everything
    state.wake("b")  # a full pass asked for after the GPU one
    state.wake("c")
    state.wake_gpu(anything)  # a GPU one after a full one: stays full
    assert [state.take_wakeup(n) for n in ("a", "b", "c")] == [True, False, False]
    assert not any(e.is_set() for e in state.wakeups.values())
    state.wake_gpu(anything)
    state.wake_all()
    assert not state.take_wakeup("a")
