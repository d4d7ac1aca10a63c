"""The access-review bookkeeping (kube/reviews.py): which answers an RBAC event drops, and when an
answer may be kept (the settle window, per namespace and cluster-wide). Time is passed in."""

from __future__ import annotations

from typing import Any

import pytest

from tenant_platform.kube.reviews import ReviewAnswers, affected_namespace

SETTLE = 2.0


def obj(namespace: str | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "x"}
    if namespace is not None:
        meta["namespace"] = namespace
    return {"metadata": meta}


# (kind, old, new) -> the one namespace affected, or None: every answer.
EVENTS = {
    "Role added in a": ("Role", None, obj("a"), "a"),
    "RoleBinding modified in a": ("RoleBinding", obj("a"), obj("a"), "a"),
    "RoleBinding deleted in a": ("RoleBinding", obj("a"), None, "a"),
    "Role deleted, only the old object": ("Role", obj("b"), None, "b"),
    "ClusterRole": ("ClusterRole", None, {"metadata": {"name": "admin"}}, None),
    "ClusterRoleBinding": ("ClusterRoleBinding", obj(None), obj(None), None),
    "a ClusterRole claiming a namespace": ("ClusterRole", None, obj("a"), None),
    "relist of an events-only scope": ("RoleBinding", None, None, None),
    "a Role without a namespace": ("Role", None, obj(None), None),
    "old and new in different namespaces": ("RoleBinding", obj("a"), obj("b"), None),
}


@pytest.mark.parametrize(("kind", "old", "new", "expected"), EVENTS.values(), ids=EVENTS.keys())
def test_affected_namespace(kind: str, old: Any, new: Any, expected: str | None) -> None:
    assert affected_namespace(kind, old, new) == expected


def filled(now: float = 100.0) -> ReviewAnswers[str, bool]:
    answers: ReviewAnswers[str, bool] = ReviewAnswers(settle=SETTLE)
    for namespace in ("a", "b", ""):
        for key in ("k1", "k2"):
            assert answers.keep(namespace, key, True, asked_at=now - 1, now=now)
    return answers


# namespace changed (None: cluster-wide) -> answers left per namespace
DROPS = {
    "a Role in a drops only a's": ("a", {"a": 0, "b": 2, "": 2}),
    "a namespace with nothing kept drops nothing": ("c", {"a": 2, "b": 2, "": 2}),
    "a ClusterRole drops everything": (None, {"a": 0, "b": 0, "": 0}),
    "an empty namespace is treated as cluster-wide": ("", {"a": 0, "b": 0, "": 0}),
}


@pytest.mark.parametrize(("changed", "left"), DROPS.values(), ids=DROPS.keys())
def test_what_an_event_drops(changed: str | None, left: dict[str, int]) -> None:
    answers = filled()
    dropped = answers.changed(changed, 200.0)
    assert {ns: answers.count(ns) for ns in left} == left
    assert dropped == 6 - sum(left.values())
    assert len(answers) == sum(left.values())


# events (namespace or None, at) before an answer about `namespace` asked at `asked` and offered at 110.
SETTLING = {
    "no event ever": ([], "a", 100.0, True),
    "an event in a long before": ([("a", 90.0)], "a", 100.0, True),
    "an event in a within the window": ([("a", 99.0)], "a", 100.0, False),
    "an event in a just at the window's edge": ([("a", 98.0)], "a", 100.0, False),
    "an event in a after asking": ([("a", 105.0)], "a", 100.0, False),
    "an event in b does not hold a back": ([("b", 99.5)], "a", 100.0, True),
    "an event in b does not hold a cluster-scoped answer back": ([("b", 99.5)], "", 100.0, True),
    "a cluster-wide event holds a back": ([(None, 99.5)], "a", 100.0, False),
    "a cluster-wide event holds a cluster-scoped answer back": ([(None, 105.0)], "", 100.0, False),
    "a cluster-wide event long before": ([(None, 50.0)], "", 100.0, True),
    "an older event in a, a newer one elsewhere": ([("a", 50.0), ("b", 99.9)], "a", 100.0, True),
    "a cluster-wide event then one in a": ([(None, 50.0), ("a", 99.0)], "a", 100.0, False),
}


@pytest.mark.parametrize(("events", "namespace", "asked", "kept"), SETTLING.values(), ids=SETTLING.keys())
def test_settle_window(events: list[tuple[str | None, float]], namespace: str, asked: float, kept: bool) -> None:
    answers: ReviewAnswers[str, bool] = ReviewAnswers(settle=SETTLE)
    for changed, at in events:
        answers.changed(changed, at)
    assert answers.keep(namespace, "k", True, asked_at=asked, now=110.0) is kept
    assert (answers.get(namespace, "k") is not None) is kept


def test_an_answer_kept_is_served_until_dropped() -> None:
    answers: ReviewAnswers[tuple[str, ...], tuple[bool, str]] = ReviewAnswers(settle=SETTLE)
    assert answers.get("a", ("create", "deployments")) is None
    answers.keep("a", ("create", "deployments"), (True, "granted"), asked_at=10.0, now=10.5)
    assert answers.get("a", ("create", "deployments")) == (True, "granted")
    assert answers.get("b", ("create", "deployments")) is None  # the namespace is part of the key
    answers.changed("b", 11.0)
    assert answers.get("a", ("create", "deployments")) == (True, "granted")
    answers.changed("a", 12.0)
    assert answers.get("a", ("create", "deployments")) is None


def test_change_times_are_forgotten_after_the_horizon_without_letting_a_stale_answer_in() -> None:
    """One change time per namespace is kept for ``horizon`` seconds (memory bounded by the RBAC
    churn of the last few minutes); an answer asked before a forgotten change is refused for its
    age instead."""
    answers: ReviewAnswers[str, bool] = ReviewAnswers(settle=SETTLE, horizon=60.0)
    for i in range(50):
        answers.changed(f"ns-{i}", float(i))
    assert answers.last_change("ns-0") == 0.0
    answers.changed("other", 200.0)  # prunes what is older than 60 s
    assert answers.last_change("ns-0") is None and answers.last_change("ns-49") is None
    assert answers.last_change("other") == 200.0
    # Asked before ns-0's change at 0.0, offered after it was forgotten: too old to keep.
    assert not answers.keep("ns-0", "k", True, asked_at=-1.0, now=201.0)
    # Asked recently: kept (the forgotten change is long settled).
    assert answers.keep("ns-0", "k", True, asked_at=199.0, now=201.0)


def test_a_cluster_wide_change_supersedes_the_namespaced_times() -> None:
    answers: ReviewAnswers[str, bool] = ReviewAnswers(settle=SETTLE)
    answers.changed("a", 10.0)
    answers.changed(None, 20.0)
    assert answers.last_change("a") == 20.0
    assert answers.last_change("") == 20.0
    answers.changed("a", 30.0)
    assert answers.last_change("a") == 30.0
    assert answers.last_change("b") == 20.0


def test_horizon_must_exceed_settle() -> None:
    with pytest.raises(ValueError, match="horizon"):
        ReviewAnswers(settle=5.0, horizon=5.0)
