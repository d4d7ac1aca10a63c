"""The watch-fed read cache (kube/cache.py) against the real API server: a no-op pass makes no API
request but the Secret GETs the operator may not replace by a watch (counted by the API server,
the operator's own identity's requests only: ``operator_requests``); a hand-made ConfigMap under
the name of one of ours is still seen (names-only scope), refused or adopted; read-your-writes; a
child's event names its platform; access-review answers are dropped when RBAC changes.

These run ``reconcile.run`` in-process with a ``CachedKube`` built as the operator builds it
(``main.cache_scopes``); tests/e2e/test_cache_operator.py runs the operator process.
"""

from __future__ import annotations

import copy
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from benchmarks import apimetrics
from tests.support import condition, create_namespace

from tenant_platform import gpuwatch, main, reconcile
from tenant_platform.api import constants
from tenant_platform.api.models import TenantPlatform
from tenant_platform.api.reasons import Common
from tenant_platform.concerns.podguard import step, verdict
from tenant_platform.config import Settings
from tenant_platform.kube import errors
from tenant_platform.kube.cache import RBAC_SETTLE_SECONDS, CachedKube
from tenant_platform.kube.client import Kube
from tenant_platform.kube.informer import Informer, Scope
from tenant_platform.observe.cluster import ClusterSnapshot
from tenant_platform.testing.apirequests import OTHER, RequestCounter
from tenant_platform.testing.controlplane import ControlPlane
from tenant_platform.testing.wait import wait_for

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
SETTINGS = Settings(drift_interval=3600)
RBAC = "rbac.authorization.k8s.io/v1"


def start_cache(base: Kube) -> CachedKube:
    woken: list[str] = []
    kube = CachedKube(
        base,
        main.cache_scopes(SETTINGS),
        on_child=woken.append,
        on_fact=lambda: woken.append("*"),
        secret_scopes=main.SECRET_SCOPES,  # as the operator: used only where Secrets may be listed and watched
    )
    kube.woken = woken  # type: ignore[attr-defined]
    kube.start()
    # The GPU snapshot the operator's Node and Pod watches keep (gpuwatch), as steps get it.
    kube.snapshot = ClusterSnapshot()  # type: ignore[attr-defined]
    gpu = gpuwatch.start_watches(kube, kube.snapshot)  # type: ignore[attr-defined]
    assert kube.wait_synced(30), [i.scope.describe() for i in kube.informers if not i.synced.is_set()]
    assert kube.snapshot.wait_synced(30)  # type: ignore[attr-defined]
    kube.gpu = gpu  # type: ignore[attr-defined]
    return kube


def stop_cache(kube: CachedKube) -> None:
    kube.gpu.stop()  # type: ignore[attr-defined]
    kube.stop()


@pytest.fixture
def cached(crd: Kube, control_plane: ControlPlane) -> Iterator[CachedKube]:
    """The cache as cluster-admin (which may watch every Secret: see ``as_operator_cached``)."""
    kube = start_cache(Kube.from_kubeconfig(str(control_plane.kubeconfig_path)))
    yield kube
    stop_cache(kube)


@pytest.fixture
def as_operator_cached(crd: Kube, as_operator: Kube) -> Iterator[CachedKube]:
    """The cache as the operator's own ServiceAccount under deploy/base/rbac.yaml (and its fences):
    it may GET Secrets by name, not list or watch them, unless a test grants one by name (or all:
    tests/integration/test_secret_scope.py)."""
    base = as_operator.sibling()
    kube = start_cache(base)
    yield kube
    stop_cache(kube)


def run(kube: Kube, name: str) -> reconcile.Outcome:
    body = kube.get(constants.API_VERSION, constants.KIND, name)
    assert body is not None
    observed = getattr(kube, "snapshot", None)
    return reconcile.run(body, kube=kube, settings=SETTINGS, now=NOW, observed=observed)


def guard_type_checked(kube: Kube) -> bool:
    """Whether the shared pod guard policies' current generation has been type-checked (by the
    kube-controller-manager's policy status controller, on its own time): until then PodGuardReady
    says it has not, and the first pass after it reports the change (a status write)."""
    live = [kube.get(o["apiVersion"], o["kind"], o["metadata"]["name"]) for o in step.shared_objects()]
    return not verdict.type_check_pending([o for o in live if o is not None])


def converge(kube: Kube, name: str) -> reconcile.Outcome:
    for _ in range(60):
        outcome = run(kube, name)
        # Converged: no step has work in flight and the pass wrote nothing (Reconciling stays True
        # while a concern waits on a person, e.g. a missing edge certificate: docs/status.md), and
        # nothing the pass reported is about to change by itself: the first platform of the
        # session creates the shared guard policies, whose type checking comes seconds later.
        if (
            not any(r.progressing for r in outcome.results.values())
            and not outcome.status_written
            and guard_type_checked(kube)
        ):
            return outcome
        time.sleep(0.5)
    raise AssertionError(f"never converged: {condition(outcome.status, 'Ready')}")


@pytest.fixture(scope="module")
def operator_requests(crd: Kube, as_operator: Kube, control_plane: ControlPlane) -> Iterator[RequestCounter]:
    """The operator ServiceAccount's own requests, as the API server classifies them (FlowSchemas
    matching that identity only): what the control plane's controllers do meanwhile, e.g. the
    namespace controller emptying an earlier test's namespace, is not counted."""
    from tenant_platform.testing.operator import OPERATOR_NAMESPACE, OPERATOR_SA  # noqa: PLC0415

    counter = RequestCounter(
        crd,
        control_plane.metrics_text,
        namespace=OPERATOR_NAMESPACE,
        name=OPERATOR_SA,
        split=[("get", "secrets"), ("create", "pods")],
        prefix="test-cache-operator",
    )
    counter.install(as_operator)
    yield counter
    counter.uninstall()


def requests(counter: RequestCounter) -> Counter[tuple[str, str]]:
    """The operator's requests so far by (verb, resource) (``OTHER``: any other), watches left out."""
    return counter.snapshot()


def dry_runs(cp: ControlPlane) -> int:
    """Dry-run requests served so far, by anyone (the control plane's controllers make none)."""
    return apimetrics.parse(cp.metrics_text()).dry_runs


def test_the_request_count_is_the_operators_own(
    crd: Kube, as_operator: Kube, operator_requests: RequestCounter, unique_name: str
) -> None:
    """What the tests below count: the operator identity's requests by (verb, resource), watches
    left out; another client's requests (here cluster-admin's, as the control plane's controllers
    make theirs) are not in it, while the API server's own apiserver_request_total has them."""
    create_namespace(crd, unique_name)
    before = requests(operator_requests)
    crd.list("v1", "Pod", unique_name)
    crd.get("v1", "Secret", "absent", unique_name)
    assert requests(operator_requests) - before == Counter()
    as_operator.get("v1", "Secret", "absent", unique_name)
    as_operator.get("v1", "Secret", "absent", unique_name)
    as_operator.list("v1", "Pod", unique_name)
    with pytest.raises(errors.Forbidden):  # counted all the same (APF classifies before authorizing)
        as_operator.list("v1", "Secret", unique_name)
    assert requests(operator_requests) - before == Counter({("get", "secrets"): 2, OTHER: 2})
    crd.delete("v1", "Namespace", unique_name)


def test_no_op_pass_makes_no_request_but_secret_gets(
    as_operator_cached: CachedKube, make_platform: Any, unique_name: str, operator_requests: RequestCounter
) -> None:
    cached = as_operator_cached
    # Native sidecars: no dry-run probe pod (``sidecarStyle: Auto`` submits one per pass, below).
    make_platform(unique_name, unique_name, mesh={"sidecarStyle": "Native"})
    converge(cached, unique_name)
    time.sleep(RBAC_SETTLE_SECONDS + 0.5)  # access-review answers are kept once RBAC writes settled
    run(cached, unique_name)  # a first no-op pass fills the discovery and access-review answers
    before = requests(operator_requests)
    reads_before = cached.counter.snapshot()
    outcome = run(cached, unique_name)
    delta = requests(operator_requests) - before
    assert not outcome.status_written
    assert cached.counter.snapshot()[1] == reads_before[1]  # no write
    # What is left: the Secrets the operator reads by name (it may not list or watch Secrets):
    # the edge certificate and the installer kubeconfig Secret's name check. The edge trust
    # ConfigMap, absent here (the certificate has no CA to publish), is not asked for: the
    # names-only ConfigMap scope says no ConfigMap of that name exists, with or without our label.
    assert delta == Counter({("get", "secrets"): 2}), delta
    assert cached.counter.snapshot()[0] - reads_before[0] == 2


def test_sidecar_style_auto_adds_one_dry_run(
    as_operator_cached: CachedKube,
    make_platform: Any,
    unique_name: str,
    control_plane: ControlPlane,
    operator_requests: RequestCounter,
) -> None:
    cached = as_operator_cached
    make_platform(unique_name, unique_name)
    converge(cached, unique_name)
    time.sleep(RBAC_SETTLE_SECONDS + 0.5)  # access-review answers are kept once RBAC writes settled
    run(cached, unique_name)
    before, dry_before = requests(operator_requests), dry_runs(control_plane)
    run(cached, unique_name)
    delta = requests(operator_requests) - before
    assert delta == Counter({("get", "secrets"): 2, ("create", "pods"): 1}), delta
    assert dry_runs(control_plane) - dry_before == 1  # the pod created is the dry-run probe


def test_fenced_views_share_the_node_sample(as_operator_cached: CachedKube, operator_requests: RequestCounter) -> None:
    """Each pass reads through a ``fenced`` view (a shallow copy): what one view keeps, the next
    view answers from (the DNS step's one-node sample was lost with every pass before)."""
    cached = as_operator_cached

    def allow(namespace: str) -> None:
        return None

    cached.fenced(allow).request("GET", "/api/v1/nodes", query={"limit": "1"})
    before = requests(operator_requests)
    hits = cached.hits
    cached.fenced(allow).request("GET", "/api/v1/nodes", query={"limit": "1"})
    assert requests(operator_requests) - before == Counter()
    assert cached.hits == hits + 1


def test_a_child_deleted_by_hand_is_reported_and_recreated(
    cached: CachedKube, crd: Kube, make_platform: Any, unique_name: str
) -> None:
    make_platform(unique_name, unique_name, mesh={"sidecarStyle": "Native"})
    converge(cached, unique_name)
    woken: list[str] = cached.woken  # type: ignore[attr-defined]
    woken.clear()
    crd.delete(RBAC, "RoleBinding", "platform-installer-admin", unique_name)
    # The watch event names the platform (the operator wakes its loop with it) ...
    wait_for(lambda: unique_name in woken, "the platform woken by its child's event", 30)
    # ... and the cache no longer has the child, so the pass recreates it.
    assert cached.get(RBAC, "RoleBinding", "platform-installer-admin", unique_name) is None
    run(cached, unique_name)
    assert crd.get(RBAC, "RoleBinding", "platform-installer-admin", unique_name) is not None


def test_writes_are_read_back_from_the_cache(cached: CachedKube, make_platform: Any, unique_name: str) -> None:
    make_platform(unique_name, unique_name, mesh={"sidecarStyle": "Native"})
    converge(cached, unique_name)
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "ryw", "namespace": unique_name, "labels": {constants.LABEL_PLATFORM: unique_name}},
        "data": {"a": "1"},
    }
    cached.apply(cm)
    cm["data"] = {"a": "2"}
    cached.apply(cm)
    reads = cached.counter.snapshot()[0]
    got = cached.get("v1", "ConfigMap", "ryw", unique_name)
    assert got is not None and got["data"] == {"a": "2"}
    assert cached.counter.snapshot()[0] == reads


def test_access_review_answers_are_dropped_when_rbac_changes(
    cached: CachedKube, crd: Kube, make_platform: Any, unique_name: str
) -> None:
    make_platform(unique_name, unique_name, mesh={"sidecarStyle": "Native"})
    outcome = converge(cached, unique_name)
    assert condition(outcome.status, constants.INSTALLER_READY)["status"] == "True"
    time.sleep(2.5)  # past the settle window after the RBAC writes of converging
    run(cached, unique_name)
    reviews = cached.stats()["reviews"]
    namespaced = cached.reviews.count(unique_name)
    assert namespaced > 0 and cached.reviews.count("") > 0
    # A permission removed by hand (the installer's admin binding, deleted by someone else, with
    # our own repair suppressed by pausing nothing: the pass below runs the check first) ...
    crd.delete(RBAC, "RoleBinding", "platform-installer-admin", unique_name)
    # ... drops the answers in its namespace (the cluster-scoped ones cannot change: see
    # tests/integration/test_review_cache.py) ...
    wait_for(lambda: cached.reviews.count(unique_name) == 0, "the access-review answers dropped", 30)
    assert cached.stats()["reviews"] == reviews - namespaced
    # ... is noticed: the same check asks the API server again and gets "no".
    user = f"system:serviceaccount:{unique_name}:platform-installer"
    allowed, _ = cached.can_i(user=user, groups=[], verb="create", resource="deployments", group="apps",
                              namespace=unique_name)  # fmt: skip
    assert not allowed


def test_reads_fall_through_until_synced(crd: Kube, control_plane: ControlPlane, unique_name: str) -> None:
    """An informer that has not listed yet (here: never started) answers nothing: reads go to the API."""
    kube = CachedKube(Kube.from_kubeconfig(str(control_plane.kubeconfig_path)), main.cache_scopes(SETTINGS))
    assert kube.get("v1", "Namespace", "default") is not None
    assert kube.counter.snapshot()[0] == 1
    assert kube.stats()["hits"] == 0


def test_a_hand_made_trust_config_map_is_still_seen(
    cached: CachedKube, crd: Kube, make_platform: Any, unique_name: str, control_plane: ControlPlane
) -> None:
    """The trust ConfigMap is a child cached by our label, and an absent one is answered from the
    names-only ConfigMap scope. A hand-made one of that name, made after the cache synced (so it
    arrives by the watch), must still be read: refused (Conflict, data untouched) until an admin
    opts it in with ``tenancy.dev/adoptable-by``, then adopted."""
    trust = f"{unique_name}-hand-trust"
    create_namespace(crd, unique_name, adoptable_by=unique_name)
    make_platform(
        unique_name,
        unique_name,
        mesh={"sidecarStyle": "Native"},
        edgeCertificate={"issuer": "SelfSigned", "secretName": f"{unique_name}-tls", "trustConfigMapName": trust},
    )
    hand = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": trust, "namespace": unique_name},
        "data": {"ca-certificates.crt": "by hand"},
    }
    crd.create(hand)
    names = next(i for i in cached.informers if i.scope.names_only and i.scope.kind == "ConfigMap")
    wait_for(lambda: names.get(unique_name, trust) is not None, "the hand-made ConfigMap in the names scope", 30)
    for _ in range(3):
        outcome = run(cached, unique_name)
    edge = condition(outcome.status, constants.EDGE_CERTIFICATE_READY)
    assert edge["reason"] == Common.CONFLICT, edge
    live = crd.get("v1", "ConfigMap", trust, unique_name)
    assert live is not None and live["data"] == {"ca-certificates.crt": "by hand"}
    assert constants.LABEL_PLATFORM not in (live["metadata"].get("labels") or {})

    crd.merge_patch(
        "v1",
        "ConfigMap",
        trust,
        {"metadata": {"annotations": {constants.ANNOTATION_ADOPTABLE: unique_name}}},
        namespace=unique_name,
    )
    wait_for(lambda: cached.get("v1", "ConfigMap", trust, unique_name) is not None, "read", 5)
    for _ in range(3):
        outcome = run(cached, unique_name)
    edge = condition(outcome.status, constants.EDGE_CERTIFICATE_READY)
    assert edge["status"] == "True", edge
    live = crd.get("v1", "ConfigMap", trust, unique_name)
    assert live is not None and live["metadata"]["labels"][constants.LABEL_PLATFORM] == unique_name
    assert "BEGIN CERTIFICATE" in live["data"]["ca-certificates.crt"]


def test_the_names_only_scope_as_the_operator(as_operator: Kube, crd: Kube, unique_name: str) -> None:
    """The operator's own identity (deploy/base/rbac.yaml) lists and watches ConfigMaps as metadata
    only; what is kept is each one's namespace, name and resourceVersion, none of its data."""
    informer = Informer(as_operator, Scope("v1", "ConfigMap", names_only=True, role="names"))
    stopped = threading.Event()
    thread = threading.Thread(target=informer.run, args=(stopped,), daemon=True)
    thread.start()
    try:
        assert informer.synced.wait(30)
        held = informer.get("kube-system", "coredns")
        assert held is not None and set(held["metadata"]) == {"namespace", "name", "resourceVersion"}
        assert "data" not in held
        create_namespace(crd, unique_name)
        crd.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "late", "namespace": unique_name}})
        wait_for(lambda: informer.get(unique_name, "late") is not None, "the watch event", 30)
        assert informer.forbidden is False and informer.errors == 0
    finally:
        stopped.set()
        crd.delete("v1", "Namespace", unique_name)


def grant_watch_by_name(crd: Kube, namespace: str, secret: str, role: str) -> None:
    """What an admin adds to let the operator watch one Secret (docs/performance.md's sample)."""
    from tenant_platform.testing.operator import OPERATOR_NAMESPACE, OPERATOR_SA  # noqa: PLC0415

    crd.apply(
        {
            "apiVersion": RBAC,
            "kind": "Role",
            "metadata": {"name": role, "namespace": namespace},
            "rules": [
                {"apiGroups": [""], "resources": ["secrets"], "resourceNames": [secret], "verbs": ["list", "watch"]}
            ],
        }
    )
    crd.apply(
        {
            "apiVersion": RBAC,
            "kind": "RoleBinding",
            "metadata": {"name": role, "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": OPERATOR_SA, "namespace": OPERATOR_NAMESPACE}],
        }
    )


def test_secrets_granted_by_name_are_watched_and_a_no_op_pass_makes_no_request(
    as_operator_cached: CachedKube,
    crd: Kube,
    make_platform: Any,
    unique_name: str,
    operator_requests: RequestCounter,
) -> None:
    """With ``list, watch`` on the two Secrets a pass reads granted by name (resourceNames), the
    operator watches each by name and a no-op pass makes no request at all; a Secret deleted by
    hand wakes its platform from the watch and is issued again; removing the grant brings the GETs
    back. Counted by the API server, the operator's own identity's requests only."""
    cached = as_operator_cached
    body = make_platform(
        unique_name,
        unique_name,
        mesh={"sidecarStyle": "Native"},
        edgeCertificate={"issuer": "SelfSigned", "secretName": f"{unique_name}-tls"},
    )
    platform = TenantPlatform.from_body(body)
    edge = (platform.spec.gateway.namespace, platform.spec.edge_certificate.secret_name)
    kubeconfig = (platform.spec.namespace, platform.kubeconfig_secret_name)
    converge(cached, unique_name)
    role = f"{unique_name}-watch-secret"
    grants = [(edge[0], edge[1], role), (kubeconfig[0], kubeconfig[1], role)]
    for namespace, secret, name in grants:
        grant_watch_by_name(crd, namespace, secret, name)
    try:
        time.sleep(RBAC_SETTLE_SECONDS + 0.5)
        # The pass after the grant settled asks (2 SelfSubjectAccessReviews per Secret) and starts
        # the watches; once they have listed, Secret reads are answered from them.
        run(cached, unique_name)
        wait_for(lambda: all(i.synced.is_set() for i in cached.secrets.informers()), "secret watches synced", 30)
        assert {(i.scope.namespace, i.scope.name) for i in cached.secrets.informers()} == {edge, kubeconfig}
        run(cached, unique_name)
        before = requests(operator_requests)
        reads_before = cached.counter.snapshot()
        outcome = run(cached, unique_name)
        delta = requests(operator_requests) - before
        assert not outcome.status_written
        assert delta == Counter(), delta
        assert cached.counter.snapshot() == reads_before

        # Deleted by hand: the watch event wakes the platform, the pass issues it again.
        woken: list[str] = cached.woken  # type: ignore[attr-defined]
        woken.clear()
        crd.delete("v1", "Secret", edge[1], edge[0])
        wait_for(lambda: unique_name in woken, "the platform woken by its Secret's deletion", 30)
        run(cached, unique_name)
        reissued = crd.get("v1", "Secret", edge[1], edge[0])
        assert reissued is not None and reissued["metadata"]["labels"][constants.LABEL_PLATFORM] == unique_name
    finally:
        for namespace, _, name in grants:
            crd.delete(RBAC, "RoleBinding", name, namespace)
            crd.delete(RBAC, "Role", name, namespace)
    # The grant removed: the next pass after RBAC settled asks again, stops the watches, and GETs.
    time.sleep(RBAC_SETTLE_SECONDS + 0.5)
    wait_for(lambda: (run(cached, unique_name), not cached.secrets.informers())[1], "watches stopped", 30)
    before = requests(operator_requests)
    run(cached, unique_name)
    delta = requests(operator_requests) - before
    assert delta == Counter({("get", "secrets"): 2}), delta


def test_event_woken_passes_reuse_recent_secret_reads(
    as_operator_cached: CachedKube,
    crd: Kube,
    make_platform: Any,
    unique_name: str,
    operator_requests: RequestCounter,
) -> None:
    """Without a grant, a pass woken by an event reuses Secrets read within the drift interval
    (``reusing_secrets``, as scheduler.py asks for early passes): no request at all. The drift
    timer's pass reads them from the API, and sees a Secret deleted by hand (issued again); the
    write is noted, so the next early pass again asks nothing."""
    cached = as_operator_cached
    body = make_platform(
        unique_name,
        unique_name,
        mesh={"sidecarStyle": "Native"},
        edgeCertificate={"issuer": "SelfSigned", "secretName": f"{unique_name}-tls"},
    )
    edge = TenantPlatform.from_body(body).spec
    converge(cached, unique_name)
    time.sleep(RBAC_SETTLE_SECONDS + 0.5)
    run(cached, unique_name)  # the drift timer's pass: Secrets from the API
    early = cached.reusing_secrets(SETTINGS.drift_interval)
    before = requests(operator_requests)
    outcome = run(early, unique_name)
    assert not outcome.status_written
    assert requests(operator_requests) - before == Counter()

    crd.delete("v1", "Secret", edge.edge_certificate.secret_name, edge.gateway.namespace)
    before = requests(operator_requests)
    run(early, unique_name)  # an early pass does not see it ...
    assert requests(operator_requests) - before == Counter()
    run(cached, unique_name)  # ... the timer's does, and issues it again
    reissued = crd.get("v1", "Secret", edge.edge_certificate.secret_name, edge.gateway.namespace)
    assert reissued is not None
    run(cached, unique_name)
    before = requests(operator_requests)
    run(early, unique_name)
    assert requests(operator_requests) - before == Counter()


VAP = "admissionregistration.k8s.io/v1"


def policy(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": VAP,
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}
                ]
            },
            "validations": [{"expression": "true"}],
        },
    }


def test_a_platforms_own_policy_wakes_only_that_platform(cached: CachedKube, crd: Kube, unique_name: str) -> None:
    """Pod guard policies are facts (the takeover looks for hand-made ones), but one labelled a
    platform's wakes only that platform: with N platforms, each one's policies no longer wake the
    N - 1 others. A hand-made (unlabelled) one still wakes every platform ("*")."""
    woken: list[str] = cached.woken  # type: ignore[attr-defined]
    woken.clear()
    ours = f"{unique_name}-ours"
    crd.create(policy(ours, {constants.LABEL_PLATFORM: unique_name}))
    try:
        wait_for(lambda: unique_name in woken, "its platform woken", 30)
        time.sleep(1)
        assert "*" not in woken, woken
        crd.create(policy(f"{unique_name}-hand", {}))
        wait_for(lambda: "*" in woken, "every platform woken", 30)
    finally:
        crd.delete(VAP, "ValidatingAdmissionPolicy", ours)
        crd.delete(VAP, "ValidatingAdmissionPolicy", f"{unique_name}-hand")


def test_the_domain_guards_read_every_platform_from_the_cache_without_copying_it(
    cached: CachedKube, make_platform: Any, unique_name: str
) -> None:
    """The DNS, Gateway and GPU steps read every TenantPlatform on each pass (ctx.platforms()):
    from the cache, with no request and no copy of the N bodies (which made converging N
    platforms cost N^2 copies under the informer's lock: docs/performance.md). ``list`` still
    hands out copies a caller may change."""
    from tenant_platform.framework.base import StepContext  # noqa: PLC0415

    body = make_platform(unique_name, unique_name)
    ctx = StepContext(platform=TenantPlatform.from_body(body), kube=cached, settings=SETTINGS, now=NOW)
    wait_for(lambda: unique_name in {b["metadata"]["name"] for b in ctx.platforms()}, "the platform in the cache", 30)
    reads = cached.counter.snapshot()[0]
    first, second = ctx.platforms(), ctx.platforms()
    assert cached.counter.snapshot()[0] == reads
    assert [id(b) for b in first] == [id(b) for b in second]  # the held bodies, not copies
    listed = {b["metadata"]["name"]: b for b in cached.list(constants.API_VERSION, constants.KIND)}
    listed[unique_name]["spec"]["domain"] = "changed.example.com"  # a copy: the cache keeps its own
    mine = next(b for b in ctx.platforms() if b["metadata"]["name"] == unique_name)
    assert mine["spec"]["domain"] == body["spec"]["domain"]


def test_a_conflict_refreshes_the_held_object_so_the_retry_can_succeed(
    cached: CachedKube, crd: Kube, unique_name: str
) -> None:
    """A PUT answered 409 (someone changed the object since we read it) reads the object again
    from the API into the cache: the caller's re-read and retry (the Corefile edit) sees the
    change at once instead of the same stale copy until the watch brings the event (with many
    platforms writing the one CoreDNS ConfigMap, every retry of a pass failed alike)."""
    create_namespace(crd, unique_name)
    try:
        labels = {constants.LABEL_PLATFORM: unique_name}
        meta = {"name": "shared", "namespace": unique_name, "labels": labels}
        crd.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"a": "1"}})
        wait_for(lambda: cached.get("v1", "ConfigMap", "shared", unique_name) is not None, "held", 30)
        ours = cached.get("v1", "ConfigMap", "shared", unique_name)
        assert ours is not None
        theirs = crd.get("v1", "ConfigMap", "shared", unique_name)
        assert theirs is not None
        theirs["data"] = {"a": "theirs"}
        theirs = crd.replace(theirs)
        # The watch has not brought their change yet: the store still holds what we read.
        informer = next(i for i in cached._covering("v1", "ConfigMap", unique_name, "shared") if i.scope.labels)
        with informer._lock:
            informer._store[(unique_name, "shared")] = copy.deepcopy(ours)
        ours["data"] = {"a": "ours"}
        with pytest.raises(errors.Conflict):
            cached.replace(ours)
        again = cached.get("v1", "ConfigMap", "shared", unique_name)
        assert again is not None and again["data"] == {"a": "theirs"}
        assert again["metadata"]["resourceVersion"] == theirs["metadata"]["resourceVersion"]
        again["data"]["a"] = "ours"
        assert cached.replace(again)["data"] == {"a": "ours"}
    finally:
        crd.delete("v1", "Namespace", unique_name)


def test_a_platforms_corefile_block_wakes_only_that_platform(cached: CachedKube, crd: Kube, unique_name: str) -> None:
    """One platform writing its block into the shared CoreDNS ConfigMap wakes that platform, not
    every platform (N writes x N passes while N platforms converge); removing a block still
    wakes every platform (one refused for that domain may take it now)."""
    from tenant_platform.formats import corefile  # noqa: PLC0415

    def edit(change: Callable[[str], str]) -> None:
        live = crd.get("v1", "ConfigMap", "coredns", "kube-system")
        assert live is not None
        live["data"]["Corefile"] = change(live["data"]["Corefile"])
        crd.replace(live)

    woken: list[str] = cached.woken  # type: ignore[attr-defined]
    mark = len(woken)
    edit(lambda text: corefile.upsert_block(text, unique_name, f"{unique_name}.example.com", "gw.istio.svc"))
    try:
        wait_for(lambda: unique_name in woken[mark:], "the block's platform woken", 30)
        assert "*" not in woken[mark:]
    finally:
        mark = len(woken)
        edit(lambda text: corefile.remove_block(text, unique_name))
    wait_for(lambda: "*" in woken[mark:], "every platform woken by the removal", 30)
