"""Namespaces are claimed, never taken, and nothing is written where a platform does not own the
namespace (framework/base.py NamespaceClaims), on the real API server, as the identities involved.

Each escalation of issue 12 is tried by a TenantPlatform author: naming another platform's
namespace, the operator's own namespace, a well-known tool's, or an existing namespace nobody
opted in, with an extra installer subject ``User mallory``. Each is refused with a condition,
nothing is written there (resourceVersions compared), and mallory gets nothing (asked as mallory,
by impersonation). Claims are read from the cluster, so a platform that lost ``status.managed``
still releases what it labelled.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import kubernetes.client
from tests.support import condition

from tenant_platform import reconcile
from tenant_platform.api import constants
from tenant_platform.config import Settings
from tenant_platform.kube import errors
from tenant_platform.kube.client import Kube
from tenant_platform.testing.wait import wait_for

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
SETTINGS = Settings(drift_interval=30)
KINDS = [
    ("v1", "ServiceAccount"),
    ("v1", "Secret"),
    ("v1", "ConfigMap"),
    ("rbac.authorization.k8s.io/v1", "Role"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    ("v1", "PersistentVolumeClaim"),
    ("v1", "Pod"),
]


def fresh(kube: Kube, name: str) -> dict[str, Any]:
    body = kube.get(constants.API_VERSION, constants.KIND, name)
    assert body is not None
    return body


def run(kube: Kube, name: str, settings: Settings = SETTINGS) -> reconcile.Outcome:
    return reconcile.run(fresh(kube, name), kube=kube, settings=settings, now=NOW)


def impersonating(admin: Kube, user: str) -> Kube:
    """A client acting as ``user`` (the admin's credentials, with Impersonate-User)."""
    api = kubernetes.client.ApiClient(admin.api.configuration)
    api.set_default_header("Impersonate-User", user)
    return Kube(api)


def contents(kube: Kube, namespace: str) -> dict[tuple[str, str], str]:
    """Every object of the kinds a step may write, in ``namespace``: (kind, name) -> resourceVersion."""
    found: dict[tuple[str, str], str] = {}
    for api_version, kind in KINDS:
        for item in kube.list(api_version, kind, namespace):
            found[(kind, item["metadata"]["name"])] = item["metadata"]["resourceVersion"]
    return found


def settled_namespace(kube: Kube, name: str, annotations: dict[str, str] | None = None) -> None:
    """Create a namespace as an admin and wait until the controller-manager has filled it."""
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "annotations": annotations or {}}})
    wait_for(lambda: kube.get("v1", "ServiceAccount", "default", name), f"ServiceAccount {name}/default")
    wait_for(lambda: kube.get("v1", "ConfigMap", "kube-root-ca.crt", name), f"ConfigMap {name}/kube-root-ca.crt")


def namespace_state(kube: Kube, name: str) -> tuple[str, dict[str, str]]:
    live = kube.get("v1", "Namespace", name)
    assert live is not None
    return live["metadata"]["resourceVersion"], dict(live["metadata"].get("labels") or {})


def mallory_gets_nothing(admin: Kube, user: str, namespace: str) -> None:
    """Asked as mallory herself: no deployments, no Secrets, no tokens in ``namespace``."""
    mallory = impersonating(admin, user)
    for verb, group, resource, sub in [
        ("create", "apps", "deployments", ""),
        ("list", "", "secrets", ""),
        ("create", "", "serviceaccounts", "token"),
        ("create", "rbac.authorization.k8s.io", "rolebindings", ""),
    ]:
        allowed, _ = admin.can_i(
            user=user, groups=["system:authenticated"], verb=verb, group=group, resource=resource,
            namespace=namespace, subresource=sub,
        )  # fmt: skip
        assert not allowed, f"{user} may {verb} {resource} in {namespace}"
    try:
        mallory.list("v1", "Secret", namespace)
    except errors.Forbidden:
        pass
    else:
        raise AssertionError(f"{user} could list Secrets in {namespace}")


def test_second_platform_on_a_claimed_namespace_writes_nothing_there(
    crd: Kube, make_platform: Any, unique_name: str
) -> None:
    first, second = f"{unique_name}-a", f"{unique_name}-b"
    mallory = f"mallory-{unique_name}"
    # The first platform's own write test would change its objects meanwhile (the played kubelet):
    # off, so that any change in the namespace is the second platform's.
    make_platform(first, first, installer={"kubeconfigSecret": {"enabled": True}}, storage={"verify": False})
    assert condition(run(crd, first).status, "InstallerReady")["status"] == "True"
    owned_before = contents(crd, first)
    ns_before = namespace_state(crd, first)
    assert ("Secret", "platform-installer-kubeconfig") in owned_before

    make_platform(
        second,
        first,
        installer={"subjects": [{"kind": "User", "name": mallory}], "kubeconfigSecret": {"enabled": True}},
        storage={"verify": True},
    )
    for _ in range(2):
        outcome = run(crd, second)
    ns_cond = condition(outcome.status, "NamespacesReady")
    assert (ns_cond["status"], ns_cond["reason"]) == ("False", "Conflict")
    assert f"claimed by TenantPlatform {first}" in ns_cond["message"]
    # The installer finds the first platform's identity and takes nothing (Conflict); the pod guard's
    # write is refused by the write gate (NamespaceNotOwned).
    installer = condition(outcome.status, "InstallerReady")
    assert (installer["status"], installer["reason"]) == ("False", "Conflict"), installer
    guard = condition(outcome.status, "PodGuardReady")
    assert (guard["status"], guard["reason"]) == ("False", "NamespaceNotOwned"), guard
    assert f"{first}: claimed by TenantPlatform {first}" in guard["message"]
    assert not any(e[1] == "TokenMinted" for e in outcome.events), "no token is minted in another's namespace"
    assert contents(crd, first) == owned_before, "the second platform wrote into the first one's namespace"
    assert namespace_state(crd, first) == ns_before
    # The second platform's pod guard parameter names none of the first one's namespaces.
    second_guard = (fresh(crd, second).get("status") or {}).get("podGuard") or {}
    assert first not in (second_guard.get("namespaces") or []), second_guard
    mallory_gets_nothing(crd, mallory, first)

    # Deleting the second platform leaves the first one's namespace as it was.
    outcome_cleanup = reconcile.cleanup(fresh(crd, second), kube=crd, settings=SETTINGS, now=NOW)
    assert outcome_cleanup.finished, outcome_cleanup.message
    assert contents(crd, first) == owned_before
    assert namespace_state(crd, first) == ns_before
    assert condition(run(crd, first).status, "Ready")["status"] in ("True", "False")  # the first one still reconciles
    assert contents(crd, first).keys() >= owned_before.keys()


def test_operator_and_tool_namespaces_are_never_taken(crd: Kube, make_platform: Any, unique_name: str) -> None:
    operator_ns, tool_ns = f"{unique_name}-op", f"{unique_name}-tool"
    mallory = f"mallory-{unique_name}"
    settings = replace(SETTINGS, operator_namespace=operator_ns, protected_namespaces=(tool_ns,))
    for ns in (operator_ns, tool_ns):
        # Even an opt-in annotation does not make a protected namespace adoptable.
        settled_namespace(crd, ns, {"tenancy.dev/adoptable-by": unique_name})
    before = {ns: (namespace_state(crd, ns), contents(crd, ns)) for ns in (operator_ns, tool_ns)}
    make_platform(
        unique_name,
        operator_ns,
        additionalNamespaces=[tool_ns],
        installer={"subjects": [{"kind": "User", "name": mallory}], "kubeconfigSecret": {"enabled": True}},
    )
    outcome = run(crd, unique_name, settings)
    ns_cond = condition(outcome.status, "NamespacesReady")
    assert (ns_cond["status"], ns_cond["reason"]) == ("False", "ProtectedNamespace")
    assert "the operator's own namespace" in ns_cond["message"]
    assert "list of protected namespaces" in ns_cond["message"]
    assert condition(outcome.status, "InstallerReady")["reason"] == "NamespaceNotOwned"
    after = {ns: (namespace_state(crd, ns), contents(crd, ns)) for ns in (operator_ns, tool_ns)}
    assert after == before, "nothing written into a protected namespace"
    for ns in (operator_ns, tool_ns):
        mallory_gets_nothing(crd, mallory, ns)
    assert reconcile.cleanup(fresh(crd, unique_name), kube=crd, settings=settings, now=NOW).finished
    assert {ns: (namespace_state(crd, ns), contents(crd, ns)) for ns in (operator_ns, tool_ns)} == before


def test_existing_namespace_is_adopted_only_when_an_admin_opted_it_in(
    crd: Kube, make_platform: Any, unique_name: str
) -> None:
    settled_namespace(crd, unique_name)
    before = namespace_state(crd, unique_name), contents(crd, unique_name)
    make_platform(unique_name, unique_name)
    outcome = run(crd, unique_name)
    ns_cond = condition(outcome.status, "NamespacesReady")
    assert (ns_cond["status"], ns_cond["reason"]) == ("False", "NotAdoptable")
    assert f"tenancy.dev/adoptable-by={unique_name}" in ns_cond["message"]
    assert (namespace_state(crd, unique_name), contents(crd, unique_name)) == before

    # An admin opts it in: the next pass adopts it (labels it) and the installer is written.
    crd.merge_patch(
        "v1", "Namespace", unique_name, {"metadata": {"annotations": {"tenancy.dev/adoptable-by": unique_name}}}
    )
    outcome = run(crd, unique_name)
    assert condition(outcome.status, "NamespacesReady")["status"] == "True"
    assert namespace_state(crd, unique_name)[1][constants.LABEL_PLATFORM] == unique_name
    assert crd.get("v1", "ServiceAccount", "platform-installer", unique_name) is not None


def _wipe_managed(kube: Kube, name: str) -> None:
    """What a kill between labelling a namespace and the first status write leaves: no status.managed."""
    kube.merge_patch(constants.API_VERSION, constants.KIND, name, {"status": {"managed": None}}, subresource="status")
    assert "managed" not in fresh(kube, name).get("status", {})


def test_claim_is_released_when_dropped_from_the_spec_although_status_forgot_it(
    crd: Kube, make_platform: Any, unique_name: str
) -> None:
    extra = f"{unique_name}-ext"
    make_platform(unique_name, unique_name, additionalNamespaces=[extra])
    run(crd, unique_name)
    _wipe_managed(crd, unique_name)
    crd.merge_patch(constants.API_VERSION, constants.KIND, unique_name, {"spec": {"additionalNamespaces": []}})
    run(crd, unique_name)
    labels = namespace_state(crd, extra)[1]
    assert constants.LABEL_PLATFORM not in labels and "istio-injection" not in labels, labels
    # Free to be claimed by another platform now (an admin opts the existing namespace in).
    other = f"{unique_name}-o"
    crd.merge_patch("v1", "Namespace", extra, {"metadata": {"annotations": {"tenancy.dev/adoptable-by": other}}})
    make_platform(other, extra)
    assert condition(run(crd, other).status, "NamespacesReady")["status"] == "True"


def test_claim_is_released_when_the_platform_is_deleted_although_status_forgot_it(
    crd: Kube, make_platform: Any, unique_name: str
) -> None:
    extra = f"{unique_name}-ext"
    make_platform(unique_name, unique_name, additionalNamespaces=[extra])
    run(crd, unique_name)
    _wipe_managed(crd, unique_name)
    # The spec no longer names it either (edited in the same moment), so only its label says it is ours.
    crd.merge_patch(constants.API_VERSION, constants.KIND, unique_name, {"spec": {"additionalNamespaces": []}})
    outcome = reconcile.cleanup(fresh(crd, unique_name), kube=crd, settings=SETTINGS, now=NOW)
    assert outcome.finished, outcome.message
    for ns in (unique_name, extra):
        labels = namespace_state(crd, ns)[1]
        assert constants.LABEL_PLATFORM not in labels, (ns, labels)
