"""kube/secretwatch.py ``SecretWatches``: which grant it asks about and what it runs (no API:
``may_i`` answers from a table, and no informer thread is started). The requests these decisions
save are counted on the real API server in tests/integration/test_secret_scope.py."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from tenant_platform.kube import errors
from tenant_platform.kube.informer import Informer, Scope
from tenant_platform.kube.secretwatch import SecretWatches, _Watch
from tenant_platform.main import SECRET_SCOPES

Asked = tuple[str, str, str]
"""(verb, namespace, name): namespace and name empty for the cluster-wide question."""


class Reviews:
    """``may_i`` from a set of allowed questions; records what was asked."""

    def __init__(self, allowed: set[Asked]) -> None:
        self.allowed = allowed
        self.asked: list[Asked] = []
        self.fail = False

    def may_i(self, *, verb: str, resource: str, namespace: str = "", name: str = "", group: str = "") -> bool:
        assert (resource, group) == ("secrets", "")
        if self.fail:
            raise errors.KubeError(503, "ServiceUnavailable", "try later")
        self.asked.append((verb, namespace, name))
        return (verb, namespace, name) in self.allowed


CLUSTER = {("list", "", ""), ("watch", "", "")}
BY_NAME = {("list", "ns", "tls"), ("watch", "ns", "tls")}


def watches(reviews: Reviews, monkeypatch: pytest.MonkeyPatch, *, cluster: bool = True) -> SecretWatches:
    clock = {"now": 1000.0}

    def run(self: SecretWatches, scope: Scope, thread_name: str) -> _Watch:
        informer = Informer(None, scope)  # type: ignore[arg-type]  # never run
        informer.synced.set()
        return _Watch(informer, threading.Event(), threading.current_thread())

    monkeypatch.setattr(SecretWatches, "_run", run)
    sw = SecretWatches(
        reviews,  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
        listener=lambda scope: lambda *_: None,
        settle=2.0,
        clock=lambda: clock["now"],
        cluster_scopes=SECRET_SCOPES if cluster else (),
    )
    sw.time = clock  # type: ignore[attr-defined]
    return sw


def scopes(sw: SecretWatches) -> list[Any]:
    return [(i.scope.namespace, i.scope.name, i.scope.names_only, i.scope.labels) for i in sw.informers()]


def test_the_secret_scopes_are_ours_by_label_and_names_only() -> None:
    labelled, names = SECRET_SCOPES
    assert labelled.labels == (("tenancy.dev/tenant-platform", None),) and labelled.holds_objects
    assert not labelled.complete  # a miss is not "absent": an unlabelled Secret may exist
    assert labelled.role == "child"  # its events wake the platform the label names
    assert names.names_only and not names.labels and not names.holds_objects and names.role == "names"
    assert all(s.namespace is None and s.name is None for s in SECRET_SCOPES)


def test_without_cluster_scopes_only_names_are_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    """No ``cluster_scopes`` (the cache built without them): as before, per name only."""
    reviews = Reviews(CLUSTER | BY_NAME)
    sw = watches(reviews, monkeypatch, cluster=False)
    assert sw.informer("ns", "tls") is not None
    assert reviews.asked == [("list", "ns", "tls"), ("watch", "ns", "tls")]
    assert scopes(sw) == [("ns", "tls", False, ())]


LIST, WATCH = ("list", "", ""), ("watch", "", "")
NAME_LIST, NAME_WATCH = ("list", "ns", "tls"), ("watch", "ns", "tls")
OURS = (None, None, False, (("tenancy.dev/tenant-platform", None),))
NAMES = (None, None, True, ())


@pytest.mark.parametrize(
    ("allowed", "asked", "watched"),
    [
        pytest.param(set(), [LIST, NAME_LIST], [], id="nothing granted: GETs"),
        pytest.param({LIST}, [LIST, WATCH, NAME_LIST], [], id="list without watch: GETs"),
        pytest.param(BY_NAME, [LIST, NAME_LIST, NAME_WATCH], [("ns", "tls", False, ())], id="by name: one watch"),
        pytest.param(CLUSTER, [LIST, WATCH], [OURS, NAMES], id="cluster-wide: two informers"),
        pytest.param(CLUSTER | BY_NAME, [LIST, WATCH], [OURS, NAMES], id="both: cluster-wide, names not asked"),
    ],
)
def test_what_runs_per_grant(
    allowed: set[Asked], asked: list[Asked], watched: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    reviews = Reviews(allowed)
    sw = watches(reviews, monkeypatch)
    found = sw.informer("ns", "tls")
    # A per-name watch answers that name; the cluster-wide informers are found by the cache itself.
    assert (found is not None) == (watched == [("ns", "tls", False, ())])
    assert reviews.asked == asked
    assert sw.cluster_wide() is (watched == [OURS, NAMES])
    assert scopes(sw) == watched
    # Answers are kept: the same name asks nothing; another name is asked about only per name.
    sw.informer("ns", "tls")
    assert reviews.asked == asked
    sw.informer("ns", "other")
    assert reviews.asked[len(asked) :] == ([] if sw.cluster_wide() else [("list", "ns", "other")])


def test_a_cluster_grant_replaces_running_name_watches_and_its_removal_stops_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reviews = Reviews(set(BY_NAME))
    sw = watches(reviews, monkeypatch)
    sw.informer("ns", "tls")
    (by_name,) = sw.informers()
    # The grant added: RBAC changed, everything is asked again at the next GET.
    reviews.allowed |= CLUSTER
    sw.forget(None)
    sw.time["now"] += 2.5  # type: ignore[attr-defined]
    reviews.asked.clear()
    sw.informer("ns", "tls")
    assert reviews.asked == [("list", "", ""), ("watch", "", "")]
    assert sw.cluster_wide() and len(sw.informers()) == 2
    assert by_name.scope.name == "tls" and by_name not in sw.informers()
    cluster = sw.informers()
    # The grant removed: both informers are stopped, and names are asked again.
    reviews.allowed -= CLUSTER
    sw.forget(None)
    sw.time["now"] += 2.5  # type: ignore[attr-defined]
    reviews.asked.clear()
    sw.informer("ns", "tls")
    assert not sw.cluster_wide()
    assert reviews.asked == [("list", "", ""), ("list", "ns", "tls"), ("watch", "ns", "tls")]
    assert scopes(sw) == [("ns", "tls", False, ())]
    assert not set(cluster) & set(sw.informers())


def test_answers_are_not_kept_until_rbac_settled(monkeypatch: pytest.MonkeyPatch) -> None:
    """Right after an RBAC change the API server's authorizer may lag: ask again next time."""
    reviews = Reviews(set())
    sw = watches(reviews, monkeypatch)
    sw.forget(None)  # a cluster-wide RBAC change, just now
    sw.informer("ns", "tls")
    sw.informer("ns", "tls")
    assert reviews.asked.count(("list", "", "")) == 2
    sw.time["now"] += 2.5  # type: ignore[attr-defined]
    sw.informer("ns", "tls")
    sw.informer("ns", "tls")
    assert reviews.asked.count(("list", "", "")) == 3


def test_a_failed_review_decides_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    reviews = Reviews(set(CLUSTER))
    sw = watches(reviews, monkeypatch)
    reviews.fail = True
    assert sw.informer("ns", "tls") is None
    assert not sw.cluster_wide() and sw.informers() == []
    reviews.fail = False
    sw.informer("ns", "tls")
    assert sw.cluster_wide()


def test_stop_stops_the_cluster_informers(monkeypatch: pytest.MonkeyPatch) -> None:
    sw = watches(Reviews(set(CLUSTER)), monkeypatch)
    sw.informer("ns", "tls")
    running = list(sw._cluster)
    sw.stop()
    assert all(w.stopped.is_set() for w in running)
    assert sw.informers() == [] and not sw.cluster_wide()
    sw.forget(None)
    sw.time["now"] += 2.5  # type: ignore[attr-defined]
    sw.informer("ns", "tls")  # closed: nothing starts again
    assert sw.informers() == []
