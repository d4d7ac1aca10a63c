"""The checks GPUReady names its problems with (concerns/gpu/verdict.py ``GPU_PROBLEMS``): one
table per check (it finds its problem, or passes), and the chain's order (the first problem
found gives the reason)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from tests.unit.test_gpu_verdict import HEALTHY, STALE, UNHEALTHY, UNPARSEABLE, UNREGISTERED, findings

from tenant_platform.api import reasons
from tenant_platform.concerns.gpu import capacity
from tenant_platform.concerns.gpu import verdict as v

EMPTY = capacity.NodeCapacity("empty", registered=True)


def run(check: Callable[[v.Findings], list[v.GpuProblem] | None], overrides: dict[str, object]) -> object:
    found = check(findings(**overrides))
    return None if found is None else [reason for reason, _ in found]


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [({}, None), ({"conflicts": ["Node a: label gpu=x is held."]}, [reasons.Common.CONFLICT])],
)
def test_label_conflicts(overrides: dict[str, object], expected: object) -> None:
    assert run(v.label_conflicts, overrides) == expected


@pytest.mark.parametrize(
    ("overrides", "expected"), [({}, None), ({"pending": ["a: set gpu=on"]}, [reasons.GPU.LABELS_PENDING])]
)
def test_labels_pending(overrides: dict[str, object], expected: object) -> None:
    assert run(v.labels_pending, overrides) == expected


WEBHOOK = (reasons.GPU.WEBHOOK_UNREACHABLE, "The webhook is unreachable.")


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [({}, None), ({"health_problems": [WEBHOOK, WEBHOOK]}, [WEBHOOK[0], WEBHOOK[0]])],
)
def test_hami_health(overrides: dict[str, object], expected: object) -> None:
    assert run(v.hami_health, overrides) == expected


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"nodes": [HEALTHY]}, None),
        ({"nodes": [UNPARSEABLE]}, [reasons.GPU.UNPARSEABLE]),
        ({"nodes": [UNPARSEABLE], "hami_enabled": False}, None),
    ],
)
def test_register_unparseable(overrides: dict[str, object], expected: object) -> None:
    assert run(v.register_unparseable, overrides) == expected


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"nodes": [UNREGISTERED]}, None),  # not labelled: not ours to expect devices from
        ({"nodes": [UNREGISTERED], "labelled": frozenset({"silent"})}, [reasons.GPU.NO_DEVICES]),
        ({"nodes": [UNREGISTERED], "labelled": frozenset({"silent"}), "hami_enabled": False}, None),
    ],
)
def test_labelled_but_silent(overrides: dict[str, object], expected: object) -> None:
    assert run(v.labelled_but_silent, overrides) == expected


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
    assert run(v.empty_device_list, overrides) == expected


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
    assert run(v.nothing_allocatable, overrides) == expected


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"nodes": [HEALTHY]}, None),
        ({"nodes": [UNHEALTHY]}, [reasons.GPU.UNHEALTHY]),
        ({"nodes": [UNHEALTHY], "hami_enabled": False}, None),
    ],
)
def test_unhealthy_cards(overrides: dict[str, object], expected: object) -> None:
    assert run(v.unhealthy_cards, overrides) == expected


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"nodes": [HEALTHY]}, None),
        ({"nodes": [STALE]}, [reasons.GPU.STALE_LOCK]),
        ({"nodes": [STALE], "hami_enabled": False}, None),
    ],
)
def test_stale_node_lock(overrides: dict[str, object], expected: object) -> None:
    assert run(v.stale_node_lock, overrides) == expected


def test_the_chain_order() -> None:
    assert v.GPU_PROBLEMS.names == (
        "label conflict",
        "labels pending",
        "HAMi health",
        "register unparseable",
        "labelled node registers no devices",
        "empty device list",
        "nothing allocatable",
        "unhealthy cards",
        "stale node lock",
    )
    everything = findings(
        conflicts=["Node a: label gpu=x is held."],
        pending=["a: set gpu=on"],
        health_problems=[WEBHOOK],
        nodes=[UNPARSEABLE, UNREGISTERED, EMPTY, HEALTHY, UNHEALTHY, STALE],
        labelled=frozenset({"silent"}),
        allocatable={"sick": 10, "locked": 10},
    )
    found = v.GPU_PROBLEMS.every(everything)
    assert [f.check for f in found] == list(v.GPU_PROBLEMS.names)
    assert v.gpu_condition(everything).reason == reasons.Common.CONFLICT  # the first problem gives the reason
