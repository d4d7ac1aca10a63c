"""Secrets watched cluster-wide (kube/secretwatch.py, main.SECRET_SCOPES) against the real API
server, as the operator's own ServiceAccount under deploy/base/rbac.yaml plus the opt-in grant
deploy/components/watch-secrets (list and watch of every Secret; the chart's rbac.watchSecrets).

With the grant: two informers in all (our Secrets by label, held whole; every Secret's name,
metadata only), a no-op drift-timer pass makes no request at all, a Secret that does not exist
costs no GET, our edge Secret deleted by hand wakes its platform from the watch and is issued
again, and an unlabelled hand-made Secret the spec names is still read with a GET. Removing the
grant brings the GETs back. Without it nothing changes (tests/integration/test_cache.py runs the
same cache, with the same scopes, under the default RBAC). Requests are counted from the API
server's own apiserver_request_total.
"""

from __future__ import annotations

import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.integration.test_cache import (  # the operator identity's request count, shared
    SETTINGS,
    converge,
    operator_requests,  # noqa: F401 - a fixture used by name below
    requests,
    run,
    start_cache,
    stop_cache,
)
from tests.support import condition, create_namespace

from tenant_platform.api import constants
from tenant_platform.api.models import TenantPlatform
from tenant_platform.kube import errors
from tenant_platform.kube.cache import RBAC_SETTLE_SECONDS, CachedKube
from tenant_platform.kube.client import Kube
from tenant_platform.testing.apirequests import RequestCounter
from tenant_platform.testing.controlplane import ControlPlane
from tenant_platform.testing.operator import REPO, apply_file
from tenant_platform.testing.wait import wait_for

GRANT = REPO / "deploy" / "components" / "watch-secrets" / "rbac.yaml"
GRANT_NAME = "tenant-platform-operator-watch-secrets"
RBAC = "rbac.authorization.k8s.io/v1"


def revoke(crd: Kube) -> None:
    crd.delete(RBAC, "ClusterRoleBinding", GRANT_NAME)
    crd.delete(RBAC, "ClusterRole", GRANT_NAME)


@pytest.fixture
def granted(crd: Kube, as_operator: Kube) -> Iterator[CachedKube]:
    """The operator's cache with list and watch of every Secret granted (deploy's component), the
    grant settled (access-review answers obtained right after an RBAC change are not kept)."""
    apply_file(crd, GRANT)
    kube = start_cache(as_operator.sibling())
    try:
        time.sleep(RBAC_SETTLE_SECONDS + 0.5)
        yield kube
    finally:
        stop_cache(kube)
        revoke(crd)


def cluster_wide_synced(kube: CachedKube) -> bool:
    informers = kube.secrets.informers()
    return kube.secrets.cluster_wide() and len(informers) == 2 and all(i.synced.is_set() for i in informers)


def secret(name: str, namespace: str, **extra: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": namespace}, **extra}


def test_secrets_watched_cluster_wide_make_a_no_op_pass_free(
    granted: CachedKube,
    crd: Kube,
    make_platform: Any,
    unique_name: str,
    operator_requests: RequestCounter,  # noqa: F811 - the fixture imported above
) -> None:
    cached = granted
    body = make_platform(
        unique_name,
        unique_name,
        mesh={"sidecarStyle": "Native"},
        edgeCertificate={"issuer": "SelfSigned", "secretName": f"{unique_name}-tls"},
    )
    platform = TenantPlatform.from_body(body)
    edge = (platform.spec.gateway.namespace, platform.spec.edge_certificate.secret_name)
    converge(cached, unique_name)
    wait_for(lambda: cluster_wide_synced(cached), "the cluster-wide Secret informers synced", 30)
    time.sleep(RBAC_SETTLE_SECONDS + 0.5)  # access-review answers are kept once RBAC writes settled
    labelled, names = sorted(cached.secrets.informers(), key=lambda i: i.scope.names_only)
    assert labelled.scope.labels == ((constants.LABEL_PLATFORM, None),) and not labelled.scope.names_only
    assert names.scope.names_only and not names.scope.labels
    # No per-name watch: two watches whatever the number of Secrets and platforms.
    assert all(i.scope.name is None for i in cached.secrets.informers())
    previous = run(cached, unique_name)  # fills the access-review answers (asked after the last RBAC write)

    # The drift timer's pass (not an event-woken one reusing recent reads): no request at all. The
    # edge Secret comes from the labelled informer; the kubeconfig Secret (disabled here, so
    # absent) is answered "absent" by the names-only one.
    before = requests(operator_requests)
    reads_before = cached.counter.snapshot()
    outcome = run(cached, unique_name)
    delta = requests(operator_requests) - before
    assert not outcome.status_written, changed(previous.status, outcome.status)
    assert delta == Counter(), delta
    assert cached.counter.snapshot() == reads_before

    # A Secret that does not exist: answered without a request.
    before = requests(operator_requests)
    assert cached.get("v1", "Secret", f"{unique_name}-nothing", unique_name) is None
    assert requests(operator_requests) - before == Counter()

    # Only our Secrets are held whole; the names-only store keeps no data of any Secret.
    held = labelled.get(*edge)
    assert held is not None and held["data"]["tls.key"]
    assert all(constants.LABEL_PLATFORM in (o["metadata"].get("labels") or {}) for o in labelled.items(None, {}))
    name_only = names.get(*edge)
    assert name_only is not None and set(name_only["metadata"]) == {"namespace", "name", "resourceVersion"}
    assert "data" not in name_only

    # Our edge Secret deleted by hand: the watch wakes the platform, the pass issues it again.
    woken: list[str] = cached.woken  # type: ignore[attr-defined]
    woken.clear()
    crd.delete("v1", "Secret", edge[1], edge[0])
    wait_for(lambda: unique_name in woken, "the platform woken by its Secret's deletion", 30)
    assert "*" not in woken  # ours: no other platform is woken
    wait_for(lambda: labelled.get(*edge) is None, "the deletion in the store", 30)
    run(cached, unique_name)
    reissued = crd.get("v1", "Secret", edge[1], edge[0])
    assert reissued is not None and reissued["metadata"]["labels"][constants.LABEL_PLATFORM] == unique_name

    # The grant removed: the next pass after RBAC settled asks again, stops both informers, and the
    # Secrets are read with GETs again (the edge certificate and the kubeconfig name), as without it.
    revoke(crd)
    time.sleep(RBAC_SETTLE_SECONDS + 0.5)
    wait_for(lambda: (run(cached, unique_name), not cached.secrets.informers())[1], "informers stopped", 30)
    assert not cached.secrets.cluster_wide()
    run(cached, unique_name)  # asks the per-name reviews again (not granted either)
    before = requests(operator_requests)
    run(cached, unique_name)
    delta = requests(operator_requests) - before
    assert delta == Counter({("get", "secrets"): 2}), delta


def test_an_unlabelled_secret_named_in_the_spec_is_still_read(
    granted: CachedKube,
    crd: Kube,
    make_platform: Any,
    unique_name: str,
    operator_requests: RequestCounter,  # noqa: F811 - the fixture imported above
) -> None:
    """A hand-made Secret (here a pull secret the spec names) is in the names-only store, not held:
    the drift timer's pass reads it with one GET, as without the grant; an event-woken pass reuses
    the recent read (``reusing_secrets``), also as without it."""
    cached = granted
    pull = f"{unique_name}-pull"
    create_namespace(crd, unique_name, adoptable_by=unique_name)
    crd.create(
        secret(
            pull,
            unique_name,
            type="kubernetes.io/dockerconfigjson",
            stringData={".dockerconfigjson": '{"auths": {"registry.example.com": {"auth": "dTpw"}}}'},
        )
    )
    make_platform(unique_name, unique_name, mesh={"sidecarStyle": "Native"}, imagePullSecrets=[pull])
    converge(cached, unique_name)
    wait_for(lambda: cluster_wide_synced(cached), "the cluster-wide Secret informers synced", 30)
    time.sleep(RBAC_SETTLE_SECONDS + 0.5)  # access-review answers are kept once RBAC writes settled
    run(cached, unique_name)
    before = requests(operator_requests)
    outcome = run(cached, unique_name)
    assert requests(operator_requests) - before == Counter({("get", "secrets"): 1})
    assert outcome.status["conditions"], outcome.status
    ready = condition(outcome.status, constants.PULL_SECRETS_READY)
    assert ready["status"] == "True", ready
    early = cached.reusing_secrets(SETTINGS.drift_interval)
    before = requests(operator_requests)
    run(early, unique_name)
    assert requests(operator_requests) - before == Counter()


def test_a_forged_label_on_someone_elses_secret(
    granted: CachedKube,
    *,
    crd: Kube,
    make_platform: Any,
    unique_name: str,
    control_plane: ControlPlane,
    operator_requests: RequestCounter,  # noqa: F811 - the fixture imported above
) -> None:
    """As an identity that may only write Secrets in its own namespace (a tenant), the worst it can
    do to the labelled informer: a Secret labelled with another platform's name, under the name
    of that platform's edge Secret. It is held (a label proves nothing, docs/security.md) and wakes
    that platform, whose pass still reads its own Secret (keys are namespace and name), writes
    nothing and leaves the forged one alone."""
    cached = granted
    body = make_platform(
        unique_name,
        unique_name,
        mesh={"sidecarStyle": "Native"},
        edgeCertificate={"issuer": "SelfSigned", "secretName": f"{unique_name}-tls"},
    )
    spec = TenantPlatform.from_body(body).spec
    edge = (spec.gateway.namespace, spec.edge_certificate.secret_name)
    converge(cached, unique_name)
    wait_for(lambda: cluster_wide_synced(cached), "the cluster-wide Secret informers synced", 30)
    time.sleep(RBAC_SETTLE_SECONDS + 0.5)
    run(cached, unique_name)
    ours = crd.get("v1", "Secret", edge[1], edge[0])
    assert ours is not None

    mallory_ns = f"{unique_name}-mallory"
    create_namespace(crd, mallory_ns)
    crd.create({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "mallory", "namespace": mallory_ns}})
    crd.create(
        {
            "apiVersion": RBAC,
            "kind": "Role",
            "metadata": {"name": "secrets", "namespace": mallory_ns},
            "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["create", "update", "patch"]}],
        }
    )
    crd.create(
        {
            "apiVersion": RBAC,
            "kind": "RoleBinding",
            "metadata": {"name": "secrets", "namespace": mallory_ns},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "secrets"},
            "subjects": [{"kind": "ServiceAccount", "name": "mallory", "namespace": mallory_ns}],
        }
    )
    token, _ = crd.request_token(mallory_ns, "mallory", expiration_seconds=600)
    with tempfile.TemporaryDirectory() as tmp:
        mallory = Kube.from_kubeconfig(str(control_plane.kubeconfig_for_token(token, Path(tmp) / "mallory")))
    try:
        woken: list[str] = cached.woken  # type: ignore[attr-defined]
        forged = secret(edge[1], mallory_ns, type="kubernetes.io/tls")
        forged["metadata"]["labels"] = {constants.LABEL_PLATFORM: unique_name}
        forged["stringData"] = {"tls.crt": "forged", "tls.key": "forged"}
        created: list[dict[str, Any]] = []
        woken.clear()
        wait_for(lambda: _created(mallory, forged, created), "mallory's Secret created (her RoleBinding settled)", 30)
        labelled = next(i for i in cached.secrets.informers() if not i.scope.names_only)
        wait_for(lambda: labelled.get(mallory_ns, edge[1]) is not None, "the forged Secret in the store", 30)
        wait_for(lambda: unique_name in woken, "the named platform woken", 30)
        time.sleep(RBAC_SETTLE_SECONDS + 0.5)  # mallory's Role and binding were RBAC changes
        run(cached, unique_name)
        before = requests(operator_requests)
        outcome = run(cached, unique_name)
        assert requests(operator_requests) - before == Counter()
        assert not outcome.status_written
        after = crd.get("v1", "Secret", edge[1], edge[0])
        assert after is not None and after["metadata"]["uid"] == ours["metadata"]["uid"]
        assert after["data"] == ours["data"]
        left = crd.get("v1", "Secret", edge[1], mallory_ns)
        # Untouched: still hers, as she wrote it.
        assert left is not None and left["metadata"]["resourceVersion"] == created[0]["metadata"]["resourceVersion"]
    finally:
        crd.delete("v1", "Namespace", mallory_ns)


def changed(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """What differs between two statuses (conditions by type, other keys whole)."""
    out: dict[str, Any] = {}
    for key in before.keys() | after.keys():
        if key == "conditions":
            old = {c["type"]: c for c in before.get(key) or []}
            new = {c["type"]: c for c in after.get(key) or []}
            out.update({t: (old.get(t), new.get(t)) for t in old.keys() | new.keys() if old.get(t) != new.get(t)})
        elif before.get(key) != after.get(key):
            out[key] = (before.get(key), after.get(key))
    return out


def _created(kube: Kube, obj: dict[str, Any], out: list[dict[str, Any]]) -> bool:
    try:
        out.append(kube.create(obj))
    except errors.Forbidden:
        return False
    return True
