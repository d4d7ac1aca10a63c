"""Access-review answers kept per namespace (kube/reviews.py, ``CachedKube.can_i``) on the real API
server: an RBAC change in one namespace re-asks the reviews of that namespace only, and the fresh
answer is the API server's; a ClusterRole or ClusterRoleBinding change re-asks everything.
The operator's Secret-watch grants (SelfSubjectAccessReviews, kube/secretwatch.py) likewise.
Reviews are counted from the API server's apiserver_request_total.

As an attacker: a tenant admin (the built-in ``admin`` ClusterRole bound in their own namespace)
may write Roles and RoleBindings there, and nothing else. Their writes drop answers of their
namespace only, which is all they can change: answers kept elsewhere (another namespace, cluster
scope) stay true, as an uncached review confirms; the namespace of an event is the one the API
server put the object in (a body naming another namespace is refused); and the writes that would
change answers everywhere (ClusterRoles, ClusterRoleBindings) are refused to them.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import kubernetes.client
import pytest
from benchmarks import apimetrics
from tests.integration.test_cache import converge, run, start_cache, stop_cache
from tests.support import create_namespace

from tenant_platform.kube import errors
from tenant_platform.kube.cache import RBAC_SETTLE_SECONDS, CachedKube
from tenant_platform.kube.client import Kube
from tenant_platform.kube.informer import RBAC_KINDS, Scope
from tenant_platform.testing.controlplane import ControlPlane
from tenant_platform.testing.wait import wait_for

RBAC = "rbac.authorization.k8s.io/v1"
RBAC_GROUP = "rbac.authorization.k8s.io"


def reviews_asked(control_plane: ControlPlane) -> int:
    """SubjectAccessReviews the API server has answered so far (all clients of this session)."""
    return apimetrics.access_reviews(apimetrics.parse(control_plane.metrics_text()))


@pytest.fixture
def reviews_cache(crd: Kube, control_plane: ControlPlane) -> Iterator[CachedKube]:
    """A cache as cluster-admin with only the RBAC watches (what ``can_i`` depends on)."""
    scopes = [Scope(RBAC, kind, keep=False, role="rbac") for kind in RBAC_KINDS]
    kube = CachedKube(Kube.from_kubeconfig(str(control_plane.kubeconfig_path)), scopes).start()
    assert kube.wait_synced(30)
    yield kube
    kube.stop()


@pytest.fixture
def namespaces(crd: Kube, unique_name: str) -> Iterator[tuple[str, str]]:
    a, b = f"{unique_name[:50]}-a", f"{unique_name[:50]}-b"
    for ns in (a, b):
        create_namespace(crd, ns)
    yield a, b
    for ns in (a, b):
        crd.delete("v1", "Namespace", ns)


def impersonating(admin: Kube, user: str) -> Kube:
    """A client acting as ``user`` (the admin's credentials, with Impersonate-User)."""
    api = kubernetes.client.ApiClient(admin.api.configuration)
    api.set_default_header("Impersonate-User", user)
    return Kube(api)


def binding(name: str, namespace: str, role_kind: str, role: str, subject: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": RBAC,
        "kind": "RoleBinding",
        "metadata": {"name": name, "namespace": namespace},
        "roleRef": {"apiGroup": RBAC_GROUP, "kind": role_kind, "name": role},
        "subjects": [subject],
    }


def user(name: str) -> dict[str, str]:
    return {"kind": "User", "apiGroup": RBAC_GROUP, "name": name}


def seen_after(cache: CachedKube, namespace: str, since: float) -> bool:
    """The cache has processed an RBAC event affecting ``namespace`` at or after ``since``."""
    last = cache.reviews.last_change(namespace)
    return last is not None and last >= since


def create_deployments(cache: Kube, who: str, namespace: str) -> bool:
    return cache.can_i(user=who, groups=[], verb="create", resource="deployments", group="apps", namespace=namespace)[0]


def list_nodes(cache: Kube, who: str) -> bool:
    return cache.can_i(user=who, groups=[], verb="list", resource="nodes")[0]


def test_a_change_in_another_namespace_keeps_the_answer_and_one_in_the_same_namespace_flips_it(
    reviews_cache: CachedKube, crd: Kube, namespaces: tuple[str, str], unique_name: str, control_plane: ControlPlane
) -> None:
    cache = reviews_cache
    a, b = namespaces
    alice = f"{unique_name}-alice"
    time.sleep(RBAC_SETTLE_SECONDS + 0.5)
    assert not create_deployments(cache, alice, a)
    assert not create_deployments(cache, alice, b)
    assert cache.reviews.count(a) == 1 and cache.reviews.count(b) == 1

    # Granted in A: only A's answer is dropped; B's is served from the cache, no review asked.
    since = time.monotonic()
    crd.create(binding("alice-edit", a, "ClusterRole", "edit", user(alice)))
    wait_for(lambda: seen_after(cache, a, since), "the RoleBinding event in A", 30)
    assert cache.reviews.count(a) == 0 and cache.reviews.count(b) == 1
    before, hits = reviews_asked(control_plane), cache.hits
    assert not create_deployments(cache, alice, b)
    assert reviews_asked(control_plane) == before
    assert cache.hits == hits + 1
    assert not crd.can_i(user=alice, groups=[], verb="create", resource="deployments", group="apps", namespace=b)[0]

    # A's answer is asked again (the API server's authorizer may lag for a moment) and flips.
    before = reviews_asked(control_plane)
    wait_for(lambda: create_deployments(cache, alice, a), "the grant in A seen", 30)
    assert reviews_asked(control_plane) > before
    time.sleep(RBAC_SETTLE_SECONDS + 0.5)
    assert create_deployments(cache, alice, a)  # asked once more after the settle window: kept
    before = reviews_asked(control_plane)
    assert create_deployments(cache, alice, a)
    assert reviews_asked(control_plane) == before

    # Revoked in A: flips back; B still from the cache.
    since = time.monotonic()
    crd.delete(RBAC, "RoleBinding", "alice-edit", a)
    wait_for(lambda: seen_after(cache, a, since), "the RoleBinding deletion in A", 30)
    wait_for(lambda: not create_deployments(cache, alice, a), "the revocation in A seen", 30)
    before = reviews_asked(control_plane)
    assert not create_deployments(cache, alice, b)
    assert reviews_asked(control_plane) == before


def test_a_tenant_admin_cannot_make_the_cache_keep_a_stale_answer_elsewhere(
    reviews_cache: CachedKube, crd: Kube, namespaces: tuple[str, str], unique_name: str, control_plane: ControlPlane
) -> None:
    cache = reviews_cache
    mine, theirs = namespaces  # the tenant admin's namespace; another tenant's
    mallory = f"{unique_name}-mallory"
    victim = f"system:serviceaccount:{theirs}:platform-installer"
    sa = {"kind": "ServiceAccount", "name": "platform-installer", "namespace": theirs}
    crd.create(binding("tenant-admin", mine, "ClusterRole", "admin", user(mallory)))
    crd.create(binding("installer-edit", theirs, "ClusterRole", "edit", sa))
    nodes = f"{unique_name}-nodes"
    time.sleep(RBAC_SETTLE_SECONDS + 0.5)
    kept = {
        "theirs": create_deployments(cache, victim, theirs),
        "mine": create_deployments(cache, victim, mine),
        "cluster": list_nodes(cache, victim),
    }
    assert kept == {"theirs": True, "mine": False, "cluster": False}
    assert len(cache.reviews) == 3

    # The tenant admin grants the other tenant's identity rights in their own namespace (allowed:
    # ``admin`` may write Roles and RoleBindings there). Only answers in their namespace change.
    tenant = impersonating(crd, mallory)
    since = time.monotonic()
    tenant.create(
        {
            "apiVersion": RBAC,
            "kind": "Role",
            "metadata": {"name": "lure", "namespace": mine},
            "rules": [{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["create"]}],
        }
    )
    tenant.create(binding("lure", mine, "Role", "lure", sa))
    wait_for(lambda: seen_after(cache, mine, since), "the tenant admin's writes seen", 30)
    before = reviews_asked(control_plane)
    assert create_deployments(cache, victim, theirs) is True
    assert list_nodes(cache, victim) is False
    assert reviews_asked(control_plane) == before  # both from the cache ...
    truth = Kube.from_kubeconfig(str(control_plane.kubeconfig_path))
    assert create_deployments(truth, victim, theirs) is True  # ... and still true
    assert list_nodes(truth, victim) is False
    wait_for(lambda: create_deployments(cache, victim, mine), "the grant in the tenant's namespace", 30)

    # What would reach answers elsewhere is refused to them: RBAC outside their namespace, a
    # cluster-scoped role or binding, or a body naming another namespace than the request's path.
    elsewhere = binding("lure", theirs, "ClusterRole", "admin", user(mallory))
    with pytest.raises(errors.Forbidden):
        tenant.create(elsewhere)
    with pytest.raises(errors.Forbidden):
        tenant.create({"apiVersion": RBAC, "kind": "ClusterRole", "metadata": {"name": nodes}, "rules": []})
    cluster_binding = {
        "apiVersion": RBAC,
        "kind": "ClusterRoleBinding",
        "metadata": {"name": nodes},
        "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": "view"},
        "subjects": [sa],
    }
    with pytest.raises(errors.Forbidden):
        tenant.create(cluster_binding)
    with pytest.raises(errors.KubeError) as refused:
        tenant.request("POST", tenant.path(RBAC, "RoleBinding", namespace=mine), body=elsewhere)
    assert refused.value.status == 400, refused.value
    assert crd.get(RBAC, "RoleBinding", "lure", theirs) is None

    # A cluster-wide change (here by the cluster admin) drops every answer, cluster scope included.
    since = time.monotonic()
    crd.create(
        {
            "apiVersion": RBAC,
            "kind": "ClusterRole",
            "metadata": {"name": nodes},
            "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}],
        }
    )
    try:
        crd.create({**cluster_binding, "roleRef": {**cluster_binding["roleRef"], "name": nodes}})
        wait_for(lambda: seen_after(cache, "", since), "the cluster-wide change seen", 30)
        assert len(cache.reviews) == 0
        wait_for(lambda: list_nodes(cache, victim), "the cluster-wide grant seen", 30)
    finally:
        crd.delete(RBAC, "ClusterRoleBinding", nodes)
        crd.delete(RBAC, "ClusterRole", nodes)


def test_a_new_platform_does_not_make_another_ask_its_reviews_again(
    crd: Kube, make_platform: Any, unique_name: str, control_plane: ControlPlane
) -> None:
    """Each platform writes its installer Role and RoleBinding in its own namespace: that used to
    drop every platform's answers (10 reviews each at its next pass); now only its own."""
    cache = start_cache(Kube.from_kubeconfig(str(control_plane.kubeconfig_path)))
    try:
        first, second = f"{unique_name[:50]}-1", f"{unique_name[:50]}-2"
        make_platform(first, first, mesh={"sidecarStyle": "Native"})
        converge(cache, first)
        time.sleep(RBAC_SETTLE_SECONDS + 0.5)
        run(cache, first)  # fills its answers
        kept = len(cache.reviews)
        assert kept > 0
        before = reviews_asked(control_plane)
        run(cache, first)
        assert reviews_asked(control_plane) == before

        since = time.monotonic()
        make_platform(second, second, mesh={"sidecarStyle": "Native"})
        converge(cache, second)
        wait_for(lambda: seen_after(cache, second, since), "the second platform's RBAC writes seen", 30)
        assert cache.reviews.last_change("") is None or cache.reviews.last_change("") < since  # nothing cluster-wide
        before = reviews_asked(control_plane)
        run(cache, first)
        assert reviews_asked(control_plane) == before
    finally:
        stop_cache(cache)


def test_a_relisted_rbac_watch_drops_every_answer(
    reviews_cache: CachedKube, namespaces: tuple[str, str], unique_name: str, control_plane: ControlPlane
) -> None:
    """After a watch gap an RBAC informer lists again, and events missed meanwhile are not
    reported: a relist is itself treated as a change everywhere (counted from its listings)."""
    cache = reviews_cache
    a, _ = namespaces
    who = f"{unique_name}-carol"
    time.sleep(RBAC_SETTLE_SECONDS + 0.5)
    assert not create_deployments(cache, who, a)
    assert not list_nodes(cache, who)
    before = reviews_asked(control_plane)
    assert not create_deployments(cache, who, a)
    assert reviews_asked(control_plane) == before
    role_bindings = next(i for i in cache.informers if i.scope.kind == "RoleBinding")
    role_bindings.list_once()  # as after a gap (a real LIST)
    before = reviews_asked(control_plane)
    assert not create_deployments(cache, who, a)
    assert not list_nodes(cache, who)
    assert reviews_asked(control_plane) == before + 2
    assert len(cache.reviews) == 0  # within the settle window of the relist: not kept


def self_reviews_asked(control_plane: ControlPlane) -> int:
    counts = apimetrics.parse(control_plane.metrics_text())
    return sum(v for (_, resource), v in counts.by_verb_resource.items() if resource == "selfsubjectaccessreviews")


def test_secret_watch_grants_are_asked_again_only_for_their_namespace(
    as_operator: Kube, crd: Kube, namespaces: tuple[str, str], unique_name: str, control_plane: ControlPlane
) -> None:
    """As the operator's own identity: whether it may watch a Secret by name (SelfSubjectAccessReviews,
    kube/secretwatch.py) is asked again after an RBAC change in the Secret's namespace, not after
    one in another namespace."""
    a, b = namespaces
    crd.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": a}, "data": {}})
    scopes = [Scope(RBAC, kind, keep=False, role="rbac") for kind in RBAC_KINDS]
    cache = CachedKube(as_operator.sibling(), scopes).start()
    try:
        assert cache.wait_synced(30)
        time.sleep(RBAC_SETTLE_SECONDS + 0.5)
        before = self_reviews_asked(control_plane)
        assert cache.get("v1", "Secret", "s", a) is not None
        assert self_reviews_asked(control_plane) > before  # not granted: answered "no", kept
        assert cache.secrets.decided(a) == 1
        before = self_reviews_asked(control_plane)
        assert cache.get("v1", "Secret", "s", a) is not None
        assert self_reviews_asked(control_plane) == before

        since = time.monotonic()
        crd.create(binding("unrelated", b, "ClusterRole", "view", user(f"{unique_name}-x")))
        wait_for(lambda: seen_after(cache, b, since), "the RoleBinding event in B", 30)
        assert cache.secrets.decided(a) == 1
        before = self_reviews_asked(control_plane)
        assert cache.get("v1", "Secret", "s", a) is not None
        assert self_reviews_asked(control_plane) == before

        crd.create(binding("related", a, "ClusterRole", "view", user(f"{unique_name}-x")))
        wait_for(lambda: cache.secrets.decided(a) == 0, "the grant answer in A dropped", 30)
        before = self_reviews_asked(control_plane)
        assert cache.get("v1", "Secret", "s", a) is not None
        assert self_reviews_asked(control_plane) > before
    finally:
        cache.stop()
