"""The node-label planner (concerns/gpu/labels.py): shared value managers, conflicts, releases, hand-over.

One row per rule. A node is described by its live labels, the value managers holding keys, and
earlier versions' per-platform managers; the plan is compared as (applies, releases, conflicts).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from tests.hami_support import HamiNode

from tenant_platform.concerns.gpu.labels import (
    MAX_MANAGER_LENGTH,
    VALUE_MANAGER_PREFIX,
    Others,
    Wanter,
    held_value,
    label_manager,
    plan_labels,
    value_manager,
)
from tenant_platform.observe.objects import node_info

ON = value_manager("gpu", "on")
OFF = value_manager("gpu", "off")


def Node(name: str = "n1", **fields: Any) -> HamiNode:  # noqa: N802 - reads as the class it builds
    return HamiNode(name, **{"uid": f"uid-{name}", **fields})


def plan(
    node: Node,
    *,
    gpu: bool = True,
    wanted: Mapping[str, str] | None = None,
    others: list[Wanter] | None = None,
    dry_run: bool = False,
) -> tuple[dict[str, Any], tuple[str, ...], list[str], list[str]]:
    """(applies, releases, conflicts, pending) for platform "me" on one node."""
    result = plan_labels(
        {node.name: node},
        {node.name} if gpu else set(),
        {"gpu": "on"} if wanted is None else wanted,
        platform="me",
        dry_run=dry_run,
        others=[] if others is None else others,
    )
    assert len(result.jobs) <= 1
    job = result.jobs[0] if result.jobs else None
    applies = {m: dict(v) for m, v in job.apply.items()} if job else {}
    return applies, job.release if job else (), result.conflicts, result.pending


def test_a_new_label_is_applied_under_its_value_manager() -> None:
    assert plan(Node())[:3] == ({ON: {"gpu": "on"}}, (), [])


def test_a_held_label_with_its_live_value_needs_no_write() -> None:
    assert plan(Node(labels={"gpu": "on"}, label_holders={"gpu": (ON,)})) == ({}, (), [], [])


def test_a_label_a_person_set_to_our_value_is_co_owned() -> None:
    assert plan(Node(labels={"gpu": "on"}))[0] == {ON: {"gpu": "on"}}


def test_a_value_a_person_changed_is_applied_again() -> None:
    """Held by nobody of ours: drift (the writer forces over the person)."""
    assert plan(Node(labels={"gpu": "off"}))[:3] == ({ON: {"gpu": "on"}}, (), [])


def test_another_platform_holding_another_value_is_a_conflict_naming_it() -> None:
    node = Node(labels={"gpu": "off"}, label_holders={"gpu": (OFF,)})
    applies, releases, conflicts, _ = plan(node, others=[Wanter("rival", {"gpu": "off"}, frozenset({"n1"}))])
    assert (applies, releases) == ({}, ())
    assert conflicts == ["Node n1: label gpu=off is held by TenantPlatform rival; this platform wants gpu=on."]


def test_a_rival_whose_gpu_nodes_are_not_known_still_holds() -> None:
    node = Node(labels={"gpu": "off"}, label_holders={"gpu": (OFF,)})
    assert plan(node, others=[Wanter("rival", {"gpu": "off"})])[2]


def test_a_held_value_nobody_wants_any_more_is_taken_over() -> None:
    """The holder's platform was deleted, or its spec changed, or the node left its GPU nodes."""
    node = Node(labels={"gpu": "off"}, label_holders={"gpu": (OFF,)})
    elsewhere = [Wanter("rival", {"gpu": "off"}, frozenset({"n2"})), Wanter("same", {"gpu": "on"})]
    assert plan(node, others=elsewhere)[:3] == ({ON: {"gpu": "on"}}, (), [])


def test_unknown_platforms_mean_conflict_and_no_release() -> None:
    node = Node(
        labels={"gpu": "off", "tier": "x"}, label_holders={"gpu": (OFF,), "tier": (value_manager("tier", "x"),)}
    )
    result = plan_labels({"n1": node}, {"n1"}, {"gpu": "on"}, platform="me", dry_run=False, others=None)
    assert result.jobs == []
    assert result.conflicts == ["Node n1: label gpu=off is held by another TenantPlatform; this platform wants gpu=on."]


@pytest.mark.parametrize(
    ("others", "released"),
    [
        pytest.param([], (ON,), id="nobody-wants-it"),
        pytest.param([Wanter("b", {"gpu": "on"}, frozenset({"n1"}))], (), id="another-wants-it-here"),
        pytest.param([Wanter("b", {"gpu": "on"}, frozenset({"n2"}))], (ON,), id="another-wants-it-elsewhere"),
        pytest.param([Wanter("b", {"gpu": "on"})], (), id="another-not-known-yet"),
        pytest.param([Wanter("b", {"gpu": "yes"}, frozenset({"n1"}))], (ON,), id="another-wants-another-value"),
    ],
)
def test_a_held_label_this_platform_no_longer_wants(others: list[Wanter], released: tuple[str, ...]) -> None:
    node = Node(labels={"gpu": "on"}, label_holders={"gpu": (ON,)})
    assert plan(node, gpu=False, others=others)[:3] == ({}, released, [])


def test_a_stale_holder_whose_name_does_not_match_the_live_value_is_released() -> None:
    node = Node(labels={"gpu": "on"}, label_holders={"gpu": (ON, OFF)})
    assert plan(node)[:2] == ({}, (OFF,))


def test_earlier_per_platform_manager_of_this_platform_is_handed_over_then_released() -> None:
    node = Node(labels={"gpu": "on"}, label_managers={"me": frozenset({"gpu"})})
    assert plan(node)[:3] == ({ON: {"gpu": "on"}}, (label_manager("me"),), [])


def test_earlier_manager_of_a_deleted_platform_hands_over_what_another_wants() -> None:
    node = Node(labels={"gpu": "on", "tier": "x"}, label_managers={"gone": frozenset({"gpu", "tier"})})
    others = [Wanter("b", {"gpu": "on"}, frozenset({"n1"}))]
    applies, releases, conflicts, _ = plan(node, gpu=False, others=others)
    assert (applies, releases, conflicts) == ({ON: {"gpu": "on"}}, (label_manager("gone"),), [])


def test_earlier_manager_of_a_live_platform_is_left_to_its_own_pass() -> None:
    node = Node(labels={"gpu": "on"}, label_managers={"b": frozenset({"gpu"})}, label_holders={"gpu": (ON,)})
    assert plan(node, others=[Wanter("b", {"gpu": "on"})])[:3] == ({}, (), [])


def test_earlier_manager_of_a_live_platform_with_another_value_is_a_conflict() -> None:
    node = Node(labels={"gpu": "off"}, label_managers={"b": frozenset({"gpu"})})
    conflicts = plan(node, others=[Wanter("b", {"gpu": "off"})])[2]
    assert conflicts == ["Node n1: label gpu=off is held by TenantPlatform b; this platform wants gpu=on."]


def test_dry_run_reports_sets_and_releases_and_plans_no_job() -> None:
    node = Node(labels={"tier": "x"}, label_holders={"tier": (value_manager("tier", "x"),)})
    applies, releases, _, pending = plan(node, dry_run=True)
    assert (applies, releases) == ({}, ())
    assert pending == ["n1: set gpu=on, release tier"]


def test_many_platforms_wanting_the_same_value_share_one_manager() -> None:
    """The point of value managers: the writes and managers do not grow with the platforms."""
    node = Node(labels={"gpu": "on"}, label_holders={"gpu": (ON,)})
    others = [Wanter(f"p{i}", {"gpu": "on"}, frozenset({"n1"})) for i in range(500)]
    assert plan(node, others=others) == ({}, (), [], [])
    assert plan(node, gpu=False, others=others)[:2] == ({}, ())


def test_value_manager_names_fit_the_api_servers_limit() -> None:
    assert ON == "tenant-platform-operator/labels/gpu=on"
    assert held_value(ON, "gpu") == "on"
    long_key = "a" * 200 + ".example.com/" + "k" * 63
    long = value_manager(long_key, "v" * 63)
    assert len(long) <= MAX_MANAGER_LENGTH
    assert long.startswith(VALUE_MANAGER_PREFIX + "sha256-")
    assert long != value_manager(long_key, "w" * 63)
    assert held_value(long, long_key) is None


def test_the_snapshot_reads_value_managers_and_earlier_managers_apart() -> None:
    body = {
        "metadata": {
            "name": "n1",
            "uid": "u",
            "labels": {"gpu": "on"},
            "managedFields": [
                {"manager": ON, "operation": "Apply", "fieldsV1": {"f:metadata": {"f:labels": {"f:gpu": {}}}}},
                {
                    "manager": label_manager("alpha"),
                    "operation": "Apply",
                    "fieldsV1": {"f:metadata": {"f:labels": {"f:gpu": {}}}},
                },
                {
                    "manager": label_manager("labels"),
                    "operation": "Apply",
                    "fieldsV1": {"f:metadata": {"f:labels": {"f:gpu": {}}}},
                },
                {"manager": ON, "operation": "Update", "fieldsV1": {"f:metadata": {"f:labels": {"f:x": {}}}}},
            ],
        }
    }
    info = node_info(body)
    assert dict(info.label_holders) == {"gpu": (ON,)}
    assert dict(info.label_managers) == {"alpha": frozenset({"gpu"}), "labels": frozenset({"gpu"})}


def test_the_steady_state_never_reads_the_other_platforms() -> None:
    """Reading every other TenantPlatform per pass would cost N parses per pass, N^2 at converge:
    a plan asks for them only when a node needs them (a rival holder, a release, an earlier manager)."""
    calls: list[int] = []

    def read() -> list[Wanter]:
        calls.append(1)
        return [Wanter("b", {"gpu": "on"})]

    steady = {
        "n1": Node(labels={"gpu": "on"}, label_holders={"gpu": (ON,)}),
        "cpu": Node(name="cpu", uid="uid-cpu"),
    }
    others = Others(read)
    assert plan_labels(steady, {"n1"}, {"gpu": "on"}, platform="me", dry_run=False, others=others).jobs == []
    assert not others.read and calls == []
    stopped = {"n1": Node(labels={"gpu": "on"}, label_holders={"gpu": (ON,)})}
    others = Others(read)
    result = plan_labels(stopped, set(), {"gpu": "on"}, platform="me", dry_run=False, others=others)
    assert result.jobs == [] and calls == [1]  # b still wants it, asked once
