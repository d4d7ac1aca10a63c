"""The installer identity is never taken and never gets a token it should not have, on the real
API server: an existing ServiceAccount without our claim (here one bound to cluster-admin) is a
Conflict with nothing written and no token; once our ServiceAccount holds more than it should,
no token is minted and our kubeconfig Secret goes; spec.installer.subjects that cannot be safe
(``system:`` users and groups: every authenticated user, every ServiceAccount) are rejected at
apply time (CRD CEL).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import kubernetes.client
import pytest
import yaml
from tests.support import condition

from tenant_platform import reconcile
from tenant_platform.api import constants
from tenant_platform.api.models import TenantPlatform
from tenant_platform.concerns.installer import manifests
from tenant_platform.config import Settings
from tenant_platform.kube import errors
from tenant_platform.kube.client import Kube
from tenant_platform.testing.wait import wait_for

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
SETTINGS = Settings(drift_interval=30)
SA = "platform-installer"
SECRET = f"{SA}-kubeconfig"


def fresh(kube: Kube, name: str) -> dict[str, Any]:
    body = kube.get(constants.API_VERSION, constants.KIND, name)
    assert body is not None
    return body


def run(kube: Kube, name: str) -> reconcile.Outcome:
    return reconcile.run(fresh(kube, name), kube=kube, settings=SETTINGS, now=NOW)


def cluster_admin_binding(kube: Kube, name: str, namespace: str) -> None:
    kube.create(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"kind": "ServiceAccount", "name": SA, "namespace": namespace}],
        }
    )


def test_existing_service_account_without_our_claim_is_never_taken(
    crd: Kube, make_platform: Any, unique_name: str
) -> None:
    crd.create(
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": unique_name, "annotations": {"tenancy.dev/adoptable-by": unique_name}},
        }
    )
    crd.create({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": SA, "namespace": unique_name}})
    cluster_admin_binding(crd, unique_name, unique_name)
    try:
        sa_before = crd.get("v1", "ServiceAccount", SA, unique_name)
        assert sa_before is not None
        make_platform(unique_name, unique_name, installer={"kubeconfigSecret": {"enabled": True}})
        outcome = run(crd, unique_name)
        installer = condition(outcome.status, "InstallerReady")
        assert (installer["status"], installer["reason"]) == ("False", "Conflict"), installer
        assert f"ServiceAccount {unique_name}/{SA} (not created by the operator)" in installer["message"]
        assert not any(e[1] == "TokenMinted" for e in outcome.events)
        assert crd.get("v1", "Secret", SECRET, unique_name) is None, "no kubeconfig for a foreign ServiceAccount"
        sa_after = crd.get("v1", "ServiceAccount", SA, unique_name)
        assert sa_after is not None
        assert sa_after["metadata"]["resourceVersion"] == sa_before["metadata"]["resourceVersion"]
        for kind in ("Role", "RoleBinding"):
            assert crd.list("rbac.authorization.k8s.io/v1", kind, unique_name) == []
    finally:
        crd.delete("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", unique_name)


def test_no_token_while_the_installer_holds_too_much_and_ours_is_deleted(
    crd: Kube, make_platform: Any, unique_name: str
) -> None:
    make_platform(unique_name, unique_name, installer={"kubeconfigSecret": {"enabled": True}})
    first = run(crd, unique_name)
    assert condition(first.status, "InstallerReady")["status"] == "True"
    assert crd.get("v1", "Secret", SECRET, unique_name) is not None
    # Someone binds our installer ServiceAccount to cluster-admin.
    cluster_admin_binding(crd, unique_name, unique_name)
    try:
        outcome = run(crd, unique_name)
        installer = condition(outcome.status, "InstallerReady")
        assert (installer["status"], installer["reason"]) == ("False", "ExcessPermissions"), installer
        assert "No kubeconfig token was minted, and ours was deleted." in installer["message"]
        assert not any(e[1] == "TokenMinted" for e in outcome.events)
        assert crd.get("v1", "Secret", SECRET, unique_name) is None
    finally:
        crd.delete("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", unique_name)
    # Once the excess is gone, a fresh token is minted again.
    again = run(crd, unique_name)
    assert condition(again.status, "InstallerReady")["status"] == "True"
    assert any(e[1] == "TokenMinted" for e in again.events)


@pytest.mark.parametrize(
    ("subject", "words"),
    [
        ({"kind": "Group", "name": "system:authenticated"}, "system:"),
        ({"kind": "Group", "name": "system:masters"}, "system:"),
        ({"kind": "User", "name": "system:kube-controller-manager"}, "system:"),
        ({"kind": "User", "name": "system:serviceaccount:kube-system:default"}, "system:"),
        ({"kind": "Group", "name": "system:serviceaccounts"}, "system:"),
    ],
)
def test_subjects_that_cannot_be_safe_are_rejected_at_apply_time(
    crd: Kube, make_platform: Any, unique_name: str, subject: dict[str, str], words: str
) -> None:
    with pytest.raises(errors.Invalid) as refused:
        make_platform(unique_name, unique_name, installer={"subjects": [subject]})
    assert "spec.installer.subjects" in refused.value.message and words in refused.value.message
    assert crd.get(constants.API_VERSION, constants.KIND, unique_name) is None


def test_named_people_groups_and_service_accounts_are_accepted(crd: Kube, make_platform: Any, unique_name: str) -> None:
    extra = f"{unique_name}-x"
    make_platform(
        unique_name,
        unique_name,
        additionalNamespaces=[extra],
        installer={
            "subjects": [
                {"kind": "User", "name": "alice@example.com"},
                {"kind": "Group", "name": "platform-team"},
                {"kind": "ServiceAccount", "name": "ci", "namespace": unique_name},
                {"kind": "ServiceAccount", "name": "ci", "namespace": extra},
                # A GitOps controller installing the platform (creating a TenantPlatform is a
                # cluster-admin right: binding an outside ServiceAccount is the admin's choice).
                {"kind": "ServiceAccount", "name": "argocd-application-controller", "namespace": "argocd"},
            ]
        },
    )


def _api_roles() -> list[dict[str, Any]]:
    path = Path(__file__).resolve().parents[2] / "deploy" / "base" / "api-roles.yaml"
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def test_viewers_get_tenantplatforms_and_only_a_bound_editor_creates_them(crd: Kube, unique_name: str) -> None:
    """deploy/base/api-roles.yaml on the real API server: `view` (by aggregation) may get and list,
    never create; create needs tenantplatforms-edit, which aggregates into nothing."""
    viewer, editor = f"viewer-{unique_name}", f"editor-{unique_name}"
    created = []
    for role in _api_roles():
        if crd.get("rbac.authorization.k8s.io/v1", "ClusterRole", role["metadata"]["name"]) is None:
            crd.create(role)
            created.append(role["metadata"]["name"])
    bindings = {viewer: "view", editor: "tenantplatforms-edit"}
    for user, role_name in bindings.items():
        crd.create(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": user},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role_name},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
            }
        )
    try:

        def can(user: str, verb: str) -> bool:
            allowed, _ = crd.can_i(
                user=user, groups=["system:authenticated"], verb=verb, group="tenancy.dev", resource="tenantplatforms"
            )
            return allowed

        # Aggregation is done by the controller-manager: wait until `view` includes our rules.
        wait_for(lambda: can(viewer, "list") or None, "view to aggregate tenantplatforms-view")
        assert can(viewer, "get") and can(viewer, "watch")
        assert not can(viewer, "create") and not can(viewer, "update") and not can(viewer, "delete")
        edit_role = crd.get("rbac.authorization.k8s.io/v1", "ClusterRole", "edit") or {}
        assert not any("tenancy.dev" in r.get("apiGroups", []) and "create" in r["verbs"] for r in edit_role["rules"])
        assert can(editor, "create")
        # As the viewer herself: listing works, creating is refused.
        as_viewer = impersonating(crd, viewer)
        as_viewer.list(constants.API_VERSION, constants.KIND)
        with pytest.raises(errors.Forbidden):
            as_viewer.create(
                {
                    "apiVersion": constants.API_VERSION,
                    "kind": constants.KIND,
                    "metadata": {"name": unique_name},
                    "spec": {"namespace": unique_name, "domain": "x.example.com"},
                }
            )
    finally:
        for user in bindings:
            crd.delete("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", user)
        for name in created:  # `view` as it was for the next test on this control plane
            crd.delete("rbac.authorization.k8s.io/v1", "ClusterRole", name)


def impersonating(admin: Kube, user: str) -> Kube:
    api = kubernetes.client.ApiClient(admin.api.configuration)
    api.set_default_header("Impersonate-User", user)
    return Kube(api)


def test_the_checklists_installer_identity_is_taken_over_once_opted_in(
    crd: Kube, make_platform: Any, unique_name: str
) -> None:
    """The checklist's installer identity applied by hand (its ServiceAccount, Roles and RoleBindings,
    no labels of ours) is a Conflict naming the opt-in, never a dead end: annotated with
    tenancy.dev/adoptable-by, every object is taken over in place (same uid) and InstallerReady is True."""
    crd.create(
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": unique_name, "annotations": {"tenancy.dev/adoptable-by": unique_name}},
        }
    )
    spec = {"namespace": unique_name, "domain": f"{unique_name}.example.com", "installer": {"serviceAccountName": SA}}
    by_hand = manifests.render_installer(TenantPlatform.from_body({"metadata": {"name": unique_name}, "spec": spec}))
    for obj in by_hand:
        path = crd.path(obj["apiVersion"], obj["kind"], namespace=unique_name)
        crd.request("POST", path, body=obj, query={"fieldManager": "kubectl-client-side-apply"})
    uids = {
        (o["kind"], o["metadata"]["name"]): crd.get(o["apiVersion"], o["kind"], o["metadata"]["name"], unique_name)[
            "metadata"
        ]["uid"]
        for o in by_hand
    }
    make_platform(unique_name, unique_name, installer={"serviceAccountName": SA})
    installer = condition(run(crd, unique_name).status, "InstallerReady")
    assert (installer["status"], installer["reason"]) == ("False", "Conflict"), installer
    assert f"annotate each of those objects tenancy.dev/adoptable-by={unique_name}" in installer["message"]

    # Opt in all but one: that one still blocks, and is named.
    for obj in by_hand[:-1]:
        crd.merge_patch(
            obj["apiVersion"],
            obj["kind"],
            obj["metadata"]["name"],
            {"metadata": {"annotations": {constants.ANNOTATION_ADOPTABLE: f"someone, {unique_name}"}}},
            namespace=unique_name,
        )
    installer = condition(run(crd, unique_name).status, "InstallerReady")
    assert (installer["status"], installer["reason"]) == ("False", "Conflict"), installer
    assert by_hand[-1]["metadata"]["name"] in installer["message"]

    last = by_hand[-1]
    crd.merge_patch(
        last["apiVersion"],
        last["kind"],
        last["metadata"]["name"],
        {"metadata": {"annotations": {constants.ANNOTATION_ADOPTABLE: unique_name}}},
        namespace=unique_name,
    )
    installer = condition(run(crd, unique_name).status, "InstallerReady")
    assert (installer["status"], installer["reason"]) == ("True", "Reconciled"), installer
    for o in by_hand:
        live = crd.get(o["apiVersion"], o["kind"], o["metadata"]["name"], unique_name)
        assert live["metadata"]["uid"] == uids[(o["kind"], o["metadata"]["name"])], "taken over in place"
        assert live["metadata"]["labels"][constants.LABEL_PLATFORM] == unique_name
