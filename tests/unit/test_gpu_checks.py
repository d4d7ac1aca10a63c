"""GPUReady as chains of named checks (concerns/gpu/verdict.py): the problems it names
(``GPU_PROBLEMS``), the condition (``GPU_READY``) and how current the snapshot is
(``SNAPSHOT_CHECKS``): one table per check (it finds something, or passes), and each chain's
order (the first finding decides)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

import pytest
from tests.unit.test_gpu_verdict import (
    HEALTHY,
    MALFORMED,
    NOW,
    STALE,
    UNHEALTHY,
    UNPARSEABLE,
    UNREGISTERED,
    facts,
    findings,
)

from tenant_platform.api import reasons
from tenant_platform.concerns.gpu import capacity, health, verdict
from tenant_platform.core import conditions

EMPTY = capacity.NodeCapacity("empty", registered=True)


def run(check: Callable[[verdict.Findings], list[verdict.GpuProblem] | None], overrides: dict[str, object]) -> object:
    found = check(findings(**overrides))
    return None if found is None else [reason for reason, _ in found]


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [({}, None), ({"conflicts": ["Node a: label gpu=x is held."]}, [reasons.Common.CONFLICT])],
)
def test_label_conflicts(overrides: dict[str, object], expected: object) -> None:
    assert run(verdict.label_conflicts, overrides) == expected


@pytest.mark.parametrize(
    ("overrides", "expected"), [({}, None), ({"pending": ["a: set gpu=on"]}, [reasons.GPU.LABELS_PENDING])]
)
def test_labels_pending(overrides: dict[str, object], expected: object) -> None:
    assert run(verdict.labels_pending, overrides) == expected


WEBHOOK = (reasons.GPU.WEBHOOK_UNREACHABLE, "The webhook is unreachable.")
UNMUTATED = health.probe_result("p-ns", pod={"spec": {"schedulerName": "default-scheduler"}})
MUTATED = health.probe_result("p-ns", pod={"spec": {"schedulerName": "hami-scheduler"}})
SCHEDULERS = ("Deployment kube-system/hami-scheduler",)


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({}, None),
        ({"webhook": UNMUTATED}, None),  # no HAMi scheduler deployed: a note (concerns/gpu/health.py)
        ({"schedulers": SCHEDULERS}, None),  # no dry run this pass
        ({"webhook": MUTATED, "schedulers": SCHEDULERS}, None),
        ({"webhook": UNMUTATED, "schedulers": SCHEDULERS}, [reasons.GPU.WEBHOOK_NOT_IN_PATH]),
        ({"webhook": UNMUTATED, "schedulers": SCHEDULERS, "hami_enabled": False}, None),
        ({"webhook": UNMUTATED, "schedulers": SCHEDULERS, "gpu_nodes": 0}, None),
        (
            {
                "webhook": health.probe_result("p-ns", pod=None, error='failed calling webhook "w"'),
                "schedulers": SCHEDULERS,
            },
            None,  # rejected, not let through: WebhookUnreachable (HAMi health)
        ),
    ],
)
def test_webhook_not_in_path(overrides: dict[str, object], expected: object) -> None:
    assert run(verdict.webhook_not_in_path, overrides) == expected


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [({}, None), ({"health_problems": [WEBHOOK, WEBHOOK]}, [WEBHOOK[0], WEBHOOK[0]])],
)
def test_hami_health(overrides: dict[str, object], expected: object) -> None:
    assert run(verdict.hami_health, overrides) == expected


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"nodes": [HEALTHY]}, None),
        ({"nodes": [UNPARSEABLE]}, [reasons.GPU.UNPARSEABLE]),
        ({"nodes": [UNPARSEABLE], "hami_enabled": False}, None),
    ],
)
def test_register_unparseable(overrides: dict[str, object], expected: object) -> None:
    assert run(verdict.register_unparseable, overrides) == expected


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"nodes": [UNREGISTERED]}, None),  # not labelled: not ours to expect devices from
        ({"nodes": [UNREGISTERED], "labelled": frozenset({"silent"})}, [reasons.GPU.NO_DEVICES]),
        ({"nodes": [UNREGISTERED], "labelled": frozenset({"silent"}), "hami_enabled": False}, None),
    ],
)
def test_labelled_but_silent(overrides: dict[str, object], expected: object) -> None:
    assert run(verdict.labelled_but_silent, overrides) == expected


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"nodes": [HEALTHY]}, None),
        ({"nodes": [UNPARSEABLE]}, None),
        ({"nodes": [EMPTY]}, [reasons.GPU.NO_DEVICES]),
        ({"nodes": [EMPTY], "hami_enabled": False}, None),
    ],
)
def test_empty_device_list(overrides: dict[str, object], expected: object) -> None:
    assert run(verdict.empty_device_list, overrides) == expected


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"nodes": [HEALTHY], "allocatable": {"lab": 10}}, None),
        ({"nodes": [HEALTHY], "allocatable": {"lab": 0}}, [reasons.GPU.NO_ALLOCATABLE]),
        ({"nodes": [HEALTHY]}, [reasons.GPU.NO_ALLOCATABLE]),
        ({"nodes": [EMPTY]}, None),  # no cards: the empty device list says it
        ({"nodes": [HEALTHY], "hami_enabled": False}, None),
    ],
)
def test_nothing_allocatable(overrides: dict[str, object], expected: object) -> None:
    assert run(verdict.nothing_allocatable, overrides) == expected


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"nodes": [HEALTHY]}, None),
        ({"nodes": [UNHEALTHY]}, [reasons.GPU.UNHEALTHY]),
        ({"nodes": [UNHEALTHY], "hami_enabled": False}, None),
    ],
)
def test_unhealthy_cards(overrides: dict[str, object], expected: object) -> None:
    assert run(verdict.unhealthy_cards, overrides) == expected


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"nodes": [HEALTHY]}, None),
        ({"nodes": [STALE]}, None),  # dangling: HAMi takes it over (named, not a problem)
        ({"nodes": [MALFORMED]}, [reasons.GPU.MALFORMED_LOCK]),
        ({"nodes": [MALFORMED, STALE]}, [reasons.GPU.MALFORMED_LOCK]),
        ({"nodes": [MALFORMED], "hami_enabled": False}, None),
    ],
)
def test_malformed_node_lock(overrides: dict[str, object], expected: object) -> None:
    assert run(verdict.malformed_node_lock, overrides) == expected


def test_the_chain_order() -> None:
    assert verdict.GPU_PROBLEMS.names == (
        "label conflict",
        "labels pending",
        "webhook not in the path",
        "HAMi health",
        "register unparseable",
        "labelled node registers no devices",
        "empty device list",
        "nothing allocatable",
        "unhealthy cards",
        "malformed node lock",
    )
    everything = findings(
        conflicts=["Node a: label gpu=x is held."],
        pending=["a: set gpu=on"],
        webhook=UNMUTATED,
        schedulers=SCHEDULERS,
        health_problems=[WEBHOOK],
        nodes=[UNPARSEABLE, UNREGISTERED, EMPTY, HEALTHY, UNHEALTHY, MALFORMED],
        labelled=frozenset({"silent"}),
        allocatable={"sick": 10, "jammed": 10},
    )
    found = verdict.GPU_PROBLEMS.every(everything)
    assert [f.check for f in found] == list(verdict.GPU_PROBLEMS.names)
    assert verdict.gpu_condition(everything).reason == reasons.Common.CONFLICT  # the first problem gives the reason


# -- GPUReady: GPU_READY ---------------------------------------------------------------------------


def reason_of(check: Callable[[verdict.Findings], conditions.Condition | None], overrides: dict[str, object]) -> object:
    found = check(findings(**overrides))
    return None if found is None else (found.status, found.reason)


OFF: dict[str, object] = {"labels_enabled": False, "hami_enabled": False}
READY_NODE: dict[str, object] = {"nodes": [HEALTHY], "labelled": frozenset({"lab"}), "allocatable": {"lab": 10}}


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({}, None),
        ({"labels_enabled": False}, None),
        ({"hami_enabled": False}, None),
        (OFF, ("True", reasons.Common.DISABLED)),
        (OFF | {"conflicts": ["C."], "gpu_nodes": 0}, ("True", reasons.Common.DISABLED)),
    ],
)
def test_turned_off(overrides: dict[str, object], expected: object) -> None:
    assert reason_of(verdict.turned_off, overrides) == expected


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (READY_NODE, None),
        ({"gpu_nodes": 0}, None),
        ({"pending": ["a: set gpu=on"]}, ("False", reasons.GPU.LABELS_PENDING)),
        ({"nodes": [STALE, UNHEALTHY], "allocatable": {"locked": 10, "sick": 10}}, ("False", reasons.GPU.UNHEALTHY)),
        ({"nodes": [STALE], "allocatable": {"locked": 10}, "hami_enabled": False}, None),
    ],
)
def test_problems_found(overrides: dict[str, object], expected: object) -> None:
    assert reason_of(verdict.problems_found, overrides) == expected


def test_problems_found_names_every_problem_then_the_notes() -> None:
    found = verdict.problems_found(
        findings(conflicts=["C."], pending=["a: set gpu=on"], notes=["N1.", "N2.", "N3.", "N4."])
    )
    assert found is not None and found.reason == reasons.Common.CONFLICT
    assert found.message.startswith("C. Neither platform overwrites")
    assert "Would change GPU node labels" in found.message
    assert found.message.endswith(" N1. N2. N3.")


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({}, None),
        ({"gpu_nodes": 0}, ("True", reasons.GPU.NO_GPU_NODES)),
        ({"gpu_nodes": 0, "notes": ["N."]}, ("True", reasons.GPU.NO_GPU_NODES)),
    ],
)
def test_no_gpu_nodes(overrides: dict[str, object], expected: object) -> None:
    assert reason_of(verdict.no_gpu_nodes, overrides) == expected


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (READY_NODE, None),
        (READY_NODE | {"all_tainted": True}, ("True", reasons.GPU.TAINTED)),
        ({"hami_enabled": False, "all_tainted": True}, ("True", reasons.GPU.TAINTED)),
    ],
)
def test_every_node_tainted(overrides: dict[str, object], expected: object) -> None:
    assert reason_of(verdict.every_node_tainted, overrides) == expected


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (READY_NODE, "1 GPU node(s), 1 labelled; HAMi reports 1 cards / 24576 MiB free"),
        ({"hami_enabled": False, "labelled": frozenset({"a"})}, "1 GPU node(s), 1 labelled."),
        ({"labels_enabled": False, "gpu_nodes": 2}, "2 GPU node(s); HAMi reports"),
        ({"hami_enabled": False, "notes": ["N1.", "N2.", "N3.", "N4."]}, "1 GPU node(s), 0 labelled. N1. N2. N3."),
    ],
)
def test_nodes_ready(overrides: dict[str, object], message: str) -> None:
    found = verdict.nodes_ready(findings(**overrides))
    assert found is not None and (found.status, found.reason) == ("True", reasons.GPU.READY)
    assert found.message.startswith(message)
    assert "N4." not in found.message


def test_the_gpu_ready_chain_order() -> None:
    assert verdict.GPU_READY.names == (
        "GPU reporting turned off",
        "problems found",
        "no GPU nodes",
        "every GPU node tainted",
        "GPU nodes ready",
    )
    # A subject every check finds something in: turned off decides, then the problems, then no nodes.
    everything = findings(gpu_nodes=0, conflicts=["C."], all_tainted=True)
    assert [f.check for f in verdict.GPU_READY.every(everything)] == [
        "problems found",
        "no GPU nodes",
        "every GPU node tainted",
        "GPU nodes ready",
    ]
    assert verdict.GPU_READY.first(everything).check == "problems found"  # type: ignore[union-attr]
    off = findings(**OFF, gpu_nodes=0, conflicts=["C."])
    assert verdict.GPU_READY.first(off).check == "GPU reporting turned off"  # type: ignore[union-attr]
    tainted = findings(**READY_NODE, all_tainted=True)
    assert [f.check for f in verdict.GPU_READY.every(tainted)] == ["every GPU node tainted", "GPU nodes ready"]
    assert verdict.gpu_condition(tainted).reason == reasons.GPU.TAINTED


# -- how current the snapshot is: SNAPSHOT_CHECKS ------------------------------------------------------

AS_LISTED = verdict.GpuReport(
    conditions.true("GPUReady", reasons.GPU.READY, "1 GPU node(s)."),
    {"gpu": {"summary": "now"}},
    {"gpuNodes": [{"name": "lab", "model": "L4", "cards": 1}]},
    (241.0,),
)
PREVIOUS: dict[str, Any] = {
    "gpu": {"summary": "before"},
    "recorded": {"gpuNodes": [{"name": "a", "model": "L4", "cards": 7}]},
    "conditions": [{"type": "GPUReady", "status": "False", "reason": "UnhealthyCards", "message": "Before."}],
}


def snapshot(
    *, synced: bool = True, stale: float | None = None, previous: Mapping[str, Any] | None = None
) -> verdict.Snapshot:
    since = None if stale is None else NOW - timedelta(seconds=stale)
    return verdict.Snapshot(facts(synced=synced, stale_since=since), previous or {}, NOW, AS_LISTED)


def outcome(found: verdict.GpuReport | None) -> object:
    """(reason, summary of status.gpu, requeue, progressing); None when the check passed."""
    if found is None:
        return None
    return (found.condition.reason, found.sections["gpu"]["summary"], found.verdict().requeue_after, found.progressing)


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        pytest.param({}, None, id="synced"),
        pytest.param({"stale": 500}, None, id="synced, stale"),
        pytest.param(
            {"synced": False},
            (reasons.GPU.SNAPSHOT_NOT_SYNCED, "now", verdict.UNSYNCED_REQUEUE, True),
            id="nothing before",
        ),
        pytest.param(
            {"synced": False, "stale": 20, "previous": PREVIOUS},
            (reasons.GPU.UNHEALTHY, "before", verdict.UNSYNCED_REQUEUE, True),
            id="previous report kept",
        ),
        pytest.param(
            {"synced": False, "stale": verdict.STALE_AFTER + 1, "previous": PREVIOUS},
            (reasons.GPU.SNAPSHOT_NOT_SYNCED, "before", verdict.UNSYNCED_REQUEUE, True),
            id="previous report too old",
        ),
    ],
)
def test_first_listing_incomplete(kwargs: dict[str, Any], expected: object) -> None:
    assert outcome(verdict.first_listing_incomplete(snapshot(**kwargs))) == expected


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        pytest.param({}, None, id="current"),
        pytest.param({"stale": verdict.STALE_AFTER}, None, id="a relist"),
        pytest.param(
            {"stale": verdict.STALE_AFTER + 1},
            (reasons.GPU.SNAPSHOT_STALE, "now", verdict.STALE_REQUEUE, False),
            id="stale",
        ),
        pytest.param(
            {"stale": 500, "previous": PREVIOUS},
            (reasons.GPU.SNAPSHOT_STALE, "now", verdict.STALE_REQUEUE, False),
            id="the report as listed, not the previous one",
        ),
    ],
)
def test_snapshot_stale(kwargs: dict[str, Any], expected: object) -> None:
    found = verdict.snapshot_stale(snapshot(**kwargs))
    assert outcome(found) == expected
    if found is not None:
        assert found.condition.message.endswith("what follows may be out of date: 1 GPU node(s).")
        assert found.recorded == AS_LISTED.recorded


def test_the_snapshot_chain_order() -> None:
    assert verdict.SNAPSHOT_CHECKS.names == ("first listing incomplete", "snapshot stale")
    both = snapshot(synced=False, stale=500)
    assert [f.check for f in verdict.SNAPSHOT_CHECKS.every(both)] == ["first listing incomplete", "snapshot stale"]
    assert verdict.SNAPSHOT_CHECKS.first(both).check == "first listing incomplete"  # type: ignore[union-attr]
    assert verdict.SNAPSHOT_CHECKS.first(snapshot(stale=20)) is None  # the report stands as listed
    assert AS_LISTED.verdict().requeue_after == 241.0 and not AS_LISTED.verdict().progressing
